//! omb-result.json: the run as the OpenMessaging Benchmark's `TestResult`, so that tools
//! written for OMB's results (its `bin/create_charts.py`, dashboards, notebooks) read
//! brokerbench's runs. Every field of `TestResult`, in its order and OMB's units: publish and
//! end-to-end latency in milliseconds, publish delay in whole microseconds; series at OMB's
//! 10-second period over the measurement window (a last, shorter period when the window is
//! not a multiple of 10 s); the aggregated values and quantile maps from the window's whole
//! histograms.
//!
//! The numbers are brokerbench's own: publish latency runs from the *intended* send time
//! (OMB's from the actual send), and OMB's publish delay is brokerbench's schedule lag (actual
//! − intended send time), so OMB's publish latency is about brokerbench's minus its lag.

use brokerbench_model::{new_histogram, IntervalRow, Phase, RunObserver, WindowHistograms};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

/// Name of the file in the results folder.
pub const OMB_RESULT_FILE: &str = "omb-result.json";
/// OMB's reporting period.
const PERIOD_SECONDS: u32 = 10;
/// OMB's quantile maps: HdrHistogram's percentile iteration with 100 ticks per half distance.
const QUANTILE_TICKS: u32 = 100;

/// What the result's header says about the workload.
#[derive(Debug, Clone)]
pub struct OmbHeader {
    pub workload: String,
    pub driver: String,
    pub message_size: u64,
    pub topics: u32,
    pub partitions: u32,
    pub producers_per_topic: u32,
    pub consumers_per_topic: u32,
}

/// One 10-second period of the measurement window.
struct Period {
    seconds: u32,
    acknowledged: u64,
    failed: u64,
    received: u64,
    backlog: i64,
    publish: Histogram<u64>,
    end_to_end: Histogram<u64>,
    schedule_lag: Histogram<u64>,
}

impl Period {
    fn new() -> Period {
        Period {
            seconds: 0,
            acknowledged: 0,
            failed: 0,
            received: 0,
            backlog: 0,
            publish: new_histogram(),
            end_to_end: new_histogram(),
            schedule_lag: new_histogram(),
        }
    }

    fn add(&mut self, row: &IntervalRow) {
        self.seconds += 1;
        self.acknowledged += row.acknowledged;
        self.failed += row.failed;
        self.received += row.received;
        self.backlog = row.backlog.unwrap_or(0).max(0);
        // Histograms of one run share their bounds.
        let _ = self.publish.add(&row.publish);
        let _ = self.end_to_end.add(&row.end_to_end);
        let _ = self.schedule_lag.add(&row.schedule_lag);
    }
}

/// A latency histogram of one period reduced to what OMB writes of it: the mean and the
/// [`POINTS`], in nanoseconds; `None` when nothing was recorded (written as `null`, never 0).
#[derive(Debug, Clone, Copy)]
struct Digest {
    mean: Option<f64>,
    points: [Option<f64>; POINTS.len()],
}

impl Digest {
    fn of(h: &Histogram<u64>) -> Digest {
        Digest {
            mean: mean(h),
            points: POINTS.map(|(_, quantile)| point(h, quantile)),
        }
    }
}

/// A period once it is over: its counts and digests, not its histograms (three histograms of
/// a quarter megabyte each per 10 s made a long run's memory grow by 80 KB a second).
struct ClosedPeriod {
    seconds: u32,
    acknowledged: u64,
    failed: u64,
    received: u64,
    backlog: i64,
    publish: Digest,
    end_to_end: Digest,
    schedule_lag: Digest,
}

impl Period {
    fn close(&self) -> ClosedPeriod {
        ClosedPeriod {
            seconds: self.seconds,
            acknowledged: self.acknowledged,
            failed: self.failed,
            received: self.received,
            backlog: self.backlog,
            publish: Digest::of(&self.publish),
            end_to_end: Digest::of(&self.end_to_end),
            schedule_lag: Digest::of(&self.schedule_lag),
        }
    }
}

