//! The fixed names and numbers of a managed RabbitMQ: its ports and their offsets, its programs
//! and package, the plugins it runs, and how long each step may take.

use std::time::Duration;

use brokerbench_brokers::managed;
use brokerbench_brokers::system_package::DebianPackage;

/// The AMQP port `up` prefers when neither [`RabbitMq::with_port`](super::RabbitMq::with_port)
/// nor the variable says.
pub const DEFAULT_PORT: u16 = 5672;

/// The name of this broker on the command line and in
/// [`BrokerStatus::name`](brokerbench_brokers::BrokerStatus::name).
pub(super) const NAME: &str = "rabbitmq";
pub(super) const PORT_VARIABLE: &str = "BROKERBENCH_RABBITMQ_PORT";
/// Where the other listeners go, relative to the AMQP port (RabbitMQ's own defaults).
pub(super) const MANAGEMENT_OFFSET: u16 = 10_000;
pub(super) const PROMETHEUS_OFFSET: u16 = 10_020;
pub(super) const DISTRIBUTION_OFFSET: u16 = 20_000;
/// The highest AMQP port whose distribution port still exists.
pub(super) const MAX_PORT: u16 = u16::MAX - DISTRIBUTION_OFFSET;
pub(super) const MAX_PORT_REASON: &str = "the Erlang distribution listens on the port + 20000";
/// Usable AMQP ports.
pub(super) const PORT_RULE: managed::PortRule = managed::PortRule {
    broker: NAME,
    variable: PORT_VARIABLE,
    default: DEFAULT_PORT,
    max: MAX_PORT,
    why: MAX_PORT_REASON,
    offsets: &[0, MANAGEMENT_OFFSET, PROMETHEUS_OFFSET, DISTRIBUTION_OFFSET],
};
/// How many AMQP ports `up` tries, from the preferred one up, before giving up.
pub(super) const PORT_ATTEMPTS: u16 = 10;
/// The start script and the CLI; Debian's package keeps the real ones here. Its `/usr/sbin`
/// entries are a wrapper that re-runs them as the `rabbitmq` user with the system's paths.
pub(super) const PACKAGE_BIN_DIR: &str = "/usr/lib/rabbitmq/bin";
pub(super) const OTHER_BIN_DIRS: [&str; 2] = ["/usr/sbin", "/usr/local/sbin"];
pub(super) const SERVER: &str = "rabbitmq-server";
pub(super) const CTL: &str = "rabbitmqctl";
pub(super) const DEBIAN_WRAPPER: &str = "rabbitmq-script-wrapper";
pub(super) const PACKAGE: &str = "rabbitmq-server";
/// Debian's package, installed on first use. Its system service is left as it is: our node
/// has a name, folder and ports of its own, and moves to the next free port when 5672 is
/// taken.
pub(super) const DEBIAN_PACKAGE: DebianPackage = DebianPackage {
    broker: NAME,
    package: PACKAGE,
    with: &[],
    service: None,
};
/// Passed to the node as `-brokerbench_dir <dir>` (Erlang keeps unknown flags as init
/// arguments): with `-s rabbit boot`, it marks our `beam.smp` in `/proc`. The start script's
/// shell has the flag too, but not the boot module.
pub(super) const OWNERSHIP_FLAG: &str = "-brokerbench_dir";
pub(super) const BOOT_MODULE: &str = "rabbit";
/// Erlang arguments for rabbitmqctl's own short-lived node (the start script word-splits them).
pub(super) const CTL_ERL_ARGS: &str = "-kernel inet_dist_use_interface {127,0,0,1}";
pub(super) const PLUGINS: &str = "[rabbitmq_management,rabbitmq_prometheus].\n";
/// With TLS on: SASL EXTERNAL (login as the client certificate's common name) too.
pub(super) const PLUGINS_TLS: &str =
    "[rabbitmq_management,rabbitmq_prometheus,rabbitmq_auth_mechanism_ssl].\n";
/// `guest:guest` for the management API's basic auth (loopback only, as the node listens).
pub(super) const GUEST_BASIC_AUTH: &str = "Z3Vlc3Q6Z3Vlc3Q=";
/// How long `up` waits for AMQP, management and Prometheus to answer.
pub(super) const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one readiness probe may take.
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long `rabbitmqctl stop` may take before `down` falls back to signals.
pub(super) const CTL_STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `down` waits for the node to exit after `rabbitmqctl stop`, and after SIGTERM.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(30);
/// Lines of a log quoted in error messages.
pub(super) const LOG_TAIL_LINES: usize = 20;
