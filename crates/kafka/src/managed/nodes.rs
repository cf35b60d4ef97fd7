//! The nodes of a managed Kafka: one, or a KRaft cluster of up to five (`broker up kafka
//! --nodes N`). Every node is broker and controller, all of them voters of one controller
//! quorum; node 1 keeps the home's port and folder, node k takes a free base port (client,
//! controller on the next one, exporter 312 above, TLS listeners 2 and 3 above when on) and
//! keeps its files in `node-k/`. The nodes share the jars, the cluster id and the TLS material.

use brokerbench_brokers::cluster;

use super::*;

/// The most nodes `broker up kafka --nodes N` starts.
pub(super) const MAX_NODES: u32 = cluster::MAX_NODES;

/// Each node's heap in a cluster, unless another was asked for: three nodes of the default
/// 1 GiB would crowd a small machine.
const CLUSTER_HEAP: &str = "512m";

impl Kafka {
    /// Node `id` of this broker, on the port its properties name (node 1: this handle's port
    /// until it has run).
    pub(super) fn node(&self, id: u32) -> Kafka {
        let node = Kafka {
            node: id,
            ..self.clone()
        };
        Kafka {
            port: node.running_port(),
            ..node
        }
    }

    /// How many nodes the last start started.
    pub(super) fn size(&self) -> u32 {
        cluster::recorded_size(&self.dir())
    }

    /// The nodes of the last start.
    pub(super) fn nodes(&self) -> Vec<Kafka> {
        (1..=self.size()).map(|id| self.node(id)).collect()
    }

    /// Every node there can be: `down` stops whatever runs of them.
    pub(super) fn every_node(&self) -> Vec<Kafka> {
        (1..=MAX_NODES).map(|id| self.node(id)).collect()
    }

    /// The broker's status: every node of the last start; the first running one gives the
    /// broker's address and pid (node 1 unless it is down). None when no node runs.
    pub(super) fn cluster_status(&self) -> Option<BrokerStatus> {
        let nodes = self.nodes();
        let statuses: Vec<NodeStatus> = nodes
            .iter()
            .map(|node| NodeStatus::local(node.node, node.running_pid(), node.running_port()))
            .collect();
        cluster::status_of_nodes(statuses, |index, pid| nodes[index].node_status_of(pid))
    }

    /// The nodes a start of `count` starts: node 1 on this handle's port, the others on free
    /// layouts that overlap no other node's ports.
    pub(super) fn plan(&self, count: u32) -> Result<Vec<Kafka>, BrokerError> {
        let first = Kafka {
            heap: self.heap_for(count),
            ..self.clone()
        };
        let offsets = first.layout();
        let mut taken: Vec<u16> = offsets.iter().map(|o| first.port + o).collect();
        let mut nodes = vec![first.clone()];
        for id in 2..=count {
            let port = cluster::free_layout(&offsets, &taken)?;
            taken.extend(offsets.iter().map(|o| port + o));
            nodes.push(Kafka {
                node: id,
                port,
                ..first.clone()
            });
        }
        Ok(nodes)
    }

    /// Each node's heap in a start of `count` nodes.
    fn heap_for(&self, count: u32) -> String {
        match (count, self.heap.as_str()) {
            (2.., DEFAULT_HEAP) => CLUSTER_HEAP.to_string(),
            _ => self.heap.clone(),
        }
    }

    /// Node `id` of the running cluster started again: the configuration of the last start
    /// (its ports, the quorum, the recorded settings), its data as it was; it rejoins the
    /// quorum and catches up.
    pub(super) fn restart_node(&self, id: u32) -> Result<u32, BrokerError> {
        let recorded = Kafka {
            options: UpOptions {
                settings: Some(settings::recorded(&self.dir())),
                ..self.options.clone()
            },
            ..self.clone()
        };
        let nodes = recorded.nodes();
        let Some(node) = nodes.iter().find(|n| n.node == id) else {
            return Err(BrokerError::Unsupported {
                what: format!("node {id} of a {}-node Kafka", nodes.len()),
            });
        };
        if let Some(pid) = node.running_pid() {
            return Ok(pid);
        }
        let node = Kafka {
            heap: recorded.heap_for(nodes.len() as u32),
            ..node.clone()
        };
        let mut started = node.start_node(&quorum_of(&nodes, id))?;
        node.wait_until_ready(&started.status, started.jvm.take())?;
        Ok(started.status.pid)
    }

