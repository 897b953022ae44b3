//! The nodes' monitoring endpoints (`http: 127.0.0.1:PORT`), read over
//! plain HTTP with a short timeout so that a paused node cannot hang the
//! caller: `/healthz` (`HandleHealthz` in nats-server's `server/monitor.go`)
//! and `/jsz` (`Jsz`, `accountDetail`), and what is read from their answers.

use std::time::Duration;

use serde::Deserialize;
use ureq::Agent;

/// Longest wait for one answer of a monitoring endpoint. On loopback a
/// healthy node answers in milliseconds; the bound is for a stopped or
/// overloaded one.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest `/jsz` answer read: with every stream of every account listed it
/// grows by about 1 KiB per stream.
const ANSWER_BYTES_MAX: u64 = 64 << 20;

/// A client for the monitoring endpoints of one cluster's nodes.
#[derive(Clone)]
pub(super) struct Monitor {
    agent: Agent,
}

impl Monitor {
    /// No proxy (loopback, whatever `HTTP_PROXY` says); non-2xx answers are
    /// answers, so that `/healthz`'s reason can be read.
    pub(super) fn new() -> Monitor {
        let config = Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .user_agent(concat!("varve-nats/", env!("CARGO_PKG_VERSION")))
            .build();
        Monitor { agent: config.into() }
    }

    /// The URL of `path` (with its query) on the node monitored at `port`.
    pub(super) fn url(port: u16, path: &str) -> String {
        format!("http://127.0.0.1:{port}{path}")
    }

    /// The status and body of `GET path`, or why there is none.
    fn get(&self, port: u16, path: &str) -> Result<(u16, String), String> {
        let mut answer = self.agent.get(Monitor::url(port, path)).call().map_err(|e| e.to_string())?;
        let status = answer.status().as_u16();
        let body =
            answer.body_mut().with_config().limit(ANSWER_BYTES_MAX).read_to_string().map_err(|e| e.to_string())?;
        Ok((status, body))
    }

    /// `Ok` when `/healthz?QUERY` answers 200, else the status and the
    /// server's reason (e.g. "JetStream has not established contact with a
    /// meta leader"), or the connection's failure.
    pub(super) fn healthz(&self, port: u16, query: &str) -> Result<(), String> {
        let path = if query.is_empty() { "/healthz".to_owned() } else { format!("/healthz?{query}") };
        match self.get(port, &path)? {
            (200, _) => Ok(()),
            (status, body) => Err(format!("{path} answered {status}: {}", body.trim())),
        }
    }

    /// `/jsz?QUERY`, read.
    pub(super) fn jsz(&self, port: u16, query: &str) -> Result<Jsz, String> {
        let path = format!("/jsz?{query}");
        match self.get(port, &path)? {
            (200, body) => serde_json::from_str(&body).map_err(|e| format!("{path}: the answer is not /jsz JSON: {e}")),
            (status, body) => Err(format!("{path} answered {status}: {}", body.trim())),
        }
    }
}

/// The part of a `/jsz` answer read here (`JSInfo` in nats-server).
#[derive(Debug, Deserialize)]
pub(super) struct Jsz {
    /// True when JetStream is off on the node.
    #[serde(default)]
    disabled: bool,
    /// The meta group, absent on a server that is not clustered.
    #[serde(default)]
    meta_cluster: Option<MetaCluster>,
    /// With `streams=true`: every account with JetStream, and its streams
    /// that have a replica on this node.
    #[serde(default)]
    account_details: Vec<AccountDetail>,
}

#[derive(Debug, Deserialize)]
struct MetaCluster {
    /// The meta leader's server name; empty (or absent) while there is none.
    #[serde(default)]
    leader: String,
}

#[derive(Debug, Deserialize)]
struct AccountDetail {
    #[serde(default)]
    stream_detail: Vec<StreamDetail>,
}

#[derive(Debug, Deserialize)]
struct StreamDetail {
    name: String,
    #[serde(default)]
    cluster: Option<StreamCluster>,
}

#[derive(Debug, Deserialize)]
struct StreamCluster {
    /// The server name of the stream's leader as this node knows it; empty
    /// while it knows none. A single server names itself.
    #[serde(default)]
    leader: String,
}

impl Jsz {
    /// `Ok` when JetStream runs and, on a clustered server, the node knows
    /// a meta leader; else why not.
    pub(super) fn meta_ready(&self) -> Result<(), String> {
        if self.disabled {
            return Err("JetStream is disabled on this node".to_owned());
        }
        match &self.meta_cluster {
            Some(meta) if meta.leader.is_empty() => Err("JetStream has no meta leader yet".to_owned()),
            _ => Ok(()),
        }
    }

