//! A managed Apache Kafka (KRaft, broker and controller in one JVM per node) on loopback: one
//! node, or a cluster of up to five (`broker up kafka --nodes 3`, see [`nodes`]).
//!
//! Layout under `<home>/kafka/` (node 1; node k keeps its own properties, data, logs and pid
//! file in `node-k/`):
//!
//! ```text
//! 4.1.1/pom.xml        the embedded pom, as handed to Maven
//! 4.1.1/lib/           the broker's jars (`install`)
//! server.properties    rewritten by every `up` that starts the broker
//! log4j2.properties    rewritten likewise
//! cluster.id           generated once, kept across `data/` wipes of the same home
//! data/                log.dirs, formatted on first start
//! logs/server.log      stdout, stderr and log4j2 output of the broker (previous start: .1)
//! broker.pid           the JVM's pid while it runs
//! tls/                 with `up --tls`: CA, certificates, the SASL user's password
//! ```
//!
//! With TLS on (`brokerbench broker up kafka --tls`) the broker also listens for SSL on
//! `port + 2` and SASL_SSL on `port + 3` (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for the user
//! `brokerbench`); PLAINTEXT stays on `port`, so runs without a driver file keep working.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::ClientContext;

use brokerbench_brokers::lifecycle::{self, Lifecycle};
use brokerbench_brokers::process;
use brokerbench_brokers::tls::{self, TlsFiles};
use brokerbench_brokers::{
    managed, settings, BrokerError, BrokerStatus, NodeStatus, NodeUrl, UpOptions,
};

mod install;
mod jvm;
mod leader;
mod managed_broker;
mod nodes;
mod properties;
mod ready;
mod storage;
mod users;

use install::*;
use nodes::*;
use properties::*;
use ready::*;

/// The Kafka version the embedded pom installs.
pub const VERSION: &str = "4.1.1";

/// The name of this broker on the command line and in [`BrokerStatus::name`].
const NAME: &str = "kafka";
/// Resolves the broker, its tools and an SLF4J → log4j2 binding from Maven Central.
const POM: &str = include_str!("../../pom.xml");
/// Jars whose presence means `install` finished (it fills a side folder, then renames it).
const REQUIRED_JARS: [&str; 3] = ["kafka_2.13", "kafka-clients", "kafka-tools"];
/// The Prometheus JMX exporter agent jar (see the pom).
const AGENT_JAR: &str = "jmx_prometheus_javaagent-1.0.1.jar";
/// How long a start waits for the exporter's port to be free before starting without it.
const EXPORTER_PORT_WAIT: Duration = Duration::from_secs(5);
/// The exporter listens on the broker port plus this (9404 for 9092).
const METRICS_PORT_OFFSET: u16 = 312;
const DEFAULT_PORT: u16 = 9092;
const PORT_VARIABLE: &str = "BROKERBENCH_KAFKA_PORT";
/// Why the client port can be 65534 at most.
const CONTROLLER_PORT: &str = "the controller listens on the port after it";
/// Usable client ports: the controller listens on the port after it.
const PORT_RULE: managed::PortRule = managed::PortRule {
    broker: NAME,
    variable: PORT_VARIABLE,
    default: DEFAULT_PORT,
    max: u16::MAX - 1,
    why: CONTROLLER_PORT,
    offsets: &[
        0,
        1,
        SSL_PORT_OFFSET,
        SASL_SSL_PORT_OFFSET,
        METRICS_PORT_OFFSET,
    ],
};
const DEFAULT_HEAP: &str = "1g";
/// With TLS on, the SSL listener is on the client port plus this, SASL_SSL on the next.
const SSL_PORT_OFFSET: u16 = 2;
const SASL_SSL_PORT_OFFSET: u16 = 3;
/// The SASL mechanism of the driver file `broker status kafka --driver-file` prints.
const DRIVER_FILE_MECHANISM: &str = "SCRAM-SHA-512";
/// The broker's main class; with our properties path it identifies our JVM in `/proc`.
const MAIN_CLASS: &str = "kafka.Kafka";
/// How long `up`, and a node's restart, wait for the broker to answer metadata requests. The
/// wait ends at once when the JVM exits, so the bound matters only for a JVM that runs and does
/// not answer: a node started again on a busy host, beside two others and a run, is given three
/// minutes rather than one.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How long `down` waits after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(30);
/// Lines of the broker log quoted in error messages.
const LOG_TAIL_LINES: usize = 20;