/// Gathers the measurement window's rows into OMB's periods as the run goes (a
/// [`RunObserver`]); [`OmbResult::to_json`] writes the result at the end.
pub struct OmbResult {
    header: OmbHeader,
    periods: Vec<ClosedPeriod>,
    current: Option<Period>,
}

impl OmbResult {
    pub fn new(header: OmbHeader) -> OmbResult {
        OmbResult {
            header,
            periods: Vec::new(),
            current: None,
        }
    }

    /// The TestResult, with aggregated values from the window's whole histograms.
    pub fn to_json(&self, window: &WindowHistograms) -> Value {
        let last = self.current.as_ref().map(Period::close);
        let periods: Vec<&ClosedPeriod> = self.periods.iter().chain(&last).collect();
        let h = &self.header;
        let mut out = Map::new();
        out.insert("workload".into(), json!(h.workload));
        out.insert("driver".into(), json!(h.driver));
        out.insert("messageSize".into(), json!(h.message_size));
        out.insert("topics".into(), json!(h.topics));
        out.insert("partitions".into(), json!(h.partitions));
        out.insert("producersPerTopic".into(), json!(h.producers_per_topic));
        out.insert("consumersPerTopic".into(), json!(h.consumers_per_topic));
        let rate = |count: fn(&ClosedPeriod) -> u64| -> Value {
            periods
                .iter()
                .map(|p| json!(count(p) as f64 / p.seconds.max(1) as f64))
                .collect()
        };
        out.insert("publishRate".into(), rate(|p| p.acknowledged));
        out.insert("publishErrorRate".into(), rate(|p| p.failed));
        out.insert("consumeRate".into(), rate(|p| p.received));
        out.insert(
            "backlog".into(),
            periods.iter().map(|p| json!(p.backlog)).collect(),
        );
        series(&mut out, "publishLatency", &periods, |p| &p.publish, millis);
        series(
            &mut out,
            "publishDelayLatency",
            &periods,
            |p| &p.schedule_lag,
            micros,
        );
        aggregated(
            &mut out,
            "aggregatedPublishLatency",
            &window.publish,
            millis,
        );
        aggregated(
            &mut out,
            "aggregatedPublishDelayLatency",
            &window.schedule_lag,
            micros,
        );
        out.insert(
            "aggregatedPublishLatencyQuantiles".into(),
            quantiles(&window.publish, millis),
        );
        out.insert(
            "aggregatedPublishDelayLatencyQuantiles".into(),
            quantiles(&window.schedule_lag, micros),
        );
        series(
            &mut out,
            "endToEndLatency",
            &periods,
            |p| &p.end_to_end,
            millis,
        );
        out.insert(
            "aggregatedEndToEndLatencyQuantiles".into(),
            quantiles(&window.end_to_end, millis),
        );
        aggregated(
            &mut out,
            "aggregatedEndToEndLatency",
            &window.end_to_end,
            millis,
        );
        Value::Object(out)
    }
}

impl RunObserver for OmbResult {
    fn interval(&mut self, row: &IntervalRow) {
        if row.phase != Phase::Measurement {
            return;
        }
        let period = self.current.get_or_insert_with(Period::new);
        period.add(row);
        if period.seconds == PERIOD_SECONDS {
            self.periods
                .extend(self.current.take().as_ref().map(Period::close));
        }
    }
}

/// OMB's latency milliseconds (fractional) from nanoseconds.
fn millis(ns: f64) -> Value {
    json!(ns / 1e6)
}

/// OMB's publish-delay microseconds (whole) from nanoseconds.
fn micros(ns: f64) -> Value {
    json!((ns / 1e3) as u64)
}

/// (suffix, quantile) of OMB's per-period and aggregated fields; `None`: the maximum.
const POINTS: [(&str, Option<f64>); 7] = [
    ("50pct", Some(0.50)),
    ("75pct", Some(0.75)),
    ("95pct", Some(0.95)),
    ("99pct", Some(0.99)),
    ("999pct", Some(0.999)),
    ("9999pct", Some(0.9999)),
    ("Max", None),
];

