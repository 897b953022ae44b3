//! A node's `nats.conf`, written from [`ClusterOptions`] and the ports
//! picked for every node; the checks that keep that text well formed; and
//! the picking of free loopback ports. No processes here.
//!
//! The option names are those of nats-server v2.15.2 (`server/opts.go`:
//! `processConfigFileLine`, `parseCluster`, `parseJetStream`,
//! `parseLeafNodes`). Every listener is on 127.0.0.1.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, TcpListener};

use super::{ClusterError, ClusterOptions, NODES_MAX};

/// The ports of one node. `cluster` is set only in a cluster (2 nodes or
/// more), `leaf` only when the cluster accepts leaf nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct NodePorts {
    /// Clients (`listen`).
    pub(super) client: u16,
    /// Routes between the nodes (`cluster { listen }`).
    pub(super) cluster: Option<u16>,
    /// The monitoring endpoint (`http`).
    pub(super) http: u16,
    /// Leaf-node connections (`leafnodes { listen }`).
    pub(super) leaf: Option<u16>,
}

/// Most bytes of a name, domain or tag: far more than any needs, and short
/// enough for nats-server's subjects and file names.
const NAME_BYTES_MAX: usize = 64;

/// Fail unless the options describe a cluster this module can configure.
/// Everything written into a quoted string of `nats.conf` is checked here,
/// so that nothing in it needs escaping (`render` relies on that).
pub(super) fn validate(options: &ClusterOptions) -> Result<(), ClusterError> {
    let invalid = |reason: String| Err(ClusterError::InvalidOptions { reason });
    if options.nodes == 0 || options.nodes > NODES_MAX {
        return invalid(format!("nodes is {}: a cluster has 1 to {NODES_MAX} nodes", options.nodes));
    }
    check_name("name", &options.name)?;
    if let Some(domain) = &options.domain {
        check_name("domain", domain)?;
    }
    if options.node_tags.len() > options.nodes {
        return invalid(format!(
            "node_tags has {} entries for {} node(s): give at most one list of tags per node",
            options.node_tags.len(),
            options.nodes
        ));
    }
    for tag in options.node_tags.iter().flatten() {
        if tag.is_empty()
            || tag.len() > NAME_BYTES_MAX
            || tag.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\')
        {
            return invalid(format!(
                "server tag {tag:?}: write 1 to {NAME_BYTES_MAX} bytes without spaces, quotes or backslashes, \
                 e.g. az:1"
            ));
        }
    }
    if let Some(url) = &options.leaf_remote {
        let well_formed =
            url.strip_prefix("nats-leaf://").or_else(|| url.strip_prefix("nats://")).is_some_and(|rest| {
                !rest.is_empty() && !rest.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\')
            });
        if !well_formed {
            return invalid(format!(
                "leaf_remote {url:?}: write nats-leaf://HOST:PORT (LocalCluster::leaf_url gives one)"
            ));
        }
    }
    for subject in &options.leaf_deny_imports {
        if options.leaf_remote.is_none() {
            return invalid("leaf_deny_imports without leaf_remote: only a leaf node denies imports".to_owned());
        }
        if subject.is_empty() || subject.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\') {
            return invalid(format!(
                "leaf_deny_imports subject {subject:?}: write a subject without spaces, quotes or backslashes, e.g. \
                 varve.>"
            ));
        }
    }
    if options.start_timeout.is_zero() {
        return invalid("start_timeout is zero: give the nodes time to start (30 s is usual)".to_owned());
    }
    Ok(())
}

/// A name nats-server takes as a server name, cluster name or JetStream
/// domain, and that is safe in a path and a quoted string.
fn check_name(what: &str, name: &str) -> Result<(), ClusterError> {
    if name.is_empty()
        || name.len() > NAME_BYTES_MAX
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(ClusterError::InvalidOptions {
            reason: format!("{what} {name:?}: write 1 to {NAME_BYTES_MAX} of A-Z a-z 0-9 - _"),
        });
    }
    Ok(())
}

/// Free loopback ports for `nodes` nodes: all bound at once (so that they
/// differ), then released for the servers to take. Another process may take
/// one in between; the node then fails to start, and the caller tries again
/// with new ports.
pub(super) fn free_ports(nodes: usize, leaf_listen: bool) -> Result<Vec<NodePorts>, ClusterError> {
    let mut held = Vec::new();
    let mut take = || -> Result<u16, ClusterError> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| ClusterError::io("binding 127.0.0.1:0 to find a free port", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| ClusterError::io("reading the port bound to find a free port", e))?
            .port();
        held.push(listener);
        Ok(port)
    };
    let mut ports = Vec::with_capacity(nodes);
    for _ in 0..nodes {
        ports.push(NodePorts {
            client: take()?,
            cluster: if nodes >= 2 { Some(take()?) } else { None },
            http: take()?,
            leaf: if leaf_listen { Some(take()?) } else { None },
        });
    }
    drop(held);
    Ok(ports)
}

