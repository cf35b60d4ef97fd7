//! What went wrong in a run, where it cannot be missed: the outages table, the notes and
//! errors, or while the run goes, its events so far.

use std::fmt::Write as _;

use serde_json::Value as Json;

use super::esc;
use super::json_text::strings;
use super::run_folder::RunFolder;

/// The outages table, when the broker went away.
pub(super) fn outages(body: &mut String, s: &Json) {
    let Ok(outages) =
        serde_json::from_value::<Vec<brokerbench_model::Outage>>(s["outages"].clone())
    else {
        return;
    };
    if outages.is_empty() {
        return;
    }
    body.push_str("<h2>Outages</h2><table class=\"outages\"><thead><tr><th>lost at</th><th>first acknowledgement after</th><th>producers</th><th>messages failed</th></tr></thead><tbody>");
    for o in &outages {
        let after = o
            .duration_s()
            .map_or("none before the run ended".to_string(), |d| {
                format!("{d:.1} s later")
            });
        let _ = write!(
            body,
            "<tr><td>{:.1} s</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            o.start_s,
            esc(&after),
            o.producers,
            o.failed
        );
    }
    body.push_str("</tbody></table><p class=\"legend-note\">Seconds into the run (from the start of warm-up), as the producers' clients saw it: from the first finding the broker gone to the last getting an acknowledgement again.</p>");
}

/// While the run goes: its outages, blocks and stalls so far, and the messages that failed.
pub(super) fn notes_so_far(body: &mut String, run: &RunFolder) {
    let Some(t) = &run.timeseries else {
        return;
    };
    let notes = super::events::notes_so_far(t, &run.seconds(), run.scheduled());
    if notes.is_empty() {
        return;
    }
    body.push_str("<h2>Notes <small>(so far, to whole seconds; the summary's come at the end)</small></h2><ul class=\"notes so-far\">");
    for n in &notes {
        let _ = write!(body, "<li>{}</li>", esc(n));
    }
    body.push_str("</ul>");
}

/// Notes and errors, where they cannot be missed.
pub(super) fn notes(body: &mut String, s: &Json) {
    let notes = strings(&s["notes"]);
    let errors: Vec<(String, f64)> = s["errors"]
        .as_object()
        .map(|e| {
            e.iter()
                .map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0)))
                .collect()
        })
        .unwrap_or_default();
    if notes.is_empty() && errors.is_empty() {
        return;
    }
    body.push_str("<h2>Notes</h2><ul class=\"notes\">");
    for (kind, n) in &errors {
        let _ = write!(
            body,
            "<li><b>{} failures of kind <code>{}</code></b></li>",
            n,
            esc(kind)
        );
    }
    for n in &notes {
        let _ = write!(body, "<li>{}</li>", esc(n));
    }
    body.push_str("</ul>");
}
