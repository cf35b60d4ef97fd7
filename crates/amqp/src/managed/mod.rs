//! A managed RabbitMQ on loopback, run from the system's `rabbitmq-server` package (Debian:
//! `apt-get install rabbitmq-server`) as a node of its own, or a cluster of such nodes
//! (`broker up rabbitmq --nodes 3`, see [`nodes`]; node k keeps its folder in `node-k/`).
//!
//! The node shares nothing with a system RabbitMQ, running or not: it has its own node name
//! (`brokerbench_PORT@localhost`), ports, configuration, database, logs and Erlang cookie, and
//! the environment it starts with is cleared, so neither `RABBITMQ_*`/`ERL_*` variables of the
//! caller nor `/etc/rabbitmq/*` apply. Layout under `<home>/rabbitmq/`:
//!
//! ```text
//! rabbitmq.conf        listeners on 127.0.0.1 (AMQP, management, Prometheus); rewritten by every start
//! enabled_plugins      [rabbitmq_management,rabbitmq_prometheus].
//! rabbitmq-env.conf    empty on purpose: keeps /etc/rabbitmq/rabbitmq-env.conf out
//! .erlang.cookie       the node's cookie (HOME is this folder for the node and for rabbitmqctl)
//! state                AMQP port and note of the node `up` started; removed by `down`
//! rabbitmq.pid         pid of the node's beam.smp, written (and removed) by RabbitMQ itself
//! mnesia/NODE/         the node's database and message stores; kept by `down`
//! log/rabbitmq.log     RabbitMQ's log (previous start: .1)
//! log/startup.log      stdout and stderr of the start script, and of `rabbitmqctl stop`
//! ```
//!
//! Ports, for an AMQP port P (5672 unless set): management P+10000 (15672), Prometheus
//! P+10020 (15692), Erlang distribution P+20000 (25672): RabbitMQ's defaults, shifted together.
//! When any of them is taken by a process that is not this node (another RabbitMQ, say), `up`
//! tries P+1, P+2, ... (10 in all), and [`BrokerStatus::note`] says which it took and why.
//!
//! `up` waits until the node answers the AMQP 0-9-1 handshake (its `Connection.Start` naming
//! our node) and both HTTP ports accept connections. RabbitMQ 3.10 starts the management and
//! Prometheus listeners before the AMQP one, so no `rabbitmqctl await_startup` (another
//! Erlang VM, about 0.7 s) is needed.
//!
//! epmd, the Erlang port mapper on 127.0.0.1:4369, is shared by every Erlang node on the host.
//! The node registers with the running one, or starts one (bound to loopback by
//! `ERL_EPMD_ADDRESS`) if there is none. `down` leaves epmd alone even then: other nodes (a
//! system RabbitMQ, another home's node) may have registered with it since, and stopping it
//! would cut their command-line tools off. It is a few hundred kilobytes and idle.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use brokerbench_brokers::lifecycle::{self, Lifecycle};
use brokerbench_brokers::process;
use brokerbench_brokers::system_package::{self, DebianPackage};
use brokerbench_brokers::tls::{self, TlsFiles};
use brokerbench_brokers::{
    managed, settings, BrokerError, BrokerStatus, NodeStatus, NodeUrl, UpOptions,
};

use crate::probe::{server_properties, ProbeError};

mod files;
mod install;
mod leader;
mod nodes;
mod ports;

use files::*;
use install::*;
use nodes::*;
use ports::*;

/// The AMQP port `up` prefers when neither [`RabbitMq::with_port`] nor the variable says.
pub const DEFAULT_PORT: u16 = 5672;

