//! Edge and cloud tiers: a namespace written at the edge, copied to the
//! cloud whenever the link between them is up (CSPOT's tiers).
//!
//! The edge is a `nats-server` with its own `JetStream` domain (`edge`),
//! joined as a leaf node to the cloud's cluster (domain `cloud`). Varve
//! writes the namespace at the edge (`nats://EDGE?domain=edge`), which keeps
//! accepting appends while the link is down. [`mirror_namespace`] makes the
//! cloud's stream `VARVE_<ns>` a `JetStream` *mirror* of the edge's: the
//! cloud's servers pull every message of the edge's stream, in order, with
//! its stream sequence, and after a cut go on from the last one they hold.
//! Readers on the cloud open `nats://CLOUD?domain=cloud` and the same
//! namespace name: every read of the backend is a direct get or a
//! `STREAM.INFO` on stream `VARVE_<ns>`, which a mirror answers as its
//! origin would, and a watch polls, so records that arrive by mirroring are
//! seen. The copy is read-only: a mirror takes no publishes, and the edge's
//! leaf remote denies `varve.>` imports so that a write made on the cloud
//! does not travel the link to the edge's stream. What this guarantees and
//! the servers' configuration are in `docs/nats.md`, "Edge and cloud".

use serde::Deserialize;
use varve_log::{validate_name, LogError, Result};

use crate::conn::{err_code, parse_answer, Conn, Failure};
use crate::names::Layout;
use crate::NatsStore;

/// Most bytes of a `JetStream` domain name accepted here (nats-server's
/// own limit is looser; a domain is one token of every API subject).
const DOMAIN_BYTES_MAX: usize = 64;

/// Make the cloud's stream for `namespace` a read-only mirror of the edge
/// domain's: the stream `VARVE_<namespace>` in the domain `cloud` addresses
/// (its `?domain=`, or its server's), mirroring `VARVE_<namespace>` through
/// `$JS.<edge_domain>.API`, with `cloud`'s `replicas` and `tags`, and direct
/// gets on so that Varve's reads work on it. Idempotent: a mirror already
/// there is left as it is (also while the link is down). The copy catches
/// up whenever the leaf link is up, by itself; nothing needs calling again.
///
/// Sends: `STREAM.INFO` on the cloud; if there is no stream yet, the
/// cloud's account `INFO`, `STREAM.INFO` at the edge (through the link), and
/// `STREAM.CREATE` on the cloud.
///
/// Errors:
/// - `InvalidName` / `InvalidArgument`: a bad namespace or domain name, the
///   cloud's own domain given as the edge's, or a stream of that name on the
///   cloud that is not a mirror of the edge's (it takes writes of its own,
///   or mirrors something else): delete it or choose another namespace;
/// - `NamespaceNotFound`: the edge domain has no stream for `namespace` (it
///   is created by the namespace's first log there);
/// - `Unavailable`: the cloud does not answer, or the edge domain does not
///   (the leaf link is down, or no server has `jetstream { domain }` set to
///   it), or the cloud cannot place the mirror's replicas yet (a peer its
///   meta leader sees offline, as just after the cluster starts): nothing
///   was created; call again;
/// - `OutcomeUnknown`: the create's answer was lost; call again.
///
/// ```no_run
/// use varve_nats::{tiers::mirror_namespace, NatsStore};
/// // Once the namespace has a log at the edge and the leaf link is up:
/// let cloud = NatsStore::open("nats://10.0.0.1:4222?domain=cloud&replicas=3")?;
/// mirror_namespace(&cloud, "plant", "edge")?;
/// // Readers open the cloud with the same namespace name.
/// let copy = NatsStore::open("nats://10.0.0.1:4222?domain=cloud")?.nats_namespace("plant")?;
/// # Ok::<(), varve_log::LogError>(())
/// ```
pub fn mirror_namespace(cloud: &NatsStore, namespace: &str, edge_domain: &str) -> Result<()> {
    validate_name(namespace, false)?;
    check_domain(edge_domain)?;
    let conn = cloud.conn();
    let layout = Layout::new(namespace);
    let edge_api = format!("$JS.{edge_domain}.API");
    let wanted = Mirror { stream: &layout.stream, namespace, edge_domain, edge_api: &edge_api };

    if let Some(existing) = stream_config(conn, &layout.stream)? {
        return wanted.check(conn, &existing);
    }
    if cloud_domain(conn)?.as_deref() == Some(edge_domain) {
        return Err(LogError::InvalidArgument {
            reason: format!(
                "{} is JetStream domain {edge_domain:?} itself: give the domain of the edge's leaf node, not the \
                 cloud's",
                conn.target
            ),
        });
    }
    wanted.check_origin(conn)?;

    let op = format!("STREAM.CREATE.{}", layout.stream);
    match conn.block_on(conn.api::<serde_json::Value>(&op, &wanted.stream_config(conn))) {
        Ok(_) => Ok(()),
        // Created meanwhile by another caller: fine if it is the same mirror.
        Err(Failure::Api(error)) if error.err_code == err_code::STREAM_NAME_IN_USE => {
            match stream_config(conn, &layout.stream)? {
                Some(existing) => wanted.check(conn, &existing),
                None => Err(error.into_log_error(&conn.target, &wanted.operation())),
            }
        }
        Err(failure) => Err(failure.into_log_error(&conn.target, &wanted.operation())),
    }
}

