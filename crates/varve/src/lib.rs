//! # varve — open any Varve store by its URI
//!
//! One call for every surface (CLI `--store`, Python `varve.open`, Rust):
//!
//! | URI | Store |
//! |---|---|
//! | `PATH` or `file:PATH` | the embedded journal in that directory (the default, `./varve-data`) |
//! | `varve://HOST:PORT` | a `varve serve` on another host ([`varve_remote`]) |
//! | `varves://HOST:PORT` | the same over TLS (`varve serve --tls-cert`); [`OpenOptions::tls_ca`] adds a CA to trust |
//! | `nats://HOST:PORT[,HOST:PORT…][?replicas=3…]` | a `NATS JetStream` cluster ([`varve_nats`], docs/nats.md) |
//!
//! A log on a server is named `varve://HOST:PORT/NAMESPACE/LOG` ([`log_uri`]),
//! or `varves://…` over TLS.
//!
//! ```no_run
//! let store = varve::open("varve://127.0.0.1:7070", &varve::OpenOptions::default())?;
//! let ns = store.namespace("sensors")?;
//! ns.create_log("temperature", varve_log::LogConfig::unbounded())?;
//! ns.append("temperature", b"21.5")?;
//! # Ok::<(), varve_log::LogError>(())
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use varve_log::{JournalOptions, JournalStore, LogError, Result, Store};
use varve_nats::{NatsOptions, NatsStore};
use varve_remote::{RemoteOptions, RemoteStore};

/// Where a store URI points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUri {
    /// The embedded journal in this directory.
    Embedded(PathBuf),
    /// A `varve serve`: the `varve://HOST:PORT` URI, or `varves://HOST:PORT` over TLS.
    Remote(String),
    /// A `NATS JetStream` cluster: its seed servers and options.
    Nats(NatsOptions),
}

impl StoreUri {
    /// Read a store URI (see the crate docs). A text without a scheme is a path.
    pub fn parse(text: &str) -> Result<StoreUri> {
        if let Some(path) = text.strip_prefix("file:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(invalid(text, "file: needs a path, e.g. file:./varve-data"));
            }
            return Ok(StoreUri::Embedded(PathBuf::from(path)));
        }
        if text.starts_with("varve://") || text.starts_with("varves://") {
            // Checked here, so a bad URI fails before any connection is tried.
            RemoteOptions::from_uri(text, None)?;
            return Ok(StoreUri::Remote(text.trim_end_matches('/').to_owned()));
        }
        if text.starts_with("nats://") {
            return Ok(StoreUri::Nats(NatsOptions::from_uri(text)?));
        }
        if let Some((scheme, _)) = text.split_once("://") {
            return Err(invalid(
                text,
                &format!(
                    "unknown scheme {scheme:?}: use a path, file:PATH, varve://HOST:PORT, varves://HOST:PORT (TLS) \
                     or nats://HOST:PORT"
                ),
            ));
        }
        if text.is_empty() {
            return Err(invalid(text, "the store URI is empty: give a directory or varve://HOST:PORT"));
        }
        Ok(StoreUri::Embedded(PathBuf::from(text)))
    }
}

fn invalid(text: &str, why: &str) -> LogError {
    LogError::InvalidArgument { reason: format!("store URI {text:?}: {why}") }
}

/// How to open a store; each field applies to the stores it names.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// The embedded journal's options (sync policy, segment size, limits, read-only).
    pub journal: JournalOptions,
    /// The bearer token for a `varve serve` started with `--token-file`.
    pub token: Option<String>,
    /// A PEM file of CA certificates to trust for a `varves://` server,
    /// besides Mozilla's roots: its private CA, or its self-signed
    /// certificate (`RemoteOptions::tls_ca`).
    pub tls_ca: Option<PathBuf>,
}

/// Open the store `uri` names.
pub fn open(uri: &str, options: &OpenOptions) -> Result<Arc<dyn Store>> {
    match StoreUri::parse(uri)? {
        StoreUri::Embedded(dir) => Ok(Arc::new(JournalStore::open(dir, options.journal)?)),
        StoreUri::Remote(uri) => {
            let remote = RemoteOptions {
                tls_ca: options.tls_ca.clone(),
                ..RemoteOptions::from_uri(&uri, options.token.clone())?
            };
            Ok(Arc::new(RemoteStore::connect(remote)?))
        }
        StoreUri::Nats(nats) => Ok(Arc::new(NatsStore::connect(nats)?)),
    }
}

/// The URI that names one log of a served store: `varve://HOST:PORT/NAMESPACE/LOG`
/// (or `varves://…`).
#[must_use]
pub fn log_uri(store: &str, namespace: &str, log: &str) -> String {
    format!("{}/{namespace}/{log}", store.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_uris_parse() {
        assert_eq!(StoreUri::parse("./data").ok(), Some(StoreUri::Embedded("./data".into())));
        assert_eq!(StoreUri::parse("file:/var/lib/varve").ok(), Some(StoreUri::Embedded("/var/lib/varve".into())));
        assert_eq!(StoreUri::parse("file:///var/lib/varve").ok(), Some(StoreUri::Embedded("/var/lib/varve".into())));
        assert_eq!(
            StoreUri::parse("varve://127.0.0.1:7070/").ok(),
            Some(StoreUri::Remote("varve://127.0.0.1:7070".into()))
        );
        assert_eq!(
            StoreUri::parse("varves://localhost:7443").ok(),
            Some(StoreUri::Remote("varves://localhost:7443".into()))
        );
        let Ok(StoreUri::Nats(nats)) = StoreUri::parse("nats://a:4222,b:4222?replicas=3") else { panic!("nats") };
        assert_eq!((nats.servers, nats.replicas), (vec!["a:4222".to_owned(), "b:4222".to_owned()], 3));
        for bad in
            ["", "file:", "varve://host", "varve://h:1/ns", "varves://h", "nats://a", "http://x:1", "s3://bucket"]
        {
            assert!(matches!(StoreUri::parse(bad), Err(LogError::InvalidArgument { .. })), "{bad:?}");
        }
        assert_eq!(log_uri("varve://h:1", "app", "t"), "varve://h:1/app/t");
    }

    #[test]
    fn an_unreachable_nats_is_unavailable_at_once() {
        // Port 9 (discard) on loopback: nothing listens there.
        let Err(error) = open("nats://127.0.0.1:9", &OpenOptions::default()) else { panic!("opened nats") };
        assert!(matches!(error, LogError::Unavailable { .. }), "{error}");
        assert!(error.to_string().contains("nats-server"), "{error}");
    }
}
