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
    let columns = number_columns(cells);
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

/// How a column's numbers read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Rate,
    Nanos,
    Count,
    Seconds,
}

/// A shown column: its label, its place in the headline numbers, its unit.
type Column = (&'static str, usize, Unit);

/// The numbers shown: the rate and p99 latencies; messages lost when some run lost one or had
/// a fault; the first fault's unavailability when some run had a fault.
fn number_columns(cells: &[CellStats]) -> Vec<Column> {
    let any = |path: &str, wanted: fn(&Stats) -> bool| {
        headline_index(path).is_some_and(|i| {
            cells
                .iter()
                .any(|c| c.stats[i].as_ref().is_some_and(wanted))
        })
    };
    let faulted = any("faults.0.unavailable_s", |_| true);
    let lossy = any("integrity.lost", |s| s.max > 0.0);
    let shown = |unit: Unit| match unit {
        Unit::Rate | Unit::Nanos => true,
        Unit::Count => lossy || faulted,
        Unit::Seconds => faulted,
    };
    [
        ("ack msg/s", "throughput.acknowledged_per_s", Unit::Rate),
        ("publish p99", "latency.publish.p99_ns", Unit::Nanos),
        ("e2e p99", "latency.end_to_end.p99_ns", Unit::Nanos),
        ("lost", "integrity.lost", Unit::Count),
        ("unavailable", "faults.0.unavailable_s", Unit::Seconds),
    ]
    .into_iter()
    .filter_map(|(label, path, unit)| {
        headline_index(path)
            .filter(|_| shown(unit))
            .map(|i| (label, i, unit))
    })
    .collect()
}

/// A number in its column's unit.
fn number_text(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Nanos => format_nanos(v.max(0.0) as u64),
        Unit::Rate => format_rate(v),
        Unit::Count => format!("{v:.0}"),
        Unit::Seconds => format!("{v:.2} s"),
    }
}

/// Mean ± half the 95% CI of a number over the repetitions ("—" when it has none).
fn stats_text(s: Option<&Stats>, unit: Unit) -> String {
    match s {
        None => "—".to_string(),
        Some(s) => match s.ci95_half() {
            Some(h) => format!("{} ± {}", number_text(s.mean, unit), number_text(h, unit)),
            None => number_text(s.mean, unit),
        },
    }
}

/// The table's header: cell, the axes, the offered rate (of a search), n and the numbers.
fn header_row(axis_names: &[String], cells: &[CellStats], columns: &[Column]) -> Vec<String> {
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
fn cell_row(c: &CellStats, columns: &[Column], sent: Option<usize>) -> Vec<String> {
    let mut row = vec![(c.cell + 1).to_string()];
    row.extend(c.values.iter().map(|v| {
        match v {
            Json::String(s) => Path::new(s)
                .file_name()
                .filter(|_| s.contains('/'))
                .map_or(s.clone(), |n| n.to_string_lossy().into_owned()),
            other => brokerbench_study::flow_text(other),
        }
    }));
    if let Some(r) = c.offered_rate {
        row.push(format_rate(r));
    }
    row.push(c.n.to_string());
    row.extend(columns.iter().map(|(_, i, unit)| {
        let unconfirmed = *unit == Unit::Rate
            && c.stats[*i].as_ref().is_some_and(|s| s.max == 0.0)
            && sent
                .and_then(|j| c.stats[j].as_ref())
                .is_some_and(|s| s.mean > 0.0);
        match (unconfirmed, sent) {
            (true, Some(j)) => format!("{} sent", stats_text(c.stats[j].as_ref(), Unit::Rate)),
            _ => stats_text(c.stats[*i].as_ref(), *unit),
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
