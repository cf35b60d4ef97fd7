//! Resource and broker-metric monitoring for one run: a monitor thread samples the broker,
//! the client and the host from /proc and scrapes the broker's metrics endpoint on the same
//! tick, writing `resources.csv` and `broker-metrics.csv` as it goes; the live figures are
//! served in the Prometheus format when `--metrics-listen` is given.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use brokerbench_engine::Clock;
use brokerbench_metrics::{BrokerMetrics, Exposition, MetricsServer, Reading};
use brokerbench_model::resources::ResourceSummary;
use brokerbench_model::{BrokerMetricsSummary, IntervalRow, Phase, RunObserver};
use brokerbench_monitor::{Monitor, ResourcesCsv, Role, Sample, Target};

/// Name of the broker metrics file in the results folder.
pub const BROKER_METRICS_FILE: &str = "broker-metrics.csv";
/// Name of the resources file in the results folder.
pub const RESOURCES_FILE: &str = "resources.csv";

/// What the monitor thread shares with the rest of the run.
#[derive(Default)]
struct Shared {
    /// Broker metric readings with their times (for the window summary).
    readings: Vec<Reading>,
    scrape_errors: u64,
    /// Latest resource and broker gauges, for the live exposition.
    live: Vec<(String, String, String, f64)>,
}

/// Monitoring of one run.
pub struct Monitoring {
    monitor: Option<Monitor>,
    shared: Arc<Mutex<Shared>>,
    broker_metrics: Option<Arc<Mutex<BrokerMetrics>>>,
    /// Broker counter total (messages in) just before the run.
    messages_in_before: Option<f64>,
    /// The broker's figures once every message was in, before the driver's cleanup.
    after: Option<Reading>,
}

impl RunObserver for Monitoring {
    fn interval(&mut self, _row: &IntervalRow) {}

    fn drained(&mut self, at_ns: u64) {
        if let Some(metrics) = &self.broker_metrics {
            let mut metrics = metrics.lock().unwrap_or_else(|e| e.into_inner());
            self.after = metrics.read(at_ns).ok();
        }
    }
}

fn messages_in_total(reading: &Reading, metrics: &BrokerMetrics) -> Option<f64> {
    let i = metrics
        .specs()
        .iter()
        .position(|s| s.key == brokerbench_metrics::MESSAGES_IN)?;
    reading.totals.get(i).copied().flatten()
}

/// The broker's own count of messages in before the run, read a second time when the first
/// reading fails or lacks it (mosquitto's `$SYS` values come every 2 s, which one wait may
/// just miss); when neither has it, a note says why the count is not compared.
fn count_before(metrics: &mut BrokerMetrics, clock: &Clock) -> Option<f64> {
    let counts = metrics
        .specs()
        .iter()
        .any(|s| s.key == brokerbench_metrics::MESSAGES_IN);
    if !counts {
        return None;
    }
    let mut why = String::new();
    for _ in 0..2 {
        match metrics.read(clock.now_ns()) {
            Ok(reading) => match messages_in_total(&reading, metrics) {
                Some(count) => return Some(count),
                None => why = "the reading had no count of messages in".into(),
            },
            Err(e) => why = e.to_string(),
        }
    }
    eprintln!(
        "note: the broker's count of messages in before the run could not be read ({why}); \
         its count over the run is not compared with brokerbench's"
    );
    None
}

impl Monitoring {
    /// Starts sampling. `broker`: the broker's processes, one per node, summed (each with
    /// its children, followed to a new pid when it restarts, if it can be found again);
    /// `metrics`: its metrics endpoints (one per node of a cluster) and what the family says
    /// they serve.
    pub fn start(
        folder: &Path,
        interval: Duration,
        broker: Vec<Target>,
        metrics: Option<BrokerMetrics>,
    ) -> anyhow::Result<Monitoring> {
        let clock = Clock::process();
        let nodes: Vec<u32> = broker
            .iter()
            .enumerate()
            .map(|(i, t)| t.node.unwrap_or(i as u32 + 1))
            .collect();
        let mut targets = vec![Target::client()];
        targets.extend(broker);
        let broker_metrics = metrics.and_then(serving_metrics);
        let shared = Arc::new(Mutex::new(Shared::default()));
        let mut messages_in_before = None;
        let mut metrics_csv = None;
        if let Some(metrics) = &broker_metrics {
            let mut m = metrics.lock().unwrap_or_else(|e| e.into_inner());
            messages_in_before = count_before(&mut m, &clock);
            metrics_csv = Some(MetricsCsv::create(folder, &m)?);
        }
        let resources_path = folder.join(RESOURCES_FILE);
        let mut resources_csv = ResourcesCsv::with_nodes(
            BufWriter::new(
                File::create(&resources_path)
                    .with_context(|| format!("creating {}", resources_path.display()))?,
            ),
            &nodes,
        )?;
        let on_sample = {
            let shared = shared.clone();
            let broker_metrics = broker_metrics.clone();
            move |sample: &Sample| {
                let _ = resources_csv.write(sample);
                let mut live = resource_gauges(sample);
                let mut shared = shared.lock().unwrap_or_else(|e| e.into_inner());
                if let (Some(metrics), Some(csv)) = (&broker_metrics, metrics_csv.as_mut()) {
                    csv.record(metrics, sample.time_ns, &mut shared, &mut live);
                }
                shared.live = live;
            }
        };
        let monitor = Monitor::start(targets, interval, move || clock.now_ns(), on_sample)?;
        Ok(Monitoring {
            monitor: Some(monitor),
            shared,
            broker_metrics,
            messages_in_before,
            after: None,
        })
    }

