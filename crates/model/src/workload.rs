//! The workload: what load to offer (topics, producers, consumers, message size, payload,
//! rate, arrival process) and for how long. Parsed from YAML in two stages: `RawWorkload`
//! mirrors the file, `Workload` is the validated form with defaults merged.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

pub use crate::field::{duration_text, FieldError, Scalar};
use crate::units::{parse_bytes, parse_duration, parse_rate};
use crate::ENVELOPE_HEADER_LEN;

/// How producers choose message keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyDistribution {
    /// No key: the client spreads messages over partitions itself.
    None,
    /// Keys cycle through a fixed set of `KEY_SPACE` keys in order.
    RoundRobin,
    /// A uniformly random key per message from a set of `KEY_SPACE` keys.
    Random,
}

/// Coarsest `schedule_resolution` accepted.
pub const MAX_SCHEDULE_RESOLUTION: Duration = Duration::from_millis(10);

/// Number of distinct keys used by the round-robin and random key distributions.
pub const KEY_SPACE: u64 = 10_000;

/// How intended send times are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrival {
    /// Evenly spaced: message i of a producer is due at t0 + i / rate.
    Uniform,
    /// Exponentially distributed gaps with mean 1 / rate (a Poisson process).
    Poisson,
}

/// Where message bodies (after the envelope header) come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Payload {
    /// Random bytes from a pool of `pool` pre-generated bodies of `message_size` bytes.
    Random {
        #[serde(default = "default_pool")]
        pool: usize,
        /// Share of each message that is random (the envelope header included); the rest is
        /// zeros, so that compression has something to do (OMB's `randomBytesRatio`).
        #[serde(default = "default_ratio", skip_serializing_if = "is_one")]
        random_ratio: f64,
    },
    /// One record per line of a file, replayed in a loop; the message is header + record.
    File {
        path: PathBuf,
        /// true: load the whole file before the run; false: read it from disk while sending.
        #[serde(default = "default_true")]
        read_in_ram: bool,
    },
    /// Generated manufacturing-sensor records (the DEBS 2012 Grand Challenge shape).
    Sensor,
    /// Every message is the bytes of one file, whose length must be `message_size`, with
    /// the envelope header written over its first bytes (OMB's `payloadFile`).
    Binary { path: PathBuf },
}

fn default_pool() -> usize {
    1000
}
fn default_true() -> bool {
    true
}
fn default_ratio() -> f64 {
    1.0
}
fn is_one(ratio: &f64) -> bool {
    *ratio == 1.0
}
fn is_one_u32(n: &u32) -> bool {
    *n == 1
}
/// Default of `producer_threads`.
pub const DEFAULT_PRODUCER_THREADS: u32 = 4;
fn is_default_producer_threads(n: &u32) -> bool {
    *n == DEFAULT_PRODUCER_THREADS
}

/// Target send rate over all producers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Rate {
    /// Messages per second, open loop.
    PerSecond(f64),
    /// Closed loop as fast as the broker acknowledges, with a bounded number in flight.
    #[serde(serialize_with = "serialize_max")]
    Max,
}

fn serialize_max<S: serde::Serializer>(s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str("max")
}

/// Backlog mode as written: consumers paused once the warm-up is over until `size` of messages
/// wait for them, then resumed (producers go on at the same rate); the window then lasts until
/// `drain_ratio` of the backlog is drained, and `duration` more.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBacklog {
    pub size: Scalar,
    pub drain_ratio: Option<f64>,
}

/// Backlog mode (OMB's `consumerBacklogSizeGB` and `backlogDrainRatio`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Backlog {
    /// Bytes of messages waiting for consumers (acknowledged × subscriptions − received,
    /// times `message_size`, over all topics) at which consumers resume.
    pub size_bytes: u64,
    /// Share of the built backlog that must be drained before the last `duration` of the
    /// window starts: drained when at most max(1000 messages, (1 − drain_ratio) × the backlog
    /// asked for) wait (OMB's rule). 0 skips the wait.
    pub drain_ratio: f64,
}

impl Backlog {
    /// Messages the backlog holds when built, for messages of `message_size` bytes.
    pub fn messages(&self, message_size: u64) -> u64 {
        self.size_bytes / message_size.max(1)
    }

