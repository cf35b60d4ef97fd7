//! Everything a run measured, as written to summary.json: how it ended, its figures, the
//! ledger's verdict, the spans that held it up, backlog mode and the faults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::broker_metrics::BrokerMetricsSummary;
use super::counts::{ClientCost, ConsumerShare, Counts, Throughput};
use super::episodes::{Block, Outage, Slowdown, Stall};
use super::integrity::Integrity;
use super::latency::Latencies;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Complete,
    Interrupted,
    Failed,
}

/// Everything a run measured, as written to summary.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub status: RunStatus,
    pub workload: String,
    pub driver: String,
    /// "open-loop" (latency from intended send times) or "max-rate" (closed loop).
    pub mode: String,
    /// Target messages per second over all producers; None in max-rate mode.
    pub target_rate: Option<f64>,
    /// Length of the measurement window actually run, seconds.
    pub measurement_s: f64,
    /// Counts inside the measurement window.
    pub window: Counts,
    /// Counts over the whole run, warm-up and drain included.
    pub total: Counts,
    pub throughput: Throughput,
    pub latency: Latencies,
    pub integrity: Integrity,
    /// Messages received per consumer, to see how partitions were shared.
    pub consumers: Vec<ConsumerShare>,
    /// Failures by kind (e.g. `msg_timed_out`, `queue_full`), whole run.
    pub errors: BTreeMap<String, u64>,
    /// Max rate: messages whose send was under way when the window closed (the client's
    /// buffer full, or the client reconnecting, past the window's end and its grace): never
    /// handed to the client, so neither sent nor an error.
    #[serde(default)]
    pub not_sent_at_window_end: u64,
    pub client: ClientCost,
    /// Broker, client and host resources over the measurement window; None when resource
    /// monitoring was off.
    #[serde(default)]
    pub resources: Option<crate::resources::ResourceSummary>,
    /// The broker's own metrics over the run; None when none were scraped.
    #[serde(default)]
    pub broker_metrics: Option<BrokerMetricsSummary>,
    /// True when schedule lag kept growing: the load generator or the client buffer, not the
    /// broker, limited the rate, so the offered load was not the target.
    pub client_bound: bool,
    /// True when schedule lag kept growing because sends waited for room in the client's
    /// buffer of unacknowledged messages: acknowledgements, not the generator, set the pace.
    #[serde(default)]
    pub broker_bound: bool,
    /// Things the reader must know to interpret the numbers.
    pub notes: Vec<String>,
    /// How the backlog of backlog mode was built and drained; None without backlog mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<BacklogReport>,
    /// Times the producers' clients lost the broker, in order; empty when they never did.
    #[serde(default)]
    pub outages: Vec<Outage>,
    /// Times the broker, still connected, acknowledged nothing for two seconds or more while
    /// messages were due (a paused process, a long GC or disk stall), in order.
    #[serde(default)]
    pub stalls: Vec<Stall>,
    /// Times the broker, connected and acknowledging, acknowledged late while the sends kept
    /// their schedule (the BROKER SLOW note's spans), in order.
    #[serde(default)]
    pub slowdowns: Vec<Slowdown>,
    /// Times the broker blocked publishing (AMQP connection.blocked: a memory or disk
    /// alarm), in order.
    #[serde(default)]
    pub blocks: Vec<Block>,
    /// The workload's faults, each as injected and measured, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<crate::faults::FaultReport>,
}

/// Backlog mode as it went: consumers paused at `paused_s`, resumed at `resumed_s` with
/// `built_messages` waiting, the backlog drained at `drained_s` (times in seconds since the
/// start of warm-up).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BacklogReport {
    /// The size asked for, bytes.
    pub size_bytes: u64,
    pub paused_s: f64,
    /// None when the run ended before the backlog was built.
    pub resumed_s: Option<f64>,
    /// Messages waiting (acknowledged × subscriptions − received) when consumers resumed.
    pub built_messages: u64,
    pub built_bytes: u64,
    /// Messages that may still wait for the backlog to count as drained.
    pub drained_at_messages: u64,
    /// None when the run ended before the backlog was drained.
    pub drained_s: Option<f64>,
    /// Messages received per second between resuming and the drained mark, all consumers.
    pub drain_received_per_s: Option<f64>,
}

impl BacklogReport {
    pub fn build_s(&self) -> Option<f64> {
        self.resumed_s.map(|r| r - self.paused_s)
    }

    pub fn drain_s(&self) -> Option<f64> {
        Some(self.drained_s? - self.resumed_s?)
    }
}

impl Summary {
    /// Whether the run completed with no failures, losses or unacknowledged messages.
    pub fn is_clean(&self) -> bool {
        self.status == RunStatus::Complete && self.errors.is_empty() && self.integrity.is_clean()
    }
}
