//! The comparison report of two results folders that are both called `out`: the table's
//! header and every chart's legend name each run by what differs, or by the given labels.

use std::path::{Path, PathBuf};

use brokerbench_model::*;
use brokerbench_report::html::comparison_report;
use brokerbench_report::*;

mod support;

use support::{SECOND, START_NS};

/// A complete run at `rate`, three seconds long.
fn summary(rate: f64) -> Summary {
    let mut summary = support::summary(RunStatus::Complete, rate, 3.0);
    summary.throughput.acknowledged_per_s = rate;
    summary
}

/// A complete three-second run at `rate` in `parent/out`.
fn run_in(parent: &Path, rate: u64, latency_us: u64) -> PathBuf {
    let dir = parent.join("out");
    let mut manifest = Manifest::new("0.1.0", format!("run-{rate}"), START_NS);
    manifest.workload = serde_json::json!({"name": "quickstart", "topics": 1, "rate": rate as f64, "duration": "3s"});
    manifest.driver = serde_json::json!({"driver": "kafka", "producer_config": {"acks": "all"}});
    let mut folder = ResultsFolder::create(&dir, manifest).unwrap();
    for second in 0..3 {
        let latencies: Vec<u64> = (1..=100).map(|i| latency_us * i / 50).collect();
        folder.interval(&support::row(second, Phase::Measurement, &latencies));
    }
    folder
        .finish(&summary(rate as f64), START_NS + 3 * SECOND)
        .unwrap();
    dir
}

/// The charts' JSON embedded in the page.
fn chart_data(html: &str) -> serde_json::Value {
    let start = html.find("id=\"report-data\">").unwrap() + "id=\"report-data\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end].replace("<\\/", "</")).unwrap()
}

fn header_cells(html: &str) -> Vec<String> {
    let start = html
        .find("<table class=\"sortable\" id=\"headline\">")
        .unwrap();
    let head = &html[start..start + html[start..].find("</thead>").unwrap()];
    let cells: Vec<&str> = head.split("</th>").collect();
    cells[..cells.len() - 1]
        .iter()
        .map(|piece| piece[piece.rfind('>').unwrap() + 1..].to_string())
        .collect()
}

#[test]
fn runs_in_folders_both_called_out_are_named_by_their_rate() {
    let root = tempfile::tempdir().unwrap();
    let a = run_in(&root.path().join("A"), 50_000, 1_000);
    let b = run_in(&root.path().join("B"), 20_000, 3_000);
    let html = comparison_report(&[a, b], &[]).unwrap();
    assert_eq!(header_cells(&html), ["number", "rate=50000", "rate=20000"]);
    let data = chart_data(&html);
    let charts = data["charts"].as_array().unwrap();
    assert!(
        charts.iter().any(|c| c["id"] == "spectrum-publish"),
        "{charts:?}"
    );
    for chart in charts {
        let legend: Vec<&str> = chart["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["label"].as_str().unwrap())
            .collect();
        assert_eq!(
            legend,
            ["rate=50000", "rate=20000"],
            "chart {}",
            chart["id"]
        );
    }
}

#[test]
fn given_labels_name_the_runs_and_a_wrong_count_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let a = run_in(&root.path().join("A"), 50_000, 1_000);
    let b = run_in(&root.path().join("B"), 20_000, 3_000);
    let given = ["before".to_string(), "after".to_string()];
    let html = comparison_report(&[a.clone(), b.clone()], &given).unwrap();
    assert_eq!(header_cells(&html), ["number", "before", "after"]);
    // The list says which folder is which label and what differs.
    assert!(html.contains("<b class=\"run-label\">before</b>"), "{html}");
    assert!(html.contains("(rate=50000)"));
    let error = comparison_report(&[a, b], &given[..1]).unwrap_err();
    assert!(
        error.to_string().contains("2 inputs but 1 --label"),
        "{error}"
    );
}
