//! `brokerbench merge`: the folders of a run's shards as one results folder. Histograms are
//! added (never percentiles averaged), counts summed, the delivery ledgers joined (a message
//! sent on one shard and received on another counts once), one row per second over all
//! shards, and a table of the shards to find an overloaded load generator.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use brokerbench_model::{RunStatus, WindowHistograms};

use super::merge_folder::write_merged_folder;
use super::merge_read::{read_shard, shard_folders, ShardFolder};
use super::merge_summary::merged_summary;
use crate::BadInput;

pub fn merge(
    given: &[PathBuf],
    out: Option<&Path>,
    exit_zero_on_errors: bool,
) -> anyhow::Result<ExitCode> {
    let folders = shard_folders(given)?;
    let folders = &folders[..];
    let mut shards = folders
        .iter()
        .map(|d| read_shard(d))
        .collect::<anyhow::Result<Vec<_>>>()?;
    shards.sort_by_key(|s| s.shard.shard);
    let run_id = checked_run_id(&shards)?;
    let out = out.map(Path::to_path_buf).unwrap_or_else(|| {
        folders[0]
            .parent()
            .unwrap_or(Path::new("."))
            .join(format!("{}-{run_id}-merged", shards[0].summary.workload))
    });

    // The window's histograms: added, tag by tag.
    let histograms = added_window_histograms(&shards)?;
    let summary = merged_summary(&shards, &histograms)?;

    let table = write_merged_folder(&out, &shards, &summary, &histograms)?;
    let report = brokerbench_report::html::write_folder_report(&out)
        .map_err(|e| eprintln!("warning: no report.html: {e}"))
        .ok();
    print!("{}", brokerbench_report::terminal_summary(&summary));
    print!("{}", table.text);
    println!("merged: {}", out.display());
    if let Some(report) = report {
        println!("report: {}", report.display());
    }
    Ok(ExitCode::from(match summary.status {
        RunStatus::Interrupted => crate::exit::INTERRUPTED,
        _ if summary.is_clean() || exit_zero_on_errors => crate::exit::CLEAN,
        _ => crate::exit::WITH_ERRORS,
    }))
}

/// The id of the run the shards (sorted by index) are of, once it is sure that they are
/// every shard of that one run, each once.
fn checked_run_id(shards: &[ShardFolder]) -> anyhow::Result<String> {
    let first = &shards[0];
    let (run_id, count) = (first.shard.run_id.clone(), first.shard.shards);
    for s in shards {
        if s.shard.run_id != run_id || s.shard.shards != count {
            return Err(BadInput(format!(
                "{} is shard {}/{} of run '{}', {} shard {}/{count} of run '{run_id}': merge the folders of one run",
                s.dir.display(),
                s.shard.shard,
                s.shard.shards,
                s.shard.run_id,
                first.dir.display(),
                first.shard.shard
            ))
            .into());
        }
    }
    for pair in shards.windows(2) {
        if pair[0].shard.shard == pair[1].shard.shard {
            return Err(BadInput(format!(
                "{} and {} are both shard {} of run '{run_id}'",
                pair[0].dir.display(),
                pair[1].dir.display(),
                pair[0].shard.shard
            ))
            .into());
        }
    }
    let missing: Vec<String> = (0..count)
        .filter(|i| !shards.iter().any(|s| s.shard.shard == *i))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(BadInput(format!(
            "run '{run_id}' had {count} shards; the folders of shard {} are missing (a merge without them would count their messages as lost)",
            missing.join(", ")
        ))
        .into());
    }
    Ok(run_id)
}

/// The shards' window histograms, added tag by tag.
fn added_window_histograms(shards: &[ShardFolder]) -> anyhow::Result<WindowHistograms> {
    let mut histograms = WindowHistograms::default();
    for s in shards {
        for (tag, _, h) in &s.window {
            let target = match tag.as_str() {
                "publish" => &mut histograms.publish,
                "end_to_end" => &mut histograms.end_to_end,
                "service_time" => &mut histograms.service_time,
                "schedule_lag" => &mut histograms.schedule_lag,
                _ => continue,
            };
            target
                .add(h)
                .map_err(|e| anyhow::anyhow!("adding {tag} of shard {}: {e:?}", s.shard.shard))?;
        }
    }
    Ok(histograms)
}
