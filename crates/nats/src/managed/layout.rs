//! The managed nats-server's configuration text, one file per node: client, monitoring and
//! (in a cluster) route ports, the JetStream store, and the TLS block when TLS is on.

use std::path::Path;

use brokerbench_brokers::tls::{self, TlsFiles};

/// The ports of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NodePorts {
    /// Where clients connect.
    pub client: u16,
    /// The HTTP monitoring endpoint (`/varz`, `/jsz`).
    pub monitor: u16,
    /// Where the other nodes of a cluster connect (unused by a server of one node).
    pub route: u16,
}

/// Marks the TLS part of the configuration.
pub(super) const TLS_MARK: &str = "# TLS (`brokerbench broker up nats --tls`)";

/// Node `id`'s configuration in a broker of `nodes` (every node's ports, node 1 first),
/// its JetStream store in `store`; `tls` is the TLS block, when TLS is on.
pub(super) fn configuration(id: u32, nodes: &[NodePorts], store: &Path, tls: &str) -> String {
    let me = nodes[id as usize - 1];
    let mut text = format!(
        "# Written by brokerbench: the managed nats-server{}.\nserver_name: {}\nlisten: 127.0.0.1:{}\nhttp: 127.0.0.1:{}\nmax_payload: 8MB\n",
        if nodes.len() > 1 { format!(", node {id} of {}", nodes.len()) } else { String::new() },
        server_name(id, nodes.len()),
        me.client,
        me.monitor,
    );
    if nodes.len() > 1 {
        text.push_str(&cluster_block(&me, nodes));
    }
    text.push_str(&format!(
        "jetstream {{\n  store_dir: \"{}\"\n  max_memory_store: 1GB\n  max_file_store: 20GB\n}}\n",
        store.display()
    ));
    text.push_str(tls);
    text
}

/// `brokerbench` for a server of one node (as it always was), `brokerbench-K` in a cluster.
pub(super) fn server_name(id: u32, nodes: usize) -> String {
    if nodes > 1 {
        format!("brokerbench-{id}")
    } else {
        "brokerbench".into()
    }
}

/// The cluster block: this node's route port and a route to every other node.
fn cluster_block(me: &NodePorts, nodes: &[NodePorts]) -> String {
    let routes: String = nodes
        .iter()
        .filter(|n| n.route != me.route)
        .map(|n| format!("    nats-route://127.0.0.1:{}\n", n.route))
        .collect();
    format!(
        "cluster {{\n  name: brokerbench\n  listen: 127.0.0.1:{}\n  routes: [\n{routes}  ]\n}}\n",
        me.route
    )
}

/// The client port a node's configuration file names (its `listen:` line).
pub(super) fn client_port(configuration: &str) -> Option<u16> {
    setting_port(configuration, "listen: ")
}

/// The monitoring port a node's configuration file names (its `http:` line).
pub(super) fn monitor_port(configuration: &str) -> Option<u16> {
    setting_port(configuration, "http: ")
}

fn setting_port(configuration: &str, key: &str) -> Option<u16> {
    configuration
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|address| address.rsplit(':').next())
        .and_then(|port| port.trim().parse().ok())
}

/// TLS on the client port beside plain connections (`allow_non_tls`), and the user
/// `brokerbench` with `password`; clients that name no user are `anonymous` (`no_auth_user`,
/// with a password nobody is told), so plain runs go on as before.
pub(super) fn tls_configuration(
    files: &TlsFiles,
    password: &str,
    anonymous_password: &str,
) -> String {
    format!(
        "{TLS_MARK}: a throwaway CA's certificate, see tls/.\ntls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  ca_file: \"{}\"\n  timeout: 2\n}}\nallow_non_tls: true\nauthorization {{\n  users: [\n    {{user: {}, password: \"{password}\"}}\n    {{user: anonymous, password: \"{anonymous_password}\"}}\n  ]\n}}\nno_auth_user: anonymous\n",
        files.server_certificate().display(),
        files.server_key().display(),
        files.ca().display(),
        tls::USER,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports(n: u16) -> Vec<NodePorts> {
        (0..n)
            .map(|i| NodePorts {
                client: 4322 + i,
                monitor: 8322 + i,
                route: 6222 + i,
            })
            .collect()
    }

    #[test]
    fn one_node_has_no_cluster_and_keeps_its_name() {
        let text = configuration(1, &ports(1), Path::new("/s"), "");
        assert!(text.contains("server_name: brokerbench\n"), "{text}");
        assert!(!text.contains("cluster"), "{text}");
        assert_eq!(client_port(&text), Some(4322));
        assert_eq!(monitor_port(&text), Some(8322));
    }

    #[test]
    fn a_node_of_three_routes_to_the_two_others() {
        let text = configuration(2, &ports(3), Path::new("/s"), "");
        assert!(text.contains("server_name: brokerbench-2\n"), "{text}");
        assert!(text.contains("listen: 127.0.0.1:6223\n"), "{text}");
        for other in [6222, 6224] {
            assert!(
                text.contains(&format!("nats-route://127.0.0.1:{other}")),
                "{text}"
            );
        }
        assert!(!text.contains("nats-route://127.0.0.1:6223"), "{text}");
        assert_eq!(client_port(&text), Some(4323));
    }
}
