//! The summary of a run, finished in one place: counts, rates, latency percentiles, the
//! ledger's verdict, client cost and notes.

use super::*;
use brokerbench_model::faults::IntegrityBySecond;

pub(super) fn summarize(
    workload: &Workload,
    driver: &DriverPolicy,
    control: &RunControl,
    times: Times,
    mut collected: Collected,
    (producer_ids, shard): (&[u32], Option<Shard>),
) -> (Summary, WindowHistograms, LedgerFile, IntegrityBySecond) {
    // The consumers' results are tallied by value (their ledgers joined per subscription).
    let consumers = std::mem::take(&mut collected.consumers);
    let mut tallied = tally_tasks(
        workload,
        driver,
        &collected,
        consumers,
        (producer_ids, shard),
    );
    let measures = measure_window(
        workload,
        driver,
        times,
        &collected,
        &mut tallied,
        (producer_ids, shard),
    );
    let status = end_status(
        control,
        collected.failed_fast,
        &tallied.tally,
        driver,
        &mut tallied.notes,
    );
    let tally = tallied.tally;
    let histograms = tally.histograms;
    let summary = Summary {
        status,
        workload: workload.name.clone(),
        driver: driver.name.to_string(),
        mode: measures.mode.to_string(),
        target_rate: measures.target_rate,
        measurement_s: measures.measurement_s,
        window: tally.window,
        total: tally.total,
        throughput: measures.throughput,
        latency: Latencies::of(&histograms),
        integrity: tallied.integrity,
        consumers: tallied.shares,
        errors: tally.errors,
        not_sent_at_window_end: tallied.not_sent_at_window_end,
        client: measures.client,
        resources: None,
        broker_metrics: None,
        client_bound: measures.bound.client,
        broker_bound: measures.bound.broker,
        notes: tallied.notes,
        backlog: collected.backlog,
        slowdowns: measures.anomalies.slowdowns(),
        outages: measures.anomalies.outages,
        stalls: measures.anomalies.stalls,
        blocks: measures.anomalies.blocks,
        faults: Vec::new(),
    };
    (summary, histograms, tallied.ledger, tallied.by_second)
}

/// What the tasks' results add up to, and the ledger's verdict on them.
struct Tallied {
    tally: Tally,
    /// A shard's ledger, for the merge.
    ledger: LedgerFile,
    /// How many messages each consumer received.
    shares: Vec<ConsumerShare>,
    integrity: brokerbench_model::Integrity,
    /// The ledger's findings by the second each message was due.
    by_second: IntegrityBySecond,
    /// Messages whose send was under way at max rate when the window closed.
    not_sent_at_window_end: u64,
    /// The summary's notes so far, in their order.
    notes: Vec<String>,
}

/// Adds up every task's counts, errors and latencies, reconciles the producers' and the
/// consumers' ledgers, and notes what the backlog, the producers, the deliveries and the
/// sending call for.
fn tally_tasks(
    workload: &Workload,
    driver: &DriverPolicy,
    collected: &Collected,
    consumers: Vec<ConsumerResult>,
    (producer_ids, shard): (&[u32], Option<Shard>),
) -> Tallied {
    let producers = &collected.producers;
    let drain_cut_off = collected.drain_cut_off;
    let mut ledger = shard_ledger(shard, producers, producer_ids, driver, drain_cut_off);
    let mut notes = backlog_notes(collected.backlog.as_ref());
    let mut tally = Tally::default();
    tally.add_producers(producers);
    notes.extend(producer_notes(producers));
    let shares = consumer_shares(&consumers);
    let subscriptions = tally.add_consumers(consumers, shard.map(|_| &mut ledger));
    ledger.foreign = tally.foreign;
    let ledgers: Vec<_> = producers.iter().map(|p| &p.ledger).collect();
    let (mut integrity, mut by_second) =
        reconcile_by_second(&ledgers, &subscriptions, tally.foreign);
    if let Some(shard) = shard {
        integrity = shard_integrity(&integrity);
        by_second = IntegrityBySecond::default();
        notes.push(format!(
            "shard {shard}: lost, duplicated and out-of-order messages are counted across all shards by `brokerbench merge` (this shard's ledger is in ledger.json)"
        ));
    }
    // What the broker dropped by policy, or never promised, is named before what is missing.
    let not_sent_at_window_end: u64 = producers.iter().map(|p| p.unsent_at_window_end).sum();
    notes.extend(sending_notes(
        &mut integrity,
        driver,
        not_sent_at_window_end,
    ));
    notes.extend(delivery_notes(&integrity, drain_cut_off, workload));
    // What the broker dropped by policy is not lost in any second either.
    by_second.unlose_latest(by_second.lost().saturating_sub(integrity.lost));
    Tallied {
        tally,
        ledger,
        shares,
        integrity,
        by_second,
        not_sent_at_window_end,
        notes,
    }
}

