//! Which node leads a queue: the management API's queue object names its leader (a quorum
//! queue) or the node it lives on (a classic queue) by Erlang node name.

use serde_json::Value;

use std::time::Duration;

use brokerbench_brokers::BrokerError;

use super::names::GUEST_BASIC_AUTH;
use super::node::RabbitMq;

impl RabbitMq {
    /// The node that leads `queue` (on the default vhost, where runs on the managed broker
    /// declare theirs) now, as the first node whose management API answers says.
    pub(super) fn leader_of(&self, queue: &str) -> Result<u32, BrokerError> {
        let nodes = self.nodes();
        let path = format!("/api/queues/%2F/{}", path_segment(queue));
        let answer = nodes.iter().find_map(|node| {
            brokerbench_brokers::http::get(
                node.management_port(),
                &path,
                Some(GUEST_BASIC_AUTH),
                // A paused node takes the connection and never answers: the fault waits.
                Duration::from_secs(1),
            )
        });
        let no_leader = |why: &str| BrokerError::NoLeader {
            object: format!("queue {queue}"),
            why: why.into(),
        };
        let answer = answer.ok_or_else(|| no_leader("no node's management API knows it"))?;
        let queue: Value = serde_json::from_str(&answer).map_err(|e| no_leader(&e.to_string()))?;
        let leader =
            leader_name(&queue).ok_or_else(|| no_leader("its members are electing one"))?;
        nodes
            .iter()
            .find(|node| node.node_name() == leader)
            .map(|node| node.node)
            .ok_or_else(|| {
                no_leader(&format!(
                    "its leader {leader} is not a node of this cluster"
                ))
            })
    }
}

/// A quorum queue's `leader`, else the `node` a classic queue lives on.
fn leader_name(queue: &Value) -> Option<&str> {
    ["leader", "node"]
        .iter()
        .find_map(|key| queue[key].as_str())
        .filter(|name| !name.is_empty())
}

/// `name` as one segment of a URL path: every byte but letters, digits and `-_.~` escaped.
fn path_segment(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod leader_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_quorum_queue_names_its_leader_and_a_classic_one_its_node() {
        let quorum = json!({"type": "quorum", "leader": "brokerbench_5673@localhost", "node": "brokerbench_5672@localhost"});
        assert_eq!(leader_name(&quorum), Some("brokerbench_5673@localhost"));
        let classic = json!({"type": "classic", "node": "brokerbench_5672@localhost"});
        assert_eq!(leader_name(&classic), Some("brokerbench_5672@localhost"));
        assert_eq!(leader_name(&json!({"leader": ""})), None);
    }

    #[test]
    fn names_are_escaped_as_path_segments() {
        assert_eq!(path_segment("bb-w_1.x~-q0"), "bb-w_1.x~-q0");
        assert_eq!(path_segment("a b/c%"), "a%20b%2Fc%25");
    }
}
