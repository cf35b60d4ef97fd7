//! What the cluster is checked for before and after topics are created: bootstrap servers
//! that listen, enough brokers for the replicas and in-sync replicas the driver file asks
//! for, existing topics that match the run, and a leader for every partition.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;

use brokerbench_driver::DriverError;

use crate::driver::{KafkaDriver, ADMIN_TIMEOUT};

/// How long a run waits for a node that listens to be listed in the cluster's metadata.
const REJOIN_WAIT: Duration = Duration::from_secs(30);

impl KafkaDriver {
    pub(crate) fn check_existing(
        &self,
        admin: &AdminClient<DefaultClientContext>,
        name: &str,
    ) -> Result<(), DriverError> {
        let metadata = admin
            .inner()
            .fetch_metadata(Some(name), ADMIN_TIMEOUT)
            .map_err(|e| DriverError::Other(format!("reading metadata of topic '{name}': {e}")))?;
        let topic = metadata
            .topics()
            .iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| {
                DriverError::Other(format!("topic '{name}' exists but has no metadata"))
            })?;
        let fix = "delete the topic, choose another topic_prefix, or set unique_topics: true";
        let partitions = topic.partitions().len() as u32;
        if partitions != self.partitions {
            return Err(DriverError::Conflict(format!(
                "topic '{name}' exists with {partitions} partitions, the workload asks for partitions_per_topic: {}; {fix}",
                self.partitions
            )));
        }
        let replicas = topic
            .partitions()
            .first()
            .map(|p| p.replicas().len())
            .unwrap_or(0) as u16;
        if replicas != self.config.replication_factor {
            return Err(DriverError::Conflict(format!(
                "topic '{name}' exists with replication factor {replicas}, the driver asks for replication_factor: {}; {fix}",
                self.config.replication_factor
            )));
        }
        if !self.config.topic_config.is_empty() {
            let resource = ResourceSpecifier::Topic(name);
            let described = block_on(admin.describe_configs([&resource], &AdminOptions::new()))
                .map_err(|e| DriverError::Other(format!("describing topic '{name}': {e}")))?;
            let Some(Ok(resource)) = described.into_iter().next() else {
                return Err(DriverError::Other(format!(
                    "describing topic '{name}' failed"
                )));
            };
            let entries = resource.entry_map();
            for (key, want) in &self.config.topic_config {
                let have = entries.get(key.as_str()).and_then(|e| e.value.clone());
                if have.as_deref() != Some(want.as_str()) {
                    return Err(DriverError::Conflict(format!(
                        "topic '{name}' exists with {key}={}, the driver asks for topic_config.{key}: {want}; {fix}",
                        have.unwrap_or_else(|| "(unset)".into())
                    )));
                }
            }
        }
        Ok(())
    }

    /// How many bootstrap servers accept a TCP connection (at one of their addresses); an error
    /// naming each refusal when none does (a refused connection is known at once; librdkafka
    /// alone would retry until the timeout).
    pub(crate) fn open_bootstrap_servers(&self) -> Result<usize, DriverError> {
        let mut reasons = Vec::new();
        let mut open = 0;
        for server in self
            .bootstrap
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match server.to_socket_addrs() {
                Ok(addrs) => {
                    let mut accepts = false;
                    for addr in addrs {
                        match TcpStream::connect_timeout(&addr, Duration::from_secs(3)) {
                            Ok(_) => accepts = true,
                            Err(e) => reasons.push(format!("{addr}: {e}")),
                        }
                    }
                    open += usize::from(accepts);
                }
                Err(e) => reasons.push(format!("{server}: {e}")),
            }
        }
        if open == 0 {
            return Err(self.unreachable(if reasons.is_empty() {
                "no bootstrap server given".into()
            } else {
                reasons.join("; ")
            }));
        }
        Ok(open)
    }

    /// The brokers the metadata lists, waiting up to [`REJOIN_WAIT`] while fewer are listed than
    /// the replicas need and than bootstrap servers listen: a node started again or reconnected
    /// (after a fault) registers with the controller a few seconds after it listens.
    pub(crate) fn wait_for_listening_brokers(&self, listed: usize, open: usize) -> usize {
        let wanted = usize::from(self.config.replication_factor).min(open);
        let deadline = Instant::now() + REJOIN_WAIT;
        let mut brokers = listed;
        while brokers < wanted && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(500));
            // A node rejoining may refuse a request meanwhile: the answer that counts is the
            // next one.
            if let Ok(metadata) = self.probe_metadata() {
                brokers = metadata.brokers().len();
            }
        }
        brokers
    }

    /// What the driver file asks of the cluster that `brokers` brokers cannot give, before
    /// anything is created: more replicas than brokers, or `min.insync.replicas` above the
    /// replication factor with `acks=all` (every message would be refused).
    pub(crate) fn check_cluster(&self, brokers: usize) -> Result<(), DriverError> {
        let replicas = self.config.replication_factor as usize;
        let mut problems = Vec::new();
        let mut fixes = Vec::new();
        if replicas > brokers {
            problems.push(format!(
                "replication_factor {replicas} needs {replicas} brokers, and the cluster at {} has {brokers}",
                self.bootstrap
            ));
            fixes.push(format!("--set replication_factor={brokers}"));
        }
        let acks_all = self
            .config
            .producer_config
            .get("acks")
            .or_else(|| self.config.producer_config.get("request.required.acks"))
            .is_none_or(|a| a == "all" || a == "-1");
        let min_insync = self
            .config
            .topic_config
            .get("min.insync.replicas")
            .and_then(|v| v.trim().parse::<usize>().ok());
        if let Some(min) = min_insync {
            let possible = replicas.min(brokers);
            if acks_all && min > possible {
                problems.push(format!(
                    "topic_config min.insync.replicas={min} with acks=all needs {min} in-sync replicas, and the topics can have {possible}: the broker would refuse every message (NOT_ENOUGH_REPLICAS)"
                ));
                fixes.push(format!("--set topic_config.min.insync.replicas={possible}"));
            }
        }
        if problems.is_empty() {
            return Ok(());
        }
        // Enough nodes for the replicas asked for, and for min.insync.replicas.
        let nodes = replicas.max(min_insync.unwrap_or(0)).min(5);
        Err(DriverError::Unsatisfiable(format!(
            "the driver file asks for what this cluster cannot give: {}; nothing was created. To run here: {} (these names work on OpenMessaging Benchmark driver files too); or, as it is, on a managed cluster of {nodes} nodes: `brokerbench broker up kafka --nodes {nodes}` and no bootstrap servers in the driver file",
            problems.join("; "),
            fixes.join(" ")
        )))
    }

    pub(crate) fn wait_for_leaders(
        &self,
        admin: &AdminClient<DefaultClientContext>,
    ) -> Result<(), DriverError> {
        let deadline = Instant::now() + ADMIN_TIMEOUT;
        loop {
            let ready = admin
                .inner()
                .fetch_metadata(None, Duration::from_secs(5))
                .map(|m| {
                    self.topics.iter().all(|name| {
                        m.topics().iter().any(|t| {
                            t.name() == name
                                && t.error().is_none()
                                && t.partitions().len() as u32 == self.partitions
                                && t.partitions().iter().all(|p| p.leader() >= 0)
                        })
                    })
                })
                .unwrap_or(false);
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(DriverError::Other(format!(
                    "topics {:?} did not get partition leaders within {ADMIN_TIMEOUT:?}",
                    self.topics
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KafkaDriverConfig;

    #[test]
    fn what_the_cluster_cannot_give_is_refused_with_the_fix() {
        let mut config = KafkaDriverConfig {
            replication_factor: 3,
            ..KafkaDriverConfig::default()
        };
        config
            .topic_config
            .insert("min.insync.replicas".into(), "2".into());
        config.producer_config.insert("acks".into(), "all".into());
        let d = KafkaDriver::new(config.clone(), "127.0.0.1:9092".into());
        let e = d.check_cluster(1).unwrap_err().to_string();
        assert!(
            e.contains("has 1")
                && e.contains("--set replication_factor=1")
                && e.contains("--set topic_config.min.insync.replicas=1")
                && e.contains("`brokerbench broker up kafka --nodes 3`"),
            "{e}"
        );
        assert!(d.check_cluster(3).is_ok());
        // acks=1 does not wait for in-sync replicas.
        config.replication_factor = 1;
        config.producer_config.insert("acks".into(), "1".into());
        assert!(KafkaDriver::new(config.clone(), String::new())
            .check_cluster(1)
            .is_ok());
        // librdkafka's default is acks=all.
        config.producer_config.clear();
        let e = KafkaDriver::new(config, String::new())
            .check_cluster(1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("NOT_ENOUGH_REPLICAS"), "{e}");
    }
}
