//! What a run produces: per-second interval rows while it runs, and a summary at the end.
//! Latencies are nanoseconds; counts are messages; rates are per second.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Lowest discernible latency value in the histograms: 1 ns.
pub const HISTOGRAM_LOW: u64 = 1;
/// Highest trackable latency: 1 hour in ns; larger values are clamped (and counted).
pub const HISTOGRAM_HIGH: u64 = 3_600_000_000_000;
/// Significant decimal digits kept by every histogram.
pub const HISTOGRAM_DIGITS: u8 = 3;

/// A new empty latency histogram with the project-wide range and precision.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(HISTOGRAM_LOW, HISTOGRAM_HIGH, HISTOGRAM_DIGITS)
        .expect("static histogram bounds are valid")
}

/// Records a value, clamping it to the trackable range so a stall is never dropped.
#[inline]
pub fn record_clamped(histogram: &mut Histogram<u64>, nanos: u64) {
    histogram.saturating_record(nanos.clamp(HISTOGRAM_LOW, HISTOGRAM_HIGH));
}

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

/// Latency distribution summary; all values in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p75_ns: u64,
    pub p90_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub p9999_ns: u64,
    pub max_ns: u64,
}

impl LatencySummary {
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            p50_ns: h.value_at_quantile(0.50),
            p75_ns: h.value_at_quantile(0.75),
            p90_ns: h.value_at_quantile(0.90),
            p95_ns: h.value_at_quantile(0.95),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            p9999_ns: h.value_at_quantile(0.9999),
            max_ns: h.max(),
        }
    }
}

/// The measurement window's latency histograms, merged over all tasks: what the summary's
/// percentiles are read from, kept whole for percentile spectra (window.hlog).
#[derive(Debug, Clone)]
pub struct WindowHistograms {
    pub publish: Histogram<u64>,
    pub end_to_end: Histogram<u64>,
    pub service_time: Histogram<u64>,
    pub schedule_lag: Histogram<u64>,
}

impl Default for WindowHistograms {
    fn default() -> Self {
        WindowHistograms {
            publish: new_histogram(),
            end_to_end: new_histogram(),
            service_time: new_histogram(),
            schedule_lag: new_histogram(),
        }
    }
}

impl WindowHistograms {
    /// (tag, histogram) pairs, tags as written in window.hlog.
    pub fn tagged(&self) -> [(&'static str, &Histogram<u64>); 4] {
        [
            ("publish", &self.publish),
            ("end_to_end", &self.end_to_end),
            ("service_time", &self.service_time),
            ("schedule_lag", &self.schedule_lag),
        ]
    }
}

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

/// What the delivery ledger found over the whole run (warm-up, measurement and drain).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Integrity {
    /// Whether consumers ran, so that loss could be checked at all.
    pub checked: bool,
    /// Acknowledged, and never received by a subscription that should have received it.
    pub lost: u64,
    /// Received more than once by one subscription.
    pub duplicated: u64,
    /// Received with a lower sequence number than an earlier message of the same producer on
    /// the same partition or queue.
    pub out_of_order: u64,
    /// Received although the send was reported failed or never acknowledged.
    pub received_unacknowledged: u64,
    /// Sent but neither acknowledged nor failed when the drain ended.
    pub unacknowledged: u64,
    /// Messages read that were not sent by this run (older data in a reused topic); ignored.
    pub foreign: u64,
    /// Acknowledged and never received where the broker discards messages by policy (e.g. a
    /// queue length limit with drop-head): counted here instead of as lost.
    #[serde(default)]
    pub dropped_by_broker: u64,
    /// Acknowledged, not received, and still stored beyond the consumers' positions when the
    /// drain ended (the broker said so): a backlog the consumers had not reached, not a loss.
    #[serde(default)]
    pub unconsumed: u64,
    /// Sent at most once (the broker acknowledges nothing in this configuration: no
    /// publisher confirms, QoS 0) and never received: no promise was broken, so not lost.
    #[serde(default)]
    pub undelivered: u64,
    /// What the broker said that tells unconsumed messages from lost ones (e.g. "Kafka high
    /// watermarks less the consumer group's positions"); None when no family could tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconsumed_evidence: Option<String>,
}