    /// Whether the window waits for the backlog to drain at all (`drain_ratio` 0: it does not,
    /// which also serves a broker that drops what waits, whose backlog never drains).
    pub fn waits_for_drain(&self) -> bool {
        self.drain_ratio > 0.0
    }

    /// The most messages that may still wait for the backlog to count as drained.
    pub fn drained_at(&self, message_size: u64) -> u64 {
        let left = ((1.0 - self.drain_ratio) * self.messages(message_size) as f64) as u64;
        left.max(1000)
    }
}

/// The workload as written in the file; every field optional, unknown fields rejected.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorkload {
    pub name: Option<String>,
    pub topics: Option<u32>,
    pub partitions_per_topic: Option<u32>,
    pub producers_per_topic: Option<u32>,
    pub consumers_per_topic: Option<u32>,
    pub subscriptions_per_topic: Option<u32>,
    pub message_size: Option<Scalar>,
    pub keys: Option<KeyDistribution>,
    pub payload: Option<Payload>,
    pub rate: Option<Scalar>,
    pub arrival: Option<Arrival>,
    pub warmup: Option<Scalar>,
    pub duration: Option<Scalar>,
    pub drain_timeout: Option<Scalar>,
    pub schedule_resolution: Option<Scalar>,
    pub max_in_flight: Option<u32>,
    pub producer_threads: Option<u32>,
    pub seed: Option<u64>,
    pub backlog: Option<RawBacklog>,
    pub faults: Option<Vec<crate::faults::RawFault>>,
}

/// Top-level workload field names, used to route `--set` overrides to the workload file.
pub const WORKLOAD_FIELDS: &[&str] = &[
    "name",
    "topics",
    "partitions_per_topic",
    "producers_per_topic",
    "consumers_per_topic",
    "subscriptions_per_topic",
    "message_size",
    "keys",
    "payload",
    "rate",
    "arrival",
    "warmup",
    "duration",
    "drain_timeout",
    "schedule_resolution",
    "max_in_flight",
    "producer_threads",
    "seed",
    "backlog",
    "faults",
];

/// A validated workload with every default filled in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    /// Name used in result folder names and topic names.
    pub name: String,
    /// Number of topics; each has its own producers and consumer group.
    pub topics: u32,
    pub partitions_per_topic: u32,
    pub producers_per_topic: u32,
    /// Consumers in one group per topic; 0 means produce only.
    pub consumers_per_topic: u32,
    /// Independent subscriptions of each topic, each receiving every message once, with
    /// `consumers_per_topic` consumers each: Kafka consumer groups, RabbitMQ queues, NATS
    /// durable consumers.
    #[serde(skip_serializing_if = "is_one_u32")]
    pub subscriptions_per_topic: u32,
    /// Size of each message in bytes, envelope header included (random payloads).
    pub message_size: u64,
    pub keys: KeyDistribution,
    pub payload: Payload,
    pub rate: Rate,
    pub arrival: Arrival,
    /// Load before measurement starts; recorded nowhere in the summary.
    #[serde(with = "duration_text")]
    pub warmup: Duration,
    /// Length of the measurement window.
    #[serde(with = "duration_text")]
    pub duration: Duration,
    /// How long, after producers stop, to wait for outstanding acknowledgements and deliveries.
    #[serde(with = "duration_text")]
    pub drain_timeout: Duration,
    /// Shortest sleep of a producer between sends on its schedule: it then sends everything
    /// that has come due, so a message may go out up to this much after its intended time
    /// (schedule lag, part of its publish latency). Longer costs less CPU at high rates.
    #[serde(with = "duration_text")]
    pub schedule_resolution: Duration,
    /// Messages in flight per producer at most, in max-rate mode.
    pub max_in_flight: u32,
    /// Threads the producer tasks of an open-loop run share at most, when their client stamps
    /// acknowledgements as they arrive (Kafka); each thread sends its tasks' messages in
    /// intended-time order. Fewer tasks than this: a thread each.
    #[serde(skip_serializing_if = "is_default_producer_threads")]
    pub producer_threads: u32,
    /// Seed for random payloads, keys and Poisson gaps (reproducible runs).
    pub seed: u64,
    /// Backlog mode; None runs consumers throughout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog: Option<Backlog>,
    /// What to do to the broker's nodes during the measurement window, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<crate::faults::Fault>,
}

