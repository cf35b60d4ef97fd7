//! A run's faults in its report: a table of what each cost, and a shaded span on the time
//! charts from its injection to its end, marked with its number.

use std::fmt::Write as _;

use brokerbench_model::faults::{FaultLatency, FaultReport};
use brokerbench_model::units::format_nanos;

use crate::terminal::group_thousands;
use serde_json::{json, Value as Json};

use super::esc;

/// The run's faults, as its summary holds them.
fn faults_of(s: &Json) -> Vec<FaultReport> {
    serde_json::from_value(s["faults"].clone()).unwrap_or_default()
}

/// Spans to shade: from each injection to its end (or `end`, the run's), labelled.
pub(super) fn spans(s: Option<&Json>, end: f64) -> Vec<Json> {
    let faults = s.map(faults_of).unwrap_or_default();
    faults
        .iter()
        .filter(|f| f.injected_at_s > 0.0)
        .map(|f| {
            let until = f.ended_at_s.unwrap_or(end).max(f.injected_at_s);
            json!({"name": "fault", "start": f.injected_at_s, "end": until, "label": format!("fault {}", f.index)})
        })
        .collect()
}

/// Before the summary exists (a run still going): each fault's span from the seconds whose
/// `faults` cell in timeseries.csv names its number, to the end of the last of them.
pub(super) fn spans_from_rows(seconds: &[f64], faults: &[String]) -> Vec<Json> {
    let mut spans: Vec<(String, f64, f64)> = Vec::new();
    for (second, cell) in seconds.iter().zip(faults) {
        for number in cell.split_whitespace() {
            match spans.iter_mut().find(|(n, _, _)| n == number) {
                Some(span) => span.2 = second + 1.0,
                None => spans.push((number.to_string(), *second, second + 1.0)),
            }
        }
    }
    spans
        .into_iter()
        .map(|(number, start, end)| json!({"name": "fault", "start": start, "end": end, "label": format!("fault {number}")}))
        .collect()
}

/// The faults table, when the workload had faults.
pub(super) fn table(body: &mut String, s: &Json) {
    let faults = faults_of(s);
    if faults.is_empty() {
        return;
    }
    body.push_str("<h2>Faults</h2><table class=\"faults\"><thead><tr><th class=\"text\">fault</th><th class=\"text\">node</th><th class=\"text\">injected at</th><th>ended</th><th>unavailable</th><th>recovered after</th><th>publish p99 before → during</th><th>failed sends during</th><th>lost · duplicated · out of order during</th><th>leader before → after</th><th class=\"text\">problems</th></tr></thead><tbody>");
    for f in &faults {
        row(body, f);
    }
    body.push_str("</tbody></table><p class=\"legend-note\">Seconds into the run (from the start of warm-up). Unavailable: the longest span in which a producer had a message due and no acknowledgement came; recovered: the acknowledged rate back within 5% of the target for 5 s; failed sends: in the seconds from the injection until recovered (or the window's end); lost (acknowledged and never received), duplicated and out of order: of the messages due in those seconds (- where no consumers checked). Each fault is shaded grey on the charts from its injection to its end.</p>");
}

fn row(body: &mut String, f: &FaultReport) {
    let node = match (&f.node, &f.chosen) {
        (Some(node), Some(chosen)) => format!("{node}<br><small>{}</small>", esc(chosen)),
        (Some(node), None) => node.to_string(),
        _ => "-".into(),
    };
    let seconds = |v: Option<f64>, none: &str| v.map_or(none.to_string(), |v| format!("{v:.1} s"));
    let injected = match f.pid.is_some() || f.output.is_some() {
        true => format!("{:.1} s", f.injected_at_s),
        false => "not injected".to_string(),
    };
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |ms| format_nanos((ms * 1e6) as u64));
    let leader = match (f.leader_before, f.leader_after) {
        (Some(b), Some(a)) => format!("{b} → {a}"),
        (Some(b), None) => format!("{b} → ?"),
        _ => "-".into(),
    };
    let _ = write!(
        body,
        "<tr><td class=\"text\">{} {}</td><td class=\"text wrap\">{}</td><td class=\"text wrap\">{}</td><td>{} {}</td><td>{:.2} s</td><td>{}</td><td>{} → {}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"text wrap\">{}</td></tr>",
        f.index,
        esc(&f.action),
        node,
        esc(&injected),
        esc(f.ending()),
        esc(&seconds(f.ended_at_s, "never")),
        f.unavailable_s,
        esc(&seconds(f.recovered_after_s, "not in the window")),
        esc(&ms(f.before.publish_p99_ms)),
        esc(&ms(f.during.publish_p99_ms)),
        f.during.failed,
        esc(&integrity(&f.during)),
        esc(&leader),
        esc(&f.problems.join("; ")),
    );
}

