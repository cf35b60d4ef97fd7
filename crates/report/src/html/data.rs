//! Reading a results folder's files into chart series: CSV columns, the HdrHistogram logs
//! (for percentile spectra), and the reduction of long series.

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use serde_json::Value as Json;

/// Most points a time series keeps in a report. Longer series are reduced to this many
/// buckets: latencies, lags, backlogs, CPU and memory keep each bucket's maximum (a peak is
/// never averaged away); message and byte rates keep each bucket's mean (so the area, the
/// number of messages, is kept).
pub const MAX_POINTS: usize = 1200;

/// A CSV file as named columns of numbers (None where a cell is empty or not a number), plus
/// its text columns.
#[derive(Debug, Default)]
pub struct Columns {
    pub numbers: HashMap<String, Vec<Option<f64>>>,
    pub text: HashMap<String, Vec<String>>,
    pub rows: usize,
}

impl Columns {
    pub fn read(path: &Path) -> Option<Columns> {
        let mut reader = csv::Reader::from_path(path).ok()?;
        let headers: Vec<String> = reader.headers().ok()?.iter().map(String::from).collect();
        let mut columns = Columns::default();
        for h in &headers {
            columns.numbers.insert(h.clone(), Vec::new());
            columns.text.insert(h.clone(), Vec::new());
        }
        for record in reader.records() {
            let Ok(record) = record else { break };
            columns.rows += 1;
            for (h, cell) in headers.iter().zip(record.iter()) {
                if let Some(v) = columns.numbers.get_mut(h) {
                    v.push(cell.trim().parse::<f64>().ok().filter(|x| x.is_finite()));
                }
                if let Some(v) = columns.text.get_mut(h) {
                    v.push(cell.to_string());
                }
            }
        }
        Some(columns)
    }

    pub fn get(&self, name: &str) -> Option<&Vec<Option<f64>>> {
        self.numbers.get(name)
    }

    /// A column scaled by a factor (e.g. µs to ns), or None if absent.
    pub fn scaled(&self, name: &str, factor: f64) -> Option<Vec<Option<f64>>> {
        Some(
            self.get(name)?
                .iter()
                .map(|v| v.map(|x| x * factor))
                .collect(),
        )
    }
}

/// How a series is reduced when too long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce {
    Max,
    Mean,
}

/// Reduces x and each series to at most [`MAX_POINTS`] points.
pub fn reduce(
    xs: &[f64],
    series: Vec<(Vec<Option<f64>>, Reduce)>,
) -> (Vec<f64>, Vec<Vec<Option<f64>>>) {
    let n = xs.len();
    if n <= MAX_POINTS {
        return (xs.to_vec(), series.into_iter().map(|(s, _)| s).collect());
    }
    let bucket = n.div_ceil(MAX_POINTS);
    let new_xs: Vec<f64> = xs.chunks(bucket).map(|c| c[0]).collect();
    let reduced = series
        .into_iter()
        .map(|(s, how)| {
            s.chunks(bucket)
                .map(|c| {
                    let values: Vec<f64> = c.iter().flatten().copied().collect();
                    if values.is_empty() {
                        return None;
                    }
                    Some(match how {
                        Reduce::Max => values.iter().copied().fold(f64::MIN, f64::max),
                        Reduce::Mean => values.iter().sum::<f64>() / values.len() as f64,
                    })
                })
                .collect()
        })
        .collect();
    (new_xs, reduced)
}

/// Reads the tagged and untagged histograms of an interval log: tag ("" for none) → the
/// histograms of its intervals with their start (seconds since the log's base time).
pub fn read_hlog(path: &Path) -> Option<Vec<(String, f64, Histogram<u64>)>> {
    let mut out = Vec::new();
    fold_hlog(path, |tag, start, h| out.push((tag.to_string(), start, h)))?;
    Some(out)
}

/// Each interval of the HdrHistogram log at `path` given to `each` (tag, start in seconds,
/// histogram) as it is decoded, none kept: how an hour of per-second logs is summed without
/// holding 7,200 histograms at once. `None` when the file cannot be read.
pub fn fold_hlog(path: &Path, mut each: impl FnMut(&str, f64, Histogram<u64>)) -> Option<()> {
    let bytes = std::fs::read(path).ok()?;
    let mut deserializer = Deserializer::new();
    let mut raw = Vec::new();
    for entry in IntervalLogIterator::new(&bytes) {
        let Ok(LogEntry::Interval(interval)) = entry else {
            continue;
        };
        raw.clear();
        let encoded = interval.encoded_histogram();
        if base64::engine::general_purpose::STANDARD
            .decode_vec(encoded, &mut raw)
            .is_err()
        {
            continue;
        }
        let Ok(h) = deserializer.deserialize::<u64, _>(&mut raw.as_slice()) else {
            continue;
        };
        let tag = interval.tag().map_or("", |t| t.as_str());
        each(tag, interval.start_timestamp().as_secs_f64(), h);
    }
    Some(())
}

/// The x values of a percentile spectrum: 1 / (1 − p) from 1 (p = 0) to 10^5 (p = 99.999%),
/// 24 points per decade.
pub fn spectrum_xs() -> Vec<f64> {
    (0..=5 * 24).map(|i| 10f64.powf(i as f64 / 24.0)).collect()
}

/// A histogram's latency at each spectrum x (None for an empty histogram).
pub fn spectrum(h: &Histogram<u64>, xs: &[f64]) -> Vec<Option<f64>> {
    xs.iter()
        .map(|x| {
            if h.is_empty() {
                None
            } else {
                Some(h.value_at_quantile(1.0 - 1.0 / x) as f64)
            }
        })
        .collect()
}

/// JSON numbers, nulls where missing.
pub fn json_series(values: &[Option<f64>]) -> Json {
    Json::Array(
        values
            .iter()
            .map(|v| {
                v.and_then(|x| serde_json::Number::from_f64((x * 1000.0).round() / 1000.0))
                    .map(Json::Number)
                    .unwrap_or(Json::Null)
            })
            .collect(),
    )
}

pub fn json_xs(xs: &[f64]) -> Json {
    json_series(&xs.iter().map(|x| Some(*x)).collect::<Vec<_>>())
}

pub fn read_json(path: &Path) -> Option<Json> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// The value at a dot path of a JSON document, as a number.
pub fn number_at(doc: &Json, path: &str) -> Option<f64> {
    path.split('.')
        .try_fold(doc, |node, part| node.get(part))?
        .as_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduction_keeps_peaks_and_means() {
        let xs: Vec<f64> = (0..3600).map(f64::from).collect();
        let mut latency = vec![Some(1.0); 3600];
        latency[1234] = Some(500.0);
        let rate = vec![Some(10.0); 3600];
        let (rx, rs) = reduce(&xs, vec![(latency, Reduce::Max), (rate, Reduce::Mean)]);
        assert!(rx.len() <= MAX_POINTS);
        assert!(rs[0].contains(&Some(500.0)), "the peak survives");
        assert!(rs[1].iter().all(|v| *v == Some(10.0)));
    }

    #[test]
    fn spectrum_reads_quantiles() {
        let mut h = brokerbench_model::new_histogram();
        for v in 1..=100_000u64 {
            h.record(v).unwrap();
        }
        let xs = spectrum_xs();
        let s = spectrum(&h, &xs);
        assert_eq!(xs.len(), s.len());
        // x = 100 is p = 99%.
        let i = xs.iter().position(|x| (*x - 100.0).abs() < 1e-6).unwrap();
        let p99 = s[i].unwrap();
        assert!((p99 - 99_000.0).abs() < 100.0, "{p99}");
    }
}