    /// An observer that serves the live figures on `server` after each interval.
    pub fn live_exposition(&self, server: MetricsServer) -> LiveExposition {
        LiveExposition {
            server,
            shared: self.shared.clone(),
            phase: Phase::Warmup,
            totals: Totals::default(),
        }
    }

    /// Stops sampling and summarizes the measurement `window`. `counted` is what brokerbench
    /// counted over the whole run, to compare with the broker's own count.
    pub fn finish(
        mut self,
        window: Range<u64>,
        started_ns: u64,
        counted: u64,
    ) -> (Option<ResourceSummary>, Option<BrokerMetricsSummary>) {
        let recording = self.monitor.take().map(Monitor::stop);
        let resources = recording.map(|r| r.summarize_since(window.clone(), started_ns));
        let broker = self.broker_metrics.as_ref().map(|metrics| {
            let mut metrics = metrics.lock().unwrap_or_else(|e| e.into_inner());
            let after = self
                .after
                .take()
                .or_else(|| metrics.read(Clock::process().now_ns()).ok());
            let shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            summarize_broker(
                &metrics,
                &shared,
                window,
                self.messages_in_before,
                after.as_ref(),
                counted,
            )
        });
        (resources, broker)
    }
}

/// The broker's metrics, shared with the monitor thread, when its endpoint serves what the
/// family says it does; otherwise a note says why they are not recorded.
fn serving_metrics(metrics: BrokerMetrics) -> Option<Arc<Mutex<BrokerMetrics>>> {
    let (url, set) = (metrics.url().to_string(), metrics.set());
    match metrics.check() {
        Ok(true) => Some(Arc::new(Mutex::new(metrics))),
        Ok(false) => {
            eprintln!(
                "note: {url} serves no {} metrics; broker metrics are not recorded",
                set.source
            );
            None
        }
        Err(e) => {
            eprintln!("note: broker metrics are not recorded: {e}");
            None
        }
    }
}

/// broker-metrics.csv as the monitor thread writes it.
struct MetricsCsv {
    writer: csv::Writer<BufWriter<File>>,
    /// The names of its columns after the time, as the broker's metrics name them.
    columns: Vec<String>,
}

impl MetricsCsv {
    /// Creates broker-metrics.csv in `folder`, with its header.
    fn create(folder: &Path, metrics: &BrokerMetrics) -> anyhow::Result<MetricsCsv> {
        let path = folder.join(BROKER_METRICS_FILE);
        let mut writer = csv::Writer::from_writer(BufWriter::new(
            File::create(&path).with_context(|| format!("creating {}", path.display()))?,
        ));
        let columns = metrics.columns();
        writer.write_record(std::iter::once("time_s").chain(columns.iter().map(String::as_str)))?;
        writer.flush()?;
        Ok(MetricsCsv { writer, columns })
    }

    /// Reads the broker's metrics at `time_ns` into a row, the `live` gauges and the
    /// readings kept for the window's summary; a failed read is counted.
    fn record(
        &mut self,
        metrics: &Mutex<BrokerMetrics>,
        time_ns: u64,
        shared: &mut Shared,
        live: &mut Vec<(String, String, String, f64)>,
    ) {
        let mut metrics = metrics.lock().unwrap_or_else(|e| e.into_inner());
        match metrics.read(time_ns) {
            Ok(reading) => {
                let time_s = format!("{:.3}", reading.time_ns as f64 / 1e9);
                let cells = reading
                    .values
                    .iter()
                    .map(|v| v.map(|v| format!("{v:.3}")).unwrap_or_default());
                let _ = self
                    .writer
                    .write_record(std::iter::once(time_s).chain(cells));
                let _ = self.writer.flush();
                for (column, value) in self.columns.iter().zip(&reading.values) {
                    // The CSV column's name, so one name means one figure.
                    if let Some(v) = value {
                        live.push((
                            format!("broker_{column}"),
                            "The broker's own metric, from its metrics endpoint \
                             (docs/src/broker-metrics.md)."
                                .into(),
                            String::new(),
                            *v,
                        ));
                    }
                }
                shared.readings.push(reading);
            }
            Err(_) => shared.scrape_errors += 1,
        }
    }
}

