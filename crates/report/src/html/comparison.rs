//! The comparison report: several results folders overlaid, each run named by its label (see
//! [`crate::labels`]) in the table's header and in every chart's legend.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::{json, Value as Json};

use super::data::{json_series, json_xs, number_at, reduce, spectrum, spectrum_xs, Reduce};
use super::headline::{measured, show, HEADLINE};
use super::run_folder::RunFolder;
use super::{chart_div, esc, page, HtmlError};
use crate::labels::{comparison_labels, difference_labels, RunToName};

/// Several runs overlaid; `given` are the `--label`s, one per folder, or none.
pub(crate) fn comparison_report(dirs: &[PathBuf], given: &[String]) -> Result<String, HtmlError> {
    let runs = dirs
        .iter()
        .map(|d| RunFolder::read(d))
        .collect::<Result<Vec<_>, _>>()?;
    let to_name: Vec<RunToName> = runs
        .iter()
        .map(|r| RunToName::folder(&r.dir, Some(r.manifest.clone())))
        .collect();
    let labels = comparison_labels(&to_name, given).map_err(HtmlError::Labels)?;
    let mut body = format!(
        "<h1>Comparison of {} runs</h1><p class=\"sub\">ratios are to the first run</p>",
        runs.len()
    );
    body.push_str(&runs_list(&runs, &labels));
    body.push_str(&headline_table(&runs, &labels));
    let mut charts = Vec::new();
    spectrum_charts(&runs, &labels, &mut charts, &mut body);
    time_charts(&runs, &labels, &mut charts, &mut body);
    Ok(page("brokerbench: comparison", &body, charts, json!([])))
}

/// Which run is which: its label, folder, workload, family, start and what sets it apart.
fn runs_list(runs: &[RunFolder], labels: &[String]) -> String {
    let manifests: Vec<&Json> = runs.iter().map(|r| &r.manifest).collect();
    let differences = difference_labels(&manifests);
    let mut list = String::from("<ol class=\"runs\">");
    for ((r, label), difference) in runs.iter().zip(labels).zip(&differences) {
        let _ = write!(
            list,
            "<li><b class=\"run-label\">{}</b>: <code>{}</code>, {} on {}, {}",
            esc(label),
            esc(&r.dir.display().to_string()),
            esc(r.manifest["workload"]["name"].as_str().unwrap_or("?")),
            esc(r
                .summary
                .as_ref()
                .and_then(|s| s["driver"].as_str())
                .unwrap_or("?")),
            esc(r.manifest["started_at"].as_str().unwrap_or("?"))
        );
        if !difference.is_empty() && difference != label {
            let _ = write!(
                list,
                " <span class=\"legend-note\">({})</span>",
                esc(difference)
            );
        }
        list.push_str("</li>");
    }
    list.push_str("</ol>");
    list
}

/// Headline numbers, a column per run, with ratios to the first.
fn headline_table(runs: &[RunFolder], labels: &[String]) -> String {
    let mut body = String::from("<h2>Headline numbers</h2><div class=\"scroll\"><table class=\"sortable\" id=\"headline\"><thead><tr><th class=\"text\">number</th>");
    for label in labels {
        let _ = write!(body, "<th>{}</th>", esc(label));
    }
    body.push_str("</tr></thead><tbody>");
    for (path, label, unit) in HEADLINE {
        let values: Vec<Option<f64>> = runs
            .iter()
            .map(|r| {
                r.summary
                    .as_ref()
                    .and_then(|s| number_at(s, path).filter(|_| measured(s, path)))
            })
            .collect();
        if values.iter().all(Option::is_none) {
            continue;
        }
        let _ = write!(
            body,
            "<tr data-key=\"{path}\"><td class=\"text\">{}</td>",
            esc(label)
        );
        for (i, v) in values.iter().enumerate() {
            match v {
                Some(v) => {
                    let ratio = match (i, values[0]) {
                        (0, _) => String::new(),
                        (_, Some(base)) if base != 0.0 => format!(" ({:.2}×)", v / base),
                        _ => String::new(),
                    };
                    let _ = write!(
                        body,
                        "<td data-value=\"{v}\">{}{}</td>",
                        esc(&show(*v, unit)),
                        ratio
                    );
                }
                None => body.push_str("<td>—</td>"),
            }
        }
        body.push_str("</tr>");
    }
    body.push_str("</tbody></table></div>");
    body
}

/// Publish and end-to-end latency by percentile, a line per run.
fn spectrum_charts(
    runs: &[RunFolder],
    labels: &[String],
    charts: &mut Vec<Json>,
    body: &mut String,
) {
    let sx = spectrum_xs();
    for (id, which, title) in [
        (
            "spectrum-publish",
            "publish",
            "Publish latency by percentile",
        ),
        (
            "spectrum-e2e",
            "end-to-end",
            "End-to-end latency by percentile",
        ),
    ] {
        let series: Vec<Json> = runs
            .iter()
            .zip(labels)
            .filter_map(|(r, label)| {
                let h = r
                    .window_histograms()
                    .into_iter()
                    .find(|(l, _)| *l == which)?
                    .1;
                (!h.is_empty())
                    .then(|| json!({"label": label, "values": json_series(&spectrum(&h, &sx))}))
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        charts.push(json!({"id": id, "x": "spectrum", "xLabel": "percentile", "xMax": 1e5, "xs": json_xs(&sx),
            "yLabel": "latency", "unitY": "ns", "logY": true, "series": series}));
        body.push_str(&chart_div(
            id,
            title,
            "whole measurement-window histograms, x on a 1/(1−p) scale",
        ));
    }
}

/// Time series overlaid on a shared axis: seconds since each run's start.
fn time_charts(runs: &[RunFolder], labels: &[String], charts: &mut Vec<Json>, body: &mut String) {
    let longest = runs.iter().map(|r| r.seconds().len()).max().unwrap_or(0);
    let xs: Vec<f64> = (0..longest).map(|i| i as f64).collect();
    for (id, column, title, y_label, unit, scale, how) in [
        (
            "acknowledged",
            "acknowledged",
            "Acknowledged per second",
            "messages per second",
            "count",
            1.0,
            Reduce::Mean,
        ),
        (
            "publish-p99",
            "publish_p99_us",
            "Publish p99 per second (log scale)",
            "latency",
            "ns",
            1e3,
            Reduce::Max,
        ),
        (
            "e2e-p99",
            "e2e_p99_us",
            "End-to-end p99 per second (log scale)",
            "latency",
            "ns",
            1e3,
            Reduce::Max,
        ),
    ] {
        let series: Vec<(&String, Vec<Option<f64>>)> = runs
            .iter()
            .zip(labels)
            .filter_map(|(r, label)| {
                let mut v = r.timeseries.as_ref()?.scaled(column, scale)?;
                v.resize(longest, None);
                v.iter().any(Option::is_some).then_some((label, v))
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        let (rx, rs) = reduce(&xs, series.iter().map(|(_, v)| (v.clone(), how)).collect());
        charts.push(json!({"id": id, "x": "time", "xLabel": "seconds since each run's start", "xs": json_xs(&rx),
            "yLabel": y_label, "unitY": unit, "logY": unit == "ns",
            "series": series.iter().zip(rs).map(|((l, _), v)| json!({"label": l, "values": json_series(&v)})).collect::<Vec<_>>()}));
        body.push_str(&chart_div(id, title, ""));
    }
}
