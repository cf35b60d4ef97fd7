//! Redis Streams, the sixth broker family, built only on the family interface.
//!
//! Mapping: a workload topic is one stream per partition,
//! `<prefix>-<workload>-<run id>-<topic>` (and `-<partition>` after it when the topic has
//! more than one); a message is one entry (XADD, its payload the field `p`), acknowledged by
//! the server's reply; a subscription is a consumer group `s<subscription>` on each of the
//! topic's streams, its members consumers of it that read with XREADGROUP and acknowledge with
//! XACK (the OpenMessaging Benchmark's Redis driver never acknowledges: its groups' pending
//! lists only grow). Every producer and consumer owns one connection, through brokerbench's own
//! RESP client (see docs/src/redis.md for why).

pub mod config;
pub mod conn;
mod consumer;
mod family;
pub mod managed;
mod metrics;
pub mod omb;
mod producer;
pub mod resp;
mod server;
mod unread;

use std::time::Duration;

use brokerbench_driver::{Consumer, ConsumerSlot, Dialed, Driver, DriverError, Topology};
use brokerbench_driver::{Producer, ProducerSlot};

use crate::config::{RedisDriverConfig, RedisUrl};
use crate::conn::Conn;

pub use family::{RedisFamily, FAMILY};

/// How long connecting and each setup command may take.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The Redis Streams driver.
pub struct RedisDriver {
    config: RedisDriverConfig,
    url: RedisUrl,
    /// Each topic's streams, partition 0 first.
    streams: Vec<Vec<String>>,
    subscriptions: u32,
    consumers: bool,
    /// The server's version and persistence, once connected.
    server: Option<server::Server>,
    /// The persistence the server had before the driver file's `appendfsync` changed it (at
    /// connect, so that the manifest records the run's).
    restore: Option<server::Persistence>,
    removes: bool,
}

impl RedisDriver {
    pub fn new(config: RedisDriverConfig, url: RedisUrl) -> Self {
        let url = url.with_tls(config.tls.as_ref());
        RedisDriver {
            config,
            url,
            streams: Vec::new(),
            subscriptions: 1,
            consumers: false,
            server: None,
            restore: None,
            removes: true,
        }
    }

    /// A new connection.
    fn open(&self) -> Result<Conn, DriverError> {
        Conn::connect(&self.url, ADMIN_TIMEOUT).map_err(|e| {
            e.for_run(Dialed {
                broker: "redis",
                address: self.url.to_string(),
                noun: "server",
                field: "redis_url",
                tls_address: "rediss://host:port, the server's TLS port",
                login_hint: String::new(),
            })
        })
    }

    /// The streams of `topic`.
    fn topic_streams(&self, topic: u32) -> Result<&[String], DriverError> {
        self.streams
            .get(topic as usize)
            .map(Vec::as_slice)
            .ok_or_else(|| DriverError::Other(format!("no streams for topic {topic}")))
    }

    /// Creates each subscription's consumer group on each stream (and the stream with it),
    /// reading from the entries added after now; a group that exists (another shard's) is
    /// the run's own.
    fn create_groups(&self, conn: &mut Conn) -> Result<(), DriverError> {
        for stream in self.streams.iter().flatten() {
            for subscription in 0..self.subscriptions {
                let group = group_name(subscription);
                let created = conn.call(
                    &[
                        b"XGROUP",
                        b"CREATE",
                        stream.as_bytes(),
                        group.as_bytes(),
                        b"$",
                        b"MKSTREAM",
                    ],
                    ADMIN_TIMEOUT,
                );
                match created {
                    Ok(_) => {}
                    Err(e) if e.starts_with("BUSYGROUP") => {}
                    Err(e) => {
                        return Err(DriverError::Other(format!(
                            "redis: creating the group {group} of {stream}: {e}"
                        )))
                    }
                }
            }
        }
        Ok(())
    }
}

impl RedisDriver {
    /// Puts back the persistence the driver file's `appendfsync` changed, once.
    fn restore_persistence(&mut self, conn: &mut Conn) -> Result<(), String> {
        match self.restore.take() {
            Some(before) => server::restore_persistence(conn, &before)
                .map_err(|e| format!("redis: putting back appendonly/appendfsync: {e}")),
            None => Ok(()),
        }
    }
}

/// A run that ends before its cleanup (an error after connecting) still puts the server's
/// persistence back.
impl Drop for RedisDriver {
    fn drop(&mut self) {
        if self.restore.is_some() {
            if let Ok(mut conn) = self.open() {
                let _ = self.restore_persistence(&mut conn);
            }
        }
    }
}

/// A subscription's consumer group.
fn group_name(subscription: u32) -> String {
    format!("s{subscription}")
}

