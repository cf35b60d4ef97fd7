//! `brokerbench compare A B [C …]`: headline numbers of run folders or study cells side by
//! side, with ratios to the first and, where repetitions exist, Welch's t-test at 95% to tell
//! a difference from the noise.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use brokerbench_model::units::{format_nanos, format_rate};
use brokerbench_report::{check_given_labels, comparison_labels, RunToName, MANIFEST_FILE};
use brokerbench_study::metrics::{self, HEADLINE};
use brokerbench_study::stats::{welch_differs, Stats};
use serde_json::Value as Json;

use super::read_json;
use crate::BadInput;

/// One side of the comparison: what names it and the summaries of its runs.
struct Side {
    /// The input as given on the command line.
    input: String,
    /// Where it is and, for a study cell, the cell's values: for the list above the table.
    description: String,
    /// What the comparison's labels are made from.
    to_name: RunToName,
    summaries: Vec<Json>,
}

/// Numbers shown in the terminal table (JSON has every headline number).
const SHOWN: &[&str] = &[
    "throughput.acknowledged_per_s",
    "throughput.received_per_s",
    "throughput.acknowledged_mb_per_s",
    "latency.publish.p50_ns",
    "latency.publish.p99_ns",
    "latency.publish.p999_ns",
    "latency.publish.max_ns",
    "latency.end_to_end.p50_ns",
    "latency.end_to_end.p99_ns",
    "latency.end_to_end.max_ns",
    "integrity.lost",
    "total.failed",
    "client.cpu_s_per_million_messages",
    "client.peak_rss_bytes",
    "resources.broker.cpu_user_pct_mean",
    "resources.broker.cpu_system_pct_mean",
    "resources.broker.disk_written_mb",
];

pub fn compare(inputs: &[String], labels: &[String], json: bool) -> anyhow::Result<ExitCode> {
    check_given_labels(labels, inputs.len()).map_err(|e| BadInput(e.to_string()))?;
    let sides = inputs
        .iter()
        .map(|i| side(i))
        .collect::<anyhow::Result<Vec<Side>>>()?;
    let to_name: Vec<RunToName> = sides.iter().map(|s| s.to_name.clone()).collect();
    let labels = comparison_labels(&to_name, labels).map_err(|e| BadInput(e.to_string()))?;
    let stats: Vec<Vec<Option<Stats>>> = sides.iter().map(headline_stats).collect();
    if json {
        print_json(&sides, &labels, &stats)?;
    } else {
        print_table(&sides, &labels, &stats);
    }
    Ok(ExitCode::SUCCESS)
}

/// Mean, spread and count of every headline number over one side's runs.
fn headline_stats(side: &Side) -> Vec<Option<Stats>> {
    HEADLINE
        .iter()
        .map(|p| {
            let values: Vec<f64> = side
                .summaries
                .iter()
                .filter_map(|sum| metrics::value(sum, p))
                .collect();
            Stats::of(&values)
        })
        .collect()
}

