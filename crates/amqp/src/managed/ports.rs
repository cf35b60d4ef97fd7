//! Ports: the layout of a node, choosing a free one, and telling who holds a taken one
//! (our node, another AMQP broker, or another process).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use brokerbench_brokers::process;

use crate::probe::{server_properties, ProbeError};

use super::names::{
    DISTRIBUTION_OFFSET, MANAGEMENT_OFFSET, MAX_PORT, PORT_ATTEMPTS, PROBE_TIMEOUT,
    PROMETHEUS_OFFSET,
};

/// True when our node answers AMQP on `port` and its HTTP listeners accept connections.
pub(super) fn answers(port: u16, node: &str) -> bool {
    let amqp = match amqp_probe(port, PROBE_TIMEOUT) {
        // RabbitMQ's cluster name is its node name with the real host name
        // (`brokerbench_5672@myhost`) unless someone renamed the cluster: that tells our node
        // from a stranger that took the port while ours was booting.
        Ok(server) => server
            .cluster_name
            .as_deref()
            .is_none_or(|cluster| node_part(cluster) == node_part(node)),
        Err(_) => false,
    };
    amqp && process::port_in_use(port + MANAGEMENT_OFFSET)
        && process::port_in_use(port + PROMETHEUS_OFFSET)
}

/// A port that is in use, and what the node would have used it for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Busy {
    /// The AMQP port of the candidate it blocked.
    pub(super) amqp_port: u16,
    /// The port in use.
    pub(super) port: u16,
    pub(super) role: &'static str,
}

impl Busy {
    pub(super) fn describe(&self) -> String {
        if self.port == self.amqp_port {
            format!("{} (AMQP)", self.port)
        } else {
            format!("{} ({} for AMQP {})", self.port, self.role, self.amqp_port)
        }
    }
}

/// The ports a node with AMQP port `port` listens on, with what each is for; with `tls`,
/// the AMQP-over-TLS port too (the port before AMQP's: 5671 for 5672, as RabbitMQ's defaults).
pub(super) fn port_layout(port: u16, tls: bool) -> Vec<(u16, &'static str)> {
    let mut layout = vec![
        (port, "AMQP"),
        (port + MANAGEMENT_OFFSET, "management"),
        (port + PROMETHEUS_OFFSET, "Prometheus"),
        (port + DISTRIBUTION_OFFSET, "Erlang distribution"),
    ];
    if tls {
        layout.push((tls_port(port), "AMQP over TLS"));
    }
    layout
}

/// The amqps:// port of a node with AMQP port `port`.
pub(super) fn tls_port(port: u16) -> u16 {
    port.saturating_sub(1)
}

pub(super) fn last_candidate(preferred: u16) -> u16 {
    preferred.saturating_add(PORT_ATTEMPTS - 1).min(MAX_PORT)
}

/// The first AMQP port from `preferred` up (10 at most) whose whole layout is free, with the
/// first busy port of each candidate skipped on the way; or all of those when none is free.
pub(super) fn choose_port(
    preferred: u16,
    tls: bool,
    is_busy: impl Fn(u16) -> bool,
) -> Result<(u16, Vec<Busy>), Vec<Busy>> {
    let mut skipped = Vec::new();
    for candidate in preferred..=last_candidate(preferred) {
        match port_layout(candidate, tls)
            .into_iter()
            .find(|&(port, _)| is_busy(port))
        {
            None => return Ok((candidate, skipped)),
            Some((port, role)) => skipped.push(Busy {
                amqp_port: candidate,
                port,
                role,
            }),
        }
    }
    Err(skipped)
}

/// The note for a node that could not have its preferred port: who holds it, and where the
/// node listens instead.
pub(super) fn moved_note(busy: &Busy, port: u16) -> String {
    let holder = match amqp_probe(busy.port, Duration::from_millis(500)) {
        Ok(server) => format!("another AMQP broker ({})", server.describe()),
        Err(_) => "another process".to_string(),
    };
    format!(
        "port {} is taken by {holder}, not this brokerbench RabbitMQ: listening on {port} instead (management {}, Prometheus {})",
        busy.describe(),
        port + MANAGEMENT_OFFSET,
        port + PROMETHEUS_OFFSET
    )
}

/// `brokerbench_5672` of `brokerbench_5672@localhost`.
pub(super) fn node_part(node: &str) -> &str {
    node.split_once('@').map_or(node, |(name, _)| name)
}

pub(super) fn node_name(port: u16) -> String {
    format!("brokerbench_{port}@localhost")
}

/// What a broker says about itself in its AMQP 0-9-1 `Connection.Start`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct ServerInfo {
    pub(super) product: Option<String>,
    pub(super) version: Option<String>,
    /// RabbitMQ: the cluster name, which defaults to the node name.
    pub(super) cluster_name: Option<String>,
}

impl ServerInfo {
    pub(super) fn from_properties(properties: &[(String, String)]) -> ServerInfo {
        let find = |key: &str| {
            properties
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, value)| value.clone())
        };
        ServerInfo {
            product: find("product"),
            version: find("version"),
            cluster_name: find("cluster_name"),
        }
    }

    pub(super) fn describe(&self) -> String {
        let mut text = match (&self.product, &self.version) {
            (Some(product), Some(version)) => format!("{product} {version}"),
            (Some(product), None) => product.clone(),
            _ => "unknown product".to_string(),
        };
        if let Some(cluster) = &self.cluster_name {
            text.push_str(&format!(", node {cluster}"));
        }
        text
    }
}

/// What the AMQP 0-9-1 server on 127.0.0.1:`port` says about itself in its
/// `Connection.Start` (read by the client's own handshake code, without logging in).
pub(super) fn amqp_probe(port: u16, timeout: Duration) -> Result<ServerInfo, ProbeError> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    Ok(ServerInfo::from_properties(&server_properties(
        address, timeout,
    )?))
}