/// A domain name as one token of `$JS.<domain>.API`.
fn check_domain(domain: &str) -> Result<()> {
    if domain.is_empty()
        || domain.len() > DOMAIN_BYTES_MAX
        || !domain.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(LogError::InvalidArgument {
            reason: format!(
                "JetStream domain {domain:?}: write 1 to {DOMAIN_BYTES_MAX} of A-Z a-z 0-9 - _ (the edge server's \
                 jetstream {{ domain }})"
            ),
        });
    }
    Ok(())
}

/// What `STREAM.INFO` says of a stream's configuration, as far as a mirror goes.
#[derive(Debug, Deserialize)]
struct StreamInfo {
    config: StreamConfig,
}

#[derive(Debug, Deserialize)]
struct StreamConfig {
    #[serde(default)]
    subjects: Option<Vec<String>>,
    #[serde(default)]
    mirror: Option<Source>,
}

#[derive(Debug, Deserialize)]
struct Source {
    name: String,
    #[serde(default)]
    external: Option<External>,
}

#[derive(Debug, Deserialize)]
struct External {
    #[serde(default)]
    api: String,
}

/// The configuration of stream `stream` on the cloud, or `None` if there is none.
fn stream_config(conn: &Conn, stream: &str) -> Result<Option<StreamConfig>> {
    let op = format!("STREAM.INFO.{stream}");
    match conn.block_on(conn.api_read::<StreamInfo>(&op, &serde_json::json!({}))) {
        Ok(info) => Ok(Some(info.config)),
        Err(Failure::Api(error)) if error.err_code == err_code::STREAM_NOT_FOUND => Ok(None),
        Err(failure) => Err(failure.into_log_error(&conn.target, &format!("read stream {stream}'s info"))),
    }
}

/// The `JetStream` domain the cloud connection addresses, if it has one.
fn cloud_domain(conn: &Conn) -> Result<Option<String>> {
    #[derive(Deserialize)]
    struct AccountInfo {
        #[serde(default)]
        domain: Option<String>,
    }
    conn.block_on(conn.api_read::<AccountInfo>("INFO", &serde_json::json!({})))
        .map(|info| info.domain.filter(|d| !d.is_empty()))
        .map_err(|f| f.into_log_error(&conn.target, "read the account's JetStream info"))
}

/// The mirror `mirror_namespace` wants.
struct Mirror<'a> {
    stream: &'a str,
    namespace: &'a str,
    edge_domain: &'a str,
    /// `$JS.<edge_domain>.API`.
    edge_api: &'a str,
}

