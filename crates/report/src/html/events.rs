//! A run's outages, stalls and blocked publishing before its summary exists (the run is
//! still going): found in timeseries.csv's rows, to whole seconds, by the rules the summary
//! applies. At the end the summary's own times, to the millisecond, replace them.

use brokerbench_model::STALL_SECONDS;
use serde_json::{json, Value as Json};

use super::data::Columns;

/// One second of the rows, as far as these events go.
#[derive(Debug, Clone, Copy)]
struct Second {
    at: f64,
    drain: bool,
    acknowledged: bool,
    disconnected: bool,
    blocked: bool,
}

/// Spans to shade on the time charts: outages (from a second in which a producer had lost the
/// broker to the second of the first acknowledgement after it), publishing blocked by the
/// broker, and, when the run is `scheduled` (a target rate), stalls (STALL_SECONDS or more
/// seconds of warm-up or measurement, after the first acknowledgement, with none, every
/// producer connected and none blocked).
pub(super) fn spans_from_rows(t: &Columns, seconds: &[f64], scheduled: bool) -> Vec<Json> {
    let rows = rows(t, seconds);
    let last = rows.last().map_or(0.0, |s| s.at + 1.0);
    let mut out = outages(&rows);
    out.extend(named(runs_of(&rows, 1, |s| s.blocked), "blocked", last));
    let sending: Vec<Second> = rows.iter().copied().filter(|s| !s.drain).collect();
    if let Some(first) = sending
        .iter()
        .position(|s| s.acknowledged)
        .filter(|_| scheduled)
    {
        let quiet = |s: &Second| !(s.acknowledged || s.disconnected || s.blocked);
        out.extend(named(
            runs_of(&sending[first..], STALL_SECONDS, quiet),
            "stall",
            last,
        ));
    }
    out
}

/// Notes on events a live page lists; the rest are counted.
const MAX_NOTES: usize = 10;

/// Notes for a live page: one per outage, block and stall so far (the first MAX_NOTES), and
/// the messages that failed so far.
pub(super) fn notes_so_far(t: &Columns, seconds: &[f64], scheduled: bool) -> Vec<String> {
    let spans = spans_from_rows(t, seconds, scheduled);
    let mut notes: Vec<String> = spans
        .iter()
        .take(MAX_NOTES)
        .map(|span| {
            let at = |k: &str| span[k].as_f64().unwrap_or(0.0);
            let what = match span["name"].as_str() {
                Some("outage") => "BROKER UNAVAILABLE: a producer lost the broker",
                Some("blocked") => "PUBLISHING BLOCKED by the broker",
                _ => "STALL: nothing was acknowledged",
            };
            let until = match span["open"].as_bool() == Some(true) {
                true => "on, still going".to_string(),
                false => format!("to {:.0} s", at("end")),
            };
            format!("{what} from {:.0} s {until}", at("start"))
        })
        .collect();
    if spans.len() > MAX_NOTES {
        notes.push(format!("{} more", spans.len() - MAX_NOTES));
    }
    let failed: f64 = t.get("failed").map_or(0.0, |c| c.iter().flatten().sum());
    if failed > 0.0 {
        let messages = if failed == 1.0 { "message" } else { "messages" };
        notes.push(format!("{failed:.0} {messages} failed so far"));
    }
    notes
}

/// Every row, warm-up, measurement and drain.
fn rows(t: &Columns, seconds: &[f64]) -> Vec<Second> {
    let count = |name: &str, i: usize| {
        t.get(name)
            .and_then(|c| c.get(i).copied().flatten())
            .is_some_and(|v| v > 0.0)
    };
    let phases = t.text.get("phase");
    (0..seconds.len().min(t.rows))
        .map(|i| Second {
            at: seconds[i],
            drain: phases.and_then(|p| p.get(i)).is_some_and(|p| p == "drain"),
            acknowledged: count("acknowledged", i),
            disconnected: count("disconnected_producers", i),
            blocked: count("blocked_producers", i),
        })
        .collect()
}

