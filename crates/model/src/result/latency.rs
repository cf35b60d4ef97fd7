//! Latency as a run measures it: the histograms' range and precision every task shares, and
//! the percentiles the summary reads from the measurement window's histograms.

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
