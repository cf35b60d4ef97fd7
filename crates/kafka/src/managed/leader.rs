//! Which node leads a topic: the leader of its partition 0 in the cluster's metadata, asked
//! of the running nodes (a node's `node.id` is its number here).

use super::*;

/// How long the metadata request may take: it delays the fault that asks.
const METADATA_TIMEOUT: Duration = Duration::from_secs(2);

impl Kafka {
    /// The node that leads partition 0 of `topic` now.
    pub(super) fn leader_of(&self, topic: &str) -> Result<u32, BrokerError> {
        let no_leader = |why: String| BrokerError::NoLeader {
            object: format!("topic {topic} (partition 0)"),
            why,
        };
        let status = self
            .status()?
            .ok_or_else(|| no_leader("no node runs".into()))?;
        let bootstrap = brokerbench_brokers::ManagedBroker::client_address(self, &status);
        let client = metadata_client(&bootstrap).map_err(|e| no_leader(e.to_string()))?;
        let metadata = client
            .fetch_metadata(Some(topic), METADATA_TIMEOUT)
            .map_err(|e| no_leader(format!("the metadata request failed: {e}")))?;
        let leader = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .and_then(|t| t.partitions().iter().find(|p| p.id() == 0))
            .map(|p| p.leader())
            .ok_or_else(|| no_leader("the cluster does not know it".into()))?;
        u32::try_from(leader)
            .ok()
            .filter(|&id| id >= 1)
            .ok_or_else(|| no_leader("its replicas are electing one".into()))
    }
}