impl Integrity {
    pub fn is_clean(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.out_of_order == 0 && self.unacknowledged == 0
    }

    /// Nothing was acknowledged (at-most-once publishing): what was sent and never received
    /// was undelivered, not lost, and does not fail the run. Returns the note that says so,
    /// when any was.
    pub fn at_most_once(&mut self) -> Option<String> {
        let undelivered = self.take_lost(u64::MAX);
        self.undelivered = undelivered;
        (undelivered > 0).then(|| {
            format!(
                "{undelivered} messages sent and never received are undelivered, not lost: sent at most once, with no acknowledgement, so no promise of delivery was broken (publisher confirms, QoS 1 or acks make one, and then count what is missing as lost)"
            )
        })
    }

    /// The broker counted `count` messages it discarded by its `limits`: up to that many of
    /// those acknowledged and never received were dropped by it, not lost. Returns the note
    /// that says so, when any was.
    pub fn dropped_up_to(&mut self, count: u64, limits: &str) -> Option<String> {
        let dropped = self.take_lost(count);
        self.dropped_by_broker += dropped;
        (dropped > 0).then(|| {
            format!(
                "{dropped} messages acknowledged and never received were dropped by the broker past its limits ({limits}: it counted {count} over the run), not lost by brokerbench"
            )
        })
    }

    /// The broker discards messages by policy (`reason`): what was acknowledged and never
    /// received was dropped by it, not lost. Returns the note that says so, when any was.
    pub fn dropped_by_policy(&mut self, reason: &str) -> Option<String> {
        let dropped = self.take_lost(u64::MAX);
        self.dropped_by_broker = dropped;
        (dropped > 0).then(|| {
            format!(
                "{dropped} messages acknowledged and never received were dropped by the broker by policy ({reason}), not lost by brokerbench"
            )
        })
    }

    /// Takes up to `at_most` of the lost messages out of `lost` (to name them otherwise);
    /// how many it took.
    fn take_lost(&mut self, at_most: u64) -> u64 {
        let taken = self.lost.min(at_most);
        self.lost -= taken;
        taken
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

/// What the broker's own metrics endpoint said about the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BrokerMetricsSummary {
    /// The endpoint scraped (http://host:port/metrics).
    pub url: String,
    /// Which metric set was read: "kafka" (JMX exporter) or "rabbitmq" (rabbitmq_prometheus).
    pub source: String,
    /// Mean of each figure over the measurement window (rates per second, gauges as read).
    pub means: BTreeMap<String, f64>,
    /// Largest value of each figure in the measurement window.
    pub maxima: BTreeMap<String, f64>,
    /// Messages the broker counted as written during the whole run (its counter's increase
    /// from just before the run to just after it; across a broker restart, which starts the
    /// counter again from 0, the increases before and after it added up).
    pub messages_in: Option<u64>,
    /// What brokerbench counted over the same span: acknowledged, or sent without confirms.
    pub messages_counted_by_brokerbench: u64,
    /// |broker − brokerbench| / brokerbench, in percent; None when not compared (the
    /// counter restarted: what was written between its last reading and the restart is not
    /// in `messages_in`).
    pub disagreement_pct: Option<f64>,
    /// Scrapes that failed.
    pub scrape_errors: u64,
    /// Times the broker's message counter went back (a broker restart).
    #[serde(default)]
    pub counter_resets: u32,
}

/// A counter's increase over readings in order, as Prometheus's `increase` takes it: a value
/// below the one before means the counter started again from 0 (a restart), so the new value
/// is all increase. Returns the increase and the number of such restarts.
pub fn counter_increase(values: impl IntoIterator<Item = f64>) -> (f64, u32) {
    let mut values = values.into_iter();
    let Some(mut last) = values.next() else {
        return (0.0, 0);
    };
    let (mut increase, mut resets) = (0.0, 0);
    for value in values {
        if value < last {
            resets += 1;
            increase += value;
        } else {
            increase += value - last;
        }
        last = value;
    }
    (increase, resets)
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Complete,
    Interrupted,
    Failed,
}

/// Latency distributions of the measurement window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latencies {
    /// Acknowledgement time − intended send time: the headline, free of coordinated omission.
    pub publish: LatencySummary,
    /// Receive time − intended send time, from the envelope.
    pub end_to_end: LatencySummary,
    /// Acknowledgement time − actual send time (diagnostic).
    pub service_time: LatencySummary,
    /// Actual send time − intended send time (diagnostic).
    pub schedule_lag: LatencySummary,
}