/// The server name of node `node`: `NAME-NODE`.
pub(super) fn server_name(cluster_name: &str, node: usize) -> String {
    format!("{cluster_name}-{node}")
}

/// The `nats.conf` of node `node`. The store is `store` relative to the
/// node's directory, which is the server's working directory (so that no
/// path needs quoting). `options` must have passed [`validate`].
pub(super) fn render(options: &ClusterOptions, node: usize, ports: &[NodePorts]) -> String {
    let own = ports[node];
    let mut text = format!(
        "# Node {node} of the local NATS cluster {name:?} ({nodes} node(s)), written by varve-nats (LocalCluster).\n\
         server_name: \"{server}\"\n\
         listen: \"127.0.0.1:{client}\"\n\
         http: \"127.0.0.1:{http}\"\n\
         # Room for the Log contract's 16 MiB records and their headers.\n\
         max_payload: 20MB\n",
        name = options.name,
        nodes = options.nodes,
        server = server_name(&options.name, node),
        client = own.client,
        http = own.http,
    );
    if let Some(tags) = options.node_tags.get(node).filter(|tags| !tags.is_empty()) {
        let quoted: Vec<String> = tags.iter().map(|tag| format!("\"{tag}\"")).collect();
        let _ = writeln!(text, "server_tags: [{}]", quoted.join(", "));
    }
    text.push_str("jetstream {\n  store_dir: \"store\"\n");
    // The contract's atomic batches hold up to 65,536 records (the default is 1,000).
    text.push_str("  limits { batch { max_msgs: 65536 } }\n");
    // Replicas of one stream on servers with different `az:` tags, when
    // every node has one (else no placement could satisfy it).
    let zoned = (0..options.nodes)
        .all(|n| options.node_tags.get(n).is_some_and(|tags| tags.iter().any(|t| t.starts_with("az:"))));
    if zoned {
        text.push_str("  unique_tag: \"az:\"\n");
    }
    if options.sync_always {
        text.push_str("  sync_interval: always\n");
    }
    if let Some(domain) = &options.domain {
        let _ = writeln!(text, "  domain: \"{domain}\"");
    }
    text.push_str("}\n");
    if let Some(cluster_port) = own.cluster {
        let _ = write!(
            text,
            "cluster {{\n  name: \"{}\"\n  listen: \"127.0.0.1:{cluster_port}\"\n  routes: [\n",
            options.name
        );
        for (other, ports) in ports.iter().enumerate() {
            if let (true, Some(port)) = (other != node, ports.cluster) {
                let _ = writeln!(text, "    \"nats-route://127.0.0.1:{port}\"");
            }
        }
        text.push_str("  ]\n}\n");
    }
    if own.leaf.is_some() || options.leaf_remote.is_some() {
        text.push_str("leafnodes {\n");
        if let Some(port) = own.leaf {
            let _ = writeln!(text, "  listen: \"127.0.0.1:{port}\"");
            if !options.leaf_advertise {
                text.push_str("  no_advertise: true\n");
            }
        }
        if let Some(url) = &options.leaf_remote {
            let _ = write!(text, "  remotes: [\n    {{ url: \"{url}\"");
            if !options.leaf_deny_imports.is_empty() {
                let quoted: Vec<String> = options.leaf_deny_imports.iter().map(|s| format!("\"{s}\"")).collect();
                let _ = write!(text, ", deny_imports: [{}]", quoted.join(", "));
            }
            text.push_str(" }\n  ]\n");
        }
        text.push_str("}\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn ports(nodes: usize, leaf: bool) -> Vec<NodePorts> {
        (0..nodes)
            .map(|i| {
                let base = u16::try_from(4000 + 10 * i).expect("small");
                NodePorts {
                    client: base,
                    cluster: (nodes >= 2).then_some(base + 1),
                    http: base + 2,
                    leaf: leaf.then_some(base + 3),
                }
            })
            .collect()
    }

    #[test]
    fn a_single_node_has_no_cluster_block() {
        let options = ClusterOptions::new(PathBuf::from("/tmp/x"), 1);
        let text = render(&options, 0, &ports(1, false));
        assert!(text.contains("server_name: \"varve-0\"\n"), "{text}");
        assert!(text.contains("listen: \"127.0.0.1:4000\"\n"), "{text}");
        assert!(text.contains("http: \"127.0.0.1:4002\"\n"), "{text}");
        assert!(text.contains("  sync_interval: always\n"), "{text}");
        assert!(text.contains("max_payload: 20MB\n"), "{text}");
        assert!(text.contains("  limits { batch { max_msgs: 65536 } }\n"), "{text}");
        assert!(!text.contains("cluster {"), "{text}");
        assert!(!text.contains("leafnodes"), "{text}");
        assert!(!text.contains("server_tags"), "{text}");
    }

    #[test]
    fn a_cluster_node_routes_to_every_other_node() {
        let mut options = ClusterOptions::new(PathBuf::from("/tmp/x"), 3);
        options.node_tags = vec![vec!["az:1".into()], vec!["az:2".into()], vec!["az:3".into()]];
        options.domain = Some("hub".into());
        options.sync_always = false;
        let text = render(&options, 1, &ports(3, false));
        assert!(text.contains("server_name: \"varve-1\"\n"), "{text}");
        assert!(text.contains("server_tags: [\"az:2\"]\n"), "{text}");
        assert!(text.contains("  domain: \"hub\"\n"), "{text}");
        assert!(!text.contains("sync_interval"), "{text}");
        assert!(
            text.contains(
                "cluster {\n  name: \"varve\"\n  listen: \"127.0.0.1:4011\"\n  routes: [\n    \
                 \"nats-route://127.0.0.1:4001\"\n    \"nats-route://127.0.0.1:4021\"\n  ]\n}\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn leaf_nodes_listen_or_connect() {
        let mut options = ClusterOptions::new(PathBuf::from("/tmp/x"), 1);
        options.leaf_listen = true;
        let hub = render(&options, 0, &ports(1, true));
        assert!(hub.contains("leafnodes {\n  listen: \"127.0.0.1:4003\"\n}\n"), "{hub}");
        options.leaf_advertise = false;
        let hidden = render(&options, 0, &ports(1, true));
        assert!(hidden.contains("leafnodes {\n  listen: \"127.0.0.1:4003\"\n  no_advertise: true\n}\n"), "{hidden}");
        options.leaf_advertise = true;
        options.leaf_listen = false;
        options.leaf_remote = Some("nats-leaf://127.0.0.1:4003".into());
        let leaf = render(&options, 0, &ports(1, false));
        assert!(
            leaf.contains("leafnodes {\n  remotes: [\n    { url: \"nats-leaf://127.0.0.1:4003\" }\n  ]\n}\n"),
            "{leaf}"
        );
        options.leaf_deny_imports = vec!["varve.>".into(), "a.b".into()];
        let denying = render(&options, 0, &ports(1, false));
        assert!(
            denying.contains(
                "  remotes: [\n    { url: \"nats-leaf://127.0.0.1:4003\", deny_imports: [\"varve.>\", \"a.b\"] }\n  ]\n"
            ),
            "{denying}"
        );
    }

    #[test]
    fn text_that_would_need_quoting_is_refused() {
        let base = ClusterOptions::new(PathBuf::from("/tmp/x"), 3);
        let cases: [fn(&mut ClusterOptions); 11] = [
            |o| o.nodes = 0,
            |o| o.nodes = NODES_MAX + 1,
            |o| o.name = "a b".into(),
            |o| o.name = String::new(),
            |o| o.domain = Some("x.y".into()),
            |o| o.node_tags = vec![vec!["a\"b".into()]],
            |o| o.node_tags = vec![vec![]; 4],
            |o| o.leaf_remote = Some("127.0.0.1:4000".into()),
            |o| o.start_timeout = std::time::Duration::ZERO,
            |o| o.leaf_deny_imports = vec!["varve.>".into()],
            |o| {
                o.leaf_remote = Some("nats-leaf://127.0.0.1:4000".into());
                o.leaf_deny_imports = vec!["a b".into()];
            },
        ];
        for (i, case) in cases.iter().enumerate() {
            let mut options = base.clone();
            case(&mut options);
            assert!(
                matches!(validate(&options), Err(ClusterError::InvalidOptions { .. })),
                "case {i}: {options:?} was accepted"
            );
        }
        assert!(validate(&base).is_ok());
    }

    #[test]
    fn free_ports_differ() {
        let ports = free_ports(3, true).expect("ports");
        let mut all: Vec<u16> =
            ports.iter().flat_map(|p| [Some(p.client), p.cluster, Some(p.http), p.leaf]).flatten().collect();
        assert_eq!(all.len(), 12);
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 12);
    }
}
