//! The folders of a run's shards, found (those given, or the newest run's below a folder
//! given) and read: shard.json, the manifest, the summary, the ledger, histograms and rows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use brokerbench_engine::shard::LedgerFile;
use brokerbench_model::{RunStatus, Summary};
use brokerbench_report::Manifest;
use hdrhistogram::Histogram;

use super::run_shard::{ShardFile, LEDGER_FILE, SHARD_FILE};
use crate::BadInput;

/// One shard's folder, read.
pub(super) struct ShardFolder {
    pub(super) dir: PathBuf,
    pub(super) shard: ShardFile,
    pub(super) manifest: Manifest,
    pub(super) summary: Summary,
    pub(super) ledger: LedgerFile,
    pub(super) window: Vec<(String, f64, Histogram<u64>)>,
    pub(super) publish: Vec<Histogram<u64>>,
    pub(super) e2e: Vec<Histogram<u64>>,
    pub(super) rows: Vec<BTreeMap<String, String>>,
}

pub(super) fn read_shard(dir: &Path) -> anyhow::Result<ShardFolder> {
    let file = |name: &str| dir.join(name);
    let shard_path = file(SHARD_FILE);
    if !shard_path.exists() {
        return Err(BadInput(format!(
            "{}: no {SHARD_FILE}, so not the folder of a shard; merge the folders that `brokerbench run --shard I/N` wrote",
            dir.display()
        ))
        .into());
    }
    let shard: ShardFile = serde_json::from_value(super::read_json(&shard_path)?)
        .with_context(|| format!("reading {}", shard_path.display()))?;
    let manifest: Manifest = serde_json::from_value(super::read_json(&file("manifest.json"))?)
        .with_context(|| format!("reading {}", file("manifest.json").display()))?;
    if manifest.status == RunStatus::Failed {
        return Err(BadInput(format!(
            "{}: shard {} of run '{}' failed ({}); there is nothing of it to merge",
            dir.display(),
            shard.shard,
            shard.run_id,
            manifest.error.as_deref().unwrap_or("no reason recorded")
        ))
        .into());
    }
    let summary: Summary = serde_json::from_value(super::read_json(&file("summary.json"))?)
        .with_context(|| format!("reading {}", file("summary.json").display()))?;
    let ledger: LedgerFile = serde_json::from_value(super::read_json(&file(LEDGER_FILE))?)
        .with_context(|| format!("reading {}", file(LEDGER_FILE).display()))?;
    let hlog = |name: &str| {
        brokerbench_report::html::read_hlog(&file(name))
            .ok_or_else(|| anyhow::anyhow!("{}: cannot read it", file(name).display()))
    };
    // A shard stopped before its window closed has no window histograms: none to add.
    let window = if !file("window.hlog").exists() && manifest.status == RunStatus::Interrupted {
        Vec::new()
    } else {
        hlog("window.hlog")?
    };
    let publish = hlog("publish.hlog")?
        .into_iter()
        .map(|(_, _, h)| h)
        .collect();
    let e2e = hlog("e2e.hlog")?.into_iter().map(|(_, _, h)| h).collect();
    let mut reader = csv::Reader::from_path(file("timeseries.csv"))
        .with_context(|| format!("reading {}", file("timeseries.csv").display()))?;
    let headers = reader.headers()?.clone();
    let rows = reader
        .records()
        .map(|r| {
            r.map(|r| {
                headers
                    .iter()
                    .zip(r.iter())
                    .map(|(h, v)| (h.to_string(), v.to_string()))
                    .collect()
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading {}", file("timeseries.csv").display()))?;
    Ok(ShardFolder {
        dir: dir.to_path_buf(),
        shard,
        manifest,
        summary,
        ledger,
        window,
        publish,
        e2e,
        rows,
    })
}

/// The shard folders under `dir` (it and two levels down) of the newest run there.
fn shard_folders_under(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut found: Vec<(PathBuf, ShardFile)> = Vec::new();
    let mut look = |d: &Path| {
        if let Ok(value) = super::read_json(&d.join(SHARD_FILE)) {
            if let Ok(shard) = serde_json::from_value::<ShardFile>(value) {
                found.push((d.to_path_buf(), shard));
            }
        }
    };
    let children = |d: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .map(|r| {
                r.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    for child in children(dir) {
        look(&child);
        for grandchild in children(&child) {
            look(&grandchild);
        }
    }
    let newest = found
        .iter()
        .max_by_key(|(_, s)| s.started_ns)
        .map(|(_, s)| s.run_id.clone());
    let Some(run_id) = newest else {
        return Err(BadInput(format!(
            "{}: no shard folders in it or below it (folders with {SHARD_FILE}, written by `brokerbench run --shard I/N`)",
            dir.display()
        ))
        .into());
    };
    let runs: std::collections::BTreeSet<&str> =
        found.iter().map(|(_, s)| s.run_id.as_str()).collect();
    if runs.len() > 1 {
        eprintln!(
            "{}: {} runs' shards; merging the newest, run '{run_id}'",
            dir.display(),
            runs.len()
        );
    }
    Ok(found
        .into_iter()
        .filter(|(_, s)| s.run_id == run_id)
        .map(|(d, _)| d)
        .collect())
}

/// The shard folders given, with those under each given folder that is no shard's.
pub(super) fn shard_folders(given: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    // A folder that is no shard's may hold them (a results volume).
    let mut folders = Vec::new();
    for dir in given {
        if dir.join(SHARD_FILE).exists() || !dir.is_dir() {
            folders.push(dir.clone());
        } else {
            folders.extend(shard_folders_under(dir)?);
        }
    }
    Ok(folders)
}