    /// A node's ports, as offsets from its client port.
    fn layout(&self) -> Vec<u16> {
        let mut offsets = vec![0, 1, METRICS_PORT_OFFSET];
        if self.tls().enabled() {
            offsets.extend([SSL_PORT_OFFSET, SASL_SSL_PORT_OFFSET]);
        }
        offsets
    }

    /// A start of another size than the last finds data of another quorum: it goes (the
    /// cluster id stays).
    pub(super) fn clear_data_of_another_size(&self, count: u32) -> Result<(), BrokerError> {
        if self.size() == count {
            return Ok(());
        }
        for node in self.every_node() {
            let data = node.data_dir();
            if data.exists() {
                fs::remove_dir_all(&data).map_err(BrokerError::io("removing", &data))?;
            }
        }
        Ok(())
    }

    /// Writes this node's configuration, formats its storage the first time and spawns its
    /// JVM.
    pub(super) fn start_node(&self, quorum: &Quorum) -> Result<StartingNode, BrokerError> {
        // A node just killed is a JVM whose last threads may still hold its ports.
        process::wait_if_exiting(&self.pid_file());
        self.check_ports_free()?;
        self.write_configuration(quorum)?;
        process::rotate_log(&self.log_file())?;
        self.format_storage_once()?;
        let child = self.spawn_broker()?;
        let status = self.node_status_of(child.id());
        process::write_pid_file(&self.pid_file(), status.pid)?;
        Ok(StartingNode {
            node: self.clone(),
            jvm: Some(child),
            status,
        })
    }

    /// Client and controller ports, and the TLS listeners' when TLS is on, are free.
    fn check_ports_free(&self) -> Result<(), BrokerError> {
        let mut ports = vec![self.port, self.port + 1];
        if self.tls().enabled() {
            for offset in [SSL_PORT_OFFSET, SASL_SSL_PORT_OFFSET] {
                ports.push(
                    self.port
                        .checked_add(offset)
                        .ok_or(BrokerError::PortOutOfRange {
                            broker: NAME,
                            port: self.port,
                            max: u16::MAX - SASL_SSL_PORT_OFFSET,
                            why: "with TLS on, the TLS and SASL listeners take port + 2 and port + 3",
                        })?,
                );
            }
        }
        match ports.into_iter().find(|&port| process::port_in_use(port)) {
            None => Ok(()),
            Some(port) => Err(BrokerError::PortInUse {
                broker: NAME,
                port,
                dir: self.dir(),
                variable: PORT_VARIABLE,
                needs: "<port> and <port>+1, and <port>+2 and <port>+3 with TLS on",
            }),
        }
    }

    /// Waits until the node at `status` lists `count` brokers in its metadata: every node has
    /// joined.
    pub(super) fn wait_for_brokers(
        &self,
        status: &BrokerStatus,
        count: usize,
    ) -> Result<(), BrokerError> {
        let failed = |reason: String| BrokerError::StartFailed {
            broker: NAME,
            reason,
            log_file: self.log_file(),
            log_tail: process::log_tail(&self.log_file(), LOG_TAIL_LINES),
        };
        let client = metadata_client(&status.address)
            .map_err(|e| failed(format!("could not create a Kafka client: {e}")))?;
        let mut listed = 0;
        managed::poll(READY_TIMEOUT, || {
            listed = client
                .fetch_metadata(None, Duration::from_millis(500))
                .map_or(0, |metadata| metadata.brokers().len());
            (listed >= count).then_some(())
        })
        .ok_or_else(|| {
            failed(format!(
                "{listed} of its {count} nodes joined within {} s",
                READY_TIMEOUT.as_secs()
            ))
        })
    }
}

/// Node `id`'s place in the quorum of `nodes`.
pub(super) fn quorum_of(nodes: &[Kafka], id: u32) -> Quorum {
    Quorum {
        node: id,
        voters: nodes.iter().map(|n| (n.node, n.port + 1)).collect(),
    }
}
