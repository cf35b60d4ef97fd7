//! The merged results folder: the first shard's manifest with this command, one row per
//! second over all shards, the window's histograms, omb-result.json and the shards' table.

use std::path::Path;

use anyhow::Context;
use brokerbench_model::{
    new_histogram, IntervalRow, Phase, RunObserver, Summary, WindowHistograms,
};
use brokerbench_report::{OmbHeader, OmbResult, ResultsFolder, Tee, OMB_RESULT_FILE};

use super::merge_read::ShardFolder;
use super::merge_table::{shard_table, ShardTable, SHARDS_FILE};

/// Writes the merged results folder `out`: the first shard's manifest with this command,
/// a row per second, the window's histograms, omb-result.json, the shards' table and the
/// summary. Returns the shards' table, for the terminal.
pub(super) fn write_merged_folder(
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
