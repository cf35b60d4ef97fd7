//! The headline numbers: which figures of summary.json are shown and how, as the run's cards,
//! or while the run goes, as its numbers so far. The comparison and the study show them alike.

use std::fmt::Write as _;

use brokerbench_model::units::{format_nanos, format_rate};
use hdrhistogram::Histogram;
use serde_json::Value as Json;

use super::data::number_at;
use super::esc;
use super::run_folder::RunFolder;

/// Headline numbers shown as cards: (summary.json path, label, unit).
pub(crate) const HEADLINE: &[(&str, &str, &str)] = &[
    (
        "throughput.acknowledged_per_s",
        "acknowledged msg/s",
        "rate",
    ),
    (
        "throughput.acknowledged_mb_per_s",
        "acknowledged MB/s",
        "plain",
    ),
    ("throughput.received_per_s", "received msg/s", "rate"),
    ("latency.publish.p50_ns", "publish p50", "ns"),
    ("latency.publish.p99_ns", "publish p99", "ns"),
    ("latency.publish.p999_ns", "publish p99.9", "ns"),
    ("latency.publish.max_ns", "publish max", "ns"),
    ("latency.end_to_end.p50_ns", "end-to-end p50", "ns"),
    ("latency.end_to_end.p99_ns", "end-to-end p99", "ns"),
    ("latency.end_to_end.max_ns", "end-to-end max", "ns"),
    ("integrity.lost", "lost", "plain"),
    ("integrity.duplicated", "duplicated", "plain"),
    ("total.failed", "failed sends", "plain"),
    (
        "client.cpu_s_per_million_messages",
        "client CPU-s per M msgs",
        "plain",
    ),
    ("client.peak_rss_bytes", "client peak RSS", "bytes"),
    (
        "resources.broker.cpu_user_pct_mean",
        "broker CPU usr %",
        "plain",
    ),
    (
        "resources.broker.cpu_system_pct_mean",
        "broker CPU sys %",
        "plain",
    ),
];

/// A headline value as text: the same formatting wherever it is shown.
pub(crate) fn show(value: f64, unit: &str) -> String {
    match unit {
        "ns" => format_nanos(value.max(0.0) as u64),
        "rate" => format_rate(value),
        "bytes" => format!("{:.1} MB", value / 1e6),
        _ if value.fract() == 0.0 => format!("{value:.0}"),
        _ => format!("{value:.2}"),
    }
}

/// Whether a latency group was measured at all (its histogram had values).
pub(super) fn measured(summary: &Json, path: &str) -> bool {
    match path.strip_prefix("latency.") {
        Some(rest) => {
            let group = rest.split('.').next().unwrap_or_default();
            number_at(summary, &format!("latency.{group}.count")).is_some_and(|c| c > 0.0)
        }
        None => true,
    }
}

/// The headline cards, and the backlog mode's line.
pub(super) fn headline(body: &mut String, s: &Json) {
    body.push_str(
        "<h2>Headline numbers <small>(measurement window)</small></h2><div class=\"cards\">",
    );
    for (path, label, unit) in HEADLINE {
        let Some(v) = number_at(s, path).filter(|_| measured(s, path)) else {
            continue;
        };
        let _ = write!(
            body,
            "<div class=\"card\" data-key=\"{path}\" data-value=\"{v}\"><div class=\"label\">{}</div><div class=\"value\">{}</div></div>",
            esc(label),
            esc(&show(v, unit))
        );
    }
    body.push_str("</div>");
    if let Ok(backlog) =
        serde_json::from_value::<brokerbench_model::BacklogReport>(s["backlog"].clone())
    {
        let _ = write!(
            body,
            "<p class=\"backlog\"><b>Backlog mode</b>: {}.</p>",
            esc(&crate::terminal::backlog_text(&backlog))
        );
    }
}

/// A live run's numbers over its measurement window so far, from the rows and the per-second
/// histograms written until now: the headline cards the summary will replace.
pub(super) fn so_far(body: &mut String, run: &RunFolder, windows: &[(&str, Histogram<u64>)]) {
    let Some(t) = &run.timeseries else {
        return;
    };
    let measured = run.measured_rows();
    if measured.is_empty() {
        body.push_str("<p class=\"legend-note\">The headline numbers appear once the measurement window has begun.</p>");
        return;
    }
    let mean = |column: &str| {
        let values = t.get(column)?;
        let known: Vec<f64> = measured
            .iter()
            .filter_map(|&i| values.get(i).copied().flatten())
            .collect();
        (!known.is_empty()).then(|| known.iter().sum::<f64>() / known.len() as f64)
    };
    let mut cards: Vec<(&str, f64, &str)> = Vec::new();
    for (column, label) in [
        ("acknowledged", "acknowledged msg/s"),
        ("received", "received msg/s"),
    ] {
        if let Some(v) = mean(column) {
            cards.push((label, v, "rate"));
        }
    }
    for (name, h) in windows {
        if matches!(*name, "publish" | "end-to-end") && !h.is_empty() {
            cards.push((name, h.value_at_quantile(0.5) as f64, "p50"));
            cards.push((name, h.value_at_quantile(0.99) as f64, "p99"));
        }
    }
    let _ = write!(
        body,
        "<h2>Headline numbers <small>(the first {} s of the measurement window)</small></h2><div class=\"cards\">",
        measured.len()
    );
    for (label, value, kind) in cards {
        let (label, unit) = match kind {
            "rate" => (label.to_string(), "rate"),
            p => (format!("{label} {p}"), "ns"),
        };
        let _ = write!(
            body,
            "<div class=\"card so-far\" data-value=\"{value}\"><div class=\"label\">{}</div><div class=\"value\">{}</div></div>",
            esc(&label),
            esc(&show(value, unit))
        );
    }
    body.push_str("</div>");
}