fn summarize_broker(
    metrics: &BrokerMetrics,
    shared: &Shared,
    window: Range<u64>,
    before: Option<f64>,
    after: Option<&Reading>,
    counted: u64,
) -> BrokerMetricsSummary {
    let mut means = BTreeMap::new();
    let mut maxima = BTreeMap::new();
    for (i, spec) in metrics.specs().iter().enumerate() {
        let values: Vec<f64> = shared
            .readings
            .iter()
            .filter(|r| window.contains(&r.time_ns))
            .filter_map(|r| r.values[i])
            .collect();
        if !values.is_empty() {
            means.insert(
                spec.key.to_string(),
                values.iter().sum::<f64>() / values.len() as f64,
            );
            maxima.insert(
                spec.key.to_string(),
                values.iter().copied().fold(f64::MIN, f64::max),
            );
        }
    }
    let after_total = after.and_then(|a| Some((a.time_ns, messages_in_total(a, metrics)?)));
    let (messages_in, counter_resets) = match (before, after_total) {
        (Some(b), Some((after_ns, a))) => {
            // Every reading in between, so that a restart's reset is seen and stitched (not
            // the ones after: the driver's cleanup may delete what the counter sums).
            let during = shared
                .readings
                .iter()
                .filter(|r| r.time_ns < after_ns)
                .filter_map(|r| messages_in_total(r, metrics));
            let all = std::iter::once(b).chain(during).chain(std::iter::once(a));
            let (increase, resets) = brokerbench_model::counter_increase(all);
            (Some(increase.round() as u64), resets)
        }
        _ => (None, 0),
    };
    let disagreement_pct = messages_in
        .filter(|_| counted > 0 && counter_resets == 0)
        .map(|m| (m as f64 - counted as f64).abs() / counted as f64 * 100.0);
    BrokerMetricsSummary {
        url: metrics.url().to_string(),
        source: metrics.set().source.into(),
        means,
        maxima,
        messages_in,
        messages_counted_by_brokerbench: counted,
        disagreement_pct,
        scrape_errors: shared.scrape_errors,
        counter_resets,
    }
}

fn resource_gauges(sample: &Sample) -> Vec<(String, String, String, f64)> {
    let mut gauges = Vec::new();
    for (role, name) in [(Role::Broker, "broker"), (Role::Client, "client")] {
        if let Some(p) = sample.process(role) {
            let help = format!("CPU of the {name} process tree, percent of one core.");
            if let Some(v) = p.cpu_user_pct {
                gauges.push((
                    format!("{name}_cpu_percent"),
                    help.clone(),
                    "mode=\"user\"".into(),
                    v,
                ));
            }
            if let Some(v) = p.cpu_system_pct {
                gauges.push((
                    format!("{name}_cpu_percent"),
                    help,
                    "mode=\"system\"".into(),
                    v,
                ));
            }
            if let Some(v) = p.rss_bytes {
                gauges.push((
                    format!("{name}_rss_bytes"),
                    format!("Resident memory of the {name}."),
                    String::new(),
                    v as f64,
                ));
            }
        }
    }
    if let Some(interval) = sample.interval_s.filter(|&i| i > 0.0) {
        let host = &sample.host;
        let rates = [
            (
                "host_disk_written_bytes_per_second",
                "Bytes written to the host's disks per second.",
                host.disk_written_bytes(),
            ),
            (
                "host_disk_read_bytes_per_second",
                "Bytes read from the host's disks per second.",
                host.disk_read_bytes(),
            ),
            (
                "host_network_received_bytes_per_second",
                "Bytes received on all interfaces, loopback included, per second.",
                host.network_total().map(|n| n.rx_bytes),
            ),
        ];
        for (name, help, bytes) in rates {
            if let Some(bytes) = bytes {
                gauges.push((
                    name.into(),
                    help.into(),
                    String::new(),
                    bytes as f64 / interval,
                ));
            }
        }
    }
    gauges
}

/// Publishes brokerbench's figures of each second, with the latest resource and broker
/// gauges, to the metrics server.
pub struct LiveExposition {
    server: MetricsServer,
    shared: Arc<Mutex<Shared>>,
    phase: Phase,
    totals: Totals,
}