impl Latencies {
    /// The percentiles of the window's histograms.
    pub fn of(histograms: &WindowHistograms) -> Self {
        Latencies {
            publish: LatencySummary::from_histogram(&histograms.publish),
            end_to_end: LatencySummary::from_histogram(&histograms.end_to_end),
            service_time: LatencySummary::from_histogram(&histograms.service_time),
            schedule_lag: LatencySummary::from_histogram(&histograms.schedule_lag),
        }
    }
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

/// The broker refusing to take messages while connected, from its notice to the one that
/// lifted it (seconds since the start of warm-up; `end_s` None: still blocked at the end).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Block {
    pub start_s: f64,
    pub end_s: Option<f64>,
    /// The broker's reason, e.g. "low on memory".
    pub reason: String,
    /// Producers it blocked.
    pub producers: u32,
}

/// Shortest run of whole seconds without an acknowledgement that counts as a stall.
pub const STALL_SECONDS: usize = 2;

/// Whole seconds of warm-up or measurement in which nothing was acknowledged though the
/// schedule had messages due and no producer had lost its connection. Times in seconds since
/// the start of warm-up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    pub start_s: f64,
    pub seconds: f64,
    /// Messages handed to the client in those seconds (0 when its buffer was already full).
    pub sent: u64,
}

/// Seconds in which acknowledgements came late (publish p99 many times the run's typical p50)
/// while sends kept their schedule and every connection was up. Times in seconds since the
/// start of warm-up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Slowdown {
    pub start_s: f64,
    pub seconds: f64,
    /// The highest per-second publish p99 in the span.
    pub publish_p99_ms: f64,
}

/// The broker lost by producers' clients (a closed connection, every broker down): from the
/// first producer finding it gone to the last of them getting an acknowledgement again.
/// Times in seconds since the start of warm-up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outage {
    pub start_s: f64,
    /// First successful acknowledgement after it (of the last producer to get one); None when
    /// none came before the run ended.
    pub first_ack_s: Option<f64>,
    /// Producers that lost the broker.
    pub producers: u32,
    /// Messages that failed in it (in flight at the loss, or refused while it lasted).
    pub failed: u64,
}

impl Outage {
    /// From the loss to the first acknowledgement after it, seconds.
    pub fn duration_s(&self) -> Option<f64> {
        self.first_ack_s.map(|end| end - self.start_s)
    }
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

/// Receives interval rows and phase changes as a run goes; implemented by the exporters and
/// the live display.
pub trait RunObserver {
    fn phase_started(&mut self, _phase: Phase, _at_ns: u64) {}
    fn interval(&mut self, row: &IntervalRow);
    /// Every message is in (or the drain gave up); the driver has not yet removed what it
    /// created. Broker-side counts read now still include the run's topics or streams.
    fn drained(&mut self, _at_ns: u64) {}
}

#[cfg(test)]
mod counter_tests {
    #[test]
    fn a_counter_that_restarts_is_stitched() {
        assert_eq!(super::counter_increase([]), (0.0, 0));
        assert_eq!(super::counter_increase([5.0, 9.0, 12.0]), (7.0, 0));
        assert_eq!(
            super::counter_increase([100.0, 150.0, 20.0, 70.0]),
            (120.0, 1)
        );
        assert_eq!(super::counter_increase([10.0, 0.0, 0.0, 4.0]), (4.0, 1));
    }
}
