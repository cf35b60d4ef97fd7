//! What a run leaves: its results folder (named, created with its manifest, written once the
//! run is over) and the summary printed on the terminal.

use std::path::PathBuf;

use anyhow::Context;
use brokerbench_model::redact::redact_assignment;
use brokerbench_model::WindowHistograms;
use brokerbench_report::{
    folder_name, terminal_summary, BrokerInfo, Manifest, OmbResult, ResultsFolder, OMB_RESULT_FILE,
};

use super::run_shard::ShardPlan;
use super::run_watchers::PhaseTimes;
use crate::cli::RunArgs;

/// `results/<time>-<workload>` (with the shard's place), free.
pub(super) fn default_folder(
    started_ns: u64,
    workload: &str,
    sharding: Option<&ShardPlan>,
) -> PathBuf {
    let mut name = folder_name(started_ns, workload);
    if let Some(s) = sharding {
        name.push_str(&format!("-shard-{}-of-{}", s.shard.index, s.shard.count));
    }
    free_folder(&PathBuf::from("results"), &name)
}

/// The results folder with its manifest: what runs, from which files, against which broker.
/// The broker as the manifest gives it: the version the connected driver reports where the
/// broker is not managed (no version otherwise), or where it says more than the managed
/// broker's (Redis: `7.0.15 (appendonly yes, appendfsync always)`).
pub(super) fn described(
    mut broker: BrokerInfo,
    driver: &dyn brokerbench_driver::Driver,
) -> BrokerInfo {
    let told = driver.broker_version();
    let adds = match (&broker.version, &told) {
        (None, Some(_)) => true,
        (Some(known), Some(told)) => told.len() > known.len() && told.starts_with(known.as_str()),
        _ => false,
    };
    if adds {
        broker.version = told;
    }
    broker
}

pub(super) fn create_folder(
    out: &std::path::Path,
    specs: &brokerbench_model::Specs,
    broker: BrokerInfo,
    run_id: &str,
    started_ns: u64,
) -> anyhow::Result<ResultsFolder> {
    let mut manifest = Manifest::new(env!("CARGO_PKG_VERSION"), run_id.to_string(), started_ns);
    manifest.command = std::env::args().map(|a| redact_assignment(&a)).collect();
    manifest.workload = serde_json::to_value(&specs.workload)?;
    manifest.driver = specs.driver.redacted();
    manifest.workload_source = specs.workload_source.clone();
    manifest.driver_source = specs.driver_source.clone();
    manifest.input_notes = specs.notes.clone();
    manifest.broker = Some(broker);
    ResultsFolder::create(out, manifest)
        .with_context(|| format!("creating the results folder '{}'", out.display()))
}

/// window.hlog: the whole window's histograms.
pub(super) fn write_window_histograms(
    folder: &mut ResultsFolder,
    outcome: &brokerbench_engine::RunOutcome,
    phases: &PhaseTimes,
) {
    let Some(window) = phases.window() else {
        return;
    };
    let length = window.end.saturating_sub(window.start);
    if let Err(e) = folder.write_window_histograms(&outcome.histograms, window.start, length) {
        eprintln!("warning: {e}");
    }
}

/// The summary on the terminal (or as JSON), and where the results and report are.
pub(super) fn print_outcome(
    args: &RunArgs,
    summary: &brokerbench_model::Summary,
    out: &std::path::Path,
    report: Option<PathBuf>,
) -> anyhow::Result<()> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(summary)?);
    } else {
        print!("{}", terminal_summary(summary));
        println!("results: {}", out.display());
        if let Some(report) = report {
            println!("report:  {}", report.display());
        }
    }
    Ok(())
}

/// Writes `value` as one line of JSON into the results folder.
pub(super) fn write_json(
    folder: &ResultsFolder,
    name: &str,
    value: &impl serde::Serialize,
) -> anyhow::Result<()> {
    let mut bytes = serde_json::to_vec(value)?;
    bytes.push(b'\n');
    folder.write_file(name, &bytes)?;
    Ok(())
}

/// Writes omb-result.json into the results folder, and to `copy` when given; a file that
/// cannot be written is a warning, never a failed run.
pub(super) fn write_omb_result(
    folder: &ResultsFolder,
    omb: &OmbResult,
    histograms: &WindowHistograms,
    copy: Option<&std::path::Path>,
) {
    let mut bytes = serde_json::to_vec_pretty(&omb.to_json(histograms)).unwrap_or_default();
    bytes.push(b'\n');
    if let Err(e) = folder.write_file(OMB_RESULT_FILE, &bytes) {
        eprintln!("warning: {e}");
    }
    if let Some(path) = copy {
        if let Err(e) = std::fs::write(path, &bytes) {
            eprintln!("warning: --omb-result {}: {e}", path.display());
        }
    }
}

/// Writes report.html into the results folder; a report that cannot be built is a warning,
/// never a failed run.
pub(super) fn write_report(out: &std::path::Path) -> Option<PathBuf> {
    brokerbench_report::html::write_folder_report(out)
        .map_err(|e| eprintln!("warning: no report.html: {e}"))
        .ok()
}

/// `parent/name`, or `parent/name-2`, `-3`, … when runs started in the same second.
fn free_folder(parent: &std::path::Path, name: &str) -> PathBuf {
    let taken = |p: &PathBuf| std::fs::read_dir(p).is_ok_and(|mut d| d.next().is_some());
    let first = parent.join(name);
    if !taken(&first) {
        return first;
    }
    (2..)
        .map(|n| parent.join(format!("{name}-{n}")))
        .find(|p| !taken(p))
        .expect("some suffix is free")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_default_folder_gets_the_next_free_suffix() {
        let parent = tempfile::tempdir().unwrap();
        let first = free_folder(parent.path(), "20261124-003122-quickstart");
        assert_eq!(first, parent.path().join("20261124-003122-quickstart"));
        // An empty folder of that name is still free; one with a file in it is taken.
        std::fs::create_dir_all(&first).unwrap();
        assert_eq!(
            free_folder(parent.path(), "20261124-003122-quickstart"),
            first
        );
        std::fs::write(first.join("manifest.json"), "{}").unwrap();
        let second = free_folder(parent.path(), "20261124-003122-quickstart");
        assert_eq!(second, parent.path().join("20261124-003122-quickstart-2"));
        std::fs::create_dir_all(&second).unwrap();
        std::fs::write(second.join("manifest.json"), "{}").unwrap();
        assert_eq!(
            free_folder(parent.path(), "20261124-003122-quickstart"),
            parent.path().join("20261124-003122-quickstart-3")
        );
    }
}