/// The name of this broker on the command line and in [`BrokerStatus::name`].
const NAME: &str = "rabbitmq";
const PORT_VARIABLE: &str = "BROKERBENCH_RABBITMQ_PORT";
/// Where the other listeners go, relative to the AMQP port (RabbitMQ's own defaults).
const MANAGEMENT_OFFSET: u16 = 10_000;
const PROMETHEUS_OFFSET: u16 = 10_020;
const DISTRIBUTION_OFFSET: u16 = 20_000;
/// The highest AMQP port whose distribution port still exists.
const MAX_PORT: u16 = u16::MAX - DISTRIBUTION_OFFSET;
const MAX_PORT_REASON: &str = "the Erlang distribution listens on the port + 20000";
/// Usable AMQP ports.
const PORT_RULE: managed::PortRule = managed::PortRule {
    broker: NAME,
    variable: PORT_VARIABLE,
    default: DEFAULT_PORT,
    max: MAX_PORT,
    why: MAX_PORT_REASON,
    offsets: &[0, MANAGEMENT_OFFSET, PROMETHEUS_OFFSET, DISTRIBUTION_OFFSET],
};
/// How many AMQP ports `up` tries, from the preferred one up, before giving up.
const PORT_ATTEMPTS: u16 = 10;
/// The start script and the CLI; Debian's package keeps the real ones here. Its `/usr/sbin`
/// entries are a wrapper that re-runs them as the `rabbitmq` user with the system's paths.
const PACKAGE_BIN_DIR: &str = "/usr/lib/rabbitmq/bin";
const OTHER_BIN_DIRS: [&str; 2] = ["/usr/sbin", "/usr/local/sbin"];
const SERVER: &str = "rabbitmq-server";
const CTL: &str = "rabbitmqctl";
const DEBIAN_WRAPPER: &str = "rabbitmq-script-wrapper";
const PACKAGE: &str = "rabbitmq-server";
/// Debian's package, installed on first use. Its system service is left as it is: our node
/// has a name, folder and ports of its own, and moves to the next free port when 5672 is
/// taken.
const DEBIAN_PACKAGE: DebianPackage = DebianPackage {
    broker: NAME,
    package: PACKAGE,
    with: &[],
    service: None,
};
/// Passed to the node as `-brokerbench_dir <dir>` (Erlang keeps unknown flags as init
/// arguments): with `-s rabbit boot`, it marks our `beam.smp` in `/proc`. The start script's
/// shell has the flag too, but not the boot module.
const OWNERSHIP_FLAG: &str = "-brokerbench_dir";
const BOOT_MODULE: &str = "rabbit";
/// Erlang arguments for rabbitmqctl's own short-lived node (the start script word-splits them).
const CTL_ERL_ARGS: &str = "-kernel inet_dist_use_interface {127,0,0,1}";
const PLUGINS: &str = "[rabbitmq_management,rabbitmq_prometheus].\n";
/// With TLS on: SASL EXTERNAL (login as the client certificate's common name) too.
const PLUGINS_TLS: &str =
    "[rabbitmq_management,rabbitmq_prometheus,rabbitmq_auth_mechanism_ssl].\n";
/// `guest:guest` for the management API's basic auth (loopback only, as the node listens).
const GUEST_BASIC_AUTH: &str = "Z3Vlc3Q6Z3Vlc3Q=";
/// How long `up` waits for AMQP, management and Prometheus to answer.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one readiness probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long `rabbitmqctl stop` may take before `down` falls back to signals.
const CTL_STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `down` waits for the node to exit after `rabbitmqctl stop`, and after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(30);
/// Lines of a log quoted in error messages.
const LOG_TAIL_LINES: usize = 20;

