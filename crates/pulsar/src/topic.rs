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
/// on): Ok when it is this one (or the connection is a proxy's), else the broker's words.
pub fn look_up(conn: &mut Conn, topic: &str) -> Result<(), String> {
    let mut authoritative = false;
    for _ in 0..5 {
        let id = conn.request_id();
        let answer = conn.request("LOOKUP", id, REQUEST_TIMEOUT, |out| {
            commands::lookup(out, topic, id, authoritative)
        })?;
        match answer.number(3) {
            // Connect: this broker, as the connection found it (or through a proxy).
            Some(1) => return Ok(()),
            // Redirect: ask again; only a cluster of several brokers does this.
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

/// Creates producer `producer_id` on `topic`: the name the broker gave it.
pub fn create_producer(conn: &mut Conn, topic: &str, producer_id: u64) -> Result<String, String> {
    look_up(conn, topic)?;
    let id = conn.request_id();
    let answer = conn.request("PRODUCER", id, REQUEST_TIMEOUT, |out| {
        commands::producer(out, topic, producer_id, id)
    })?;
    if answer.kind != kind::PRODUCER_SUCCESS {
        return Err(format!(
            "PRODUCER on {topic} answered by command {}",
            answer.kind
        ));
    }
    Ok(answer.text(2))
}

/// Subscribes consumer `s.consumer_id` and grants it `permits`.
pub fn subscribe(conn: &mut Conn, s: &commands::Subscribe<'_>, permits: u32) -> Result<(), String> {
    look_up(conn, s.topic)?;
    let id = conn.request_id();
    conn.request("SUBSCRIBE", id, REQUEST_TIMEOUT, |out| {
        commands::subscribe(out, s, id)
    })?;
    commands::flow(conn.out(), s.consumer_id, permits);
    conn.flush()
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
