//! Up, down and status: the broker's own entry points, and the [`Lifecycle`] that runs them
//! over every node of the last start (one, or a cluster).

use std::path::PathBuf;

use brokerbench_brokers::lifecycle::{self, Lifecycle};
use brokerbench_brokers::{settings, BrokerError, BrokerStatus};

use super::names::NAME;
use super::node::RabbitMq;
use super::nodes::Starting;
use super::ready::Watch;

impl RabbitMq {
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