/// A single-node RabbitMQ managed under `<home>/rabbitmq/`, listening on 127.0.0.1.
#[derive(Debug, Clone)]
pub struct RabbitMq {
    /// The brokerbench home (see [`brokerbench_brokers::home`]); RabbitMQ keeps everything in `rabbitmq/`.
    home: PathBuf,
    /// Preferred AMQP port; `up` moves up from it while ports are taken.
    port: u16,
    /// BROKERBENCH_RABBITMQ_PORT as given, when it was not a usable port; reported by `up`.
    invalid_port_variable: Option<String>,
    /// The folder with `rabbitmq-server` and `rabbitmqctl`; `None` when not installed.
    bin_dir: Option<PathBuf>,
    /// Which node this is, 1 to N; node k > 1 keeps its folder in `node-k/`.
    node: u32,
    /// What `up` was asked for: how many nodes, which server settings.
    options: UpOptions,
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
    fn root(&self) -> PathBuf {
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

    fn logs_dir(&self) -> PathBuf {
        self.dir().join("log")
    }

    fn mnesia_base(&self) -> PathBuf {
        self.dir().join("mnesia")
    }

    fn config_file(&self) -> PathBuf {
        self.dir().join("rabbitmq.conf")
    }

    fn plugins_file(&self) -> PathBuf {
        self.dir().join("enabled_plugins")
    }

    fn env_file(&self) -> PathBuf {
        self.dir().join("rabbitmq-env.conf")
    }

    fn cookie_file(&self) -> PathBuf {
        self.dir().join(".erlang.cookie")
    }

    fn state_file(&self) -> PathBuf {
        self.dir().join("state")
    }

    pub(crate) fn pid_file(&self) -> PathBuf {
        self.dir().join("rabbitmq.pid")
    }

    /// Starts the node unless it runs already, and waits until AMQP, management and
    /// Prometheus answer. Returns its status and whether it was already running (then it
    /// keeps the port it was started with). When the preferred port (or one it implies) is
    /// taken, the node listens on the next free one and [`BrokerStatus::note`] says so.
    pub fn up(&self) -> Result<(BrokerStatus, bool), BrokerError> {
        lifecycle::up(self)
    }

    /// Stops the node this home started: `rabbitmqctl stop`, then SIGTERM and SIGKILL on its
    /// `beam.smp` if it is still there. Returns the pid it stopped, or `None` when none ran.
    /// Leaves epmd running (see the module documentation).
    ///
    /// Takes about 6 s even for an idle node: while RabbitMQ 3.10 stops its applications, the
    /// management agent's event handler calls into the busy application controller and waits
    /// out a 5 s timeout (`rabbit_mgmt_db_handler:ensure_statistics_disabled/0`). SIGTERM
    /// takes as long; only the plugins make the difference (about 1 s without them).
    pub fn down(&self) -> Result<Option<u32>, BrokerError> {
        lifecycle::down(self)
    }

    /// The running node of this home, or `None`. Does not check that it answers requests.
    pub fn status(&self) -> Result<Option<BrokerStatus>, BrokerError> {
        Ok(lifecycle::status(self))
    }

    fn check_port(&self) -> Result<(), BrokerError> {
        PORT_RULE.check(self.port, self.invalid_port_variable.as_deref())
    }

    /// The folder of RabbitMQ's programs, Debian's package installed first when there is
    /// none.
    fn installed_bin_dir(&self) -> Result<PathBuf, BrokerError> {
        if let Some(dir) = &self.bin_dir {
            return Ok(dir.clone());
        }
        system_package::ensure(&DEBIAN_PACKAGE, || find_bin_dir(std::env::var_os("PATH")))
    }

    /// Arguments that only our node's `beam.smp` has on its command line.
    fn ownership_arguments(&self) -> [OsString; 3] {
        [
            BOOT_MODULE.into(),
            OWNERSHIP_FLAG.into(),
            self.dir().into_os_string(),
        ]
    }

    fn running_pid(&self) -> Option<u32> {
        process::find_ours(&self.pid_file(), &self.ownership_arguments())
    }

    fn status_of(&self, pid: u32) -> BrokerStatus {
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

    fn read_state(&self) -> Option<State> {
        parse_state(&fs::read_to_string(self.state_file()).ok()?)
    }

    fn write_state(&self, state: &State) -> Result<(), BrokerError> {
        process::write_atomically(&self.state_file(), format_state(state).as_bytes())
    }

    /// The TLS material and whether TLS is on for the next start (see [`TlsFiles`]).
    pub fn tls(&self) -> TlsFiles {
        TlsFiles::of(&self.dir())
    }

    /// The amqps:// port of the running node's configuration, when it was started with TLS.
    fn running_tls_port(&self) -> Option<u16> {
        conf_tls_port(&fs::read_to_string(self.config_file()).ok()?)
    }

    fn write_configuration(&self, port: u16) -> Result<(), BrokerError> {
        for dir in [self.logs_dir(), self.mnesia_base()] {
            fs::create_dir_all(&dir).map_err(BrokerError::io("creating", &dir))?;
        }
        let files = self.tls();
        let tls = files.enabled();
        if tls {
            files.generate_once()?;
        }
        let mut conf = rabbitmq_conf(port, tls.then_some(&files));
        conf.push_str(&settings_lines(
            &self.options.settings.clone().unwrap_or_default(),
        ));
        process::write_atomically(&self.config_file(), conf.as_bytes())?;
        process::write_atomically(
            &self.plugins_file(),
            if tls { PLUGINS_TLS } else { PLUGINS }.as_bytes(),
        )?;
        process::write_atomically(&self.env_file(), ENV_CONF.as_bytes())?;
        self.ensure_cookie()
    }

    /// Creates the node's Erlang cookie once (20 random capital letters, like Erlang's own),
    /// readable by the owner only: Erlang refuses a cookie file others can read.
    fn ensure_cookie(&self) -> Result<(), BrokerError> {
        let path = self.cookie_file();
        if !path.is_file() || self.node > 1 {
            // The nodes of a cluster share node 1's cookie: Erlang lets in only those.
            let cookie = match self.node {
                1 => random_cookie().map_err(BrokerError::io("reading", Path::new(RANDOM)))?,
                _ => {
                    let first = self.root().join(".erlang.cookie");
                    fs::read_to_string(&first).map_err(BrokerError::io("reading", &first))?
                }
            };
            let mut temporary = path.as_os_str().to_owned();
            temporary.push(".tmp");
            let temporary = PathBuf::from(temporary);
            fs::write(&temporary, &cookie).map_err(BrokerError::io("writing", &temporary))?;
            fs::set_permissions(&temporary, fs::Permissions::from_mode(0o400))
                .map_err(BrokerError::io("restricting", &temporary))?;
            fs::rename(&temporary, &path).map_err(BrokerError::io("renaming to", &path))?;
        }
        fs::set_permissions(&path, fs::Permissions::from_mode(0o400))
            .map_err(BrokerError::io("restricting", &path))
    }

    /// The environment the node and our `rabbitmqctl` calls share: nothing of the caller's
    /// but PATH and the locale, HOME = our folder (for the cookie), our node name and an
    /// empty `rabbitmq-env.conf`.
    fn base_command(&self, program: PathBuf, port: u16) -> Command {
        let mut command = Command::new(program);
        command.env_clear();
        for name in ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"] {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        if std::env::var_os("PATH").is_none() {
            command.env(
                "PATH",
                "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
            );
        }
        command
            .env("HOME", self.dir())
            .env("RABBITMQ_CONF_ENV_FILE", self.env_file())
            .env("RABBITMQ_NODENAME", node_name(port))
            // An epmd that the node or the CLI has to start listens on loopback only.
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            // rabbitmqctl is an Erlang node too: its distribution listener on loopback only.
            .env("RABBITMQ_CTL_ERL_ARGS", CTL_ERL_ARGS)
            .current_dir(self.dir());
        command
    }

    /// `rabbitmq-server -kernel inet_dist_use_interface {127,0,0,1} -brokerbench_dir <dir>`
    /// with every path pointing into our folder.
    fn server_command(&self, bin_dir: &Path, port: u16) -> Command {
        let mut server = self.base_command(bin_dir.join(SERVER), port);
        let dir = self.dir();
        server
            .env("RABBITMQ_BASE", &dir)
            .env("RABBITMQ_CONFIG_FILE", self.config_file())
            // Neither /etc/rabbitmq/conf.d nor /etc/rabbitmq/advanced.config: files that do
            // not exist in our folder.
            .env("RABBITMQ_CONFIG_FILES", dir.join("conf.d"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", dir.join("advanced.config"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", self.plugins_file())
            .env("RABBITMQ_MNESIA_BASE", self.mnesia_base())
            .env("RABBITMQ_LOG_BASE", self.logs_dir())
            .env("RABBITMQ_LOGS", self.log_file())
            .env("RABBITMQ_PID_FILE", self.pid_file())
            .env(
                "RABBITMQ_DIST_PORT",
                (port + DISTRIBUTION_OFFSET).to_string(),
            )
            .env("ERL_CRASH_DUMP", self.logs_dir().join("erl_crash.dump"))
            // The start script hands its arguments to erl unchanged (no word splitting).
            .args(["-kernel", "inet_dist_use_interface", "{127,0,0,1}"])
            .arg(OWNERSHIP_FLAG)
            .arg(&dir);
        server
    }

    /// `rabbitmqctl -n NODE ARGS...` with the node's HOME (cookie), output to the startup log.
    fn ctl_command(&self, bin_dir: &Path, port: u16, arguments: &[&str]) -> io::Result<Command> {
        let mut ctl = self.base_command(bin_dir.join(CTL), port);
        ctl.arg("-n").arg(node_name(port)).args(arguments);
        process::output_to(&mut ctl, &self.startup_log())?;
        Ok(ctl)
    }

    fn spawn_server(&self, bin_dir: &Path, port: u16) -> Result<Child, BrokerError> {
        let log = self.startup_log();
        let mut server = self.server_command(bin_dir, port);
        process::output_to(&mut server, &log).map_err(BrokerError::io("opening", &log))?;
        process::spawn_detached(&mut server).map_err(|source| BrokerError::Io {
            action: "starting",
            path: bin_dir.join(SERVER),
            source,
        })
    }

    /// `rabbitmqctl stop`, the documented clean shutdown; then SIGTERM (which RabbitMQ also
    /// treats as a clean shutdown) and SIGKILL when the node does not go.
    fn stop_node(&self, pid: u32) -> Result<(), BrokerError> {
        let state = self.read_state();
        let stopped_by_ctl = match (&self.bin_dir, &state) {
            (Some(bin_dir), Some(state)) => {
                let stopped = self
                    .ctl_command(bin_dir, state.port, &["stop"])
                    .and_then(|mut ctl| process::run_with_timeout(&mut ctl, CTL_STOP_TIMEOUT));
                matches!(stopped, Ok(Some(status)) if status.success())
                    && process::wait_for_exit(pid, STOP_GRACE)
            }
            _ => false,
        };
        if !stopped_by_ctl {
            // `rabbitmqctl stop` failed (no state, a cookie mismatch, a hung node): signals.
            process::stop(NAME, pid, STOP_GRACE)?;
        }
        // The start script exits right after the node. When this process started it (a test,
        // or a run that started the broker itself), reap it so it does not stay a zombie.
        if let Some(script) = state.and_then(|state| state.script_pid) {
            let script_arguments = [OsString::from(OWNERSHIP_FLAG), self.dir().into_os_string()];
            if process::is_ours(script, &script_arguments) {
                process::wait_for_exit(script, Duration::from_secs(5));
            }
            process::reap(script);
        }
        Ok(())
    }

    /// Polls until the node answers AMQP on `port` as node `brokerbench_PORT@localhost` and
    /// its management and Prometheus ports accept connections. Returns the pid of its
    /// `beam.smp`. Fails at once, with the log's explanation, when the node exits meanwhile.
    fn wait_until_ready(&self, port: u16, mut watch: Watch<'_>) -> Result<u32, BrokerError> {
        let node = node_name(port);
        let ownership = self.ownership_arguments();
        let mut last_pid = None;
        let outcome = managed::poll(READY_TIMEOUT, || {
            let pid = match watch {
                Watch::Running(pid) => Some(pid),
                // RabbitMQ writes its pid file early in its boot.
                Watch::Started(_) => process::read_pid_file(&self.pid_file())
                    .filter(|&pid| process::is_ours(pid, &ownership)),
            };
            last_pid = pid;
            if let Some(pid) = pid {
                if answers(port, &node) {
                    return Some(Ok(pid));
                }
            }
            let exited = match &mut watch {
                Watch::Started(script) => script.try_wait().ok().flatten().is_some(),
                Watch::Running(pid) => !process::is_alive(*pid),
            };
            exited.then(|| {
                Err(self.start_failed(format!(
                    "the node exited before it answered on 127.0.0.1:{port}"
                )))
            })
        });
        outcome.unwrap_or_else(|| {
            let who = last_pid.map_or_else(String::new, |pid| format!(" (pid {pid})"));
            Err(self.start_failed(format!(
                "the node{who} did not answer AMQP on 127.0.0.1:{port} (with management on {} and Prometheus on {}) within {} s",
                port + MANAGEMENT_OFFSET,
                port + PROMETHEUS_OFFSET,
                READY_TIMEOUT.as_secs()
            )))
        })
    }

    /// A start failure quoting whichever log explains it: RabbitMQ prints `BOOT FAILED` and
    /// the reason to stdout (the startup log) and to its own log.
    fn start_failed(&self, reason: String) -> BrokerError {
        let logs = [self.startup_log(), self.log_file()];
        let explained = logs.iter().find_map(|log| {
            let text = fs::read_to_string(log).ok()?;
            boot_failure(&text).map(|excerpt| (log.clone(), excerpt))
        });
        let (log_file, log_tail) = explained.unwrap_or_else(|| {
            let log = self.startup_log();
            let tail = process::log_tail(&log, LOG_TAIL_LINES);
            (log, tail)
        });
        BrokerError::StartFailed {
            broker: NAME,
            reason,
            log_file,
            log_tail,
        }
    }
}

impl RabbitMq {
    /// Creates (or updates) the user `brokerbench` with the home's password and full rights
    /// on `/`, through the management API as guest; then checks that it logs in over
    /// amqps:// with its password (PLAIN) and with the client certificate (EXTERNAL).
    fn add_tls_user(&self, port: u16, tls_port: u16) -> Result<(), BrokerError> {
        let files = self.tls();
        let password = files.password()?;
        let management = port + MANAGEMENT_OFFSET;
        let user = tls::USER;
        let requests = [
            (
                format!("/api/users/{user}"),
                format!("{{\"password\":\"{password}\",\"tags\":\"\"}}"),
            ),
            (
                format!("/api/permissions/%2f/{user}"),
                "{\"configure\":\".*\",\"write\":\".*\",\"read\":\".*\"}".to_string(),
            ),
        ];
        for (path, body) in &requests {
            let outcome = managed::poll(Duration::from_secs(20), || {
                match management_put(management, path, body) {
                    Ok(status) if (200..300).contains(&status) => Some(Ok(())),
                    Ok(status) if status == 401 || status == 403 => Some(Err(status)),
                    _ => None,
                }
            });
            match outcome {
                Some(Ok(())) => {}
                other => {
                    return Err(self.start_failed(format!(
                        "the management API on 127.0.0.1:{management} did not take PUT {path} ({})",
                        match other {
                            Some(Err(status)) => format!("HTTP {status} for guest"),
                            _ => "no answer within 20 s".into(),
                        }
                    )))
                }
            }
        }
        for uri in [
            self.tls_uri(tls_port, &password, false),
            self.tls_uri(tls_port, &password, true),
        ] {
            let uri = crate::config::AmqpUri::parse(&uri).map_err(|e| BrokerError::Tls {
                what: format!("the amqps:// URI of the managed node: {e}"),
            })?;
            let logged_in = managed::poll(Duration::from_secs(10), || {
                crate::probe::probe(&uri, PROBE_TIMEOUT * 3).ok()
            });
            if logged_in.is_none() {
                let error = crate::probe::probe(&uri, PROBE_TIMEOUT * 3)
                    .err()
                    .map(|e| format!("{e:?}"))
                    .unwrap_or_default();
                return Err(self.start_failed(format!(
                    "the user `{user}` could not log in over amqps:// on 127.0.0.1:{tls_port} ({}): {error}",
                    if uri.external { "EXTERNAL" } else { "PLAIN" }
                )));
            }
        }
        Ok(())
    }

    /// The amqps:// URI of the node's TLS listener: as `brokerbench` with its password, or
    /// (`external`) with the client certificate.
    fn tls_uri(&self, tls_port: u16, password: &str, external: bool) -> String {
        let files = self.tls();
        let encode = |path: PathBuf| path.display().to_string().replace('%', "%25");
        if external {
            format!(
                "amqps://127.0.0.1:{tls_port}/%2f?cacertfile={}&certfile={}&keyfile={}&auth_mechanism=external",
                encode(files.ca()),
                encode(files.client_certificate()),
                encode(files.client_key())
            )
        } else {
            format!(
                "amqps://{}:{password}@127.0.0.1:{tls_port}/%2f?cacertfile={}",
                tls::USER,
                encode(files.ca())
            )
        }
    }

    /// Lines `up` and `status` print about the TLS listener of the running node.
    fn tls_lines(&self) -> Vec<String> {
        let Some(tls_port) = self.running_tls_port() else {
            return Vec::new();
        };
        vec![
            format!(
                "TLS:  amqps://127.0.0.1:{tls_port} (PLAIN as user `{}`, or EXTERNAL with the client certificate)",
                tls::USER
            ),
            format!("CA:   {}", self.tls().ca().display()),
            "`brokerbench broker status rabbitmq --driver-file > rabbitmq-tls.yaml` writes a driver file for it (it holds the password)".into(),
        ]
    }
}

/// `PUT path` with a JSON body to the management API on 127.0.0.1:`port` as guest; the HTTP
/// status.
fn management_put(port: u16, path: &str, body: &str) -> io::Result<u16> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Basic {GUEST_BASIC_AUTH}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or_else(|| io::Error::other("not an HTTP answer"))
}

/// What `wait_until_ready` watches for an early exit.
enum Watch<'a> {
    /// The start script we just spawned; it exits when the node does.
    Started(&'a mut Child),
    /// The `beam.smp` of a node that was running already.
    Running(u32),
}

impl RabbitMq {
    /// Writes this node's configuration and spawns its start script: the script (the node's
    /// parent; it exits when the node does) and the AMQP port it took.
    fn start_node(&self) -> Result<(Child, u16), BrokerError> {
        let bin_dir = self.installed_bin_dir()?;
        // A killed node still winding down holds its ports: wait for it rather than move on
        // to the next free port.
        process::wait_if_exiting(&self.pid_file());
        let (port, skipped) = choose_port(self.port, self.tls().enabled(), |port| {
            !process::can_listen(port)
        })
        .map_err(|busy| BrokerError::NoFreePort {
            broker: NAME,
            first: self.port,
            last: last_candidate(self.port),
            busy: busy
                .iter()
                .map(|busy| busy.describe())
                .collect::<Vec<_>>()
                .join(", "),
            variable: PORT_VARIABLE,
        })?;
        let note = skipped.first().map(|busy| moved_note(busy, port));
        self.write_configuration(port)?;
        process::rotate_log(&self.startup_log())?;
        process::rotate_log(&self.log_file())?;
        // A pid file left by a node that died would name a stranger (or nobody) while we wait.
        process::remove_pid_file(&self.pid_file())?;
        let script = self.spawn_server(&bin_dir, port)?;
        self.write_state(&State {
            port,
            note,
            script_pid: Some(script.id()),
        })?;
        Ok((script, port))
    }