impl Mirror<'_> {
    fn operation(&self) -> String {
        format!("create stream {} as a mirror of JetStream domain {:?}'s", self.stream, self.edge_domain)
    }

    /// The cloud stream's configuration. No `subjects` (a mirror takes no
    /// publishes) and no `allow_atomic` (refused on a mirror; the batches
    /// arrive as their records). `allow_direct` serves Varve's reads on the
    /// stream's own name; `mirror_direct` would subscribe the origin's name
    /// for direct gets too, which here is the same name in the cloud's
    /// domain, so it adds nothing.
    fn stream_config(&self, conn: &Conn) -> serde_json::Value {
        let options = &conn.options;
        let mut config = serde_json::json!({
            "name": self.stream,
            "retention": "limits",
            "storage": "file",
            "num_replicas": options.replicas,
            "discard": "old",
            "allow_direct": true,
            "mirror_direct": false,
            "mirror": { "name": self.stream, "external": { "api": self.edge_api, "deliver": "" } },
        });
        if !options.tags.is_empty() {
            config["placement"] = serde_json::json!({ "tags": options.tags });
        }
        config
    }

    /// An existing stream is fine if it is this mirror (whatever its
    /// replicas or placement).
    fn check(&self, conn: &Conn, existing: &StreamConfig) -> Result<()> {
        let what = match &existing.mirror {
            Some(source)
                if source.name == self.stream
                    && source.external.as_ref().is_some_and(|external| external.api == self.edge_api) =>
            {
                return Ok(())
            }
            Some(source) => format!(
                "mirrors stream {} through {}",
                source.name,
                source.external.as_ref().map_or("its own domain", |external| external.api.as_str())
            ),
            None => {
                format!("takes writes of its own (subjects {:?})", existing.subjects.as_deref().unwrap_or_default())
            }
        };
        Err(LogError::InvalidArgument {
            reason: format!(
                "namespace {:?} cannot be mirrored from JetStream domain {:?}: {} already has stream {}, which {what}; \
                 delete it or choose another namespace",
                self.namespace, self.edge_domain, conn.target, self.stream
            ),
        })
    }

    /// The edge's stream must exist: a mirror of a missing stream would be
    /// created, and stay empty without saying why.
    fn check_origin(&self, conn: &Conn) -> Result<()> {
        let subject = format!("{}.STREAM.INFO.{}", self.edge_api, self.stream);
        let answer = conn.block_on(async {
            let message = conn.request(subject, None, b"{}".as_slice().into()).await?;
            parse_answer::<StreamInfo>(&message.payload)
        });
        let unreachable = |reason: String| LogError::Unavailable {
            target: format!("JetStream domain {:?} (through {})", self.edge_domain, conn.target),
            reason: format!(
                "{reason}: is the edge's leaf node connected to this cloud, with jetstream {{ domain: {} }}?",
                self.edge_domain
            ),
        };
        match answer {
            Ok(_) => Ok(()),
            Err(Failure::Api(error)) if error.err_code == err_code::STREAM_NOT_FOUND => {
                Err(LogError::NamespaceNotFound { namespace: self.namespace.to_owned() })
            }
            // A read: a lost answer changed nothing.
            Err(Failure::NotSent(reason) | Failure::Lost(reason)) => Err(unreachable(reason)),
            Err(Failure::Api(error)) => Err(error.into_log_error(
                &format!("JetStream domain {:?} (through {})", self.edge_domain, conn.target),
                &format!("read stream {}'s info", self.stream),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_one_token() {
        for good in ["edge", "edge-1", "site_42"] {
            assert!(check_domain(good).is_ok(), "{good}");
        }
        for bad in ["", "a.b", "a b", "*", ">", &"x".repeat(DOMAIN_BYTES_MAX + 1)] {
            assert!(matches!(check_domain(bad), Err(LogError::InvalidArgument { .. })), "{bad:?}");
        }
    }
}