/// What the measurement window showed beyond the counts.
struct WindowMeasures {
    mode: &'static str,
    target_rate: Option<f64>,
    measurement_s: f64,
    throughput: Throughput,
    client: ClientCost,
    anomalies: Anomalies,
    bound: Bound,
}

/// Measures the window: its length, throughput and the client's cost, what went wrong and
/// what limited the rate; adds their notes, and what the ledger could not check, to
/// `tallied`'s.
fn measure_window(
    workload: &Workload,
    driver: &DriverPolicy,
    times: Times,
    collected: &Collected,
    tallied: &mut Tallied,
    (producer_ids, shard): (&[u32], Option<Shard>),
) -> WindowMeasures {
    let producers = &collected.producers;
    let window = &tallied.tally.window;
    let measurement_s = collected
        .measurement_end_ns
        .saturating_sub(times.warmup_end_ns) as f64
        / 1e9;
    let throughput = Throughput::of(window, measurement_s);
    // Without confirms nothing is acknowledged: the cost is per message sent.
    let messages = if driver.confirms {
        window.acknowledged
    } else {
        window.sent
    };
    let client = client_cost(collected.cpu, messages);
    let scheduled = driver.confirms && workload.rate != Rate::Max;
    let anomalies = Anomalies::find(producers, &collected.seconds, times.start_ns, scheduled);
    let bound = Bound::of(
        workload,
        &collected.lag_per_second,
        producers,
        measurement_s,
        &anomalies,
    );
    let integrity = &tallied.integrity;
    let notes = &mut tallied.notes;
    notes.extend(anomalies.notes(driver.events.as_ref(), &times, integrity));
    let (mode, target_rate) = mode_and_target(workload, shard, producer_ids);
    if workload.rate == Rate::Max {
        notes.push(format!(
            "max-rate mode: closed loop with at most {} messages in flight per producer; intended send time = actual send time, so latency here is not open-loop latency",
            workload.max_in_flight
        ));
    }
    notes.extend(bound.notes());
    notes.extend(below_target_note(
        target_rate,
        &throughput,
        driver.confirms,
        measurement_s,
    ));
    notes.extend(checking_notes(integrity, shard));
    WindowMeasures {
        mode,
        target_rate,
        measurement_s,
        throughput,
        client,
        anomalies,
        bound,
    }
}

/// How the run ended (failed fast, interrupted or complete), with the note each calls for; a
/// failure's note comes first of all.
fn end_status(
    control: &RunControl,
    failed_fast: Option<(f64, u64)>,
    tally: &Tally,
    driver: &DriverPolicy,
    notes: &mut Vec<String>,
) -> RunStatus {
    let interrupted = control.stop.load(Ordering::Relaxed) && failed_fast.is_none();
    if interrupted {
        notes.push("interrupted: the run was stopped before its planned end".into());
    }
    if let Some((seconds, _)) = failed_fast {
        let failed = tally.total.failed;
        let note = fail_fast_note(seconds, failed, &tally.errors, driver.failure_settings);
        notes.insert(0, note);
    }
    if failed_fast.is_some() {
        RunStatus::Failed
    } else if interrupted {
        RunStatus::Interrupted
    } else {
        RunStatus::Complete
    }
}