/// The mean, ns; `None` when nothing was recorded.
fn mean(h: &Histogram<u64>) -> Option<f64> {
    (!h.is_empty()).then(|| h.mean())
}

/// The value at `quantile` (`None`: the maximum), ns; `None` when nothing was recorded.
fn point(h: &Histogram<u64>, quantile: Option<f64>) -> Option<f64> {
    if h.is_empty() {
        return None;
    }
    Some(match quantile {
        Some(q) => h.value_at_quantile(q) as f64,
        None => h.max() as f64,
    })
}

/// `<name>Avg`, `<name>50pct` … `<name>Max` as lists over the periods. OMB's averages are
/// doubles even for publish delay, whose other fields are whole microseconds.
fn series(
    out: &mut Map<String, Value>,
    name: &str,
    periods: &[&ClosedPeriod],
    digest: fn(&ClosedPeriod) -> &Digest,
    unit: fn(f64) -> Value,
) {
    out.insert(
        format!("{name}Avg"),
        periods
            .iter()
            .map(|p| digest(p).mean.map_or(Value::Null, |ns| average(name, ns)))
            .collect(),
    );
    for (i, (suffix, _)) in POINTS.iter().enumerate() {
        out.insert(
            format!("{name}{suffix}"),
            periods
                .iter()
                .map(|p| digest(p).points[i].map_or(Value::Null, unit))
                .collect(),
        );
    }
}

fn aggregated(
    out: &mut Map<String, Value>,
    name: &str,
    h: &Histogram<u64>,
    unit: fn(f64) -> Value,
) {
    let avg = mean(h).map_or(Value::Null, |ns| average(name, ns));
    out.insert(format!("{name}Avg"), avg);
    for (suffix, quantile) in POINTS {
        let value = point(h, quantile).map_or(Value::Null, unit);
        out.insert(format!("{name}{suffix}"), value);
    }
}

/// An average in the field's unit: microseconds for publish delay, else milliseconds.
fn average(name: &str, ns: f64) -> Value {
    if name.contains("Delay") {
        json!(ns / 1e3)
    } else {
        json!(ns / 1e6)
    }
}

/// HdrHistogram's percentile iteration, keyed by percentile as Java writes a double.
fn quantiles(h: &Histogram<u64>, unit: fn(f64) -> Value) -> Value {
    let mut map = Map::new();
    if h.is_empty() {
        return Value::Object(map);
    }
    for step in h.iter_quantiles(QUANTILE_TICKS) {
        map.insert(
            java_double(step.quantile() * 100.0),
            unit(step.value_iterated_to() as f64),
        );
    }
    Value::Object(map)
}

