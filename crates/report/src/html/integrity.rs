//! The integrity table: the delivery ledger's counts over the whole run, from what was sent
//! to what was lost, duplicated or never received.

use std::fmt::Write as _;

use serde_json::Value as Json;

use super::data::number_at;
use super::esc;

/// The integrity table rows: (summary.json path, label).
const INTEGRITY_ROWS: [(&str, &str); 13] = [
    ("total.sent", "sent"),
    ("total.acknowledged", "acknowledged"),
    ("total.failed", "failed"),
    ("total.received", "received (every copy)"),
    (
        "integrity.lost",
        "lost (acknowledged, and the consumers moved past it)",
    ),
    (
        "integrity.unconsumed",
        "unconsumed (still stored beyond the consumers' positions)",
    ),
    ("integrity.duplicated", "duplicated"),
    ("integrity.out_of_order", "out of order"),
    (
        "integrity.unacknowledged",
        "unacknowledged when the drain ended",
    ),
    (
        "integrity.received_unacknowledged",
        "received although not acknowledged",
    ),
    (
        "integrity.dropped_by_broker",
        "dropped by the broker by policy",
    ),
    (
        "integrity.undelivered",
        "undelivered (sent at most once, never received)",
    ),
    (
        "integrity.foreign",
        "foreign (not sent by this run), ignored",
    ),
];

/// The delivery ledger's counts over the whole run.
pub(super) fn integrity(body: &mut String, s: &Json) {
    body.push_str("<h2>Integrity <small>(whole run, from the delivery ledger)</small></h2><table><thead><tr><th class=\"text\">count</th><th>messages</th></tr></thead><tbody>");
    for (path, label) in INTEGRITY_ROWS {
        let v = number_at(s, path).unwrap_or(0.0);
        let _ = write!(
            body,
            "<tr data-key=\"{path}\"><td class=\"text\">{}</td><td>{v:.0}</td></tr>",
            esc(label)
        );
    }
    let checked = s["integrity"]["checked"].as_bool() == Some(true);
    body.push_str("</tbody></table>");
    let consumers = s["consumers"].as_array().is_some_and(|c| !c.is_empty());
    if !checked && consumers {
        body.push_str("<p class=\"legend-note\">One shard of a run: its consumers read other shards' messages too, so loss, duplicates and order are counted by <code>brokerbench merge</code>.</p>");
    } else if !checked {
        body.push_str("<p class=\"legend-note\">No consumers: loss, duplicates and order were not checked.</p>");
    }
}