fn print_json(
    sides: &[Side],
    labels: &[String],
    stats: &[Vec<Option<Stats>>],
) -> anyhow::Result<()> {
    let doc: Vec<Json> = HEADLINE
        .iter()
        .enumerate()
        .map(|(m, path)| {
            let base = stats[0][m].as_ref();
            serde_json::json!({
                "number": path,
                "sides": sides.iter().zip(labels).zip(stats).map(|((side, label), st)| {
                    let s = st[m].as_ref();
                    serde_json::json!({
                        "input": side.input,
                        "label": label,
                        "stats": s,
                        "ratio_to_first": ratio(base, s),
                        "beyond_noise": match (base, s) { (Some(a), Some(b)) => welch_differs(a, b), _ => None },
                    })
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "test": "Welch's t-test, two-sided, 95%; null when a side has fewer than 2 runs",
            "numbers": doc,
        }))?
    );
    Ok(())
}

/// Which input is which, then the table: a row per number, a column per input.
fn print_table(sides: &[Side], labels: &[String], stats: &[Vec<Option<Stats>>]) {
    for (i, (side, label)) in sides.iter().zip(labels).enumerate() {
        let runs = side.summaries.len();
        println!(
            "{}. {label}: {} ({runs} run{})",
            i + 1,
            side.description,
            if runs == 1 { "" } else { "s" }
        );
    }
    let mut rows: Vec<Vec<String>> = vec![std::iter::once("number".to_string())
        .chain(labels.iter().cloned())
        .collect()];
    for path in SHOWN {
        let m = HEADLINE
            .iter()
            .position(|h| h == path)
            .expect("shown numbers are headline numbers");
        if stats.iter().all(|s| s[m].is_none()) {
            continue;
        }
        let mut row = vec![label(path).to_string()];
        for (i, st) in stats.iter().enumerate() {
            row.push(match &st[m] {
                Some(s) => cell(path, s, (i > 0).then(|| stats[0][m].as_ref()).flatten()),
                None => "—".into(),
            });
        }
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    println!();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(t, w)| format!("{t:<w$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
    println!("\nmean ± 95% CI over repetitions; ratio to the first ({}); noise by Welch's t-test at 95% where both sides have ≥ 2 runs", labels[0]);
}

/// One number of one side: mean, CI and, against the first side (`base`), ratio and noise.
fn cell(path: &str, s: &Stats, base: Option<&Stats>) -> String {
    let mut text = show(path, s.mean);
    if let Some(h) = s.ci95_half() {
        text.push_str(&format!(" ± {}", show(path, h)));
    }
    if let Some(r) = ratio(base, Some(s)) {
        text.push_str(&format!(" ({r:.2}×"));
        match base.and_then(|a| welch_differs(a, s)) {
            Some(true) => text.push_str(", beyond noise"),
            Some(false) => text.push_str(", within noise"),
            None => {}
        }
        text.push(')');
    }
    text
}

fn ratio(base: Option<&Stats>, other: Option<&Stats>) -> Option<f64> {
    let (a, b) = (base?.mean, other?.mean);
    (a != 0.0).then(|| b / a)
}

fn label(path: &str) -> &str {
    match path {
        "throughput.acknowledged_per_s" => "acknowledged msg/s",
        "throughput.received_per_s" => "received msg/s",
        "throughput.acknowledged_mb_per_s" => "acknowledged MB/s",
        "latency.publish.p50_ns" => "publish p50",
        "latency.publish.p99_ns" => "publish p99",
        "latency.publish.p999_ns" => "publish p99.9",
        "latency.publish.max_ns" => "publish max",
        "latency.end_to_end.p50_ns" => "end-to-end p50",
        "latency.end_to_end.p99_ns" => "end-to-end p99",
        "latency.end_to_end.max_ns" => "end-to-end max",
        "integrity.lost" => "lost",
        "total.failed" => "failed",
        "client.cpu_s_per_million_messages" => "client CPU-s per M msgs",
        "client.peak_rss_bytes" => "client peak RSS MB",
        "resources.broker.cpu_user_pct_mean" => "broker CPU usr %",
        "resources.broker.cpu_system_pct_mean" => "broker CPU sys %",
        "resources.broker.disk_written_mb" => "broker disk written MB",
        other => other,
    }
}

fn show(path: &str, v: f64) -> String {
    if path.ends_with("_ns") {
        format_nanos(v.max(0.0) as u64)
    } else if path.ends_with("_per_s") {
        format_rate(v)
    } else if path == "client.peak_rss_bytes" {
        format!("{:.1}", v / 1e6)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Reads one input: a run folder, a study folder with one cell, or `STUDY_DIR#N`.
fn side(input: &str) -> anyhow::Result<Side> {
    let (dir, cell) = folder_and_cell(input)?;
    if cell.is_none() && dir.join(brokerbench_report::SUMMARY_FILE).exists() {
        let summary = read_json(&dir.join(brokerbench_report::SUMMARY_FILE))?;
        return Ok(Side {
            input: input.to_string(),
            description: dir.display().to_string(),
            to_name: RunToName::folder(&dir, read_json(&dir.join(MANIFEST_FILE)).ok()),
            summaries: vec![summary],
        });
    }
    if !dir.join("study.json").exists() {
        return Err(BadInput(format!(
            "{input}: neither a run folder (no {}) nor a study folder (no study.json)",
            brokerbench_report::SUMMARY_FILE
        ))
        .into());
    }
    study_cell_side(input, &dir, cell)
}

/// The folder an input names and, for `STUDY_DIR#N`, the cell number N.
fn folder_and_cell(input: &str) -> anyhow::Result<(PathBuf, Option<usize>)> {
    Ok(match input.rsplit_once('#') {
        Some((d, n)) => {
            let n: usize = n.parse().map_err(|_| {
                BadInput(format!(
                    "{input}: `#{n}` is not a cell number; write STUDY_DIR#N with N from the `cell` column of cells.csv"
                ))
            })?;
            (PathBuf::from(d), Some(n))
        }
        None => (PathBuf::from(input), None),
    })
}

/// One cell of the study in `dir` (the `cell`th, or its only one): the summaries of its
/// complete runs.
fn study_cell_side(input: &str, dir: &Path, cell: Option<usize>) -> anyhow::Result<Side> {
    let study = read_json(&dir.join("study.json"))?;
    let runs = study
        .get("runs")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    let complete: Vec<&Json> = runs
        .iter()
        .filter(|r| r.get("status").and_then(Json::as_str) == Some("complete"))
        .collect();
    let cell = chosen_cell(input, cell, &complete)?;
    let mut summaries = Vec::new();
    let mut manifest = None;
    let mut values = String::new();
    for r in complete
        .iter()
        .filter(|r| r.get("cell").and_then(Json::as_u64) == Some(cell))
    {
        if values.is_empty() {
            if let Some(v) = r.get("values").and_then(Json::as_array) {
                values = cell_values(v);
            }
        }
        let folder = dir.join(r.get("results").and_then(Json::as_str).unwrap_or_default());
        summaries.push(read_json(&folder.join(brokerbench_report::SUMMARY_FILE))?);
        if manifest.is_none() {
            manifest = read_json(&folder.join(MANIFEST_FILE)).ok();
        }
    }
    if summaries.is_empty() {
        return Err(BadInput(format!("{input}: cell {} has no complete run", cell + 1)).into());
    }
    let study_name = dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(Side {
        input: input.to_string(),
        to_name: RunToName {
            name: format!("{study_name}#{}", cell + 1),
            generated: true,
            manifest,
        },
        description: if values.is_empty() {
            format!("{} cell {}", dir.display(), cell + 1)
        } else {
            format!("{} cell {} ({values})", dir.display(), cell + 1)
        },
        summaries,
    })
}

/// The index of the cell to compare: the one named (counted from 1), or the only cell with
/// complete runs.
fn chosen_cell(input: &str, named: Option<usize>, complete: &[&Json]) -> anyhow::Result<u64> {
    let cells: std::collections::BTreeSet<u64> = complete
        .iter()
        .filter_map(|r| r.get("cell").and_then(Json::as_u64))
        .collect();
    match (named, cells.len()) {
        (Some(n), _) => Ok(n as u64 - 1),
        (None, 1) => Ok(*cells.iter().next().unwrap_or(&0)),
        (None, _) => Err(BadInput(format!(
            "{input}: the study has {} cells; name one as {input}#N (N from cells.csv: {})",
            cells.len(),
            cells
                .iter()
                .map(|c| (c + 1).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into()),
    }
}

/// A cell's axis values, as `path=value, …`.
fn cell_values(values: &[Json]) -> String {
    values
        .iter()
        .filter_map(|pair| {
            let p = pair.get(0)?.as_str()?;
            let v = pair.get(1)?;
            Some(format!(
                "{p}={}",
                v.as_str().map_or(v.to_string(), |s| s.to_string())
            ))
        })
        .collect::<Vec<_>>()
        .join(", ")
}
