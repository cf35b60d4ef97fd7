//! The table printed when the study ends.

use super::*;

pub(super) fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// The end-of-study table: per cell, mean ± 95% CI of the acknowledged rate and p99 latencies.
pub(super) fn end_table(axis_names: &[String], cells: &[CellStats]) -> String {
    if cells.is_empty() {
        return "no run completed\n".into();
    }
    let columns = number_columns();
    let sent = headline_index("throughput.sent_per_s");
    let mut rows = vec![header_row(axis_names, cells, &columns)];
    for c in cells {
        rows.push(cell_row(c, &columns, sent));
    }
    aligned_text(&rows)
}

/// A number's place in the headline numbers.
fn headline_index(name: &str) -> Option<usize> {
    HEADLINE.iter().position(|h| *h == name)
}

/// The numbers shown, as (label, place in the headline numbers, in ns).
fn number_columns() -> Vec<(&'static str, usize, bool)> {
    [
        ("ack msg/s", "throughput.acknowledged_per_s", false),
        ("publish p99", "latency.publish.p99_ns", true),
        ("e2e p99", "latency.end_to_end.p99_ns", true),
    ]
    .into_iter()
    .filter_map(|(label, path, ns)| headline_index(path).map(|i| (label, i, ns)))
    .collect()
}

/// A number as a duration (`ns`) or as a rate.
fn number_text(v: f64, ns: bool) -> String {
    if ns {
        format_nanos(v.max(0.0) as u64)
    } else {
        format_rate(v)
    }
}

/// Mean ± half the 95% CI of a number over the repetitions ("—" when it has none).
fn stats_text(s: Option<&Stats>, ns: bool) -> String {
    match s {
        None => "—".to_string(),
        Some(s) => match s.ci95_half() {
            Some(h) => format!("{} ± {}", number_text(s.mean, ns), number_text(h, ns)),
            None => number_text(s.mean, ns),
        },
    }
}

/// The table's header: cell, the axes, the offered rate (of a search), n and the numbers.
fn header_row(
    axis_names: &[String],
    cells: &[CellStats],
    columns: &[(&str, usize, bool)],
) -> Vec<String> {
    let mut header: Vec<String> = vec!["cell".into()];
    header.extend(axis_names.iter().cloned());
    if cells.iter().any(|c| c.offered_rate.is_some()) {
        header.push("offered".into());
    }
    header.push("n".into());
    header.extend(
        columns
            .iter()
            .map(|(l, _, _)| format!("{l} (mean ± 95% CI)")),
    );
    header
}

/// One cell's row; a rate of a cell whose messages were never acknowledged (the broker does
/// not confirm them) is the rate sent. `sent`: the place of the sent rate in the headline
/// numbers.
fn cell_row(c: &CellStats, columns: &[(&str, usize, bool)], sent: Option<usize>) -> Vec<String> {
    let mut row = vec![(c.cell + 1).to_string()];
    row.extend(c.values.iter().map(|v| {
        match v {
            Json::String(s) => Path::new(s)
                .file_name()
                .filter(|_| s.contains('/'))
                .map_or(s.clone(), |n| n.to_string_lossy().into_owned()),
            other => other.to_string(),
        }
    }));
    if let Some(r) = c.offered_rate {
        row.push(format_rate(r));
    }
    row.push(c.n.to_string());
    row.extend(columns.iter().map(|(_, i, ns)| {
        let unconfirmed = !ns
            && c.stats[*i].as_ref().is_some_and(|s| s.max == 0.0)
            && sent
                .and_then(|j| c.stats[j].as_ref())
                .is_some_and(|s| s.mean > 0.0);
        match (unconfirmed, sent) {
            (true, Some(j)) => format!("{} sent", stats_text(c.stats[j].as_ref(), false)),
            _ => stats_text(c.stats[*i].as_ref(), *ns),
        }
    }));
    row
}

/// The rows as text, in aligned columns, the header underlined.
fn aligned_text(rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::from("\n");
    for (n, row) in rows.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(t, w)| format!("{t:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
        if n == 0 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
            out.push('\n');
        }
    }
    out
}