/// The streams of a topic named `name` with `partitions` partitions.
fn stream_names(name: &str, partitions: u32) -> Vec<String> {
    match partitions {
        0 | 1 => vec![name.to_string()],
        n => (0..n).map(|p| format!("{name}-{p}")).collect(),
    }
}

impl Driver for RedisDriver {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn connect(&mut self) -> Result<(), DriverError> {
        let mut conn = self.open()?;
        let asked = |conn: &mut Conn| {
            server::Server::ask(conn)
                .map_err(|e| DriverError::Other(format!("redis at {}: {e}", self.url)))
        };
        let server = asked(&mut conn)?;
        server.check_streams().map_err(DriverError::Other)?;
        self.server = Some(server);
        if let Some(fsync) = self.config.appendfsync {
            let failed = |e: String| {
                DriverError::Other(format!("redis: setting appendfsync {}: {e} (leave appendfsync out to run with the server's own persistence)", fsync.as_str()))
            };
            // Recorded before anything is set, so that whatever follows puts it back.
            self.restore = Some(server::current_persistence(&mut conn).map_err(failed)?);
            server::set_persistence(&mut conn, fsync).map_err(failed)?;
            self.server = Some(asked(&mut conn)?);
        }
        Ok(())
    }

    fn broker_version(&self) -> Option<String> {
        self.server.as_ref().map(server::Server::describe)
    }

    fn prepare(&mut self, topology: &Topology) -> Result<(), DriverError> {
        self.removes = topology.removes();
        if !self.removes {
            // One shard puts the persistence back, after every shard is done: shard 0.
            self.restore = None;
        }
        self.subscriptions = topology.subscriptions_per_topic.max(1);
        self.consumers = topology.consumers_per_topic > 0;
        self.streams = (0..topology.topics)
            .map(|topic| {
                let name = brokerbench_driver::naming::run_object_name(
                    &self.config.stream_prefix,
                    &topology.workload,
                    &topology.run_id,
                    topic,
                );
                stream_names(&name, topology.partitions_per_topic)
            })
            .collect();
        if self.consumers {
            self.create_groups(&mut self.open()?)?;
        }
        Ok(())
    }

    fn producer(&self, slot: ProducerSlot) -> Result<Box<dyn Producer>, DriverError> {
        let ProducerSlot { topic, .. } = slot;
        let trim = self.config.max_len.map(|max_len| producer::Trim {
            approximate: self.config.approximate_trim,
            max_len,
        });
        Ok(Box::new(producer::RedisProducer::new(
            self.open()?,
            conn::Reconnector::new(self.url.clone(), self.config.reconnect, Conn::redial),
            self.topic_streams(topic)?,
            trim,
            self.config.max_outstanding,
        )))
    }

    fn consumer(&self, slot: ConsumerSlot) -> Result<Box<dyn Consumer>, DriverError> {
        let member = consumer::Membership {
            streams: self.topic_streams(slot.topic)?.to_vec(),
            group: group_name(slot.subscription),
            consumer: format!("c{}", slot.member),
            read_count: self.config.read_count,
        };
        Ok(Box::new(consumer::RedisConsumer::new(
            self.open()?,
            conn::Reconnector::new(self.url.clone(), self.config.reconnect, Conn::redial),
            member,
        )))
    }

    fn subscriptions_per_topic(&self) -> u32 {
        self.subscriptions
    }

    fn broker_drop_policy(&self) -> Option<String> {
        self.config.max_len.map(|n| {
            format!("each XADD trims its stream to {n} entries (MAXLEN{}): entries the groups had not read are discarded", if self.config.approximate_trim { " ~" } else { "" })
        })
    }

    fn failure_settings(&self) -> &'static [(&'static str, &'static str)] {
        &[(
            "redis_oom",
            "the server's maxmemory (streams keep every entry unless trimmed: set max_len in the driver file)",
        )]
    }

    /// Deletes the run's streams (their groups go with them) and puts back the persistence
    /// the driver file's `appendfsync` changed.
    fn cleanup(&mut self) -> Result<(), DriverError> {
        let mut failed = Vec::new();
        let mut conn = self.open()?;
        if let Err(e) = self.restore_persistence(&mut conn) {
            failed.push(e);
        }
        if self.config.delete_streams && self.removes {
            for stream in std::mem::take(&mut self.streams).iter().flatten() {
                if let Err(e) = conn.call(&[b"DEL", stream.as_bytes()], ADMIN_TIMEOUT) {
                    failed.push(format!("redis: deleting {stream}: {e}"));
                }
            }
        }
        DriverError::unless_failed(failed)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_topic_is_one_stream_per_partition() {
        assert_eq!(super::stream_names("t", 1), vec!["t"]);
        assert_eq!(super::stream_names("t", 3), vec!["t-0", "t-1", "t-2"]);
    }
}
