//! One node of a managed RabbitMQ: the home and port it was made with, where each of its files
//! lives, the state `up` recorded, and whether its `beam.smp` runs.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use brokerbench_brokers::process;
use brokerbench_brokers::system_package;
use brokerbench_brokers::tls::TlsFiles;
use brokerbench_brokers::{managed, settings, BrokerError, BrokerStatus, NodeStatus, UpOptions};

use super::files::{conf_tls_port, format_state, parse_state, State};
use super::install::{find_bin_dir, version_from_dpkg, version_from_install};
use super::names::*;
use super::ports::node_name;

/// A single-node RabbitMQ managed under `<home>/rabbitmq/`, listening on 127.0.0.1.
#[derive(Debug, Clone)]
pub struct RabbitMq {
    /// The brokerbench home (see [`brokerbench_brokers::home`]); RabbitMQ keeps everything in `rabbitmq/`.
    pub(super) home: PathBuf,
    /// Preferred AMQP port; `up` moves up from it while ports are taken.
    pub(super) port: u16,
    /// BROKERBENCH_RABBITMQ_PORT as given, when it was not a usable port; reported by `up`.
    pub(super) invalid_port_variable: Option<String>,
    /// The folder with `rabbitmq-server` and `rabbitmqctl`; `None` when not installed.
    pub(super) bin_dir: Option<PathBuf>,
    /// Which node this is, 1 to N; node k > 1 keeps its folder in `node-k/`.
    pub(super) node: u32,
    /// What `up` was asked for: how many nodes, which server settings.
    pub(super) options: UpOptions,
}

impl RabbitMq {
    /// RabbitMQ under `home`, preferring AMQP port `$BROKERBENCH_RABBITMQ_PORT` if set, else
    /// 5672. Looks for the installed `rabbitmq-server` (see [`RabbitMq::is_installed`]).
    pub fn new(home: &Path) -> Self {
        let (port, invalid_port_variable) = PORT_RULE.read();
        RabbitMq {
            // The ownership check compares the folder on beam's command line.
            home: managed::absolute_home(home),
            port,
            invalid_port_variable,
            bin_dir: find_bin_dir(std::env::var_os("PATH")),
            node: 1,
            options: UpOptions::default(),
        }
    }

    /// The same broker preferring another AMQP port (the other listeners follow it).
    pub fn with_port(self, port: u16) -> Self {
        RabbitMq {
            port,
            invalid_port_variable: None,
            ..self
        }
    }

    /// The AMQP port `up` tries first.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The AMQP port of the node this home started, as recorded by `up` (it may have moved
    /// off the preferred port); the preferred port when none was started.
    pub fn amqp_port(&self) -> u16 {
        self.read_state().map_or(self.port, |state| state.port)
    }

