//! The study's tables: `runs.csv` (one row per run) and `cells.csv` (one row per cell, with
//! statistics over its repetitions), each also as JSON with the same column names.
//!
//! runs.csv columns: `run` (1-based, in execution order), `cell` (1-based, grid order), one
//! column per axis named by its path, `repetition`, for a search `step`, `sustainable` and
//! `reason`, then `status` (complete | failed | interrupted), `results` (the run's folder,
//! relative to the study folder), `key` (the run's identity), `error`, and every headline
//! number of [`crate::metrics::HEADLINE`] named by its summary.json path (the first fault's
//! figures as `faults.0.unavailable_s`, `faults.0.recovered_after_s`,
//! `faults.0.during.publish_p99_ms` and `faults.0.during.lost`: empty for a run without
//! faults).
//!
//! cells.csv columns: `cell`, the axis columns, for a search `offered_rate`, `n` (complete
//! runs), then for each headline number `<name>.mean`, `.stdev`, `.min`, `.max`,
//! `.ci95_low`, `.ci95_high` (Student's t over the repetitions; empty for n = 1).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::metrics::HEADLINE;
use crate::plan::RunKey;
use crate::stats::Stats;

/// Statistics columns written per headline number in cells.csv, in order.
pub const STAT_COLUMNS: &[&str] = &["mean", "stdev", "min", "max", "ci95_low", "ci95_high"];

/// What a study knows about one of its runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub key: RunKey,
    /// Cell, 0-based in grid order.
    pub cell: usize,
    pub repetition: u32,
    /// Axis path and value of this run's cell, in axis order.
    pub values: Vec<(String, Json)>,
    /// Step of a search (1-based); None in a grid study.
    #[serde(default)]
    pub step: Option<u32>,
    /// For a search step: whether the offered rate was sustained, and if not, why.
    #[serde(default)]
    pub sustainable: Option<bool>,
    #[serde(default)]
    pub reason: Option<String>,
    /// complete | failed | interrupted
    pub status: String,
    /// The run's results folder, relative to the study folder.
    pub results: String,
    /// Exit code of the run, when it exited.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Why the run failed, when it did (already redacted by the run).
    #[serde(default)]
    pub error: Option<String>,
    /// Headline numbers in [`HEADLINE`] order (from the run's summary.json; not stored).
    #[serde(skip)]
    pub headline: Vec<Option<f64>>,
}

/// A table with named columns, written as CSV and as a JSON array of objects.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Json>>,
}

impl Table {
    /// Writes the table as CSV, atomically.
    pub fn write_csv(&self, path: &Path) -> io::Result<()> {
        let mut out = csv::Writer::from_writer(Vec::new());
        out.write_record(&self.columns)?;
        for row in &self.rows {
            out.write_record(row.iter().map(csv_text))?;
        }
        let bytes = out
            .into_inner()
            .map_err(|e| io::Error::other(e.to_string()))?;
        write_atomically(path, &bytes)
    }

    /// Writes the table as a JSON array of objects, atomically.
    pub fn write_json(&self, path: &Path) -> io::Result<()> {
        let rows: Vec<Json> = self
            .rows
            .iter()
            .map(|row| {
                Json::Object(
                    self.columns
                        .iter()
                        .cloned()
                        .zip(row.iter().cloned())
                        .collect(),
                )
            })
            .collect();
        let text = serde_json::to_string_pretty(&rows).map_err(io::Error::other)?;
        write_atomically(path, text.as_bytes())
    }
}

/// Writes a file through a temporary name and a rename, so a reader (or a crash) never sees
/// half of it.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

fn csv_text(value: &Json) -> String {
    match value {
        Json::Null => String::new(),
        Json::String(s) => s.clone(),
        Json::Number(n) => n.to_string(),
        Json::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

fn number(v: Option<f64>) -> Json {
    v.and_then(serde_json::Number::from_f64)
        .map(Json::Number)
        .unwrap_or(Json::Null)
}

/// The runs table.
pub fn runs_table(axis_names: &[String], search: bool, records: &[RunRecord]) -> Table {
    let mut columns: Vec<String> = vec!["run".into(), "cell".into()];
    columns.extend(axis_names.iter().cloned());
    columns.push("repetition".into());
    if search {
        columns.extend(["step", "sustainable", "reason"].map(String::from));
    }
    columns.extend(["status", "results", "key", "error"].map(String::from));
    columns.extend(HEADLINE.iter().map(|h| h.to_string()));
    let rows = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut row: Vec<Json> = vec![Json::from(i + 1), Json::from(r.cell + 1)];
            row.extend(axis_values(axis_names, r));
            row.push(Json::from(r.repetition));
            if search {
                row.push(r.step.map(Json::from).unwrap_or(Json::Null));
                row.push(r.sustainable.map(Json::from).unwrap_or(Json::Null));
                row.push(r.reason.clone().map(Json::from).unwrap_or(Json::Null));
            }
            row.push(Json::from(r.status.clone()));
            row.push(Json::from(r.results.clone()));
            row.push(Json::from(r.key.0.clone()));
            row.push(r.error.clone().map(Json::from).unwrap_or(Json::Null));
            row.extend((0..HEADLINE.len()).map(|m| number(r.headline.get(m).copied().flatten())));
            row
        })
        .collect();
    Table { columns, rows }
}

