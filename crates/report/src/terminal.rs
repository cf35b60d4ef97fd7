//! The summary printed at the end of a run: one screen, aligned, with loss and errors stated
//! so plainly that a lossy or failed run can never be mistaken for a clean one.

use std::fmt::Write as _;

use brokerbench_model::units::{format_bytes, format_bytes_given, format_nanos};
use brokerbench_model::{
    BacklogReport, ConsumerShare, Integrity, LatencySummary, RunStatus, Summary,
};

/// Width of the label column of every line.
const LABEL: usize = 13;
/// Width of the label column of the latency table (its cells carry their own padding).
const LATENCY_LABEL: usize = 12;
/// Width of one latency cell; `format_nanos` yields at most 9 characters.
const CELL: usize = 10;

pub(crate) use brokerbench_model::units::group_thousands;

/// A rate in msg/s: whole numbers with thousands separators, small fractional rates with
/// 2 decimals.
pub(crate) fn format_count_rate(per_second: f64) -> String {
    if !per_second.is_finite() || per_second < 0.0 {
        return format!("{per_second}");
    }
    if per_second >= 100.0 || per_second.fract() == 0.0 {
        group_thousands(per_second.round() as u64)
    } else {
        format!("{per_second:.2}")
    }
}

fn status_text(summary: &Summary) -> &'static str {
    match summary.status {
        RunStatus::Complete if summary.is_clean() => "complete",
        RunStatus::Complete => "complete, NOT CLEAN (see integrity and errors)",
        RunStatus::Interrupted => "INTERRUPTED",
        RunStatus::Failed => "FAILED",
    }
}

fn mode_text(summary: &Summary) -> String {
    match (summary.mode.as_str(), summary.target_rate) {
        ("max-rate", _) | (_, None) => {
            format!("{} (closed loop: latency is not open-loop)", summary.mode)
        }
        (mode, Some(rate)) => format!("{mode} at {} msg/s", format_count_rate(rate)),
    }
}

fn latency_row(out: &mut String, label: &str, latency: &LatencySummary) {
    if latency.count == 0 {
        return;
    }
    let _ = write!(out, "{label:<LATENCY_LABEL$}");
    for value in [
        latency.p50_ns,
        latency.p75_ns,
        latency.p90_ns,
        latency.p95_ns,
        latency.p99_ns,
        latency.p999_ns,
        latency.p9999_ns,
        latency.max_ns,
    ] {
        let _ = write!(out, "{:>CELL$}", format_nanos(value));
    }
    out.push('\n');
}

/// The verdict on delivery: `(lossless)` only when the ledger ran and found nothing wrong.
fn integrity_verdict(integrity: &Integrity, consumers: usize) -> String {
    if !integrity.checked && consumers > 0 {
        // One shard of a run: its consumers read other shards' messages too.
        return "loss NOT CHECKED (one shard of a run: `brokerbench merge` checks it)".to_string();
    }
    if !integrity.checked {
        return "loss NOT CHECKED (no consumers)".to_string();
    }
    if integrity.lost > 0 {
        return format!("LOSSY: {} lost", group_thousands(integrity.lost));
    }
    let problems: Vec<String> = [
        (integrity.duplicated, "duplicated"),
        (integrity.out_of_order, "out of order"),
        (integrity.unacknowledged, "unacknowledged"),
    ]
    .iter()
    .filter(|(count, _)| *count > 0)
    .map(|(count, what)| format!("{} {what}", group_thousands(*count)))
    .collect();
    if problems.is_empty() && integrity.undelivered > 0 {
        format!(
            "(nothing acknowledged lost; {} sent at most once never arrived)",
            group_thousands(integrity.undelivered)
        )
    } else if problems.is_empty() && integrity.unconsumed > 0 {
        format!(
            "(lossless; {} not yet consumed when the drain ended)",
            group_thousands(integrity.unconsumed)
        )
    } else if problems.is_empty() {
        "(lossless)".to_string()
    } else {
        format!("NOT CLEAN: {}", problems.join(", "))
    }
}