/// A Kafka managed under `<home>/kafka/`, listening on 127.0.0.1: one node of it, and through
/// node 1 the whole broker.
#[derive(Debug, Clone)]
pub struct Kafka {
    /// The brokerbench home (see [`brokerbench_brokers::home`]); Kafka keeps everything in `kafka/` below it.
    home: PathBuf,
    /// Client (PLAINTEXT) port; the KRaft controller listens on `port + 1`.
    port: u16,
    /// JVM heap, used for both -Xms and -Xmx (a fixed heap avoids resize pauses mid-run).
    heap: String,
    /// BROKERBENCH_KAFKA_PORT as given, when it was not a usable port; reported by `up`.
    invalid_port_variable: Option<String>,
    /// Which node this is, 1 to N; node k > 1 keeps its files in `node-k/`.
    node: u32,
    /// What `up` was asked for: how many nodes, which server settings.
    options: UpOptions,
}

impl Kafka {
    /// Kafka under `home`, on port `$BROKERBENCH_KAFKA_PORT` if set, else 9092.
    pub fn new(home: &Path) -> Self {
        let (port, invalid_port_variable) = PORT_RULE.read();
        Kafka {
            // The ownership check compares the properties path on the JVM's command line.
            home: managed::absolute_home(home),
            port,
            heap: DEFAULT_HEAP.to_string(),
            invalid_port_variable,
            node: 1,
            options: UpOptions::default(),
        }
    }

    /// The same broker on another client port (the controller takes `port + 1`).
    pub fn with_port(self, port: u16) -> Self {
        Kafka {
            port,
            invalid_port_variable: None,
            ..self
        }
    }

    /// The same broker with another JVM heap size, in `-Xmx` syntax (`512m`, `2g`).
    pub fn with_heap(self, heap: &str) -> Self {
        Kafka {
            heap: heap.to_string(),
            ..self
        }
    }

    /// The client port `up` starts the broker on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Where Kafka keeps its jars, cluster id, TLS material and node 1's configuration, data,
    /// logs and pid file: `<home>/kafka`.
    pub fn dir(&self) -> PathBuf {
        self.home.join(NAME)
    }

    /// This node's own files: the folder itself for node 1, `node-k/` inside it for node k.
    fn node_dir(&self) -> PathBuf {
        match self.node {
            1 => self.dir(),
            id => brokerbench_brokers::cluster::node_dir(&self.dir(), id),
        }
    }

    /// Where `install` puts the broker's jars: `<home>/kafka/4.1.1/lib`.
    pub fn lib_dir(&self) -> PathBuf {
        self.version_dir().join("lib")
    }

    /// The broker's partitions (`log.dirs`); kept by `down`.
    pub fn data_dir(&self) -> PathBuf {
        self.node_dir().join("data")
    }

    /// The broker's log: stdout, stderr and log4j2 output.
    pub fn log_file(&self) -> PathBuf {
        self.logs_dir().join("server.log")
    }

    fn version_dir(&self) -> PathBuf {
        self.dir().join(VERSION)
    }

    fn logs_dir(&self) -> PathBuf {
        self.node_dir().join("logs")
    }

    fn properties_file(&self) -> PathBuf {
        self.node_dir().join("server.properties")
    }

    /// The TLS material and whether TLS is on for the next start (see [`TlsFiles`]).
    pub fn tls(&self) -> TlsFiles {
        TlsFiles::of(&self.dir())
    }

    /// The broker's key and certificate in one PEM file, as Kafka's PEM key store reads it.
    fn keystore_file(&self) -> PathBuf {
        self.tls().dir().join("kafka-keystore.pem")
    }

    /// The listeners of the running broker's configuration: (SSL, SASL_SSL) ports when it was
    /// started with TLS.
    fn running_tls_ports(&self) -> Option<(u16, u16)> {
        let properties = fs::read_to_string(self.properties_file()).ok()?;
        Some((
            named_listener_port(&properties, "SSL")?,
            named_listener_port(&properties, "SASL_SSL")?,
        ))
    }

    fn log4j2_file(&self) -> PathBuf {
        self.node_dir().join("log4j2.properties")
    }

    pub(crate) fn pid_file(&self) -> PathBuf {
        self.node_dir().join("broker.pid")
    }

