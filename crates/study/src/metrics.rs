//! The headline numbers of a run that study tables carry, each named by its path in
//! summary.json, and read from there (so old results folders work too).

/// Headline numbers, in table order; each is a dot path into summary.json.
pub const HEADLINE: &[&str] = &[
    "target_rate",
    "throughput.sent_per_s",
    "throughput.acknowledged_per_s",
    "throughput.acknowledged_mb_per_s",
    "throughput.received_per_s",
    "latency.publish.min_ns",
    "latency.publish.mean_ns",
    "latency.publish.p50_ns",
    "latency.publish.p75_ns",
    "latency.publish.p90_ns",
    "latency.publish.p95_ns",
    "latency.publish.p99_ns",
    "latency.publish.p999_ns",
    "latency.publish.max_ns",
    "latency.end_to_end.min_ns",
    "latency.end_to_end.mean_ns",
    "latency.end_to_end.p50_ns",
    "latency.end_to_end.p75_ns",
    "latency.end_to_end.p90_ns",
    "latency.end_to_end.p95_ns",
    "latency.end_to_end.p99_ns",
    "latency.end_to_end.p999_ns",
    "latency.end_to_end.max_ns",
    "integrity.lost",
    "integrity.duplicated",
    "integrity.out_of_order",
    "total.failed",
    "resources.broker.cpu_user_pct_mean",
    "resources.broker.cpu_system_pct_mean",
    "resources.broker.disk_written_mb",
    "resources.host.cpu_user_pct_mean",
    "resources.host.cpu_system_pct_mean",
    "client.cpu_s_per_million_messages",
    "client.peak_rss_bytes",
    "integrity.unconsumed",
    "faults.0.unavailable_s",
    "faults.0.recovered_after_s",
    "faults.0.during.publish_p99_ms",
    "faults.0.during.lost",
];

/// The value at a dot path of a summary, when it is a number; a number in the path indexes an
/// array (`faults.0.unavailable_s`: the first fault's). A latency whose histogram is empty
/// (count 0: nothing was measured) has no value rather than 0.
pub fn value(summary: &serde_json::Value, path: &str) -> Option<f64> {
    let mut node = summary;
    for part in path.split('.') {
        node = match part.parse::<usize>() {
            Ok(index) => node.get(index)?,
            Err(_) => node.get(part)?,
        };
    }
    if let Some(rest) = path.strip_prefix("latency.") {
        let group = rest.split('.').next().unwrap_or_default();
        let count = summary
            .get("latency")
            .and_then(|l| l.get(group))
            .and_then(|g| g.get("count"))
            .and_then(serde_json::Value::as_u64);
        if count == Some(0) {
            return None;
        }
    }
    node.as_f64()
}

/// Every headline number of a summary, in [`HEADLINE`] order.
pub fn headline(summary: &serde_json::Value) -> Vec<Option<f64>> {
    HEADLINE.iter().map(|p| value(summary, p)).collect()
}

/// A short label for terminal tables.
pub fn short_name(path: &str) -> &str {
    match path {
        "throughput.acknowledged_per_s" => "ack msg/s",
        "latency.publish.p99_ns" => "publish p99",
        "latency.end_to_end.p99_ns" => "e2e p99",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_paths_and_skips_empty_latencies() {
        let s = serde_json::json!({
            "throughput": {"acknowledged_per_s": 123.5},
            "latency": {"publish": {"count": 0, "p99_ns": 0}, "end_to_end": {"count": 3, "p99_ns": 7}},
            "resources": null,
        });
        assert_eq!(value(&s, "throughput.acknowledged_per_s"), Some(123.5));
        assert_eq!(value(&s, "latency.publish.p99_ns"), None);
        assert_eq!(value(&s, "latency.end_to_end.p99_ns"), Some(7.0));
        assert_eq!(value(&s, "resources.broker.disk_written_mb"), None);
        let faulted = serde_json::json!({"faults": [{"unavailable_s": 9.4}]});
        assert_eq!(value(&faulted, "faults.0.unavailable_s"), Some(9.4));
        assert_eq!(value(&faulted, "faults.1.unavailable_s"), None);
        assert_eq!(value(&s, "faults.0.unavailable_s"), None);
    }
}