/// How the messages were shared among consumers (uneven partition assignment shows here);
/// omitted for a single consumer.
fn consumers_line(out: &mut String, consumers: &[ConsumerShare]) {
    const LIST_AT_MOST: usize = 8;
    if consumers.len() < 2 {
        return;
    }
    let _ = write!(out, "{:<LABEL$}received", "consumers");
    if consumers.len() <= LIST_AT_MOST {
        for c in consumers {
            let _ = write!(
                out,
                "  topic {} sub {} #{}: {}",
                c.topic,
                c.subscription,
                c.member,
                group_thousands(c.received)
            );
        }
        out.push('\n');
    } else {
        let min = consumers.iter().map(|c| c.received).min().unwrap_or(0);
        let max = consumers.iter().map(|c| c.received).max().unwrap_or(0);
        let _ = writeln!(
            out,
            " between {} and {} each by {} consumers",
            group_thousands(min),
            group_thousands(max),
            consumers.len()
        );
    }
}

/// Backlog mode: how much was built, when, and how fast it drained.
pub(crate) fn backlog_text(b: &BacklogReport) -> String {
    let mut out = String::new();
    match (b.resumed_s, b.build_s()) {
        (Some(resumed), Some(build)) => {
            let _ = write!(
                out,
                "built {} messages ({}) in {build:.1} s, consumers paused {:.1}–{resumed:.1} s",
                group_thousands(b.built_messages),
                format_bytes(b.built_bytes),
                b.paused_s
            );
        }
        _ => {
            let _ = write!(
                out,
                "not built: {} never waited (consumers paused from {:.1} s)",
                format_bytes_given(b.size_bytes),
                b.paused_s
            );
        }
    }
    match (b.drain_s(), b.drained_s) {
        (Some(drain), Some(at)) => {
            let _ = write!(out, "; drained in {drain:.1} s (at {at:.1} s)");
            if let Some(rate) = b.drain_received_per_s {
                let _ = write!(
                    out,
                    ", consumers received {} msg/s",
                    format_count_rate(rate)
                );
            }
        }
        _ if b.resumed_s.is_some() => {
            let _ = write!(
                out,
                "; not drained to {} messages",
                group_thousands(b.drained_at_messages)
            );
        }
        _ => {}
    }
    out
}

/// Renders the end-of-run summary for a terminal.
pub fn terminal_summary(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} on {} — {}, {}, {:.1} s measured",
        summary.workload,
        summary.driver,
        status_text(summary),
        mode_text(summary),
        summary.measurement_s
    );
    throughput_line(&mut out, summary);
    if let Some(backlog) = &summary.backlog {
        let _ = writeln!(out, "{:<LABEL$}{}", "backlog", backlog_text(backlog));
    }
    latency_table(&mut out, summary);
    integrity_line(&mut out, summary);
    consumers_line(&mut out, &summary.consumers);
    errors_line(&mut out, summary);
    fault_lines(&mut out, summary);
    client_line(&mut out, summary);
    resources_lines(&mut out, summary);
    notes_lines(&mut out, summary);
    out
}

/// Acknowledged rate and bandwidth, with the sent rate when it differs and the received
/// rate when there were consumers.
fn throughput_line(out: &mut String, summary: &Summary) {
    let throughput = &summary.throughput;
    let _ = write!(
        out,
        "{:<LABEL$}{} msg/s acknowledged   {:.2} MB/s",
        "throughput",
        format_count_rate(throughput.acknowledged_per_s),
        throughput.acknowledged_mb_per_s
    );
    // Sent and acknowledged part ways when the broker cannot keep up; show it then.
    let ack = throughput.acknowledged_per_s;
    if (throughput.sent_per_s - ack).abs() > 0.01 * ack.max(1.0) {
        let _ = write!(
            out,
            "   sent {} msg/s",
            format_count_rate(throughput.sent_per_s)
        );
    }
    if summary.integrity.checked || summary.total.received > 0 {
        let _ = write!(
            out,
            "   received {} msg/s",
            format_count_rate(throughput.received_per_s)
        );
    }
    out.push('\n');
}

