//! The broker's own metrics (broker-metrics.csv): one chart per figure it gave, with each
//! node's line beside the cluster's where the broker gives the figure per node.

use std::fmt::Write as _;

use serde_json::{json, Value as Json};

use super::chart::{time_chart, Page};
use super::data::{Columns, Reduce};
use super::esc;
use super::run_folder::RunFolder;

/// A broker figure's unit, from its name (docs/src/broker-metrics.md): a ratio is 0–1,
/// shown as %.
fn broker_metric_unit(name: &str) -> &'static str {
    if name.ends_with("_bytes") {
        "bytes"
    } else if name.ends_with("_ratio") {
        "ratio"
    } else {
        "count"
    }
}

/// One chart per figure the broker's own metrics gave (broker-metrics.csv).
pub(super) fn broker_metrics(page: &mut Page, run: &RunFolder, s: Option<&Json>) {
    let Some(b) = Columns::read(&run.dir.join("broker-metrics.csv")).filter(|b| b.rows > 0) else {
        return;
    };
    let bx: Vec<f64> = b
        .get("time_s")
        .map(|v| v.iter().map(|t| t.unwrap_or(0.0) - run.start_s).collect())
        .unwrap_or_default();
    let mut names: Vec<&String> = b
        .numbers
        .keys()
        .filter(|k| k.as_str() != "time_s")
        .collect();
    names.sort();
    let source = s
        .and_then(|s| s["broker_metrics"]["source"].as_str())
        .unwrap_or("broker");
    let _ = write!(
        page.body,
        "<h2>The broker's own metrics <small>({}; each name is defined in docs/src/broker-metrics.md)</small></h2><div class=\"grid2\">",
        esc(source)
    );
    let (per_node, names): (Vec<&String>, Vec<&String>) = names
        .into_iter()
        .partition(|name| super::nodes::metric_node(name, &b).is_some());
    for name in names {
        let values = b.get(name).cloned().unwrap_or_default();
        if values.iter().all(Option::is_none) {
            continue;
        }
        let id = format!(
            "broker-{}",
            name.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
        );
        let unit = broker_metric_unit(name);
        let node_lines = super::nodes::metric_nodes(name, &per_node, &b);
        let (label, note) = match node_lines.is_empty() {
            true => (name.as_str(), ""),
            false => (
                "cluster",
                "the cluster's figure, and each node's alone (a gap: the node did not answer)",
            ),
        };
        let mut series = vec![(label, values, Reduce::Max, 0)];
        series.extend(
            node_lines
                .iter()
                .map(|(label, values)| (label.as_str(), values.clone(), Reduce::Max, 0)),
        );
        page.add_chart(
            time_chart(
                &id,
                &bx,
                series,
                json!({"yLabel": name, "unitY": unit, "height": 170}),
            ),
            name,
            note,
        );
    }
    page.body.push_str("</div>");
}
