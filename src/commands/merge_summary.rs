//! The summary of a whole run from its shards': counts summed, the delivery ledgers joined,
//! events of the broker counted once, and the notes that say how the merge was made.

use std::collections::BTreeMap;

use brokerbench_engine::ledger::reconcile;
use brokerbench_engine::shard::LedgerFile;
use brokerbench_model::{
    ClientCost, Counts, Latencies, RunStatus, Summary, Throughput, WindowHistograms,
};

use super::merge_read::ShardFolder;
use super::merge_table::SHARDS_FILE;
use super::run_shard::LEDGER_FILE;

/// Above this clock offset between shards, end-to-end latency across them is called into
/// question.
const OFFSET_WARNING_NS: i64 = 1_000_000;

/// The summary of the whole run from its shards'.
pub(super) fn merged_summary(
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
