//! `brokerbench merge`: the folders of a run's shards as one results folder. Histograms are
//! added (never percentiles averaged), counts summed, the delivery ledgers joined (a message
//! sent on one shard and received on another counts once), one row per second over all
//! shards, and a table of the shards to find an overloaded load generator.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use brokerbench_engine::ledger::reconcile;
use brokerbench_engine::shard::LedgerFile;
use brokerbench_model::{
    new_histogram, ClientCost, Counts, IntervalRow, Latencies, Phase, RunObserver, RunStatus,
    Summary, Throughput, WindowHistograms,
};
use brokerbench_report::{Manifest, OmbHeader, OmbResult, ResultsFolder, Tee, OMB_RESULT_FILE};
use hdrhistogram::Histogram;

use super::run_shard::{ShardFile, LEDGER_FILE, SHARD_FILE};
use crate::BadInput;

/// The per-shard table, beside summary.json.
pub const SHARDS_FILE: &str = "shards.csv";
/// Above this clock offset between shards, end-to-end latency across them is called into
/// question.
const OFFSET_WARNING_NS: i64 = 1_000_000;

/// One shard's folder, read.
struct ShardFolder {
    dir: PathBuf,
    shard: ShardFile,
    manifest: Manifest,
    summary: Summary,
    ledger: LedgerFile,
    window: Vec<(String, f64, Histogram<u64>)>,
    publish: Vec<Histogram<u64>>,
    e2e: Vec<Histogram<u64>>,
    rows: Vec<BTreeMap<String, String>>,
}

