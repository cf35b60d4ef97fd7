//! The nodes of a managed RabbitMQ: one, or a cluster of up to five (`broker up rabbitmq
//! --nodes N`). Node 1 starts as a node of one would; once it answers, node k starts on a free
//! port layout (AMQP P, management P+10000, Prometheus P+10020, distribution P+20000) from its
//! own folder `node-k/` with node 1's Erlang cookie, and joins node 1 (`rabbitmqctl stop_app`,
//! `join_cluster`, `start_app`). A cluster starts from empty databases every time: a node
//! that was a member of another cluster would refuse to join this one.

use std::fs;
use std::process::Child;
use std::time::Duration;

use brokerbench_brokers::cluster::{self, MAX_NODES};
use brokerbench_brokers::{process, settings, BrokerError, BrokerStatus, NodeStatus, UpOptions};

use super::names::{DISTRIBUTION_OFFSET, MANAGEMENT_OFFSET, NAME, PROMETHEUS_OFFSET};
use super::node::RabbitMq;
use super::ports::port_layout;
use super::ready::Watch;

/// A start in progress: how many nodes it starts, and each started node with its start
/// script and AMQP port, node 1 first.
pub struct Starting {
    pub(super) count: u32,
    pub(super) nodes: Vec<(RabbitMq, Child, u16)>,
}

/// How long one `rabbitmqctl` step of a join may take.
const JOIN_STEP_TIMEOUT: Duration = Duration::from_secs(60);

impl RabbitMq {
    /// Node `id` of this broker (its AMQP port is the one its state records).
    pub(super) fn node(&self, id: u32) -> RabbitMq {
        RabbitMq {
            node: id,
            ..self.clone()
        }
    }

    /// How many nodes the last start started.
    pub(super) fn size(&self) -> u32 {
        cluster::recorded_size(&self.root())
    }

    /// The nodes of the last start.
    pub(super) fn nodes(&self) -> Vec<RabbitMq> {
        (1..=self.size()).map(|id| self.node(id)).collect()
    }

    /// Every node there can be: `down` stops whatever runs of them.
    pub(super) fn every_node(&self) -> Vec<RabbitMq> {
        (1..=MAX_NODES).map(|id| self.node(id)).collect()
    }

    /// `--nodes` within bounds; a cluster has no TLS listeners yet.
    pub(super) fn check_size(&self) -> Result<(), BrokerError> {
        let Some(count) = self.options.nodes else {
            return Ok(());
        };
        cluster::check_size(NAME, count, MAX_NODES)?;
        if count > 1 && self.tls().enabled() {
            return Err(BrokerError::Unsupported {
                what: "TLS on a managed RabbitMQ cluster (`brokerbench broker up rabbitmq --no-tls --nodes N`)".into(),
            });
        }
        Ok(())
    }

    /// The broker's status: every node of the last start; the first running one gives the
    /// broker's address and pid. None when no node runs.
    pub(super) fn cluster_status(&self) -> Option<BrokerStatus> {
        let nodes = self.nodes();
        let statuses: Vec<NodeStatus> = nodes
            .iter()
            .map(|node| NodeStatus::local(node.node, node.running_pid(), node.amqp_port()))
            .collect();
        cluster::status_of_nodes(statuses, |index, pid| nodes[index].status_of(pid))
    }

    /// A cluster, or one node after a cluster, starts from empty databases.
    pub(super) fn clear_data_for(&self, count: u32) -> Result<(), BrokerError> {
        if count == 1 && self.size() == 1 {
            return Ok(());
        }
        for node in self.every_node() {
            let mnesia = node.mnesia_base();
            if mnesia.exists() {
                fs::remove_dir_all(&mnesia).map_err(BrokerError::io("removing", &mnesia))?;
            }
        }
        Ok(())
    }

    /// Starts node `id` on a free port layout, waits until it answers and joins it to node 1;
    /// it is in `starting` from its spawn on, so a failure takes it down too.
    pub(super) fn start_joining(
        &self,
        id: u32,
        starting: &mut Starting,
    ) -> Result<(), BrokerError> {
        let taken: Vec<u16> = starting
            .nodes
            .iter()
            .flat_map(|(_, _, port)| port_layout(*port, false).into_iter().map(|(p, _)| p))
            .collect();
        let offsets = [0, MANAGEMENT_OFFSET, PROMETHEUS_OFFSET, DISTRIBUTION_OFFSET];
        let port = cluster::free_layout(&offsets, &taken)?;
        let node = RabbitMq {
            port,
            ..self.node(id)
        };
        let (script, port) = node.start_node()?;
        starting.nodes.push((node.clone(), script, port));
        let (_, script, _) = starting.nodes.last_mut().expect("just pushed");
        let pid = node.wait_until_ready(port, Watch::Started(script))?;
        node.join(port, &self.node_name())?;
        node.wait_until_ready(port, Watch::Running(pid)).map(|_| ())
    }

    /// Node `id` of the running cluster started again on its recorded port, with its
    /// database as it was (so it rejoins the cluster by itself) and the recorded settings.
    pub(super) fn restart_node(&self, id: u32) -> Result<u32, BrokerError> {
        let node = self.node(id);
        if let Some(pid) = node.running_pid() {
            return Ok(pid);
        }
        let node = RabbitMq {
            port: node.amqp_port(),
            options: UpOptions {
                settings: Some(settings::recorded(&self.root())),
                ..self.options.clone()
            },
            ..node
        };
        let (mut script, port) = node.start_node()?;
        node.wait_until_ready(port, Watch::Started(&mut script))
    }

    /// Joins this running node (AMQP `port`) to the cluster of node `first`.
    fn join(&self, port: u16, first: &str) -> Result<(), BrokerError> {
        let bin_dir = self.installed_bin_dir()?;
        for step in [&["stop_app"][..], &["join_cluster", first], &["start_app"]] {
            let outcome = self
                .ctl_command(&bin_dir, port, step)
                .and_then(|mut ctl| process::run_with_timeout(&mut ctl, JOIN_STEP_TIMEOUT));
            if !matches!(outcome, Ok(Some(status)) if status.success()) {
                return Err(self.start_failed(format!(
                    "node {} could not join {first}: `rabbitmqctl {}` failed",
                    self.node,
                    step.join(" ")
                )));
            }
        }
        Ok(())
    }
}