/// A double as Java's `Double.toString` writes it (the keys of OMB's quantile maps): decimal
/// between 10⁻³ and 10⁷ with at least one digit after the point, else `d.dddE±n`.
fn java_double(x: f64) -> String {
    if x == 0.0 {
        return "0.0".into();
    }
    if (1e-3..1e7).contains(&x.abs()) {
        let text = format!("{x:?}");
        if text.contains('.') {
            text
        } else {
            format!("{text}.0")
        }
    } else {
        let text = format!("{x:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_string()
        } else {
            format!("{mantissa}.0")
        };
        format!("{mantissa}E{exponent}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::row;
    use brokerbench_model::record_clamped;

    fn header() -> OmbHeader {
        OmbHeader {
            workload: "w".into(),
            driver: "kafka".into(),
            message_size: 100,
            topics: 1,
            partitions: 2,
            producers_per_topic: 1,
            consumers_per_topic: 1,
        }
    }

    #[test]
    fn doubles_are_written_as_java_writes_them() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(50.0), "50.0");
        assert_eq!(java_double(99.90234375), "99.90234375");
        assert_eq!(java_double(0.0001), "1.0E-4");
        assert_eq!(java_double(0.00125), "0.00125");
        assert_eq!(java_double(100.0), "100.0");
    }

    #[test]
    fn periods_are_ten_seconds_of_the_window_in_omb_units() {
        let mut omb = OmbResult::new(header());
        let mut warmup = row(0, 0);
        warmup.phase = Phase::Warmup;
        omb.interval(&warmup);
        // 25 s of measurement: periods of 10, 10 and 5 seconds.
        for second in 1..=25 {
            let mut r = row(second, second * 1_000_000_000);
            record_clamped(&mut r.publish, 2_000_000 * second); // 2 ms × second
            record_clamped(&mut r.schedule_lag, 3_000 * second); // 3 µs × second
            record_clamped(&mut r.end_to_end, 5_000_000);
            r.backlog = Some(second as i64 - 20);
            omb.interval(&r);
        }
        let mut window = WindowHistograms::default();
        for v in [1_000_000u64, 2_000_000, 3_000_000, 4_000_000] {
            record_clamped(&mut window.publish, v);
            record_clamped(&mut window.schedule_lag, v / 1000);
            record_clamped(&mut window.end_to_end, v * 2);
        }
        let json = omb.to_json(&window);
        let list = |k: &str| json[k].as_array().unwrap().clone();
        assert_eq!(list("publishRate").len(), 3);
        // row(): 90 acknowledged, 1 failed, 80 received per second.
        assert_eq!(list("publishRate")[2], 90.0);
        assert_eq!(list("publishErrorRate")[0], 1.0);
        assert_eq!(list("consumeRate")[1], 80.0);
        // The backlog at each period's end, never negative.
        assert_eq!(list("backlog"), vec![json!(0), json!(0), json!(5)]);
        // Period 1 holds seconds 1..=10: max publish 20 ms, max delay 30 µs.
        let max = list("publishLatencyMax")[0].as_f64().unwrap();
        assert!((max - 20.0).abs() < 0.02, "{max}");
        assert_eq!(list("publishDelayLatencyMax")[0], 30);
        assert!(list("publishDelayLatency50pct")[0].is_u64());
        let e2e = list("endToEndLatency50pct")[2].as_f64().unwrap();
        assert!((e2e - 5.0).abs() < 0.01, "{e2e}");
        // Aggregated from the window histograms.
        let p50 = json["aggregatedPublishLatency50pct"].as_f64().unwrap();
        assert!((p50 - 2.0).abs() < 0.01, "{p50}");
        assert_eq!(json["aggregatedPublishDelayLatencyMax"], 4);
        let avg = json["aggregatedPublishDelayLatencyAvg"].as_f64().unwrap();
        assert!((avg - 2.5).abs() < 0.01, "{avg}");
        let quantiles = json["aggregatedPublishLatencyQuantiles"]
            .as_object()
            .unwrap();
        assert!(quantiles.contains_key("25.0") && quantiles.contains_key("100.0"));
        let last = quantiles["100.0"].as_f64().unwrap();
        assert!((last - 4.0).abs() < 0.01, "{last}");
    }

    #[test]
    fn latency_nothing_recorded_is_null_not_zero() {
        let mut omb = OmbResult::new(header());
        // A period with publish latency and no end-to-end latency (produce only).
        let mut r = row(1, 1_000_000_000);
        record_clamped(&mut r.publish, 2_000_000);
        omb.interval(&r);
        let mut window = WindowHistograms::default();
        record_clamped(&mut window.publish, 2_000_000);
        let json = omb.to_json(&window);
        assert_eq!(json["endToEndLatency99pct"], json!([null]));
        assert_eq!(json["endToEndLatencyAvg"], json!([null]));
        assert_eq!(json["aggregatedEndToEndLatency99pct"], Value::Null);
        assert_eq!(json["aggregatedEndToEndLatencyAvg"], Value::Null);
        assert_eq!(json["aggregatedEndToEndLatencyQuantiles"], json!({}));
        let p99 = json["aggregatedPublishLatency99pct"].as_f64().unwrap();
        assert!((p99 - 2.0).abs() < 0.01, "{p99}");
    }
}
