//! [`RemoteStore`]: a `varve serve` as a [`Store`], and where its namespaces
//! come from.

use std::sync::Arc;

use varve_log::{validate_name, LogError, Namespace, Result, Store};

use crate::client::{Call, Client};
use crate::namespace::RemoteNamespace;
use crate::uri::RemoteOptions;
use crate::wire::{parse_json, NamespacesJson};

/// The namespaces of a `varve serve`, reached over HTTP.
///
/// One store holds one keep-alive connection pool, shared by its namespaces
/// and safe to use from many threads.
#[derive(Clone, Debug)]
pub struct RemoteStore {
    client: Arc<Client>,
}

impl RemoteStore {
    /// Connect to the server `options` name, checking with `GET /healthz`
    /// that it is up (resent up to 3 times like any read).
    ///
    /// `Unavailable` if it cannot be reached; `InvalidArgument` for a
    /// malformed address, token or timeout; `Protocol` if something other
    /// than a `varve serve` answers. The token is not checked here: a wrong
    /// one is `Denied` on the first request that needs it.
    pub fn connect(options: RemoteOptions) -> Result<RemoteStore> {
        let client = Client::new(options)?;
        let answer = client.send(&Call::get("/healthz".into()))?;
        if answer.body.trim_ascii() != b"ok" {
            return Err(LogError::Protocol {
                target: client.target().to_owned(),
                reason: format!("GET /healthz answered {:?}, not \"ok\"", String::from_utf8_lossy(&answer.body)),
            });
        }
        Ok(RemoteStore { client: Arc::new(client) })
    }

    /// The options for a store URI, `varve://HOST:PORT` (a trailing `/` is
    /// allowed), without a token: [`RemoteOptions::from_uri`].
    pub fn parse_uri(uri: &str) -> Result<RemoteOptions> {
        RemoteOptions::from_uri(uri, None)
    }

    /// The store's URI, `varve://HOST:PORT`: the `target` its errors name.
    #[must_use]
    pub fn target(&self) -> &str {
        self.client.target()
    }

    /// Namespace `name` as its concrete type, for what only a remote
    /// namespace offers ([`RemoteNamespace::append_batch_once`]). Checks the
    /// name locally and sends nothing: the server creates a namespace on its
    /// first write, so one that does not exist yet is no error.
    pub fn remote_namespace(&self, name: &str) -> Result<RemoteNamespace> {
        validate_name(name, false)?;
        Ok(RemoteNamespace::new(Arc::clone(&self.client), name))
    }
}

impl Store for RemoteStore {
    /// As [`RemoteStore::remote_namespace`]: no request is sent.
    fn namespace(&self, name: &str) -> Result<Arc<dyn Namespace>> {
        Ok(Arc::new(self.remote_namespace(name)?))
    }

    fn list_namespaces(&self) -> Result<Vec<String>> {
        let answer = self.client.send(&Call::get("/v1/namespaces".into()))?;
        Ok(parse_json::<NamespacesJson>(self.target(), "the list of namespaces", &answer.body)?.namespaces)
    }
}
