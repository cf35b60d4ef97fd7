//! What the node's folder holds: the state `up` records, `rabbitmq.conf`, the environment
//! file and the Erlang cookie.

use std::fs;
use std::io::{self, Read};

use brokerbench_brokers::settings;
use brokerbench_brokers::tls::TlsFiles;

use super::names::{MANAGEMENT_OFFSET, PROMETHEUS_OFFSET};
use super::ports::tls_port;

/// What `up` remembers about the node it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct State {
    /// The AMQP port it listens on.
    pub(super) port: u16,
    /// Why that is not the preferred port, if it is not.
    pub(super) note: Option<String>,
    /// The start script's shell, the node's parent: `down` reaps it when it is our child.
    pub(super) script_pid: Option<u32>,
}

pub(super) fn format_state(state: &State) -> String {
    let mut text = format!(
        "# Written by brokerbench `broker up rabbitmq`; removed by `down`.\nport={}\n",
        state.port
    );
    if let Some(note) = &state.note {
        // One line per key: a note never spans lines.
        text.push_str(&format!("note={}\n", note.replace('\n', " ")));
    }
    if let Some(pid) = state.script_pid {
        text.push_str(&format!("script_pid={pid}\n"));
    }
    text
}

pub(super) fn parse_state(text: &str) -> Option<State> {
    let value = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
    };
    Some(State {
        port: value("port")?.trim().parse().ok()?,
        note: value("note").map(str::to_string),
        script_pid: value("script_pid").and_then(|pid| pid.trim().parse().ok()),
    })
}

/// `rabbitmq.conf` for a node on 127.0.0.1 only: AMQP on `port`, management and Prometheus
/// on the ports [`port_layout`] gives.
pub(super) fn rabbitmq_conf(port: u16, tls: Option<&TlsFiles>) -> String {
    let management = port + MANAGEMENT_OFFSET;
    let prometheus = port + PROMETHEUS_OFFSET;
    let mut conf = format!(
        "\
# Written by brokerbench on every start; edits are overwritten.
listeners.tcp.default = 127.0.0.1:{port}
management.tcp.ip = 127.0.0.1
management.tcp.port = {management}
prometheus.tcp.ip = 127.0.0.1
prometheus.tcp.port = {prometheus}
# guest/guest may connect from loopback only (RabbitMQ's default), which is all we listen on.
loopback_users.guest = true
"
    );
    if let Some(tls) = tls {
        conf.push_str(&format!(
            "\
# TLS (`brokerbench broker up rabbitmq --tls`): a throwaway CA's certificate, see tls/.
listeners.ssl.default = 127.0.0.1:{tls_port}
ssl_options.cacertfile = {ca}
ssl_options.certfile = {certificate}
ssl_options.keyfile = {key}
# A client certificate is checked when one is sent (SASL EXTERNAL), not required.
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
auth_mechanisms.1 = PLAIN
auth_mechanisms.2 = AMQPLAIN
auth_mechanisms.3 = EXTERNAL
ssl_cert_login_from = common_name
",
            tls_port = tls_port(port),
            ca = tls.ca().display(),
            certificate = tls.server_certificate().display(),
            key = tls.server_key().display(),
        ));
    }
    conf
}

/// `--config` settings as `KEY = VALUE` lines at the end of `rabbitmq.conf` (the last of a
/// key wins).
pub(super) fn settings_lines(settings: &settings::Settings) -> String {
    if settings.is_empty() {
        return String::new();
    }
    let lines: String = settings
        .iter()
        .map(|(k, v)| format!("{k} = {v}\n"))
        .collect();
    format!("# Server settings (`brokerbench broker up rabbitmq --config KEY=VALUE`).\n{lines}")
}

/// The port of the amqps:// listener in a `rabbitmq.conf`, when it has one.
pub(super) fn conf_tls_port(conf: &str) -> Option<u16> {
    conf.lines()
        .find_map(|line| line.trim().strip_prefix("listeners.ssl.default"))?
        .trim()
        .strip_prefix('=')?
        .trim()
        .rsplit_once(':')?
        .1
        .parse()
        .ok()
}

/// Sourced by the start script instead of /etc/rabbitmq/rabbitmq-env.conf.
pub(super) const ENV_CONF: &str = "\
# Written by brokerbench. Empty on purpose: the node takes its settings from the environment
# brokerbench gives it, not from /etc/rabbitmq/rabbitmq-env.conf.
";

pub(super) const RANDOM: &str = "/dev/urandom";

/// 20 random capital letters, the form Erlang uses for the cookies it makes itself.
pub(super) fn random_cookie() -> io::Result<String> {
    let mut bytes = [0u8; 20];
    fs::File::open(RANDOM)?.read_exact(&mut bytes)?;
    // 256 is not a multiple of 26; the bias this leaves is irrelevant for a loopback-only node.
    Ok(bytes
        .iter()
        .map(|byte| char::from(b'A' + byte % 26))
        .collect())
}
