//! [`NatsStore`]: a NATS cluster with `JetStream` as a [`Store`].

use std::sync::Arc;

use serde::Deserialize;
use varve_log::{validate_name, Limits, Namespace, Result, Store};

use crate::conn::{Conn, Failure};
use crate::names::{namespace_of_stream, STREAM_PREFIX, SUBJECT_ROOT};
use crate::namespace::NatsNamespace;
use crate::options::NatsOptions;

/// Room kept in a message for Varve's and `JetStream`'s headers.
const HEADER_ROOM: u64 = 4096;

/// The namespaces held in a NATS `JetStream` cluster, one stream each.
#[derive(Clone, Debug)]
pub struct NatsStore {
    conn: Arc<Conn>,
    limits: Limits,
}

impl NatsStore {
    /// Connect and check that `JetStream` answers: `Unavailable` if no
    /// server of `options.servers` can be reached, or `JetStream` is off.
    pub fn connect(options: NatsOptions) -> Result<NatsStore> {
        let conn = Conn::connect(options)?;
        // A record must fit one message, with its headers.
        let max_payload = conn.client.server_info().max_payload as u64;
        let defaults = Limits::default();
        let limits = Limits {
            record_bytes_max: defaults.record_bytes_max.min(max_payload.saturating_sub(HEADER_ROOM)),
            batch_bytes_max: defaults.batch_bytes_max,
            batch_records_max: conn.options.batch_records_max.min(defaults.batch_records_max),
        };
        Ok(NatsStore { conn: Arc::new(conn), limits })
    }

    /// [`NatsStore::connect`] to the servers of a `nats://…` URI.
    pub fn open(uri: &str) -> Result<NatsStore> {
        NatsStore::connect(NatsOptions::from_uri(uri)?)
    }

    /// The store's URI, `nats://HOST:PORT,…`.
    #[must_use]
    pub fn target(&self) -> &str {
        &self.conn.target
    }

    /// The limits appends are checked against: a record is at most the
    /// servers' `max_payload` less room for headers (and at most 16 MiB).
    #[must_use]
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The connection, for the crate's own requests beyond the Log contract
    /// (e.g. [`crate::tiers::mirror_namespace`]).
    pub(crate) fn conn(&self) -> &Conn {
        &self.conn
    }

    /// Namespace `name` as its concrete type. Sends nothing: the stream is
    /// created with the namespace's first log.
    pub fn nats_namespace(&self, name: &str) -> Result<NatsNamespace> {
        validate_name(name, false)?;
        Ok(NatsNamespace::new(Arc::clone(&self.conn), name, self.limits))
    }
}

impl Store for NatsStore {
    fn namespace(&self, name: &str) -> Result<Arc<dyn Namespace>> {
        Ok(Arc::new(self.nats_namespace(name)?))
    }

    fn list_namespaces(&self) -> Result<Vec<String>> {
        #[derive(Deserialize)]
        struct Names {
            #[serde(default)]
            streams: Option<Vec<String>>,
        }
        let body = serde_json::json!({ "subject": format!("{SUBJECT_ROOT}.>") });
        let names = self
            .conn
            .block_on(self.conn.api_read::<Names>("STREAM.NAMES", &body))
            .map_err(|f: Failure| f.into_read_error(&self.conn.target, "list the namespaces"))?;
        let mut namespaces: Vec<String> = names
            .streams
            .unwrap_or_default()
            .iter()
            .filter(|s| s.starts_with(STREAM_PREFIX))
            .filter_map(|s| namespace_of_stream(s))
            .collect();
        namespaces.sort();
        Ok(namespaces)
    }
}