impl Workload {
    /// Total producers over all topics.
    pub fn producer_count(&self) -> u32 {
        self.topics * self.producers_per_topic
    }

    /// Target rate of one producer, or None in max-rate mode.
    pub fn rate_per_producer(&self) -> Option<f64> {
        match self.rate {
            Rate::PerSecond(r) => Some(r / self.producer_count() as f64),
            Rate::Max => None,
        }
    }
}

fn positive(field: &str, value: Option<u32>, default: u32, min: u32) -> Result<u32, FieldError> {
    let v = value.unwrap_or(default);
    if v < min {
        return Err(FieldError::new(
            field,
            format!("{v} is too small; it must be at least {min}"),
        ));
    }
    Ok(v)
}

fn duration_field(
    field: &str,
    value: &Option<Scalar>,
    default: &str,
) -> Result<Duration, FieldError> {
    let text = value
        .as_ref()
        .map(Scalar::text)
        .unwrap_or_else(|| default.to_string());
    parse_duration(&text).map_err(|m| FieldError::new(field, m))
}

impl RawWorkload {
    /// Merges defaults and checks every field; the first problem found is returned.
    pub fn validate(self) -> Result<Workload, FieldError> {
        let name = workload_name(self.name)?;
        let topics = positive("topics", self.topics, 1, 1)?;
        let partitions_per_topic =
            positive("partitions_per_topic", self.partitions_per_topic, 1, 1)?;
        let producers_per_topic = positive("producers_per_topic", self.producers_per_topic, 1, 1)?;
        let consumers_per_topic = positive("consumers_per_topic", self.consumers_per_topic, 1, 0)?;
        let subscriptions_per_topic = positive(
            "subscriptions_per_topic",
            self.subscriptions_per_topic,
            1,
            1,
        )?;
        let payload = self.payload.unwrap_or(Payload::Random {
            pool: 1000,
            random_ratio: 1.0,
        });
        let message_size = message_size_bytes(&self.message_size)?;
        check_payload(&payload)?;
        let rate = offered_rate(&self.rate)?;
        let warmup = duration_field("warmup", &self.warmup, "5s")?;
        let duration = duration_field("duration", &self.duration, "30s")?;
        let drain_timeout = duration_field("drain_timeout", &self.drain_timeout, "10s")?;
        let schedule_resolution =
            duration_field("schedule_resolution", &self.schedule_resolution, "100us")?;
        check_timing(schedule_resolution, duration)?;
        let max_in_flight = positive("max_in_flight", self.max_in_flight, 100_000, 1)?;
        let producer_threads = positive(
            "producer_threads",
            self.producer_threads,
            DEFAULT_PRODUCER_THREADS,
            1,
        )?;
        let backlog = match &self.backlog {
            None => None,
            Some(raw) => Some(backlog(raw, consumers_per_topic, message_size)?),
        };
        let faults = crate::faults::check_faults(self.faults.as_deref().unwrap_or(&[]), duration)?;
        Ok(Workload {
            name,
            topics,
            partitions_per_topic,
            producers_per_topic,
            consumers_per_topic,
            subscriptions_per_topic,
            message_size,
            keys: self.keys.unwrap_or(KeyDistribution::None),
            payload,
            rate,
            arrival: self.arrival.unwrap_or(Arrival::Uniform),
            warmup,
            duration,
            drain_timeout,
            schedule_resolution,
            max_in_flight,
            producer_threads,
            seed: self.seed.unwrap_or(0x6272_6f6b_6572),
            backlog,
            faults,
        })
    }
}

/// The workload's name ("workload" by default): letters, digits, '-', '_' and '.' only, as it
/// becomes part of topic and folder names.
fn workload_name(name: Option<String>) -> Result<String, FieldError> {
    let name = name.unwrap_or_else(|| "workload".to_string());
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err(FieldError::new(
            "name",
            format!("'{name}' must be non-empty and use only letters, digits, '-', '_' and '.' (it becomes part of topic and folder names)"),
        ));
    }
    Ok(name)
}