/// The latency percentiles, a row per kind of latency recorded.
fn latency_table(out: &mut String, summary: &Summary) {
    let latency = &summary.latency;
    let rows = [
        ("  publish", &latency.publish),
        ("  end-to-end", &latency.end_to_end),
        ("  service", &latency.service_time),
        ("  sched. lag", &latency.schedule_lag),
    ];
    if rows.iter().all(|(_, l)| l.count == 0) {
        let _ = writeln!(out, "{:<LABEL$}none recorded", "latency");
    } else {
        let _ = write!(out, "{:<LATENCY_LABEL$}", "latency");
        for heading in ["p50", "p75", "p90", "p95", "p99", "p99.9", "p99.99", "max"] {
            let _ = write!(out, "{heading:>CELL$}");
        }
        out.push('\n');
        for (label, summary) in rows {
            latency_row(out, label, summary);
        }
    }
}

/// The whole run's counts, every kind of trouble that occurred, and the verdict on delivery.
fn integrity_line(out: &mut String, summary: &Summary) {
    let total = &summary.total;
    let integrity = &summary.integrity;
    let _ = write!(
        out,
        "{:<LABEL$}whole run: sent {}  acknowledged {}",
        "integrity",
        group_thousands(total.sent),
        group_thousands(total.acknowledged)
    );
    if total.failed > 0 {
        let _ = write!(out, "  failed {}", group_thousands(total.failed));
    }
    if integrity.checked {
        let _ = write!(
            out,
            "  received {}  lost {}  duplicated {}  out of order {}",
            group_thousands(total.received),
            group_thousands(integrity.lost),
            group_thousands(integrity.duplicated),
            group_thousands(integrity.out_of_order)
        );
    }
    for (count, what) in [
        (integrity.unacknowledged, "unacknowledged"),
        (integrity.received_unacknowledged, "received unacknowledged"),
        (integrity.foreign, "foreign (ignored)"),
        (
            integrity.dropped_by_broker,
            "dropped by the broker (by policy)",
        ),
        (
            integrity.unconsumed,
            "unconsumed (still stored beyond the consumers' positions)",
        ),
        (
            integrity.undelivered,
            "undelivered (sent at most once, never received)",
        ),
    ] {
        if count > 0 {
            let _ = write!(out, "  {what} {}", group_thousands(count));
        }
    }
    let _ = writeln!(
        out,
        "  {}",
        integrity_verdict(integrity, summary.consumers.len())
    );
}

/// The errors by kind over the whole run, or that there were none.
fn errors_line(out: &mut String, summary: &Summary) {
    if summary.errors.is_empty() {
        let _ = writeln!(out, "{:<LABEL$}none", "errors");
    } else {
        let kinds: Vec<String> = summary
            .errors
            .iter()
            .map(|(kind, count)| format!("{kind}={}", group_thousands(*count)))
            .collect();
        let _ = writeln!(out, "{:<LABEL$}{} (whole run)", "errors", kinds.join(", "));
    }
}

/// A line per fault injected (or meant to be).
fn fault_lines(out: &mut String, summary: &Summary) {
    for fault in &summary.faults {
        let _ = writeln!(
            out,
            "{:<LABEL$}{}",
            format!("fault {}", fault.index),
            fault_text(fault)
        );
    }
}

/// What the client cost: CPU per million messages, peak memory and, when counted, heap
/// allocations per message.
fn client_line(out: &mut String, summary: &Summary) {
    let client = &summary.client;
    if client.peak_rss_bytes == 0 && client.cpu_user_s + client.cpu_system_s == 0.0 {
        let _ = writeln!(out, "{:<LABEL$}not measured", "client");
    } else {
        let per_million = client.cpu_s_per_million_messages.map_or(
            "no CPU-s per million messages (none acknowledged)".to_string(),
            |c| format!("{c:.2} CPU-s per million messages"),
        );
        let _ = write!(
            out,
            "{:<LABEL$}{per_million} (user {:.2} s, system {:.2} s), peak RSS {:.0} MiB",
            "client",
            client.cpu_user_s,
            client.cpu_system_s,
            client.peak_rss_bytes as f64 / (1024.0 * 1024.0)
        );
        if let Some(allocations) = client.allocations_per_message {
            let _ = write!(out, ", {allocations:.3} heap allocations per message");
        }
        out.push('\n');
    }
}

/// The summary's notes, one per line.
fn notes_lines(out: &mut String, summary: &Summary) {
    // The summary's notes say everything once, the client-bound one included.
    for (i, note) in summary.notes.iter().enumerate() {
        let label = if i == 0 { "notes" } else { "" };
        let _ = writeln!(out, "{label:<LABEL$}- {note}");
    }
}