    /// Takes a node that failed to start down and removes what its start left.
    fn abandon_node(&self, mut script: Child) {
        if let Some(pid) = self.running_pid() {
            let _ = process::stop(NAME, pid, STOP_GRACE);
        }
        let _ = script.kill();
        let _ = script.wait();
        let _ = process::remove_if_present(&self.state_file());
        let _ = process::remove_pid_file(&self.pid_file());
    }
}

impl Lifecycle for RabbitMq {
    /// Each started node's start script and AMQP port, node 1 first.
    type Starting = Starting;

    fn dir(&self) -> PathBuf {
        self.root()
    }

    fn check(&self) -> Result<(), BrokerError> {
        self.check_port()?;
        self.check_size()?;
        self.installed_bin_dir().map(|_| ())
    }

    fn running_pid(&self) -> Option<u32> {
        self.nodes().iter().find_map(RabbitMq::running_pid)
    }

    fn status_of(&self, pid: u32) -> BrokerStatus {
        self.cluster_status()
            .unwrap_or_else(|| RabbitMq::status_of(self, pid))
    }

    fn check_running(&self, status: &BrokerStatus) -> Result<(), BrokerError> {
        self.options.check_running(NAME, status)
    }

    fn start_again(&self, id: u32) -> Result<u32, BrokerError> {
        RabbitMq::restart_node(self, id)
    }