/// Running totals since the run started, for counters and the latency summaries' sum and
/// count.
#[derive(Debug, Default)]
struct Totals {
    sent: u64,
    acknowledged: u64,
    failed: u64,
    received: u64,
    bytes_acknowledged: u64,
    bytes_received: u64,
    /// (sum of seconds, count) of publish and end-to-end latency observations.
    publish: (f64, u64),
    end_to_end: (f64, u64),
}

impl Totals {
    /// Adds one second's counts and latency observations.
    fn add(&mut self, row: &IntervalRow) {
        self.sent += row.sent;
        self.acknowledged += row.acknowledged;
        self.failed += row.failed;
        self.received += row.received;
        self.bytes_acknowledged += row.bytes_acknowledged;
        self.bytes_received += row.bytes_received;
        for (total, h) in [
            (&mut self.publish, &row.publish),
            (&mut self.end_to_end, &row.end_to_end),
        ] {
            total.0 += h.mean() * h.len() as f64 / 1e9;
            total.1 += h.len();
        }
    }
}

impl RunObserver for LiveExposition {
    fn phase_started(&mut self, phase: Phase, _at_ns: u64) {
        self.phase = phase;
    }

    fn interval(&mut self, row: &IntervalRow) {
        self.totals.add(row);
        let mut e = Exposition::default();
        message_counters(&mut e, &self.totals);
        second_gauges(&mut e, row);
        latency_summaries(&mut e, row, &self.totals);
        for phase in [Phase::Warmup, Phase::Measurement, Phase::Drain] {
            e.gauge(
                "phase",
                "1 for the current phase of the run.",
                &format!("phase=\"{}\"", phase.as_str()),
                (phase == self.phase) as u8 as f64,
            );
        }
        for (name, help, labels, value) in
            &self.shared.lock().unwrap_or_else(|e| e.into_inner()).live
        {
            e.gauge(name, help, labels, *value);
        }
        self.server.publish(&e);
    }
}

/// The counters of messages and bytes since the run started.
fn message_counters(e: &mut Exposition, t: &Totals) {
    for (name, help, value) in [
        (
            "messages_sent_total",
            "Messages handed to the client library since the run started.",
            t.sent,
        ),
        (
            "messages_acknowledged_total",
            "Messages acknowledged by the broker since the run started.",
            t.acknowledged,
        ),
        (
            "messages_failed_total",
            "Messages whose send or acknowledgement failed since the run started.",
            t.failed,
        ),
        (
            "messages_received_total",
            "Messages received by consumers since the run started (every copy).",
            t.received,
        ),
        (
            "acknowledged_bytes_total",
            "Payload bytes acknowledged since the run started.",
            t.bytes_acknowledged,
        ),
        (
            "received_bytes_total",
            "Payload bytes received since the run started.",
            t.bytes_received,
        ),
    ] {
        e.counter(name, help, "", value as f64);
    }
}

/// The gauges of the last second: the one-minute rate, backlog, schedule lag and
/// disconnected producers.
fn second_gauges(e: &mut Exposition, row: &IntervalRow) {
    e.gauge(
        "acknowledged_one_minute_rate",
        "Kafka-style one-minute exponentially weighted acknowledged rate, messages per second.",
        "",
        row.acknowledged_rate_1m,
    );
    if let Some(backlog) = row.backlog {
        e.gauge(
            "backlog_messages",
            "Acknowledged and not yet received.",
            "",
            backlog as f64,
        );
    }
    e.gauge(
        "schedule_lag_max_seconds",
        "Largest lateness of a send against its intended time in the last second.",
        "",
        row.schedule_lag_max_ns as f64 / 1e9,
    );
    e.gauge(
        "disconnected_producers",
        "Producers whose client had lost the broker at some time in the last second.",
        "",
        row.disconnected_producers as f64,
    );
}

/// Publish and end-to-end latency: quantiles of the last second, sum and count since the
/// run started.
fn latency_summaries(e: &mut Exposition, row: &IntervalRow, t: &Totals) {
    for (name, what, histogram, total) in [
        (
            "publish_latency_seconds",
            "Publish latency (acknowledgement − intended send time)",
            &row.publish,
            t.publish,
        ),
        (
            "end_to_end_latency_seconds",
            "End-to-end latency (receive − intended send time)",
            &row.end_to_end,
            t.end_to_end,
        ),
    ] {
        let quantiles: Vec<(f64, f64)> = if histogram.is_empty() {
            Vec::new()
        } else {
            [0.5, 0.99, 0.999, 1.0]
                .iter()
                .map(|q| (*q, histogram.value_at_quantile(*q) as f64 / 1e9))
                .collect()
        };
        e.summary(
            name,
            &format!(
                "{what}: quantiles over the last second; sum and count since the run started."
            ),
            &quantiles,
            total.0,
            total.1,
        );
    }
}