/// One fault: what, when, how long producers went without acknowledgements, when the run
/// was back, publish p99 before and during, and the sends that failed meanwhile and the
/// messages due meanwhile that were lost, duplicated or reordered.
fn fault_text(fault: &brokerbench_model::faults::FaultReport) -> String {
    let mut text = fault.describe();
    if fault.pid.is_none() && fault.output.is_none() {
        return text + ": not injected";
    }
    text.push_str(&format!(" at {:.1} s", fault.injected_at_s));
    match fault.ended_at_s {
        Some(ended) => text.push_str(&format!(", {} at {ended:.1} s", fault.ending())),
        None if fault.action == "kill" || fault.action == "stop" => text.push_str(", left down"),
        None => {}
    }
    text.push_str(&format!(": unavailable {:.2} s, ", fault.unavailable_s));
    text.push_str(&match fault.recovered_after_s {
        Some(s) => format!("recovered after {s:.1} s"),
        None => "not recovered in the window".into(),
    });
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |ms| format_nanos((ms * 1e6) as u64));
    text.push_str(&format!(
        "; publish p99 {} before, {} during",
        ms(fault.before.publish_p99_ms),
        ms(fault.during.publish_p99_ms)
    ));
    if fault.during.failed > 0 {
        text.push_str(&format!(
            "; {} sends failed",
            group_thousands(fault.during.failed)
        ));
    }
    let during = &fault.during;
    for (count, what) in [
        (during.lost, "acknowledged then lost"),
        (during.duplicated, "duplicated"),
        (during.out_of_order, "out of order"),
    ] {
        if let Some(n) = count.filter(|&n| n > 0) {
            text.push_str(&format!("; {} {what}", group_thousands(n)));
        }
    }
    if let (Some(before), Some(after)) = (fault.leader_before, fault.leader_after) {
        text.push_str(&format!("; leader node {before} → node {after}"));
    }
    text
}

/// Broker and host resources over the measurement window, and the broker's own count.
fn resources_lines(out: &mut String, summary: &Summary) {
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}%"));
    let mb = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1} MB"));
    if let Some(r) = &summary.resources {
        if let Some(b) = &r.broker {
            let _ = writeln!(
                out,
                "{:<LABEL$}cpu {} usr {} sys (of one core), peak RSS {}, disk written {}, read {}",
                "broker",
                pct(b.cpu_user_pct_mean),
                pct(b.cpu_system_pct_mean),
                b.rss_bytes_max.map_or("-".to_string(), |v| format!(
                    "{:.0} MiB",
                    v as f64 / (1024.0 * 1024.0)
                )),
                mb(b.disk_written_mb),
                mb(b.disk_read_mb),
            );
        }
        let h = &r.host;
        let busy = h
            .busy_cores()
            .map_or("-".to_string(), |cores| format!("{cores:.2}"));
        let _ = writeln!(
            out,
            "{:<LABEL$}cpu {} usr {} sys {} iowait of {} cores ({busy} busy), disk written {}, loopback {}",
            "host",
            pct(h.cpu_user_pct_mean),
            pct(h.cpu_system_pct_mean),
            pct(h.cpu_iowait_pct_mean),
            h.cpu_count,
            mb(h.disk_written_mb),
            mb(h.loopback_mb),
        );
    }
    if let Some(m) = &summary.broker_metrics {
        // `messages_in_per_s` in results written before the names spelled units out.
        let rate = m
            .means
            .get("messages_in_per_second")
            .or_else(|| m.means.get("messages_in_per_s"))
            .map_or("-".to_string(), |r| {
                format!("{}/s", group_thousands(r.round() as u64))
            });
        let count = match (m.messages_in, m.disagreement_pct) {
            (Some(n), Some(apart)) => format!(
                ", {} over the run (brokerbench {}; {apart:.2}% apart)",
                group_thousands(n),
                group_thousands(m.messages_counted_by_brokerbench)
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{:<LABEL$}messages in {rate} (mean){count}",
            "broker says"
        );
    }
}

#[cfg(test)]
mod tests;