    /// Waits for the node that gives the status (the first running one).
    fn wait_running(&self, status: &BrokerStatus) -> Result<(), BrokerError> {
        let node = status.nodes.iter().find(|n| n.pid == Some(status.pid));
        let node = self.node(node.map_or(1, |n| n.id));
        node.wait_until_ready(node.amqp_port(), Watch::Running(status.pid))
            .map(|_| ())
    }

    /// Starts node 1; the others start, one by one, once it answers (they join it).
    fn start(&self) -> Result<Starting, BrokerError> {
        let count = self.options.nodes.unwrap_or(1);
        self.clear_data_for(count)?;
        brokerbench_brokers::cluster::record_size(&self.root(), count)?;
        let asked = self.options.settings.clone().unwrap_or_default();
        settings::record(&self.root(), &asked)?;
        let (script, port) = self.start_node()?;
        Ok(Starting {
            count,
            nodes: vec![(self.clone(), script, port)],
        })
    }

    fn wait_started(&self, starting: &mut Starting) -> Result<BrokerStatus, BrokerError> {
        let (_, script, port) = &mut starting.nodes[0];
        let port = *port;
        let pid = self.wait_until_ready(port, Watch::Started(script))?;
        if let Some(tls_port) = self.running_tls_port() {
            self.add_tls_user(port, tls_port)?;
        }
        for id in 2..=starting.count {
            self.start_joining(id, starting)?;
        }
        Ok(self
            .cluster_status()
            .unwrap_or_else(|| RabbitMq::status_of(self, pid)))
    }