    /// The meta leader this node names, empty while it knows none; `None`
    /// on a server that is not clustered.
    pub(super) fn meta_leader(&self) -> Option<String> {
        self.meta_cluster.as_ref().map(|meta| meta.leader.clone())
    }

    /// The leader this node names for `stream` (in any account), empty when
    /// it knows none; `None` when the node holds no replica of it.
    pub(super) fn stream_leader(&self, stream: &str) -> Option<String> {
        self.account_details
            .iter()
            .flat_map(|account| &account.stream_detail)
            .find(|detail| detail.name == stream)
            .map(|detail| detail.cluster.as_ref().map(|cluster| cluster.leader.clone()).unwrap_or_default())
    }
}

/// The leader of a stream from what the answering nodes say: `views` holds
/// `(node, leader it names)` and `names[node]` is each node's server name.
///
/// A node counts as the leader only when it says so itself: a follower
/// names the last leader it heard from, which may be a node that was killed
/// a moment ago. If several claim it (one that was paused has not yet heard
/// that it was deposed), the one most nodes name wins; a tie is no leader.
pub(super) fn leader_from_views(views: &[(usize, String)], names: &[String]) -> Option<usize> {
    let claimants: Vec<usize> = views
        .iter()
        .filter(|(node, leader)| names.get(*node).is_some_and(|name| name == leader))
        .map(|(node, _)| *node)
        .collect();
    let votes = |node: usize| views.iter().filter(|(_, leader)| names.get(node) == Some(leader)).count();
    match claimants.as_slice() {
        [] => None,
        [only] => Some(*only),
        several => {
            let best = several.iter().map(|&node| votes(node)).max()?;
            let mut winners = several.iter().filter(|&&node| votes(node) == best);
            match (winners.next(), winners.next()) {
                (Some(&node), None) => Some(node),
                _ => None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["c-0".into(), "c-1".into(), "c-2".into()]
    }

    #[test]
    fn a_leader_counts_when_it_says_so_itself() {
        let views = |v: &[(usize, &str)]| v.iter().map(|(n, l)| (*n, (*l).to_owned())).collect::<Vec<_>>();
        assert_eq!(leader_from_views(&views(&[(0, "c-1"), (1, "c-1"), (2, "c-1")]), &names()), Some(1));
        // Node 1 was killed: the others still name it until they elect another.
        assert_eq!(leader_from_views(&views(&[(0, "c-1"), (2, "c-1")]), &names()), None);
        assert_eq!(leader_from_views(&views(&[(0, ""), (2, "")]), &names()), None);
        // Node 0 was paused while leading, and resumed: it still says it leads.
        assert_eq!(leader_from_views(&views(&[(0, "c-0"), (1, "c-2"), (2, "c-2")]), &names()), Some(2));
        assert_eq!(leader_from_views(&views(&[(0, "c-0"), (2, "c-2")]), &names()), None);
        assert_eq!(leader_from_views(&[], &names()), None);
    }

    #[test]
    fn jsz_answers_are_read() {
        let clustered: Jsz = serde_json::from_str(
            r#"{"server_id":"X","streams":1,"meta_cluster":{"name":"c","leader":"c-2","cluster_size":3},
                "account_details":[{"name":"$G","id":"$G","stream_detail":[
                    {"name":"other","cluster":{"leader":"c-0"}},
                    {"name":"orders","cluster":{"name":"c","leader":"c-1","replicas":[]}}]}]}"#,
        )
        .expect("jsz");
        assert!(clustered.meta_ready().is_ok());
        assert_eq!(clustered.stream_leader("orders").as_deref(), Some("c-1"));
        assert_eq!(clustered.stream_leader("missing"), None);
        assert_eq!(clustered.meta_leader().as_deref(), Some("c-2"));

        let electing: Jsz = serde_json::from_str(r#"{"meta_cluster":{"cluster_size":3}}"#).expect("jsz");
        assert!(electing.meta_ready().is_err());
        let single: Jsz = serde_json::from_str(r#"{"server_id":"X","streams":0}"#).expect("jsz");
        assert!(single.meta_ready().is_ok());
        assert_eq!(single.meta_leader(), None);
        let disabled: Jsz = serde_json::from_str(r#"{"disabled":true}"#).expect("jsz");
        assert!(disabled.meta_ready().is_err());
    }
}