/// Outages: each run of seconds with a producer disconnected, to the end of the second of the
/// first acknowledgement after it (the last of its seconds, when that one has one and is not
/// its only one), or to the
/// last row, still going, when none has come yet; runs that reach the same acknowledgement are
/// one outage (a client that reconnects and loses the broker again before any).
fn outages(rows: &[Second]) -> Vec<Json> {
    let last = rows.last().map_or(0.0, |s| s.at + 1.0);
    let mut spans: Vec<(f64, f64, bool)> = Vec::new();
    for (start, end) in runs_of(rows, 1, |s| s.disconnected) {
        // A lone second's acknowledgements may all have come before the loss.
        let from = if end - start > 1.0 { end - 1.0 } else { end };
        let acked = rows
            .iter()
            .find(|s| s.at >= from && s.acknowledged)
            .map(|s| s.at + 1.0);
        let span = (start, acked.unwrap_or(last), acked.is_none());
        match spans.last_mut() {
            Some(previous) if start < previous.1 => *previous = (previous.0, span.1, span.2),
            _ => spans.push(span),
        }
    }
    spans
        .into_iter()
        .map(|(start, end, open)| json!({"name": "outage", "start": start, "end": end, "open": open}))
        .collect()
}

/// Spans as the charts take them, named `name`; `open` (still going) when they reach `last`.
fn named(spans: Vec<(f64, f64)>, name: &str, last: f64) -> Vec<Json> {
    spans
        .into_iter()
        .map(|(start, end)| json!({"name": name, "start": start, "end": end, "open": end >= last}))
        .collect()
}

