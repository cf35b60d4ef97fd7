//! The summary of a run, finished in one place: counts, rates, latency percentiles, the
//! ledger's verdict, client cost and notes.

use super::*;
use brokerbench_model::faults::IntegrityBySecond;

/// What the summary must know about the driver.
pub(super) struct DriverPolicy {
    pub(super) name: &'static str,
    /// Why the broker may discard messages by design, if it may.
    pub(super) drops: Option<String>,
    /// How many messages the broker counted as discarded by its limits, and which.
    pub(super) dropped: Option<(u64, String)>,
    /// Whether every producer had its messages confirmed.
    pub(super) confirms: bool,
    /// What the client library did on its own (retries, rebalances), when the driver says.
    pub(super) events: Option<brokerbench_driver::ClientEvents>,
    /// The settings to check per error kind (see `Driver::failure_settings`).
    pub(super) failure_settings: &'static [(&'static str, &'static str)],
}

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

/// A shard's ledger, for the merge (a whole run reconciles its own and keeps none); the
/// consumers' part is added as they are tallied.
fn shard_ledger(
    shard: Option<Shard>,
    producers: &[ProducerResult],
    producer_ids: &[u32],
    driver: &DriverPolicy,
    drain_cut_off: Option<u64>,
) -> LedgerFile {
    let mut ledger = LedgerFile::default();
    if shard.is_some() {
        ledger.producers = producers
            .iter()
            .zip(producer_ids)
            .map(|(p, &id)| LedgerFile::producer(id, &p.ledger))
            .collect();
        ledger.drop_policy = driver.drops.clone();
        ledger.drain_cut_off = drain_cut_off;
    }
    ledger
}

/// Why a backlog the workload asked for did not do what it should have.
fn backlog_notes(backlog: Option<&BacklogReport>) -> Vec<String> {
    let Some(b) = backlog else {
        return Vec::new();
    };
    if b.resumed_s.is_none() {
        vec![format!(
            "the backlog never reached {} before the run ended; consumers were paused from {:.1} s on",
            brokerbench_model::units::format_bytes_given(b.size_bytes),
            b.paused_s
        )]
    } else if b.drained_s.is_none() {
        vec![format!(
            "the backlog was not drained to {} messages before the run ended",
            b.drained_at_messages
        )]
    } else {
        Vec::new()
    }
}

/// Every task's counts, errors and latencies added up.
#[derive(Default)]
struct Tally {
    histograms: WindowHistograms,
    window: Counts,
    total: Counts,
    errors: BTreeMap<String, u64>,
    /// Messages read that this run did not send.
    foreign: u64,
}

impl Tally {
    fn add_errors(&mut self, from: &HashMap<String, u64>) {
        for (kind, n) in from {
            *self.errors.entry(kind.clone()).or_default() += n;
        }
    }

    fn add_producers(&mut self, producers: &[ProducerResult]) {
        for p in producers {
            p.publish.add_to(&mut self.histograms.publish);
            p.service_time.add_to(&mut self.histograms.service_time);
            p.schedule_lag.add_to(&mut self.histograms.schedule_lag);
            self.window.add(&p.window);
            self.total.add(&p.total);
            self.add_errors(&p.errors);
        }
    }

    /// Adds the consumers and joins their ledgers per subscription (a shard also keeps each
    /// in `ledger`, for the merge).
    fn add_consumers(
        &mut self,
        consumers: Vec<ConsumerResult>,
        mut ledger: Option<&mut LedgerFile>,
    ) -> Vec<SubscriptionLedger> {
        let mut subscriptions: BTreeMap<(u32, u32), SubscriptionLedger> = BTreeMap::new();
        for c in consumers {
            c.end_to_end.add_to(&mut self.histograms.end_to_end);
            self.window.add(&c.window);
            self.total.add(&c.total);
            self.add_errors(&c.errors);
            self.foreign += c.foreign;
            if let Some(ledger) = ledger.as_deref_mut() {
                let member = (c.topic, c.subscription, c.member);
                ledger
                    .consumers
                    .push(LedgerFile::consumer(member, &c.ledger));
            }
            SubscriptionLedger::add_member(&mut subscriptions, (c.topic, c.subscription), c.ledger);
        }
        subscriptions.into_values().collect()
    }
}

/// The first producer's note on acknowledgements, and the broker's own reasons for closing
/// producers' channels, each once, with how many.
fn producer_notes(producers: &[ProducerResult]) -> Vec<String> {
    let mut notes: Vec<String> = producers
        .iter()
        .find_map(|p| p.ack_note.clone())
        .into_iter()
        .collect();
    let mut closed: BTreeMap<&str, usize> = BTreeMap::new();
    for reason in producers
        .iter()
        .filter_map(|p| p.closed_by_broker.as_deref())
    {
        *closed.entry(reason).or_default() += 1;
    }
    for (reason, producers) in closed {
        notes.push(match producers {
            1 => format!("the broker closed a producer's channel: {reason}"),
            n => format!("the broker closed {n} producers' channels: {reason}"),
        });
    }
    notes
}