/// The message size in bytes (100 by default): at least the envelope header, at most 64 MiB.
fn message_size_bytes(value: &Option<Scalar>) -> Result<u64, FieldError> {
    let message_size = match value {
        None => 100,
        Some(s) => parse_bytes(&s.text()).map_err(|m| FieldError::new("message_size", m))?,
    };
    if message_size < ENVELOPE_HEADER_LEN as u64 {
        return Err(FieldError::new(
            "message_size",
            format!(
                "{message_size} B is smaller than the {ENVELOPE_HEADER_LEN}-byte envelope header every message carries; use at least {ENVELOPE_HEADER_LEN}B"
            ),
        ));
    }
    if message_size > 64 << 20 {
        return Err(FieldError::new(
            "message_size",
            format!("{message_size} B is larger than the 64 MiB this tool supports"),
        ));
    }
    Ok(message_size)
}

/// Checks the payload: a random pool of at least 1 with a ratio from 0 to 1, or a file named.
fn check_payload(payload: &Payload) -> Result<(), FieldError> {
    match payload {
        Payload::Random { pool, .. } if *pool == 0 => {
            Err(FieldError::new("payload.pool", "must be at least 1"))
        }
        Payload::Random { random_ratio, .. } if !(0.0..=1.0).contains(random_ratio) => {
            Err(FieldError::new(
                "payload.random_ratio",
                format!("{random_ratio} must be between 0 (all zeros) and 1 (all random)"),
            ))
        }
        Payload::Binary { path } if path.as_os_str().is_empty() => Err(FieldError::new(
            "payload.path",
            "must name a file of message_size bytes",
        )),
        Payload::File { path, .. } if path.as_os_str().is_empty() => Err(FieldError::new(
            "payload.path",
            "must name a file with one record per line",
        )),
        _ => Ok(()),
    }
}

/// The offered rate (50 000 messages per second by default): positive and finite, or max.
fn offered_rate(value: &Option<Scalar>) -> Result<Rate, FieldError> {
    let rate = match value {
        None => Rate::PerSecond(50_000.0),
        Some(s) => match parse_rate(&s.text()).map_err(|m| FieldError::new("rate", m))? {
            None => Rate::Max,
            Some(r) if r > 0.0 && r.is_finite() => Rate::PerSecond(r),
            Some(r) => {
                return Err(FieldError::new(
                    "rate",
                    format!("{r} must be a positive number of messages per second, or max"),
                ))
            }
        },
    };
    Ok(rate)
}

/// Checks the schedule resolution is fine enough and the measurement window not empty.
fn check_timing(schedule_resolution: Duration, duration: Duration) -> Result<(), FieldError> {
    if schedule_resolution > MAX_SCHEDULE_RESOLUTION {
        return Err(FieldError::new(
            "schedule_resolution",
            format!(
                "{schedule_resolution:?} is too coarse: at most {MAX_SCHEDULE_RESOLUTION:?} (messages would go out in bursts that late); the default is 100us"
            ),
        ));
    }
    if duration.is_zero() {
        return Err(FieldError::new(
            "duration",
            "must be longer than 0s, e.g. 30s",
        ));
    }
    Ok(())
}

fn backlog(
    raw: &RawBacklog,
    consumers_per_topic: u32,
    message_size: u64,
) -> Result<Backlog, FieldError> {
    let size_bytes =
        parse_bytes(&raw.size.text()).map_err(|m| FieldError::new("backlog.size", m))?;
    if size_bytes < message_size {
        return Err(FieldError::new(
            "backlog.size",
            format!(
                "{size_bytes} B holds no message of {message_size} B; give a size such as 1GiB"
            ),
        ));
    }
    let drain_ratio = raw.drain_ratio.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&drain_ratio) {
        return Err(FieldError::new(
            "backlog.drain_ratio",
            format!(
                "{drain_ratio} must be between 0 (do not wait for the drain) and 1 (drain it all)"
            ),
        ));
    }
    if consumers_per_topic == 0 {
        return Err(FieldError::new(
            "backlog",
            "a backlog is built for consumers and drained by them, but consumers_per_topic is 0; set consumers_per_topic: 1 or remove backlog",
        ));
    }
    Ok(Backlog {
        size_bytes,
        drain_ratio,
    })
}

impl<'de> Deserialize<'de> for Workload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RawWorkload::deserialize(d)?
            .validate()
            .map_err(|e| serde::de::Error::custom(format!("{}: {}", e.field, e.message)))
    }
}

#[cfg(test)]
mod tests;