/// [start, end) of each run of at least `shortest` consecutive seconds that are `of`.
fn runs_of(rows: &[Second], shortest: usize, of: impl Fn(&Second) -> bool) -> Vec<(f64, f64)> {
    let mut spans = Vec::new();
    let mut run: Vec<f64> = Vec::new();
    let mut close = |run: &mut Vec<f64>| {
        if run.len() >= shortest {
            spans.push((run[0], run[run.len() - 1] + 1.0));
        }
        run.clear();
    };
    for s in rows {
        if !(of(s) && run.last().is_none_or(|last| s.at == last + 1.0)) {
            close(&mut run);
        }
        if of(s) {
            run.push(s.at);
        }
    }
    close(&mut run);
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Columns as timeseries.csv has them: seconds from 0, the given phase and counts.
    fn columns(phases: &[&str], acks: &[u64], disconnected: &[u64], blocked: &[u64]) -> Columns {
        let mut t = Columns {
            rows: phases.len(),
            ..Columns::default()
        };
        let numbers = |v: &[u64]| v.iter().map(|&n| Some(n as f64)).collect();
        t.numbers.insert("acknowledged".into(), numbers(acks));
        t.numbers
            .insert("disconnected_producers".into(), numbers(disconnected));
        t.numbers
            .insert("blocked_producers".into(), numbers(blocked));
        t.text.insert(
            "phase".into(),
            phases.iter().map(|p| p.to_string()).collect(),
        );
        t
    }

    fn names_and_times(spans: &[Json]) -> Vec<(String, f64, f64)> {
        spans
            .iter()
            .map(|s| {
                let n = |k: &str| s[k].as_f64().unwrap();
                (
                    s["name"].as_str().unwrap().to_string(),
                    n("start"),
                    n("end"),
                )
            })
            .collect()
    }

    #[test]
    fn an_outage_a_block_and_a_stall_are_found_in_the_rows() {
        let m = "measurement";
        let t = columns(
            &[
                "warmup", "warmup", m, m, m, m, m, m, m, m, m, m, "drain", "drain",
            ],
            &[0, 0, 5, 0, 0, 5, 0, 5, 0, 5, 0, 0, 0, 0],
            &[0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0],
        );
        let seconds: Vec<f64> = (0..14).map(f64::from).collect();
        let spans = names_and_times(&spans_from_rows(&t, &seconds, true));
        // The outage lasts to the second of the first acknowledgement after it (7). The slow
        // start (seconds 0-1) is not a stall, nor is one quiet second (8), nor the drain
        // (12-13); the last measured second (11) alone is too short.
        assert_eq!(
            spans,
            vec![
                ("outage".to_string(), 6.0, 8.0),
                ("blocked".to_string(), 9.0, 11.0),
                ("stall".to_string(), 3.0, 5.0),
            ]
        );
    }

    #[test]
    fn a_stall_going_on_now_is_shaded_to_the_last_row() {
        let t = columns(&["measurement"; 5], &[5, 5, 0, 0, 0], &[0; 5], &[0; 5]);
        let seconds = [0.0, 1.0, 2.0, 3.0, 4.0];
        let spans = names_and_times(&spans_from_rows(&t, &seconds, true));
        assert_eq!(spans, vec![("stall".to_string(), 2.0, 5.0)]);
        // At maximum rate nothing is due at a time, so nothing stalls (as in the summary).
        assert!(spans_from_rows(&t, &seconds, false).is_empty());
    }

    #[test]
    fn an_outage_in_the_drain_is_shaded_to_the_last_row_without_an_acknowledgement() {
        let t = columns(
            &["measurement", "measurement", "drain", "drain"],
            &[5, 5, 0, 0],
            &[0, 0, 1, 0],
            &[0; 4],
        );
        let spans = names_and_times(&spans_from_rows(&t, &[0.0, 1.0, 2.0, 3.0], true));
        assert_eq!(spans, vec![("outage".to_string(), 2.0, 4.0)]);
    }

    #[test]
    fn the_notes_so_far_name_each_event_and_the_failures() {
        let mut t = columns(
            &["measurement"; 6],
            &[5, 0, 5, 5, 0, 0],
            &[0, 1, 0, 0, 0, 0],
            &[0; 6],
        );
        t.numbers.insert(
            "failed".into(),
            vec![Some(0.0), Some(7.0), None, Some(0.0), Some(0.0), Some(0.0)],
        );
        let notes = notes_so_far(&t, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], true);
        assert_eq!(
            notes,
            vec![
                "BROKER UNAVAILABLE: a producer lost the broker from 1 s to 3 s",
                "STALL: nothing was acknowledged from 4 s on, still going",
                "7 messages failed so far",
            ]
        );
    }

    #[test]
    fn a_client_that_loses_the_broker_again_before_an_acknowledgement_has_one_outage() {
        let t = columns(
            &["measurement"; 8],
            &[5, 0, 0, 0, 0, 0, 5, 0],
            &[0, 1, 0, 1, 0, 0, 0, 0],
            &[0; 8],
        );
        let seconds: Vec<f64> = (0..8).map(f64::from).collect();
        let spans = spans_from_rows(&t, &seconds, false);
        assert_eq!(
            names_and_times(&spans),
            vec![("outage".to_string(), 1.0, 7.0)]
        );
        assert_eq!(spans[0]["open"], false);
    }

    #[test]
    fn a_loss_in_the_last_row_is_still_going_though_that_second_had_acknowledgements() {
        let t = columns(&["measurement"; 3], &[5, 5, 3], &[0, 0, 1], &[0; 3]);
        let notes = notes_so_far(&t, &[0.0, 1.0, 2.0], true);
        assert_eq!(
            notes,
            vec!["BROKER UNAVAILABLE: a producer lost the broker from 2 s on, still going"]
        );
    }

    #[test]
    fn an_outage_ended_by_the_last_row_is_not_still_going() {
        let t = columns(&["measurement"; 3], &[5, 0, 5], &[0, 1, 0], &[0; 3]);
        let notes = notes_so_far(&t, &[0.0, 1.0, 2.0], true);
        assert_eq!(
            notes,
            vec!["BROKER UNAVAILABLE: a producer lost the broker from 1 s to 3 s"]
        );
    }

    #[test]
    fn rows_without_the_blocked_column_have_no_blocks() {
        let mut t = columns(&["measurement"; 3], &[5, 5, 5], &[0; 3], &[1; 3]);
        t.numbers.remove("blocked_producers");
        assert!(spans_from_rows(&t, &[0.0, 1.0, 2.0], true).is_empty());
    }
}
