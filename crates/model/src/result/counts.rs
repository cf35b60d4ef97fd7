//! The summary's plain figures: message and byte counts, the window's rates, what the run
//! cost the client, and what each consumer received.

use serde::{Deserialize, Serialize};

/// Message and byte counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub sent: u64,
    pub acknowledged: u64,
    pub failed: u64,
    pub received: u64,
    pub bytes_sent: u64,
    pub bytes_acknowledged: u64,
    pub bytes_received: u64,
}

impl Counts {
    /// Adds another task's counts to these.
    pub fn add(&mut self, other: &Counts) {
        self.sent += other.sent;
        self.acknowledged += other.acknowledged;
        self.failed += other.failed;
        self.received += other.received;
        self.bytes_sent += other.bytes_sent;
        self.bytes_acknowledged += other.bytes_acknowledged;
        self.bytes_received += other.bytes_received;
    }
}

/// Rates over the measurement window, per second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Messages whose acknowledgement arrived in the window, per second.
    pub acknowledged_per_s: f64,
    /// Messages handed to the client in the window, per second.
    pub sent_per_s: f64,
    /// Messages received by consumers in the window, per second.
    pub received_per_s: f64,
    /// Acknowledged payload, MB (10^6 bytes) per second.
    pub acknowledged_mb_per_s: f64,
    /// Received payload, MB per second.
    pub received_mb_per_s: f64,
}

impl Throughput {
    /// The window's counts over its `seconds` (all 0 for an empty window).
    pub fn of(window: &Counts, seconds: f64) -> Self {
        let per_s = |n: u64| {
            if seconds > 0.0 {
                n as f64 / seconds
            } else {
                0.0
            }
        };
        Throughput {
            acknowledged_per_s: per_s(window.acknowledged),
            sent_per_s: per_s(window.sent),
            received_per_s: per_s(window.received),
            acknowledged_mb_per_s: per_s(window.bytes_acknowledged) / 1e6,
            received_mb_per_s: per_s(window.bytes_received) / 1e6,
        }
    }
}

/// What the run cost the client (this process).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientCost {
    /// User CPU seconds used by brokerbench during the measurement window.
    pub cpu_user_s: f64,
    /// System CPU seconds used by brokerbench during the measurement window.
    pub cpu_system_s: f64,
    /// (user + system) CPU seconds per million acknowledged messages in the window (sent,
    /// without confirms); None (null) when there were none: a cost of nothing is no figure.
    #[serde(default)]
    pub cpu_s_per_million_messages: Option<f64>,
    /// Peak resident set size of the process, bytes.
    pub peak_rss_bytes: u64,
    /// Heap allocations by brokerbench's own code per acknowledged message in the window;
    /// None unless `--count-allocations` was given.
    #[serde(default)]
    pub allocations_per_message: Option<f64>,
}

impl ClientCost {
    /// The cost of `messages` (acknowledged, or sent without confirms) for this much CPU.
    pub fn of(cpu_user_s: f64, cpu_system_s: f64, peak_rss_bytes: u64, messages: u64) -> Self {
        ClientCost {
            cpu_user_s,
            cpu_system_s,
            cpu_s_per_million_messages: (messages > 0)
                .then(|| (cpu_user_s + cpu_system_s) / (messages as f64 / 1e6)),
            peak_rss_bytes,
            allocations_per_message: None,
        }
    }
}

/// What one consumer received over the whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsumerShare {
    pub topic: u32,
    /// Subscription (Kafka: consumer group) of the topic.
    pub subscription: u32,
    /// Index of the consumer inside its subscription.
    pub member: u32,
    /// Messages received by this consumer, duplicates included.
    pub received: u64,
}
