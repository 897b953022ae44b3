//! [`NatsOptions`]: which servers, how many replicas, how long to wait, read
//! from a store URI `nats://HOST:PORT[,HOST:PORT…][?replicas=N&…]`.

use std::time::Duration;

use varve_log::{LogError, Result};

/// How a [`crate::NatsStore`] connects and creates its streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatsOptions {
    /// The seed servers, `HOST:PORT` each; the client learns the rest of
    /// the cluster from them.
    pub servers: Vec<String>,
    /// Replicas of each namespace's stream (1, 3 or 5; `JetStream`'s Raft
    /// needs an odd count). Applies when a namespace's stream is created.
    pub replicas: usize,
    /// Placement tags a new namespace's stream must run on (`server_tags`
    /// of the servers), e.g. `["cloud"]`.
    pub tags: Vec<String>,
    /// The `JetStream` domain to use (a leaf node's own, or the hub's), or
    /// the one the connected server is in.
    pub domain: Option<String>,
    /// The longest wait for one request's answer.
    pub request_timeout: Duration,
    /// The longest an append keeps retrying while the cluster has no
    /// leader (an election, a lost node) before it fails with
    /// `Unavailable` (nothing landed) or `OutcomeUnknown`.
    pub append_deadline: Duration,
    /// The most records one atomic batch may hold: the servers'
    /// `jetstream { limits { batch { max_msgs } } }`, 1,000 by default.
    pub batch_records_max: usize,
}

impl Default for NatsOptions {
    fn default() -> Self {
        NatsOptions {
            servers: vec!["127.0.0.1:4222".into()],
            replicas: 1,
            tags: Vec::new(),
            domain: None,
            request_timeout: Duration::from_secs(5),
            append_deadline: Duration::from_secs(30),
            batch_records_max: 1000,
        }
    }
}

fn invalid(uri: &str, why: &str) -> LogError {
    LogError::InvalidArgument { reason: format!("store URI {uri:?}: {why}") }
}

impl NatsOptions {
    /// Read `nats://HOST:PORT[,HOST:PORT…][?replicas=N&tags=a,b&domain=D&timeout_ms=T&batch_max=B]`.
    pub fn from_uri(uri: &str) -> Result<NatsOptions> {
        let rest = uri
            .strip_prefix("nats://")
            .ok_or_else(|| invalid(uri, "a NATS store URI starts with nats://"))?
            .trim_end_matches('/');
        let (hosts, query) = rest.split_once('?').unwrap_or((rest, ""));
        let servers: Vec<String> = hosts.split(',').map(|s| s.trim().to_owned()).collect();
        if servers
            .iter()
            .any(|s| s.rsplit_once(':').is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().is_err()))
        {
            return Err(invalid(uri, "write nats://HOST:PORT[,HOST:PORT…]"));
        }
        let mut options = NatsOptions { servers, ..NatsOptions::default() };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let number = || value.parse::<u64>().map_err(|_| invalid(uri, &format!("{key} must be a number")));
            match key {
                "replicas" => {
                    options.replicas = usize::try_from(number()?).unwrap_or(0);
                    if !matches!(options.replicas, 1 | 3 | 5) {
                        return Err(invalid(uri, "replicas must be 1, 3 or 5"));
                    }
                }
                "tags" => options.tags = value.split(',').filter(|t| !t.is_empty()).map(str::to_owned).collect(),
                "domain" if !value.is_empty() => options.domain = Some(value.to_owned()),
                "timeout_ms" => options.request_timeout = Duration::from_millis(number()?.max(1)),
                "deadline_ms" => options.append_deadline = Duration::from_millis(number()?),
                "batch_max" => options.batch_records_max = usize::try_from(number()?.max(1)).unwrap_or(usize::MAX),
                _ => {
                    return Err(invalid(
                        uri,
                        &format!(
                            "unknown option {key:?}: use replicas, tags, domain, timeout_ms, deadline_ms or batch_max"
                        ),
                    ))
                }
            }
        }
        Ok(options)
    }

    /// The URI these options stand for (the servers only).
    #[must_use]
    pub fn target(&self) -> String {
        format!("nats://{}", self.servers.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse() {
        let options = NatsOptions::from_uri("nats://127.0.0.1:4222,127.0.0.1:4223?replicas=3&tags=az:1").expect("ok");
        assert_eq!(options.servers, ["127.0.0.1:4222", "127.0.0.1:4223"]);
        assert_eq!(options.replicas, 3);
        assert_eq!(options.tags, ["az:1"]);
        assert_eq!(options.target(), "nats://127.0.0.1:4222,127.0.0.1:4223");
        for bad in
            ["nats://", "nats://h", "nats://h:1?replicas=2", "nats://h:1?x=1", "varve://h:1", "nats://h:1?timeout_ms=x"]
        {
            assert!(matches!(NatsOptions::from_uri(bad), Err(LogError::InvalidArgument { .. })), "{bad}");
        }
    }
}