    /// Where clients connect: `amqp://guest:guest@127.0.0.1:PORT/%2f` (the default vhost
    /// `/`). RabbitMQ lets `guest` in from loopback only, which is where the node listens.
    pub fn amqp_uri(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.amqp_port())
    }

    /// The management plugin's HTTP port (UI and `/api`): AMQP port + 10000.
    pub fn management_port(&self) -> u16 {
        self.amqp_port().saturating_add(MANAGEMENT_OFFSET)
    }

    /// The Prometheus plugin's HTTP port (`/metrics`): AMQP port + 10020.
    pub fn prometheus_port(&self) -> u16 {
        self.amqp_port().saturating_add(PROMETHEUS_OFFSET)
    }

    /// The Erlang node name, for `rabbitmqctl -n`: `brokerbench_PORT@localhost`. Run the CLI
    /// with `HOME=<dir>` so it finds the node's cookie.
    pub fn node_name(&self) -> String {
        node_name(self.amqp_port())
    }

    /// Where this node keeps its configuration, data, logs and pid file: `<home>/rabbitmq`
    /// for node 1, `node-k/` inside it for node k.
    pub fn dir(&self) -> PathBuf {
        match self.node {
            1 => self.root(),
            id => brokerbench_brokers::cluster::node_dir(&self.root(), id),
        }
    }

    /// `<home>/rabbitmq`: node 1's folder, the cluster's lock and recorded size.
    pub(super) fn root(&self) -> PathBuf {
        self.home.join(NAME)
    }

    /// The node's database and message stores: `<dir>/mnesia/NODE`; kept by `down`.
    pub fn data_dir(&self) -> PathBuf {
        self.mnesia_base().join(self.node_name())
    }

    /// RabbitMQ's own log.
    pub fn log_file(&self) -> PathBuf {
        self.logs_dir().join("rabbitmq.log")
    }

    /// stdout and stderr of the start script: where a node that cannot boot says why.
    pub fn startup_log(&self) -> PathBuf {
        self.logs_dir().join("startup.log")
    }

    /// True when `rabbitmq-server` (with `rabbitmqctl` beside it) was found: in
    /// `/usr/lib/rabbitmq/bin` (Debian's package), on PATH, or in `/usr/sbin`,
    /// `/usr/local/sbin`. Debian's `/usr/sbin` wrapper does not count.
    pub fn is_installed(&self) -> bool {
        self.bin_dir.is_some()
    }

    /// The RabbitMQ version of the installation, e.g. `"3.10.8"`, without starting anything:
    /// from its folder name (`rabbitmq_server-3.10.8`), else from dpkg.
    pub fn version(&self) -> String {
        self.bin_dir
            .as_deref()
            .and_then(version_from_install)
            .or_else(version_from_dpkg)
            .unwrap_or_else(|| "unknown".to_string())
    }

    pub(super) fn logs_dir(&self) -> PathBuf {
        self.dir().join("log")
    }

    pub(super) fn mnesia_base(&self) -> PathBuf {
        self.dir().join("mnesia")
    }

    pub(super) fn config_file(&self) -> PathBuf {
        self.dir().join("rabbitmq.conf")
    }

    pub(super) fn plugins_file(&self) -> PathBuf {
        self.dir().join("enabled_plugins")
    }

    pub(super) fn env_file(&self) -> PathBuf {
        self.dir().join("rabbitmq-env.conf")
    }

    pub(super) fn cookie_file(&self) -> PathBuf {
        self.dir().join(".erlang.cookie")
    }

    pub(super) fn state_file(&self) -> PathBuf {
        self.dir().join("state")
    }

    pub(crate) fn pid_file(&self) -> PathBuf {
        self.dir().join("rabbitmq.pid")
    }

    pub(super) fn check_port(&self) -> Result<(), BrokerError> {
        PORT_RULE.check(self.port, self.invalid_port_variable.as_deref())
    }

    /// The folder of RabbitMQ's programs, Debian's package installed first when there is
    /// none.
    pub(super) fn installed_bin_dir(&self) -> Result<PathBuf, BrokerError> {
        if let Some(dir) = &self.bin_dir {
            return Ok(dir.clone());
        }
        system_package::ensure(&DEBIAN_PACKAGE, || find_bin_dir(std::env::var_os("PATH")))
    }

    /// Arguments that only our node's `beam.smp` has on its command line.
    pub(super) fn ownership_arguments(&self) -> [OsString; 3] {
        [
            BOOT_MODULE.into(),
            OWNERSHIP_FLAG.into(),
            self.dir().into_os_string(),
        ]
    }

    pub(super) fn running_pid(&self) -> Option<u32> {
        process::find_ours(&self.pid_file(), &self.ownership_arguments())
    }

    pub(super) fn status_of(&self, pid: u32) -> BrokerStatus {
        let state = self.read_state();
        let port = state.as_ref().map_or(self.port, |state| state.port);
        BrokerStatus {
            name: NAME,
            address: format!("127.0.0.1:{port}"),
            pid,
            version: self.version(),
            data_dir: self.mnesia_base().join(node_name(port)),
            log_file: self.log_file(),
            note: state.and_then(|state| state.note),
            nodes: NodeStatus::only(pid, &format!("127.0.0.1:{port}")),
            settings: settings::recorded(&self.root()),
        }
    }

    pub(super) fn read_state(&self) -> Option<State> {
        parse_state(&fs::read_to_string(self.state_file()).ok()?)
    }

    pub(super) fn write_state(&self, state: &State) -> Result<(), BrokerError> {
        process::write_atomically(&self.state_file(), format_state(state).as_bytes())
    }

    /// The TLS material and whether TLS is on for the next start (see [`TlsFiles`]).
    pub fn tls(&self) -> TlsFiles {
        TlsFiles::of(&self.dir())
    }

    /// The amqps:// port of the running node's configuration, when it was started with TLS.
    pub(super) fn running_tls_port(&self) -> Option<u16> {
        conf_tls_port(&fs::read_to_string(self.config_file()).ok()?)
    }
}
