//! What a run produces while it runs: its phases, one row per second, and the observers
//! (exporters, live display) that receive them.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Phase of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Load is offered but nothing counts towards the summary.
    Warmup,
    /// The measurement window.
    Measurement,
    /// Producers stopped; waiting for outstanding acknowledgements and deliveries.
    Drain,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Warmup => "warmup",
            Phase::Measurement => "measurement",
            Phase::Drain => "drain",
        }
    }
}

/// One second of a run, over all producers and consumers.
#[derive(Debug, Clone)]
pub struct IntervalRow {
    /// Index of the second since the run started (0 = first second of warm-up).
    pub second: u64,
    /// Phase at the start of this second.
    pub phase: Phase,
    /// Start of the interval, ns since the UNIX epoch.
    pub start_ns: u64,
    /// Messages handed to the client library in this second.
    pub sent: u64,
    /// Messages acknowledged by the broker in this second.
    pub acknowledged: u64,
    /// Messages whose send or acknowledgement failed in this second.
    pub failed: u64,
    /// Messages received by consumers in this second (every copy counts).
    pub received: u64,
    /// Payload bytes acknowledged in this second.
    pub bytes_acknowledged: u64,
    /// Payload bytes received in this second.
    pub bytes_received: u64,
    /// Messages acknowledged so far and expected by consumers, less those received so far;
    /// None when the workload has no consumers.
    pub backlog: Option<i64>,
    /// Kafka-style one-minute exponentially weighted acknowledged rate (msg/s), updated on
    /// 5-second ticks exactly like Kafka's MessagesInPerSec OneMinuteRate.
    pub acknowledged_rate_1m: f64,
    /// Publish latency (ack time − intended send time) of the acknowledgements in this second.
    pub publish: Histogram<u64>,
    /// End-to-end latency (receive time − intended send time) of the messages received in it.
    pub end_to_end: Histogram<u64>,
    /// Schedule lag (actual − intended send time) of the messages sent in this second.
    pub schedule_lag: Histogram<u64>,
    /// Largest schedule lag in this second, ns (exact; the histogram's is within its precision).
    pub schedule_lag_max_ns: u64,
    /// Producers whose client was disconnected from the broker at some time in this second.
    pub disconnected_producers: u64,
    /// Producers whose publishing the broker blocked at some time in this second.
    pub blocked_producers: u64,
}

/// Receives interval rows and phase changes as a run goes; implemented by the exporters and
/// the live display.
pub trait RunObserver {
    fn phase_started(&mut self, _phase: Phase, _at_ns: u64) {}
    fn interval(&mut self, row: &IntervalRow);
    /// Every message is in (or the drain gave up); the driver has not yet removed what it
    /// created. Broker-side counts read now still include the run's topics or streams.
    fn drained(&mut self, _at_ns: u64) {}
}