/// The axis values of a run, one per axis name (a zipped axis's values joined with `+`).
fn axis_values(axis_names: &[String], r: &RunRecord) -> Vec<Json> {
    axis_names
        .iter()
        .map(|name| {
            let parts: Vec<&Json> = name
                .split('+')
                .filter_map(|p| r.values.iter().find(|(k, _)| k == p).map(|(_, v)| v))
                .collect();
            match parts.as_slice() {
                [one] => (*one).clone(),
                many => Json::from(
                    many.iter()
                        .map(|v| csv_text(v))
                        .collect::<Vec<_>>()
                        .join("+"),
                ),
            }
        })
        .collect()
}

/// One cell's statistics.
#[derive(Debug, Clone)]
pub struct CellStats {
    pub cell: usize,
    /// The offered rate of a search step; None in a grid study.
    pub offered_rate: Option<f64>,
    /// Axis values (as in the runs table).
    pub values: Vec<Json>,
    /// Complete runs.
    pub n: usize,
    /// Per headline number, statistics over the runs that have it.
    pub stats: Vec<Option<Stats>>,
    /// Results folders of the runs, relative to the study folder.
    pub results: Vec<String>,
}

/// Groups the complete runs by cell (and, in a search, by offered rate), in grid order.
pub fn cell_stats(axis_names: &[String], search: bool, records: &[RunRecord]) -> Vec<CellStats> {
    let target = HEADLINE
        .iter()
        .position(|h| *h == "target_rate")
        .expect("target_rate is a headline number");
    let mut groups: BTreeMap<(usize, u64), Vec<&RunRecord>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.status == "complete") {
        let rate = if search {
            r.headline.get(target).copied().flatten().unwrap_or(0.0)
        } else {
            0.0
        };
        groups.entry((r.cell, rate.to_bits())).or_default().push(r);
    }
    let mut cells: Vec<CellStats> = groups
        .into_iter()
        .map(|((cell, rate_bits), runs)| CellStats {
            cell,
            offered_rate: search.then(|| f64::from_bits(rate_bits)),
            values: axis_values(axis_names, runs[0]),
            n: runs.len(),
            stats: (0..HEADLINE.len())
                .map(|m| {
                    let values: Vec<f64> = runs
                        .iter()
                        .filter_map(|r| r.headline.get(m).copied().flatten())
                        .collect();
                    Stats::of(&values)
                })
                .collect(),
            results: runs.iter().map(|r| r.results.clone()).collect(),
        })
        .collect();
    cells.sort_by(|a, b| {
        (a.cell, a.offered_rate.unwrap_or(0.0))
            .partial_cmp(&(b.cell, b.offered_rate.unwrap_or(0.0)))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    cells
}

/// The cells table.
pub fn cells_table(axis_names: &[String], search: bool, cells: &[CellStats]) -> Table {
    let mut columns: Vec<String> = vec!["cell".into()];
    columns.extend(axis_names.iter().cloned());
    if search {
        columns.push("offered_rate".into());
    }
    columns.push("n".into());
    for h in HEADLINE {
        for s in STAT_COLUMNS {
            columns.push(format!("{h}.{s}"));
        }
    }
    let rows = cells
        .iter()
        .map(|c| {
            let mut row = vec![Json::from(c.cell + 1)];
            row.extend(c.values.iter().cloned());
            if search {
                row.push(number(c.offered_rate));
            }
            row.push(Json::from(c.n));
            for s in &c.stats {
                match s {
                    Some(s) => row.extend([
                        number(Some(s.mean)),
                        number(s.stdev),
                        number(Some(s.min)),
                        number(Some(s.max)),
                        number(s.ci95_low),
                        number(s.ci95_high),
                    ]),
                    None => row.extend(std::iter::repeat_n(Json::Null, STAT_COLUMNS.len())),
                }
            }
            row
        })
        .collect();
    Table { columns, rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(cell: usize, rep: u32, rate: f64, status: &str) -> RunRecord {
        let mut headline = vec![None; HEADLINE.len()];
        headline[2] = Some(rate);
        RunRecord {
            key: RunKey(format!("k{cell}-{rep}")),
            cell,
            repetition: rep,
            values: vec![
                ("a".into(), Json::from(cell)),
                ("b".into(), Json::from("x,\"y\"")),
            ],
            step: None,
            sustainable: None,
            reason: None,
            status: status.into(),
            results: format!("runs/c{cell}-r{rep}"),
            exit_code: Some(0),
            error: None,
            headline,
        }
    }

    #[test]
    fn cells_group_complete_runs_and_csv_quotes_text() {
        let names = vec!["a".to_string(), "b".to_string()];
        let records = vec![
            record(0, 1, 10.0, "complete"),
            record(1, 1, 20.0, "complete"),
            record(0, 2, 14.0, "complete"),
            record(1, 2, 99.0, "failed"),
        ];
        let cells = cell_stats(&names, false, &records);
        assert_eq!(cells.len(), 2);
        assert_eq!(cells[0].n, 2);
        assert_eq!(cells[0].stats[2].as_ref().unwrap().mean, 12.0);
        assert_eq!(cells[1].n, 1);
        let dir = std::env::temp_dir().join(format!("bb-tables-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        runs_table(&names, false, &records)
            .write_csv(&dir.join("runs.csv"))
            .unwrap();
        let text = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
        assert!(text.contains("\"x,\"\"y\"\"\""), "{text}");
        let mut reader = csv::Reader::from_path(dir.join("runs.csv")).unwrap();
        assert_eq!(reader.records().count(), 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