/// How many messages each consumer received, in (topic, subscription, member) order.
fn consumer_shares(consumers: &[ConsumerResult]) -> Vec<ConsumerShare> {
    let mut shares: Vec<ConsumerShare> = consumers
        .iter()
        .map(|c| ConsumerShare {
            topic: c.topic,
            subscription: c.subscription,
            member: c.member,
            received: c.total.received,
        })
        .collect();
    shares.sort_by_key(|c| (c.topic, c.subscription, c.member));
    shares
}

/// One shard's consumers receive other shards' messages: only the joined ledgers say what
/// was lost, so a shard counts no loss itself.
fn shard_integrity(integrity: &brokerbench_model::Integrity) -> brokerbench_model::Integrity {
    brokerbench_model::Integrity {
        checked: false,
        unacknowledged: integrity.unacknowledged,
        foreign: integrity.foreign,
        ..Default::default()
    }
}

/// What the messages acknowledged and not received were: unconsumed, or perhaps only late
/// when the drain was cut off.
fn delivery_notes(
    integrity: &brokerbench_model::Integrity,
    drain_cut_off: Option<u64>,
    workload: &Workload,
) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(evidence) = integrity
        .unconsumed_evidence
        .as_ref()
        .filter(|_| integrity.unconsumed > 0)
    {
        notes.push(format!(
            "{} acknowledged messages not received were still stored beyond the consumers' positions when the drain ended ({evidence}): not consumed yet, not lost; a longer drain_timeout or faster consumers would receive them",
            integrity.unconsumed
        ));
    }
    if let (Some(recent), true) = (drain_cut_off, integrity.lost > 0) {
        let drain = format!(
            "the drain ended at its timeout (drain_timeout: {:?})",
            workload.drain_timeout
        );
        notes.push(if recent > 0 {
            format!(
                "{drain} while consumers were still receiving ({recent} messages in its last seconds): some of the {} acknowledged messages not received may only have been late; a longer drain_timeout tells them apart",
                integrity.lost
            )
        } else {
            format!(
                "{drain}; consumers had received nothing in its last seconds, so the {} acknowledged messages not received had stopped arriving",
                integrity.lost
            )
        });
    }
    notes
}

/// Messages never sent at max rate, what the broker may drop by design, and a run without
/// confirms.
fn sending_notes(
    integrity: &mut brokerbench_model::Integrity,
    driver: &DriverPolicy,
    not_sent_at_window_end: u64,
) -> Vec<String> {
    let mut notes = Vec::new();
    if not_sent_at_window_end > 0 {
        notes.push(format!(
            "{not_sent_at_window_end} message(s) whose send was under way when the window closed (the client's buffer was full) were not sent: at max rate there is no schedule to be behind, so this is no error"
        ));
    }
    if let Some(reason) = &driver.drops {
        notes.extend(integrity.dropped_by_policy(reason));
    }
    if let Some((count, limits)) = &driver.dropped {
        notes.extend(integrity.dropped_up_to(*count, limits));
    }
    if !driver.confirms {
        notes.extend(integrity.at_most_once());
        notes.push(
            "delivery was not confirmed (the broker acknowledges nothing in this configuration): only sent messages are counted, publish latency is not measured, and the ledger expects every sent message".into(),
        );
    }
    notes
}

/// The client's CPU over the window, per million `messages`, and its peak memory.
fn client_cost(cpu: Option<(Rusage, Rusage)>, messages: u64) -> ClientCost {
    let Some((start, end)) = cpu else {
        return ClientCost {
            peak_rss_bytes: rusage().max_rss_bytes,
            ..ClientCost::default()
        };
    };
    let user = end.user_s - start.user_s;
    let system = end.system_s - start.system_s;
    ClientCost::of(user, system, end.max_rss_bytes, messages)
}

/// What limited the send rate when the schedule lag kept growing.
struct Bound {
    /// Sends waited for the client's buffer of unacknowledged messages: acknowledgements came
    /// too slowly.
    broker: bool,
    /// The load generator or the client's buffer itself.
    client: bool,
    /// The share of the window sends waited for room in the buffer, per producer.
    buffer_full_share: f64,
}