    fn abandon(&self, starting: Starting) {
        for (node, script, _) in starting.nodes {
            node.abandon_node(script);
        }
    }

    /// Stops every node at once (each takes about 6 s, see [`RabbitMq::down`]).
    fn stop(&self, _pid: u32) -> Result<(), BrokerError> {
        let running: Vec<(RabbitMq, u32)> = self
            .every_node()
            .into_iter()
            .filter_map(|node| node.running_pid().map(|pid| (node, pid)))
            .collect();
        brokerbench_brokers::cluster::stop_all(&running, |(node, pid)| node.stop_node(*pid))
    }

    fn leftovers(&self) -> Vec<PathBuf> {
        self.every_node()
            .iter()
            .flat_map(|node| [node.state_file(), node.pid_file()])
            .collect()
    }
}

impl brokerbench_brokers::ManagedBroker for RabbitMq {
    fn install(&self) -> Result<String, BrokerError> {
        let bin_dir = self.installed_bin_dir()?;
        let installed = RabbitMq {
            bin_dir: Some(bin_dir),
            ..self.clone()
        };
        Ok(format!(
            "rabbitmq {} is installed (Debian package rabbitmq-server)",
            installed.version()
        ))
    }
    fn up(&self) -> Result<(BrokerStatus, bool), BrokerError> {
        RabbitMq::up(self)
    }
    fn restart_node(&self, id: u32) -> Result<u32, BrokerError> {
        RabbitMq::restart_node(self, id)
    }
    fn leader(&self, queue: &str) -> Result<u32, BrokerError> {
        self.leader_of(queue)
    }
    fn max_nodes(&self) -> u32 {
        brokerbench_brokers::cluster::MAX_NODES
    }
    fn up_with(&self, options: &UpOptions) -> Result<(BrokerStatus, bool), BrokerError> {
        lifecycle::up(&RabbitMq {
            options: options.clone(),
            ..self.clone()
        })
    }
    fn down(&self) -> Result<Option<u32>, BrokerError> {
        RabbitMq::down(self)
    }
    fn status(&self) -> Result<Option<BrokerStatus>, BrokerError> {
        RabbitMq::status(self)
    }
    fn port_rule(&self) -> Option<managed::PortRule> {
        Some(PORT_RULE)
    }
    /// Every running node's URI, node 1's (or the first running one's) first.
    fn client_address(&self, status: &BrokerStatus) -> String {
        let up: Vec<String> = status
            .nodes
            .iter()
            .filter(|n| n.up)
            .map(|n| self.node(n.id).amqp_uri())
            .collect();
        match up.is_empty() {
            true => self.amqp_uri(),
            false => up.join(","),
        }
    }
    fn metrics_url(&self) -> Option<String> {
        Some(format!(
            "http://127.0.0.1:{}/metrics",
            self.prometheus_port()
        ))
    }
    /// Every node's rabbitmq_prometheus endpoint: each counts what its own connections and
    /// queue leaders handled.
    fn metrics_urls(&self) -> Vec<NodeUrl> {
        self.nodes()
            .iter()
            .filter_map(|node| Some((node.node, node.metrics_url()?)))
            .collect()
    }
    fn endpoints(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "management: http://127.0.0.1:{}/  metrics: http://127.0.0.1:{}/metrics",
            self.management_port(),
            self.prometheus_port()
        )];
        lines.extend(self.tls_lines());
        lines
    }
    fn set_tls(&self, on: bool) -> Result<(), BrokerError> {
        self.tls().switch(
            NAME,
            self.running_pid()
                .map(|pid| (pid, self.running_tls_port().is_some())),
            on,
        )
    }
    fn driver_file(&self, _status: &BrokerStatus) -> Result<String, BrokerError> {
        let Some(tls_port) = self.running_tls_port() else {
            return Ok(format!(
                "\
# The managed RabbitMQ's AMQP listener (`brokerbench broker status rabbitmq --driver-file`).
# Start it with TLS and a user of its own: brokerbench broker down rabbitmq; brokerbench broker up rabbitmq --tls
driver: rabbitmq
uri: amqp://guest:guest@127.0.0.1:{}/%2f
",
                self.amqp_port()
            ));
        };
        let password = self.tls().password()?;
        Ok(format!(
            "\
# The managed RabbitMQ's amqps:// listener (`brokerbench broker status rabbitmq --driver-file`).
# It holds the password of the user `{user}`: keep it private. brokerbench writes it into no
# result, log or report. With the uri set, a run samples the broker's process when given
# --broker-process beam.smp. To log in with the client certificate (SASL EXTERNAL) instead:
# uri: {external}
driver: rabbitmq
uri: {plain}
",
            user = tls::USER,
            external = self.tls_uri(tls_port, "", true),
            plain = self.tls_uri(tls_port, &password, false),
        ))
    }
}

#[cfg(test)]
mod tests;