fn read_shard(dir: &Path) -> anyhow::Result<ShardFolder> {
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

/// The shard folders given, with those under each given folder that is no shard's.
fn shard_folders(given: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
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

/// Writes the merged results folder `out`: the first shard's manifest with this command,
/// a row per second, the window's histograms, omb-result.json, the shards' table and the
/// summary. Returns the shards' table, for the terminal.
fn write_merged_folder(
    out: &Path,
    shards: &[ShardFolder],
    summary: &Summary,
    histograms: &WindowHistograms,
) -> anyhow::Result<ShardTable> {
    let base = &shards[0];
    let mut manifest = base.manifest.clone();
    manifest.command = std::env::args()
        .map(|a| brokerbench_model::redact::redact_assignment(&a))
        .collect();
    let mut folder = ResultsFolder::create(out, manifest.clone())
        .with_context(|| format!("creating the merged folder '{}'", out.display()))?;
    let mut omb = omb_result(&base.manifest.workload, summary);
    {
        let mut tee = Tee::new(vec![&mut folder, &mut omb]);
        for row in merged_rows(shards) {
            tee.interval(&row);
        }
    }
    if let (Some(start), Some(end)) = (base.shard.window_start_ns, base.shard.window_end_ns) {
        folder.write_window_histograms(histograms, start, end.saturating_sub(start))?;
    }
    let mut bytes = serde_json::to_vec_pretty(&omb.to_json(histograms))?;
    bytes.push(b'\n');
    folder.write_file(OMB_RESULT_FILE, &bytes)?;
    let table = shard_table(shards);
    folder.write_file(SHARDS_FILE, table.csv.as_bytes())?;
    let ended = shards
        .iter()
        .filter_map(|s| s.manifest.ended_at_ns)
        .max()
        .unwrap_or(manifest.started_at_ns);
    folder
        .finish(summary, ended)
        .with_context(|| format!("writing '{}'", out.display()))?;
    Ok(table)
}

/// The whole run's omb-result.json as it starts: headed by the run's workload.
fn omb_result(workload: &serde_json::Value, summary: &Summary) -> OmbResult {
    let number = |field: &str| workload.get(field).and_then(|v| v.as_u64()).unwrap_or(0) as u32;
    OmbResult::new(OmbHeader {
        workload: summary.workload.clone(),
        driver: summary.driver.clone(),
        message_size: workload
            .get("message_size")
            .and_then(|v| v.as_u64())
            .unwrap_or(0),
        topics: number("topics"),
        partitions: number("partitions_per_topic"),
        producers_per_topic: number("producers_per_topic"),
        consumers_per_topic: number("consumers_per_topic"),
    })
}

/// The summary of the whole run from its shards'.
fn merged_summary(
    shards: &[ShardFolder],
    histograms: &WindowHistograms,
) -> anyhow::Result<Summary> {
    let base = &shards[0].summary;
    let summaries: Vec<&Summary> = shards.iter().map(|s| &s.summary).collect();
    let tally = Tally::of(&summaries);
    let measurement_s = summaries
        .iter()
        .map(|s| s.measurement_s)
        .fold(0.0, f64::max);
    let confirms = tally.window.acknowledged > 0 || tally.window.sent == 0;
    let messages = if confirms {
        tally.window.acknowledged
    } else {
        tally.window.sent
    };
    let ledgers: Vec<LedgerFile> = shards.iter().map(|s| s.ledger.clone()).collect();
    let (producers, subscriptions, foreign) =
        LedgerFile::join(&ledgers).map_err(|e| anyhow::anyhow!("{LEDGER_FILE}: {e}"))?;
    let mut integrity = reconcile(&producers, &subscriptions, foreign);
    let mut notes = merge_notes(shards, &mut integrity);
    notes.extend(shard_notes(shards));
    if base.resources.is_some() {
        notes.push(
            "resources are shard 0's view (the broker, its host, its own client); every shard's client CPU and memory: shards.csv".into(),
        );
    }
    let interrupted = shards.iter().any(|s| {
        s.summary.status == RunStatus::Interrupted || s.manifest.status == RunStatus::Interrupted
    });
    Ok(Summary {
        status: if interrupted {
            RunStatus::Interrupted
        } else {
            RunStatus::Complete
        },
        workload: base.workload.clone(),
        driver: base.driver.clone(),
        mode: base.mode.clone(),
        target_rate: summaries.iter().map(|s| s.target_rate).sum::<Option<f64>>(),
        measurement_s,
        throughput: Throughput::of(&tally.window, measurement_s),
        window: tally.window,
        total: tally.total,
        latency: Latencies::of(histograms),
        integrity,
        consumers: tally.consumers,
        errors: tally.errors,
        not_sent_at_window_end: summaries.iter().map(|s| s.not_sent_at_window_end).sum(),
        client: ClientCost::of(
            tally.cpu_user_s,
            tally.cpu_system_s,
            tally.peak_rss,
            messages,
        ),
        resources: base.resources.clone(),
        broker_metrics: merged_broker_metrics(&summaries),
        client_bound: summaries.iter().any(|s| s.client_bound),
        broker_bound: summaries.iter().any(|s| s.broker_bound),
        notes,
        backlog: None,
        outages: union_by_second(summaries.iter().map(|s| &s.outages), |o| o.start_s),
        stalls: union_by_second(summaries.iter().map(|s| &s.stalls), |t| t.start_s),
        slowdowns: union_by_second(summaries.iter().map(|s| &s.slowdowns), |t| t.start_s),
        blocks: union_by_second(summaries.iter().map(|s| &s.blocks), |b| b.start_s),
        faults: Vec::new(),
    })
}

/// The shards' counts, errors, consumers and client cost added up.
#[derive(Default)]
struct Tally {
    window: Counts,
    total: Counts,
    errors: BTreeMap<String, u64>,
    consumers: Vec<brokerbench_model::ConsumerShare>,
    cpu_user_s: f64,
    cpu_system_s: f64,
    /// The largest shard's.
    peak_rss: u64,
}

impl Tally {
    fn of(summaries: &[&Summary]) -> Self {
        let mut tally = Tally::default();
        for summary in summaries {
            tally.window.add(&summary.window);
            tally.total.add(&summary.total);
            for (kind, n) in &summary.errors {
                *tally.errors.entry(kind.clone()).or_default() += n;
            }
            tally.cpu_user_s += summary.client.cpu_user_s;
            tally.cpu_system_s += summary.client.cpu_system_s;
            tally.peak_rss = tally.peak_rss.max(summary.client.peak_rss_bytes);
            tally.consumers.extend(summary.consumers.iter().cloned());
        }
        tally
            .consumers
            .sort_by_key(|c| (c.topic, c.subscription, c.member));
        tally
    }
}

/// The shards' events, one broker event seen by several shards (starting in the same
/// second) counted once.
fn union_by_second<'a, T: Clone + 'a>(
    per_shard: impl Iterator<Item = &'a Vec<T>>,
    start_s: impl Fn(&T) -> f64,
) -> Vec<T> {
    let mut events: Vec<T> = Vec::new();
    for event in per_shard.flatten() {
        if !events
            .iter()
            .any(|e| same_second(start_s(e), start_s(event)))
        {
            events.push(event.clone());
        }
    }
    events
}

/// What the merge itself tells: where the summary comes from, drains cut off, drops by
/// policy, shards lost, clocks apart, shards interrupted before their window ended.
fn merge_notes(
    shards: &[ShardFolder],
    integrity: &mut brokerbench_model::Integrity,
) -> Vec<String> {
    let mut notes = vec![format!(
        "merged from {} shards of run '{}' by `brokerbench merge`: histograms added, counts summed, the delivery ledgers joined; per shard: {SHARDS_FILE}",
        shards.len(),
        shards[0].shard.run_id
    )];
    notes.extend(cut_off_note(shards, integrity.lost));
    if let Some(reason) = shards.iter().find_map(|s| s.ledger.drop_policy.clone()) {
        notes.extend(integrity.dropped_by_policy(&reason));
    }
    let lost_shards: Vec<String> = shards
        .iter()
        .flat_map(|s| s.shard.lost_shards.iter().map(u32::to_string))
        .collect();
    if !lost_shards.is_empty() {
        notes.push(format!(
            "shard 0 lost the connection to shard {} before it finished: the drain did not wait for its messages, and what its consumers did not receive counts as lost",
            lost_shards.join(", ")
        ));
    }
    notes.extend(clock_note(shards));
    for s in shards.iter().filter(|s| s.window.is_empty()) {
        notes.push(format!(
            "shard {} was interrupted before its measurement window ended: its latencies are not in the window's percentiles (its counts are)",
            s.shard.shard
        ));
    }
    notes
}

/// Drains that ended at their timeout, when messages are missing.
fn cut_off_note(shards: &[ShardFolder], lost: u64) -> Option<String> {
    let cut_off: Vec<(u32, u64)> = shards
        .iter()
        .filter_map(|s| s.ledger.drain_cut_off.map(|recent| (s.shard.shard, recent)))
        .collect();
    if lost == 0 || cut_off.is_empty() {
        return None;
    }
    let still = cut_off.iter().filter(|(_, recent)| *recent > 0).count();
    let which: Vec<String> = cut_off.iter().map(|(i, _)| i.to_string()).collect();
    Some(format!(
        "the drain of shard {} ended at its timeout{}: some of the {lost} acknowledged messages not received may only have been late; a longer drain_timeout tells them apart",
        which.join(", "),
        if still > 0 { " while its consumers were still receiving" } else { "" },
    ))
}

/// The shard whose clock is furthest from shard 0's, when that is far enough to matter.
fn clock_note(shards: &[ShardFolder]) -> Option<String> {
    let worst = shards
        .iter()
        .max_by_key(|s| s.shard.clock.offset_ns.unsigned_abs())?;
    let (shard, clock) = (worst.shard.shard, worst.shard.clock);
    (clock.offset_ns.abs() > OFFSET_WARNING_NS).then(|| format!(
        "CLOCKS APART: shard {shard}'s clock is {:.2} ms from shard 0's (± {:.2} ms): end-to-end latency of messages sent on one shard and received on another is off by up to that much",
        clock.offset_ns as f64 / 1e6,
        clock.round_trip_ns as f64 / 2e6
    ))
}

/// Each shard's own notes, said once with the shards that gave them.
fn shard_notes(shards: &[ShardFolder]) -> Vec<String> {
    let mut by_text: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for s in shards {
        for note in &s.summary.notes {
            let own = note.starts_with(&format!("shard {}/", s.shard.shard))
                || note.starts_with("the broker counted ");
            if !own {
                by_text.entry(note.clone()).or_default().push(s.shard.shard);
            }
        }
    }
    by_text
        .into_iter()
        .map(|(text, from)| {
            let from: Vec<String> = from.iter().map(u32::to_string).collect();
            let which = if from.len() > 1 { "shards" } else { "shard" };
            format!("{which} {}: {text}", from.join(", "))
        })
        .collect()
}

/// Shard 0's reading of the broker's metrics, its count set against every shard's.
fn merged_broker_metrics(
    summaries: &[&Summary],
) -> Option<brokerbench_model::BrokerMetricsSummary> {
    let mut m = summaries[0].broker_metrics.clone()?;
    let counted: u64 = summaries
        .iter()
        .filter_map(|s| s.broker_metrics.as_ref())
        .map(|b| b.messages_counted_by_brokerbench)
        .sum();
    m.messages_counted_by_brokerbench = counted;
    m.disagreement_pct = m
        .messages_in
        .filter(|_| counted > 0)
        .map(|n| (n as f64 - counted as f64).abs() / counted as f64 * 100.0);
    Some(m)
}

/// Whether two events of different shards (seconds since the common start) are one.
fn same_second(a: f64, b: f64) -> bool {
    (a - b).abs() < 1.0
}

/// One row per second over all shards: counts summed, latency histograms of the second
/// added; the schedule-lag column is the most of any shard.
fn merged_rows(shards: &[ShardFolder]) -> Vec<IntervalRow> {
    let seconds = shards.iter().map(|s| s.rows.len()).max().unwrap_or(0);
    let start = shards[0].shard.started_ns;
    (0..seconds)
        .map(|k| {
            let mut row = IntervalRow {
                second: k as u64,
                phase: Phase::Drain,
                start_ns: start + k as u64 * 1_000_000_000,
                sent: 0,
                acknowledged: 0,
                failed: 0,
                received: 0,
                bytes_acknowledged: 0,
                bytes_received: 0,
                backlog: None,
                acknowledged_rate_1m: 0.0,
                publish: new_histogram(),
                end_to_end: new_histogram(),
                schedule_lag: new_histogram(),
                schedule_lag_max_ns: 0,
                disconnected_producers: 0,
                blocked_producers: 0,
            };
            let mut phases = Vec::new();
            for s in shards {
                let Some(r) = s.rows.get(k) else { continue };
                let n = |c: &str| r.get(c).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
                let f = |c: &str| r.get(c).and_then(|v| v.parse::<f64>().ok());
                row.sent += n("sent");
                row.acknowledged += n("acknowledged");
                row.failed += n("failed");
                row.received += n("received");
                row.bytes_acknowledged += n("bytes_acknowledged");
                row.bytes_received += n("bytes_received");
                row.disconnected_producers += n("disconnected_producers");
                row.blocked_producers += n("blocked_producers");
                if let Some(b) = r.get("backlog").and_then(|v| v.parse::<i64>().ok()) {
                    *row.backlog.get_or_insert(0) += b;
                }
                // The one-minute rate is linear in the counts: the shards' rates add up.
                row.acknowledged_rate_1m += f("acknowledged_rate_1m").unwrap_or(0.0);
                let lag = (f("schedule_lag_max_us").unwrap_or(0.0) * 1e3) as u64;
                row.schedule_lag_max_ns = row.schedule_lag_max_ns.max(lag);
                if let Some(h) = s.publish.get(k) {
                    let _ = row.publish.add(h);
                }
                if let Some(h) = s.e2e.get(k) {
                    let _ = row.end_to_end.add(h);
                }
                phases.push(r.get("phase").cloned().unwrap_or_default());
            }
            // A second is measured when any shard measured it.
            row.phase = if phases.iter().any(|p| p == "measurement") {
                Phase::Measurement
            } else if phases.iter().any(|p| p == "warmup") {
                Phase::Warmup
            } else {
                Phase::Drain
            };
            row
        })
        .collect()
}

struct ShardTable {
    csv: String,
    text: String,
}

/// Rate, CPU, memory, schedule lag and clock of each shard.
fn shard_table(shards: &[ShardFolder]) -> ShardTable {
    let mut csv = String::from(
        "shard,host,producers,consumers,target_msg_s,acknowledged_msg_s,received_msg_s,cpu_user_s,cpu_system_s,cpu_s_per_million,peak_rss_bytes,schedule_lag_p99_ns,schedule_lag_max_ns,client_bound,clock_offset_ns,clock_round_trip_ns\n",
    );
    let mut text = String::from(
        "shards       producers consumers   target msg/s   ack. msg/s   recv. msg/s  CPU-s/M   RSS MiB  lag p99    lag max  clock offset\n",
    );
    for s in shards {
        let m = &s.summary;
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{:.1},{:.1},{:.3},{:.3},{},{},{},{},{},{},{}",
            s.shard.shard,
            s.shard.host,
            s.shard.producers.len(),
            s.shard.consumers.len(),
            m.target_rate.map_or(String::new(), |r| format!("{r:.1}")),
            m.throughput.acknowledged_per_s,
            m.throughput.received_per_s,
            m.client.cpu_user_s,
            m.client.cpu_system_s,
            m.client
                .cpu_s_per_million_messages
                .map_or(String::new(), |c| format!("{c:.3}")),
            m.client.peak_rss_bytes,
            m.latency.schedule_lag.p99_ns,
            m.latency.schedule_lag.max_ns,
            m.client_bound,
            s.shard.clock.offset_ns,
            s.shard.clock.round_trip_ns
        );
        let _ = writeln!(
            text,
            "  {:<10} {:>9} {:>9} {:>14} {:>12.0} {:>13.0} {:>8} {:>9.1} {:>8} {:>10}  {}{}",
            format!("{}/{}", s.shard.shard, s.shard.shards),
            s.shard.producers.len(),
            s.shard.consumers.len(),
            m.target_rate
                .map_or("max".to_string(), |r| format!("{r:.0}")),
            m.throughput.acknowledged_per_s,
            m.throughput.received_per_s,
            m.client
                .cpu_s_per_million_messages
                .map_or("-".to_string(), |c| format!("{c:.2}")),
            m.client.peak_rss_bytes as f64 / (1024.0 * 1024.0),
            brokerbench_model::units::format_nanos(m.latency.schedule_lag.p99_ns),
            brokerbench_model::units::format_nanos(m.latency.schedule_lag.max_ns),
            format_offset(s.shard.clock),
            if m.client_bound { "  CLIENT-BOUND" } else { "" }
        );
    }
    ShardTable { csv, text }
}

fn format_offset(clock: crate::shards::ClockEstimate) -> String {
    format!(
        "{:+.3} ms ± {:.3}",
        clock.offset_ns as f64 / 1e6,
        clock.round_trip_ns as f64 / 2e6
    )
}