impl Bound {
    fn of(
        workload: &Workload,
        lag_per_second: &[u64],
        producers: &[ProducerResult],
        measurement_s: f64,
        anomalies: &Anomalies,
    ) -> Self {
        // Lag that grew while the broker was gone, stalled or blocking is that's doing; its
        // note says so.
        let lag_grew = workload.rate != Rate::Max
            && client_bound(lag_per_second)
            && !anomalies.broker_held_up();
        // Lag that grew while sends waited for room in the client's buffer of unacknowledged
        // messages is the acknowledgements' doing, not the generator's.
        let window_ns = (measurement_s * 1e9).max(1.0);
        let buffer_full_share = producers
            .iter()
            .map(|p| p.buffer_full_ns as f64 / window_ns)
            .sum::<f64>()
            / producers.len().max(1) as f64;
        let broker = lag_grew && buffer_full_share >= BROKER_BOUND_SHARE;
        Bound {
            broker,
            client: lag_grew && !broker,
            buffer_full_share,
        }
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.broker {
            notes.push(format!(
                "BROKER-BOUND: schedule lag kept growing because sends waited for room in the client's buffer of unacknowledged messages {:.0}% of the window: acknowledgements came more slowly than the target rate, so the broker (or the client library's connection to it), not the load generator, limited the send rate",
                self.buffer_full_share * 100.0
            ));
        }
        if self.client {
            notes.push(
                "CLIENT-BOUND: schedule lag kept growing, so the load generator or the client's buffer, not the broker, limited the send rate; the offered load was below the target".into(),
            );
        }
        notes
    }
}

/// The run's mode and its target rate (a shard's target is its producers' share).
fn mode_and_target(
    workload: &Workload,
    shard: Option<Shard>,
    producer_ids: &[u32],
) -> (&'static str, Option<f64>) {
    match workload.rate {
        Rate::Max => ("max-rate", None),
        Rate::PerSecond(rate) if shard.is_some() => (
            "open-loop",
            Some(rate * producer_ids.len() as f64 / workload.producer_count().max(1) as f64),
        ),
        Rate::PerSecond(rate) => ("open-loop", Some(rate)),
    }
}

/// A rate that fell short of the target by more than 5%.
fn below_target_note(
    target: Option<f64>,
    throughput: &Throughput,
    confirms: bool,
    measurement_s: f64,
) -> Option<String> {
    let target = target?;
    let (achieved, what) = if confirms {
        (throughput.acknowledged_per_s, "acknowledged")
    } else {
        (throughput.sent_per_s, "sent")
    };
    (measurement_s > 0.0 && achieved < 0.95 * target)
        .then(|| format!("{what} {achieved:.0} msg/s, below the target of {target:.0} msg/s"))
}

/// What the ledger could not check, and what it left out.
fn checking_notes(integrity: &brokerbench_model::Integrity, shard: Option<Shard>) -> Vec<String> {
    let mut notes = Vec::new();
    if !integrity.checked && shard.is_none() {
        notes.push("no consumers: loss, duplicates and order were not checked".into());
    }
    if integrity.foreign > 0 {
        notes.push(format!(
            "{} messages read that this run did not send (older data in a reused topic) were ignored",
            integrity.foreign
        ));
    }
    notes
}

/// What is measured outside the engine and belongs in the summary.
#[derive(Debug, Default)]
pub struct Measured {
    /// Heap allocations per message in the measurement window (`--count-allocations`).
    pub allocations_per_message: Option<f64>,
    /// CPU, memory, disk and network of the client, the broker and the host.
    pub resources: Option<brokerbench_model::resources::ResourceSummary>,
    /// The broker's own figures, and its count set against brokerbench's.
    pub broker_metrics: Option<brokerbench_model::BrokerMetricsSummary>,
    /// One shard of a run: the broker counts every shard's messages, this shard only its own.
    pub sharded: bool,
}

/// Completes `summary` with what was measured outside the engine and the notes it calls for;
/// after this the summary is final.
pub fn complete(summary: &mut Summary, measured: Measured) {
    if measured.allocations_per_message.is_some() {
        summary.client.allocations_per_message = measured.allocations_per_message;
    }
    if let Some(m) = measured
        .broker_metrics
        .as_ref()
        .filter(|m| m.counter_resets > 0)
    {
        summary.notes.push(format!(
            "the broker's message counter started again from 0 ({} time{}: a broker restart); it counted {} messages over the run with the restarts stitched, not compared with brokerbench's {}: what was written between its last reading and each restart is not in it",
            m.counter_resets,
            if m.counter_resets == 1 { "" } else { "s" },
            m.messages_in.unwrap_or(0),
            m.messages_counted_by_brokerbench
        ));
    }
    if let Some(m) = &measured.broker_metrics {
        if let (Some(apart), Some(broker_count)) = (m.disagreement_pct, m.messages_in) {
            if apart > 1.0 && measured.sharded {
                summary.notes.push(format!(
                    "the broker counted {broker_count} messages written, every shard's; this shard acknowledged {} (`brokerbench merge` sets the broker's count against all shards')",
                    m.messages_counted_by_brokerbench
                ));
            } else if apart > 1.0 {
                summary.notes.push(format!(
                    "the broker counted {broker_count} messages written and brokerbench {}: {apart:.1}% apart (other clients, or messages the broker wrote but did not acknowledge?)",
                    m.messages_counted_by_brokerbench
                ));
            }
        }
    }
    if let Some(r) = &measured.resources {
        summary.notes.extend(r.notes.iter().cloned());
    }
    if measured.resources.is_some() {
        summary.resources = measured.resources;
    }
    if measured.broker_metrics.is_some() {
        summary.broker_metrics = measured.broker_metrics;
    }
}