/// "12 · 0 · 3", or "-" when nothing was checked.
fn integrity(during: &FaultLatency) -> String {
    match (during.lost, during.duplicated, during.out_of_order) {
        (Some(l), Some(d), Some(o)) => format!(
            "{} · {} · {}",
            group_thousands(l),
            group_thousands(d),
            group_thousands(o)
        ),
        _ => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_runs_faults_are_shaded_from_the_rows_that_name_them() {
        let seconds = [0.0, 1.0, 2.0, 3.0, 4.0];
        let cells = ["", "1", "1 2", "2", ""].map(String::from);
        let spans = spans_from_rows(&seconds, &cells);
        assert_eq!(
            spans,
            vec![
                json!({"name": "fault", "start": 1.0, "end": 3.0, "label": "fault 1"}),
                json!({"name": "fault", "start": 2.0, "end": 4.0, "label": "fault 2"}),
            ]
        );
    }

    fn summary() -> Json {
        json!({"faults": [
            {"index": 1, "action": "kill", "node": 2, "chosen": "leader of topic t at injection", "pid": 7,
             "leader_before": 2, "leader_after": 1, "at_s": 3.0, "injected_at_s": 4.0, "ended_at_s": 9.5,
             "unavailable_s": 1.25, "recovered_after_s": 6.0, "restarted_pid": 8,
             "before": {"seconds": 5.0, "publish_p99_ms": 3.0}, "during": {"seconds": 6.0, "publish_p99_ms": 1200.0, "failed": 42, "lost": 20132, "duplicated": 0, "out_of_order": 3}},
            {"index": 2, "action": "pause", "node": 3, "at_s": 20.0, "injected_at_s": 0.0, "unavailable_s": 0.0,
             "before": {"seconds": 0.0}, "during": {"seconds": 0.0}, "problems": ["not injected: the run ended before its time"]}
        ]})
    }

    #[test]
    fn each_fault_is_a_row_and_an_injected_one_a_span() {
        let s = summary();
        let mut body = String::new();
        table(&mut body, &s);
        assert!(
            body.contains("<td class=\"text\">1 kill</td><td class=\"text wrap\">2<br><small>leader of topic t at injection</small></td><td class=\"text wrap\">4.0 s</td><td>started again 9.5 s</td>"),
            "{body}"
        );
        assert!(
            body.contains("<td>1.25 s</td><td>6.0 s</td><td>3.00 ms → 1.20 s</td><td>42</td><td>20,132 · 0 · 3</td><td>2 → 1</td><td class=\"text wrap\"></td>"),
            "{body}"
        );
        assert!(
            body.contains(">not injected</td>")
                && body.contains("not injected: the run ended before its time"),
            "{body}"
        );
        // A fault injected whose restart failed is injected, with its problem beside it.
        let mut failed = s.clone();
        failed["faults"][0]["problems"] = json!(["node 2 could not be started again: no"]);
        let mut body = String::new();
        table(&mut body, &failed);
        assert!(
            body.contains("<td class=\"text wrap\">4.0 s</td>")
                && body.contains(">node 2 could not be started again: no</td>"),
            "{body}"
        );
        let spans = spans(Some(&s), 30.0);
        assert_eq!(
            spans,
            [json!({"name": "fault", "start": 4.0, "end": 9.5, "label": "fault 1"})]
        );
        let mut none = String::new();
        table(&mut none, &json!({}));
        assert!(none.is_empty());
    }
}