    /// True when the jars of Kafka [`VERSION`] are in [`Kafka::lib_dir`].
    pub fn is_installed(&self) -> bool {
        let lib = self.lib_dir();
        REQUIRED_JARS
            .iter()
            .all(|jar| lib.join(format!("{jar}-{VERSION}.jar")).is_file())
            && self.agent_jar().is_file()
    }

    /// The Prometheus JMX exporter agent, kept out of the broker's class path.
    fn agent_jar(&self) -> PathBuf {
        self.version_dir().join("agent").join(AGENT_JAR)
    }

    fn jmx_exporter_config(&self) -> PathBuf {
        self.node_dir().join("jmx-exporter.yaml")
    }

    /// The broker's metrics endpoint (Prometheus JMX exporter), if the running broker was
    /// started with it.
    pub fn metrics_url(&self) -> Option<String> {
        let pid = self.running_pid()?;
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let agent = cmdline
            .split(|&b| b == 0)
            .find_map(|argument| {
                std::str::from_utf8(argument)
                    .ok()?
                    .strip_prefix("-javaagent:")
            })?
            .to_string();
        // -javaagent:<jar>=127.0.0.1:<port>:<config>
        let port = agent.split('=').nth(1)?.split(':').nth(1)?;
        Some(format!("http://127.0.0.1:{port}/metrics"))
    }

    /// `-javaagent:…` for the JMX exporter on loopback, when installed and its port is free.
    fn agent_argument(&self) -> Option<std::ffi::OsString> {
        let jar = self.agent_jar();
        let port = self.port.checked_add(METRICS_PORT_OFFSET)?;
        // A broker that was just stopped can leave its exporter's listening socket behind
        // for a moment (connections still complete in its backlog): wait for it to go
        // rather than start the new broker without metrics.
        let free = managed::poll(EXPORTER_PORT_WAIT, || {
            (!process::port_in_use(port)).then_some(())
        });
        if !jar.is_file() || free.is_none() {
            return None;
        }
        let mut argument = concat_os("-javaagent:", &jar);
        argument.push(format!("=127.0.0.1:{port}:"));
        argument.push(self.jmx_exporter_config());
        Some(argument)
    }

    /// Starts the broker unless it runs already, and waits until it answers metadata
    /// requests. Returns its status and whether it was already running (then it keeps the
    /// port it was started with, which [`BrokerStatus::address`] reports).
    pub fn up(&self) -> Result<(BrokerStatus, bool), BrokerError> {
        self.install_on_first_use()?;
        lifecycle::up(self)
    }

    /// `up` with `options` (nodes, server settings): a running broker of another size or
    /// settings is an error.
    pub fn up_with(&self, options: &UpOptions) -> Result<(BrokerStatus, bool), BrokerError> {
        self.install_on_first_use()?;
        lifecycle::up(&Kafka {
            options: options.clone(),
            ..self.clone()
        })
    }

    /// Stops the broker this home started (SIGTERM, then SIGKILL after 30 s). Returns the pid
    /// it stopped, or `None` when none was running.
    pub fn down(&self) -> Result<Option<u32>, BrokerError> {
        lifecycle::down(self)
    }

    /// The running broker of this home, or `None`. Does not check that it answers requests.
    pub fn status(&self) -> Result<Option<BrokerStatus>, BrokerError> {
        Ok(lifecycle::status(self))
    }

    fn check_port(&self) -> Result<(), BrokerError> {
        PORT_RULE.check(self.port, self.invalid_port_variable.as_deref())
    }

    /// The jars fetched with Maven before the first start, saying so.
    fn install_on_first_use(&self) -> Result<(), BrokerError> {
        self.check_port()?;
        if !self.is_installed() {
            eprintln!("installing Kafka {VERSION}'s jars with Maven (once; `brokerbench broker install kafka` does it ahead of a run) ...");
            self.install()?;
        }
        Ok(())
    }

    /// Arguments that only our broker's JVM has on its command line.
    fn ownership_arguments(&self) -> [OsString; 2] {
        [MAIN_CLASS.into(), self.properties_file().into_os_string()]
    }

    fn running_pid(&self) -> Option<u32> {
        process::find_ours(&self.pid_file(), &self.ownership_arguments())
    }

    /// The client port this node was started on (its properties), else this handle's.
    fn running_port(&self) -> u16 {
        // A running broker keeps the port it was started with, whatever this handle says.
        fs::read_to_string(self.properties_file())
            .ok()
            .and_then(|properties| listener_port(&properties))
            .unwrap_or(self.port)
    }

