//! A run's topics as Pulsar names them, and finding the broker that serves one (LOOKUP).

use std::time::Duration;

use crate::commands::{self, kind};
use crate::conn::Conn;

/// How long a lookup, a producer's or a subscription's creation may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One topic of a run: its full name and its partitions' names (itself when unpartitioned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    /// `persistent://tenant/ns/name`.
    pub name: String,
    pub partitions: u32,
}

impl Topic {
    /// The names producers and consumers open: `<name>-partition-<i>` when partitioned.
    pub fn parts(&self) -> Vec<String> {
        if self.partitions <= 1 {
            return vec![self.name.clone()];
        }
        (0..self.partitions)
            .map(|i| format!("{}-partition-{i}", self.name))
            .collect()
    }

    /// The admin API's path of the topic: `persistent/tenant/ns/name`.
    pub fn admin_path(&self) -> String {
        self.name.replacen("://", "/", 1)
    }
}

/// Asks the broker on `conn` which broker serves `topic` (which also has a broker take it
/// on), each request waiting at most `timeout`: the service URL of the broker it names, or why
/// not. A Redirect names a broker to ask instead: only a cluster of several brokers answers
/// so, and brokerbench talks to the broker of `service_url` only.
pub fn look_up(conn: &mut Conn, topic: &str, timeout: Duration) -> Result<String, String> {
    let mut authoritative = false;
    for _ in 0..5 {
        let id = conn.request_id();
        let answer = conn.request("LOOKUP", id, timeout, |out| {
            commands::lookup(out, topic, id, authoritative)
        })?;
        match answer.number(3) {
            Some(1) => return Ok(answer.text(1)),
            Some(0) if answer.text(1).is_empty() => authoritative = answer.number(5) == Some(1),
            Some(0) => {
                return Err(format!(
                    "{topic} is served by {}: brokerbench's Pulsar client talks to the broker of service_url only; name that broker, or a Pulsar proxy, as service_url",
                    answer.text(1)
                ))
            }
            _ => return Err(format!("lookup of {topic} failed: {}", answer.error())),
        }
    }
    Err(format!("lookup of {topic}: redirected 5 times"))
}

/// A refusal of a producer or subscription, with the broker the lookup named when the broker
/// asked says it does not serve the topic.
fn refused(error: String, owner: &str) -> String {
    if error.starts_with("ServiceNotReady") && !owner.is_empty() {
        format!("{error} (the lookup named {owner}: brokerbench's Pulsar client talks to the broker of service_url only; name that broker, or a Pulsar proxy, as service_url)")
    } else {
        error
    }
}

/// Creates producer `producer_id` on `topic`: the name the broker gave it.
pub fn create_producer(
    conn: &mut Conn,
    topic: &str,
    producer_id: u64,
    timeout: Duration,
) -> Result<String, String> {
    let owner = look_up(conn, topic, timeout)?;
    let id = conn.request_id();
    let answer = conn
        .request("PRODUCER", id, timeout, |out| {
            commands::producer(out, topic, producer_id, id)
        })
        .map_err(|e| refused(e, &owner))?;
    if answer.kind != kind::PRODUCER_SUCCESS {
        return Err(format!(
            "PRODUCER on {topic} answered by command {}, not PRODUCER_SUCCESS",
            answer.kind
        ));
    }
    Ok(answer.text(2))
}

/// Subscribes consumer `s.consumer_id` and grants it `permits`.
pub fn subscribe(
    conn: &mut Conn,
    s: &commands::Subscribe<'_>,
    permits: u32,
    timeout: Duration,
) -> Result<(), String> {
    let owner = look_up(conn, s.topic, timeout)?;
    let id = conn.request_id();
    conn.request("SUBSCRIBE", id, timeout, |out| {
        commands::subscribe(out, s, id)
    })
    .map_err(|e| refused(e, &owner))?;
    commands::flow(conn.link.out(), s.consumer_id, permits);
    conn.link
        .flush()
        .map_err(|_| crate::conn::CONNECTION_CLOSED.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_named_as_pulsar_names_them() {
        let t = Topic {
            name: "persistent://public/default/x".into(),
            partitions: 2,
        };
        assert_eq!(t.parts()[1], "persistent://public/default/x-partition-1");
        assert_eq!(t.admin_path(), "persistent/public/default/x");
        assert_eq!(Topic { partitions: 1, ..t }.parts().len(), 1);
    }
}