    /// The status of this one node, running as `pid`.
    fn node_status_of(&self, pid: u32) -> BrokerStatus {
        let port = self.running_port();
        BrokerStatus {
            name: NAME,
            address: format!("127.0.0.1:{port}"),
            pid,
            version: VERSION.to_string(),
            data_dir: self.data_dir(),
            log_file: self.log_file(),
            note: None,
            nodes: NodeStatus::only(pid, &format!("127.0.0.1:{port}")),
            settings: settings::recorded(&self.dir()),
        }
    }
}

/// One node's JVM while it boots, and the status it will have.
pub struct StartingNode {
    node: Kafka,
    jvm: Option<Child>,
    status: BrokerStatus,
}

impl Lifecycle for Kafka {
    /// Every node's JVM while they boot, node 1 first.
    type Starting = Vec<StartingNode>;

    fn dir(&self) -> PathBuf {
        Kafka::dir(self)
    }

    fn check(&self) -> Result<(), BrokerError> {
        self.check_port()?;
        if let Some(nodes) = self.options.nodes {
            brokerbench_brokers::cluster::check_size(NAME, nodes, MAX_NODES)?;
        }
        if !self.is_installed() {
            return Err(BrokerError::NotInstalled {
                broker: NAME,
                dir: self.lib_dir(),
            });
        }
        Ok(())
    }

    fn running_pid(&self) -> Option<u32> {
        self.nodes().iter().find_map(Kafka::running_pid)
    }

    fn status_of(&self, pid: u32) -> BrokerStatus {
        self.cluster_status()
            .unwrap_or_else(|| self.node_status_of(pid))
    }

    fn check_running(&self, status: &BrokerStatus) -> Result<(), BrokerError> {
        self.options.check_running(NAME, status)
    }

    fn start_again(&self, id: u32) -> Result<u32, BrokerError> {
        Kafka::restart_node(self, id)
    }

    fn wait_running(&self, status: &BrokerStatus) -> Result<(), BrokerError> {
        for node in self.nodes() {
            node.refresh_exporter_config()?;
        }
        self.wait_until_ready(status, None)
    }

    fn start(&self) -> Result<Vec<StartingNode>, BrokerError> {
        let nodes = self.plan(self.options.nodes.unwrap_or(1))?;
        self.clear_data_of_another_size(nodes.len() as u32)?;
        brokerbench_brokers::cluster::record_size(&self.dir(), nodes.len() as u32)?;
        let asked = self.options.settings.clone().unwrap_or_default();
        settings::record(&self.dir(), &asked)?;
        let mut starting = Vec::new();
        for node in &nodes {
            match node.start_node(&quorum_of(&nodes, node.node)) {
                Ok(started) => starting.push(started),
                Err(error) => {
                    self.abandon(starting);
                    return Err(error);
                }
            }
        }
        Ok(starting)
    }

    fn wait_started(&self, starting: &mut Vec<StartingNode>) -> Result<BrokerStatus, BrokerError> {
        for node in starting.iter_mut() {
            node.node.wait_until_ready(&node.status, node.jvm.take())?;
        }
        let first = &starting[0];
        if starting.len() > 1 {
            first.node.wait_for_brokers(&first.status, starting.len())?;
        }
        if self.running_tls_ports().is_some() {
            self.add_scram_user(&first.status)?;
        }
        Ok(self
            .cluster_status()
            .unwrap_or_else(|| first.status.clone()))
    }

    fn abandon(&self, starting: Vec<StartingNode>) {
        for started in starting {
            let node = &started.node;
            if process::is_ours(started.status.pid, &node.ownership_arguments()) {
                let _ = process::stop(NAME, started.status.pid, STOP_GRACE);
            }
            let _ = process::remove_pid_file(&node.pid_file());
        }
    }

    /// Stops every node at once: one by one, the last would wait out its grace for a
    /// controller quorum that left before it.
    fn stop(&self, _pid: u32) -> Result<(), BrokerError> {
        let pids: Vec<u32> = self
            .every_node()
            .iter()
            .filter_map(Kafka::running_pid)
            .collect();
        brokerbench_brokers::cluster::stop_all(&pids, |&pid| process::stop(NAME, pid, STOP_GRACE))
    }

    fn leftovers(&self) -> Vec<PathBuf> {
        self.every_node().iter().map(Kafka::pid_file).collect()
    }
}

#[cfg(test)]
mod tests;
