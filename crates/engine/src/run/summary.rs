//! The summary of a run, finished in one place: counts, rates, latency percentiles, the
//! ledger's verdict, client cost and notes.

use super::*;

/// What the summary must know about the driver.
pub(super) struct DriverPolicy {
    pub(super) name: &'static str,
    /// Why the broker may discard messages by design, if it may.
    pub(super) drops: Option<String>,
    /// Whether every producer had its messages confirmed.
    pub(super) confirms: bool,
    /// What the client library did on its own (retries, rebalances), when the driver says.
    pub(super) events: Option<brokerbench_driver::ClientEvents>,
}

pub(super) fn summarize(
    workload: &Workload,
    driver: &DriverPolicy,
    control: &RunControl,
    times: Times,
    collected: Collected,
    (producer_ids, shard): (&[u32], Option<Shard>),
) -> (Summary, WindowHistograms, LedgerFile) {
    // A shard's ledger, for the merge (a whole run reconciles its own and keeps none).
    let mut ledger = LedgerFile::default();
    if shard.is_some() {
        ledger.producers = collected
            .producers
            .iter()
            .zip(producer_ids)
            .map(|(p, &id)| LedgerFile::producer(id, &p.ledger))
            .collect();
        ledger.drop_policy = driver.drops.clone();
        ledger.drain_cut_off = collected.drain_cut_off;
    }
    let mut publish = brokerbench_model::new_histogram();
    let mut service_time = brokerbench_model::new_histogram();
    let mut schedule_lag = brokerbench_model::new_histogram();
    let mut end_to_end = brokerbench_model::new_histogram();
    let mut window = Counts::default();
    let mut total = Counts::default();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut notes = Vec::new();
    let backlog_report = collected.backlog.clone();
    if let Some(b) = &backlog_report {
        if b.resumed_s.is_none() {
            notes.push(format!(
                "the backlog never reached {} before the run ended; consumers were paused from {:.1} s on",
                brokerbench_model::units::format_bytes_given(b.size_bytes),
                b.paused_s
            ));
        } else if b.drained_s.is_none() {
            notes.push(format!(
                "the backlog was not drained to {} messages before the run ended",
                b.drained_at_messages
            ));
        }
    }
    let mut add_errors = |from: &HashMap<String, u64>| {
        for (kind, n) in from {
            *errors.entry(kind.clone()).or_default() += n;
        }
    };
    for p in &collected.producers {
        p.publish.add_to(&mut publish);
        p.service_time.add_to(&mut service_time);
        p.schedule_lag.add_to(&mut schedule_lag);
        window.add(&p.window);
        total.add(&p.total);
        add_errors(&p.errors);
    }
    if let Some(note) = collected.producers.iter().find_map(|p| p.ack_note.clone()) {
        notes.push(note);
    }
    // The broker's own reasons for closing producers' channels, each once, with how many.
    let mut closed: BTreeMap<&str, usize> = BTreeMap::new();
    for reason in collected
        .producers
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
    let mut subscriptions: BTreeMap<(u32, u32), SubscriptionLedger> = BTreeMap::new();
    let mut foreign = 0;
    let mut consumers: Vec<ConsumerShare> = collected
        .consumers
        .iter()
        .map(|c| ConsumerShare {
            topic: c.topic,
            subscription: c.subscription,
            member: c.member,
            received: c.total.received,
        })
        .collect();
    consumers.sort_by_key(|c| (c.topic, c.subscription, c.member));
    for c in collected.consumers {
        c.end_to_end.add_to(&mut end_to_end);
        window.add(&c.window);
        total.add(&c.total);
        add_errors(&c.errors);
        foreign += c.foreign;
        if shard.is_some() {
            ledger.consumers.push(LedgerFile::consumer(
                (c.topic, c.subscription, c.member),
                &c.ledger,
            ));
        }
        SubscriptionLedger::add_member(&mut subscriptions, (c.topic, c.subscription), c.ledger);
    }
    let ledgers: Vec<_> = collected
        .producers
        .iter()
        .map(|p| p.ledger.clone())
        .collect();
    let subscriptions: Vec<_> = subscriptions.into_values().collect();
    ledger.foreign = foreign;
    let mut integrity = reconcile(&ledgers, &subscriptions, foreign);
    if let Some(shard) = shard {
        // One shard's consumers receive other shards' messages: only the joined ledgers say
        // what was lost.
        integrity = brokerbench_model::Integrity {
            checked: false,
            unacknowledged: integrity.unacknowledged,
            foreign,
            ..Default::default()
        };
        notes.push(format!(
            "shard {shard}: lost, duplicated and out-of-order messages are counted across all shards by `brokerbench merge` (this shard's ledger is in ledger.json)"
        ));
    }
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
    if let (Some(recent), true) = (collected.drain_cut_off, integrity.lost > 0) {
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
    let not_sent_at_window_end: u64 = collected
        .producers
        .iter()
        .map(|p| p.unsent_at_window_end)
        .sum();
    if not_sent_at_window_end > 0 {
        notes.push(format!(
            "{not_sent_at_window_end} message(s) whose send was under way when the window closed (the client's buffer was full) were not sent: at max rate there is no schedule to be behind, so this is no error"
        ));
    }
    if let Some(reason) = &driver.drops {
        notes.extend(integrity.dropped_by_policy(reason));
    }
    if !driver.confirms {
        notes.push(
            "delivery was not confirmed (publisher confirms off): only sent messages are counted, publish latency is not measured, and the ledger expects every sent message".into(),
        );
    }
    let measurement_s = collected
        .measurement_end_ns
        .saturating_sub(times.warmup_end_ns) as f64
        / 1e9;
    let per_s = |n: u64| {
        if measurement_s > 0.0 {
            n as f64 / measurement_s
        } else {
            0.0
        }
    };
    let throughput = Throughput {
        acknowledged_per_s: per_s(window.acknowledged),
        sent_per_s: per_s(window.sent),
        received_per_s: per_s(window.received),
        acknowledged_mb_per_s: per_s(window.bytes_acknowledged) / 1e6,
        received_mb_per_s: per_s(window.bytes_received) / 1e6,
    };
    // Without confirms nothing is acknowledged: the cost is per message sent.
    let messages = if driver.confirms {
        window.acknowledged
    } else {
        window.sent
    };
    let client = match collected.cpu {
        Some((start, end)) => {
            let cpu = (end.user_s - start.user_s) + (end.system_s - start.system_s);
            ClientCost {
                cpu_user_s: end.user_s - start.user_s,
                cpu_system_s: end.system_s - start.system_s,
                cpu_s_per_million_messages: if messages > 0 {
                    cpu / (messages as f64 / 1e6)
                } else {
                    0.0
                },
                peak_rss_bytes: end.max_rss_bytes,
                allocations_per_message: None,
            }
        }
        None => ClientCost {
            peak_rss_bytes: rusage().max_rss_bytes,
            ..ClientCost::default()
        },
    };
    let lag_grew = workload.rate != Rate::Max && client_bound(&collected.lag_per_second);
    // Lag that grew while sends waited for room in the client's buffer of unacknowledged
    // messages is the acknowledgements' doing, not the generator's.
    let window_ns = (measurement_s * 1e9).max(1.0);
    let buffer_full_share = collected
        .producers
        .iter()
        .map(|p| p.buffer_full_ns as f64 / window_ns)
        .sum::<f64>()
        / collected.producers.len().max(1) as f64;
    let outages = merge_outages(&collected.producers, times.start_ns);
    let stalls = if driver.confirms && workload.rate != Rate::Max {
        find_stalls(&collected.seconds)
    } else {
        Vec::new()
    };
    let blocks = merge_blocks(&collected.producers, times.start_ns);
    let slowdowns = if driver.confirms && workload.rate != Rate::Max {
        find_slowdowns(&collected.seconds)
    } else {
        Vec::new()
    };
    // Lag that grew while the broker was gone, stalled or blocking is that's doing; its note
    // says so.
    let lag_grew = lag_grew && outages.is_empty() && stalls.is_empty() && blocks.is_empty();
    let broker_bound = lag_grew && buffer_full_share >= BROKER_BOUND_SHARE;
    let is_client_bound = lag_grew && !broker_bound;
    notes.extend(outage_notes(&outages));
    notes.extend(blocks.iter().take(OUTAGE_NOTES).map(|b| {
        let how_long = match b.end_s {
            Some(end) => format!("for {:.1} s", end - b.start_s),
            None => "to the end of the run".to_string(),
        };
        format!(
            "PUBLISHING BLOCKED by the broker at {:.1} s {how_long}: \"{}\" (a resource alarm, e.g. memory or disk; connection.blocked); sends waited meanwhile",
            b.start_s, b.reason
        )
    }));
    notes.extend(stalls.iter().take(OUTAGE_NOTES).map(|stall| {
        format!(
            "BROKER STALLED at {:.0} s: nothing acknowledged for {:.0} s while messages were due ({} sent meanwhile), with every connection up (a paused broker, a long GC or disk stall)",
            stall.start_s, stall.seconds, stall.sent
        )
    }));
    if let Some(note) = slowdown_note(&slowdowns) {
        notes.push(note);
    }
    if let Some(events) = &driver.events {
        notes.extend(client_event_notes(events, &times, &integrity));
    }
    if !outages.is_empty() && (integrity.duplicated > 0 || integrity.out_of_order > 0) {
        notes.push(format!(
            "{} duplicated and {} out of order in a run with an outage: deliveries a consumer had not yet acknowledged when its connection went are delivered again (at least once), after newer ones",
            integrity.duplicated, integrity.out_of_order
        ));
    }
    let (mode, target_rate) = match workload.rate {
        Rate::Max => {
            notes.push(format!(
                "max-rate mode: closed loop with at most {} messages in flight per producer; intended send time = actual send time, so latency here is not open-loop latency",
                workload.max_in_flight
            ));
            ("max-rate", None)
        }
        // A shard's target is its producers' share.
        Rate::PerSecond(rate) if shard.is_some() => (
            "open-loop",
            Some(rate * producer_ids.len() as f64 / workload.producer_count().max(1) as f64),
        ),
        Rate::PerSecond(rate) => ("open-loop", Some(rate)),
    };
    if broker_bound {
        notes.push(format!(
            "BROKER-BOUND: schedule lag kept growing because sends waited for room in the client's buffer of unacknowledged messages {:.0}% of the window: acknowledgements came more slowly than the target rate, so the broker (or the client library's connection to it), not the load generator, limited the send rate",
            buffer_full_share * 100.0
        ));
    }
    if is_client_bound {
        notes.push(
            "CLIENT-BOUND: schedule lag kept growing, so the load generator or the client's buffer, not the broker, limited the send rate; the offered load was below the target".into(),
        );
    }
    if let Some(target) = target_rate {
        let (achieved, what) = if driver.confirms {
            (throughput.acknowledged_per_s, "acknowledged")
        } else {
            (throughput.sent_per_s, "sent")
        };
        if measurement_s > 0.0 && achieved < 0.95 * target {
            notes.push(format!(
                "{what} {achieved:.0} msg/s, below the target of {target:.0} msg/s"
            ));
        }
    }
    if !integrity.checked && shard.is_none() {
        notes.push("no consumers: loss, duplicates and order were not checked".into());
    }
    if integrity.foreign > 0 {
        notes.push(format!(
            "{} messages read that this run did not send (older data in a reused topic) were ignored",
            integrity.foreign
        ));
    }
    let failed_fast = collected.failed_fast;
    let interrupted = control.stop.load(Ordering::Relaxed) && failed_fast.is_none();
    if interrupted {
        notes.push("interrupted: the run was stopped before its planned end".into());
    }
    if let Some((seconds, _)) = failed_fast {
        notes.insert(0, fail_fast_note(seconds, total.failed, &errors));
    }
    let summary = Summary {
        status: if failed_fast.is_some() {
            RunStatus::Failed
        } else if interrupted {
            RunStatus::Interrupted
        } else {
            RunStatus::Complete
        },
        workload: workload.name.clone(),
        driver: driver.name.to_string(),
        mode: mode.to_string(),
        target_rate,
        measurement_s,
        window,
        total,
        throughput,
        latency: Latencies {
            publish: LatencySummary::from_histogram(&publish),
            end_to_end: LatencySummary::from_histogram(&end_to_end),
            service_time: LatencySummary::from_histogram(&service_time),
            schedule_lag: LatencySummary::from_histogram(&schedule_lag),
        },
        integrity,
        consumers,
        errors,
        not_sent_at_window_end,
        client,
        resources: None,
        broker_metrics: None,
        client_bound: is_client_bound,
        broker_bound,
        notes,
        backlog: backlog_report,
        outages,
        stalls,
        blocks,
    };
    let histograms = WindowHistograms {
        publish,
        end_to_end,
        service_time,
        schedule_lag,
    };
    (summary, histograms, ledger)
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

/// One producer's span of something (an outage, a block): the producer, its start and end
/// (None: still open when the producer finished), and what it carries.
type Span<'a, T> = (usize, u64, Option<u64>, &'a T);

/// Producers' spans that overlap, merged: each as (start, end, producers, members), the end
/// the latest of its members' (None when one of them never ended).
fn merge_spans<T>(mut spans: Vec<Span<'_, T>>) -> Vec<(u64, Option<u64>, u32, Vec<&T>)> {
    spans.sort_by_key(|&(_, start, _, _)| start);
    let mut merged: Vec<(u64, u64, Vec<usize>, Vec<&T>)> = Vec::new();
    for (producer, start, end, member) in spans {
        let end = end.unwrap_or(u64::MAX);
        match merged.last_mut() {
            Some((_, last_end, who, members)) if start <= *last_end => {
                *last_end = (*last_end).max(end);
                if !who.contains(&producer) {
                    who.push(producer);
                }
                members.push(member);
            }
            _ => merged.push((start, end, vec![producer], vec![member])),
        }
    }
    merged
        .into_iter()
        .map(|(start, end, who, members)| {
            (
                start,
                (end != u64::MAX).then_some(end),
                who.len() as u32,
                members,
            )
        })
        .collect()
}

/// Seconds from `start_ns` to `ns`.
fn seconds_since(start_ns: u64, ns: u64) -> f64 {
    ns.saturating_sub(start_ns) as f64 / 1e9
}

/// The producers' outages as the run's: spans that overlap are one outage (a broker restart
/// seen by every producer), which lasts until the last of them was acknowledged again.
fn merge_outages(producers: &[ProducerResult], start_ns: u64) -> Vec<Outage> {
    let spans = producers
        .iter()
        .enumerate()
        .flat_map(|(i, p)| {
            p.outages
                .iter()
                .map(move |o| (i, o.start_ns, o.first_ack_ns, o))
        })
        .collect();
    merge_spans(spans)
        .into_iter()
        .map(|(start, end, producers, members)| Outage {
            start_s: seconds_since(start_ns, start),
            first_ack_s: end.map(|end| seconds_since(start_ns, end)),
            producers,
            failed: members.iter().map(|o| o.failed).sum(),
        })
        .collect()
}

/// Outages listed in the notes beyond which they are only counted.
const OUTAGE_NOTES: usize = 5;

/// One note per outage (the first few), with times in seconds into the run.
fn outage_notes(outages: &[Outage]) -> Vec<String> {
    let mut notes: Vec<String> = outages
        .iter()
        .take(OUTAGE_NOTES)
        .map(|o| {
            let who = match o.producers {
                1 => "1 producer".to_string(),
                n => format!("{n} producers"),
            };
            let failed = match o.failed {
                0 => "no message failed".to_string(),
                1 => "1 message failed".to_string(),
                n => format!("{n} messages failed"),
            };
            match o.duration_s() {
                Some(d) => format!(
                    "BROKER UNAVAILABLE at {:.1} s: {who} lost the broker and got the first acknowledgement again {d:.1} s later ({failed}); messages due meanwhile were sent late, and their latency includes the wait",
                    o.start_s
                ),
                None => format!(
                    "BROKER UNAVAILABLE at {:.1} s: {who} lost the broker and got no acknowledgement after it before the run ended ({failed})",
                    o.start_s
                ),
            }
        })
        .collect();
    if outages.len() > OUTAGE_NOTES {
        notes.push(format!(
            "{} more outages (summary.json lists every one)",
            outages.len() - OUTAGE_NOTES
        ));
    }
    notes
}

/// Why a run stopped early: every message of its first seconds failed. Names the error and
/// the setting to look at.
fn fail_fast_note(seconds: f64, failed: u64, errors: &BTreeMap<String, u64>) -> String {
    let mut kinds: Vec<(&String, &u64)> = errors.iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1));
    let named: Vec<String> = kinds
        .iter()
        .take(3)
        .map(|(kind, n)| format!("{kind} ({n})"))
        .collect();
    let fix = kinds
        .first()
        .map_or("the driver file's settings", |(kind, _)| setting_for(kind));
    format!(
        "STOPPED after {seconds:.0} s: nothing was acknowledged and {failed} messages failed ({}); a setting is wrong: check {fix}",
        named.join(", ")
    )
}

/// The setting most likely behind a failure kind that fails every message.
fn setting_for(kind: &str) -> &'static str {
    match kind {
        "invalid_required_acks" => "producer_config.acks (Kafka takes all, -1, 0 or 1)",
        "message_size_too_large" | "msg_size_too_large" | "record_list_too_large" => {
            "message_size against the broker's limit (Kafka: producer_config.message.max.bytes and the topic's max.message.bytes)"
        }
        "topic_authorization_failed" | "cluster_authorization_failed" => {
            "the credentials in producer_config (sasl.username, sasl.password)"
        }
        "unknown_topic_or_partition" | "unknown_topic_or_part" => {
            "the topic settings (topics, partitions_per_topic) and whether the broker creates topics"
        }
        "unroutable" => "the exchange and its bindings (exchange.type, queues_per_topic)",
        "no_responders" => "that the NATS server runs JetStream and the stream exists",
        "rejected" | "nacked" => "the queue's length limits (queue.max_length, queue.overflow)",
        "channel_closed" => "the broker's reason for closing the channel, in the notes",
        _ => "the driver file's settings that this error names",
    }
}

/// Shortest run of seconds without an acknowledgement that counts as a stall.
const STALL_SECONDS: usize = 2;

/// Runs of at least STALL_SECONDS whole seconds in which nothing was acknowledged and no
/// producer was disconnected, after the first acknowledgement of the run (a start that takes
/// a while to get going is not a stall).
fn find_stalls(seconds: &[SecondCounts]) -> Vec<Stall> {
    let Some(first) = seconds.iter().position(|s| s.acknowledged > 0) else {
        return Vec::new();
    };
    let mut stalls = Vec::new();
    let mut run: Vec<&SecondCounts> = Vec::new();
    let mut close = |run: &mut Vec<&SecondCounts>| {
        if run.len() >= STALL_SECONDS {
            stalls.push(Stall {
                start_s: run[0].second as f64,
                seconds: run.len() as f64,
                sent: run.iter().map(|s| s.sent).sum(),
            });
        }
        run.clear();
    };
    for s in &seconds[first..] {
        if s.acknowledged == 0 && s.disconnected == 0 && s.blocked == 0 {
            run.push(s);
        } else {
            close(&mut run);
        }
    }
    close(&mut run);
    stalls
}

/// A second's acknowledgements are slow when their p99 is this many times the run's typical
/// (median per-second) p50 ...
const SLOW_FACTOR: u64 = 10;
/// ... and at least this long (ns): below it, a spike is noise, not a slow broker.
const SLOW_AT_LEAST_NS: u64 = 50_000_000;
/// Sends kept their schedule in a second when its schedule lag p99 stayed under this (ns).
const ON_SCHEDULE_NS: u64 = 10_000_000;
/// Seconds after one with no acknowledgement, a lost connection or a block whose latency
/// is that event's, not slowness.
const RECOVERY_SECONDS: u64 = 2;

/// A span of seconds in which the broker acknowledged, late, while sends kept their schedule.
#[derive(Debug, Clone, PartialEq)]
struct Slowdown {
    start_s: u64,
    seconds: u64,
    /// The highest per-second publish p99 in the span, ns.
    publish_p99_ns: u64,
    /// The highest per-second schedule lag p99 in the span, ns.
    lag_p99_ns: u64,
    /// The run's median per-second publish p50, ns.
    typical_p50_ns: u64,
}

/// Spans of measured seconds whose acknowledgements came late (p99 at least SLOW_FACTOR × the
/// typical p50 and SLOW_AT_LEAST_NS) while the generator kept its schedule, the connections
/// were up and nothing was blocked — the broker was slow, not gone, stalled or the client's
/// bottleneck. A second with no acknowledgement at all is slow too when it is too short a
/// gap for a stall. The seconds right after a stall, an outage or a block carry that event's
/// latency and are left to its note.
fn find_slowdowns(seconds: &[SecondCounts]) -> Vec<Slowdown> {
    let mut medians: Vec<u64> = seconds
        .iter()
        .filter(|s| s.measuring && s.acknowledged > 0)
        .map(|s| s.publish_p50_ns)
        .collect();
    if medians.is_empty() {
        return Vec::new();
    }
    medians.sort_unstable();
    let typical = medians[medians.len() / 2];
    let threshold = typical.saturating_mul(SLOW_FACTOR).max(SLOW_AT_LEAST_NS);
    // Seconds that belong to a stall (STALL_SECONDS or more without an acknowledgement,
    // after the first one): the stall's note names them.
    let first_ack = seconds.iter().position(|s| s.acknowledged > 0);
    let mut in_stall = vec![false; seconds.len()];
    let mut i = first_ack.unwrap_or(seconds.len());
    while i < seconds.len() {
        let quiet = |s: &SecondCounts| s.acknowledged == 0 && s.disconnected == 0 && s.blocked == 0;
        let run = seconds[i..].iter().take_while(|s| quiet(s)).count();
        if run >= STALL_SECONDS {
            in_stall[i..i + run].iter_mut().for_each(|x| *x = true);
        }
        i += run.max(1);
    }
    let mut spans: Vec<Slowdown> = Vec::new();
    let mut last_event: Option<u64> = None;
    let mut previous_slow = false;
    for (index, s) in seconds.iter().enumerate() {
        if s.disconnected > 0 || s.blocked > 0 || in_stall[index] {
            last_event = Some(s.second);
            previous_slow = false;
            continue;
        }
        let recovering = last_event.is_some_and(|e| s.second <= e + RECOVERY_SECONDS);
        let acknowledged_late = if s.acknowledged == 0 {
            // A second without an acknowledgement, too short for a stall, while messages
            // were due: the broker was slower than the second.
            first_ack.is_some_and(|first| index > first) && s.sent > 0
        } else {
            s.publish_p99_ns >= threshold
        };
        let slow = s.measuring && !recovering && acknowledged_late && s.lag_p99_ns < ON_SCHEDULE_NS;
        if slow {
            match spans.last_mut() {
                Some(span) if previous_slow => {
                    span.seconds += 1;
                    span.publish_p99_ns = span.publish_p99_ns.max(s.publish_p99_ns);
                    span.lag_p99_ns = span.lag_p99_ns.max(s.lag_p99_ns);
                }
                _ => spans.push(Slowdown {
                    start_s: s.second,
                    seconds: 1,
                    publish_p99_ns: s.publish_p99_ns,
                    lag_p99_ns: s.lag_p99_ns,
                    typical_p50_ns: typical,
                }),
            }
        }
        previous_slow = slow;
    }
    spans
}

/// The whole seconds into the run of `times_ns`, each once, the first few named.
fn seconds_list(times_ns: impl Iterator<Item = u64>, start_ns: u64) -> String {
    let mut seconds: Vec<u64> = times_ns
        .map(|ns| ns.saturating_sub(start_ns) / 1_000_000_000)
        .collect();
    seconds.dedup();
    let shown = seconds
        .iter()
        .take(OUTAGE_NOTES)
        .map(|s| format!("{s} s"))
        .collect::<Vec<_>>()
        .join(", ");
    if seconds.len() > OUTAGE_NOTES {
        format!("{shown} and {} more", seconds.len() - OUTAGE_NOTES)
    } else {
        shown
    }
}

/// What the client did on its own that can reorder or repeat messages, beside the ledger's
/// counts: requests it retried, partitions its consumer group moved while the run sent (the
/// groups settle before it starts, and a consumer that closes after the measurement gives its
/// partitions up too), and, when messages came out of order with neither, that too.
fn client_event_notes(
    events: &brokerbench_driver::ClientEvents,
    times: &Times,
    integrity: &brokerbench_model::Integrity,
) -> Vec<String> {
    let mut notes = Vec::new();
    let retried: u64 = events.retries.iter().map(|(_, n)| n).sum();
    let rebalances: Vec<u64> = events
        .rebalances
        .iter()
        .copied()
        .filter(|&ns| ns >= times.start_ns && ns < times.measure_end_ns)
        .collect();
    let reordered = integrity.out_of_order > 0 || integrity.duplicated > 0;
    let explains = |what: &str| {
        if reordered {
            format!(
                "; {what}, so they can account for the {} out of order and {} duplicated",
                integrity.out_of_order, integrity.duplicated
            )
        } else {
            String::new()
        }
    };
    if retried > 0 {
        notes.push(format!(
            "CLIENT RETRIES: {retried} {} during the run, at {}{}",
            events.retried,
            seconds_list(events.retries.iter().map(|(ns, _)| *ns), times.start_ns),
            explains("a retried request can land after a newer one unless the producer is idempotent (Kafka: enable.idempotence=true)")
        ));
    }
    if !rebalances.is_empty() {
        notes.push(format!(
            "CONSUMER REBALANCES: partitions were taken from consumers {}, at {}{}",
            match rebalances.len() {
                1 => "once".to_string(),
                n => format!("{n} times"),
            },
            seconds_list(rebalances.iter().copied(), times.start_ns),
            explains("messages read and not yet committed when a partition moves are read again by its next owner, after newer ones")
        ));
    }
    if integrity.out_of_order > 0 && retried == 0 && rebalances.is_empty() {
        notes.push(format!(
            "{} out of order with no request retried by the client and no consumer rebalance seen",
            integrity.out_of_order
        ));
    }
    notes
}

/// Milliseconds with a precision that suits their size.
fn ms_text(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 1.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

/// One note for every slowdown of the run (the first OUTAGE_NOTES named).
fn slowdown_note(slowdowns: &[Slowdown]) -> Option<String> {
    let first = slowdowns.first()?;
    let spans = slowdowns
        .iter()
        .take(OUTAGE_NOTES)
        .map(|s| {
            format!(
                "at {} s for {} s (publish p99 up to {})",
                s.start_s,
                s.seconds,
                ms_text(s.publish_p99_ns)
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let more = slowdowns.len().saturating_sub(OUTAGE_NOTES);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let lag = slowdowns.iter().map(|s| s.lag_p99_ns).max().unwrap_or(0);
    Some(format!(
        "BROKER SLOW {spans}{more}: acknowledgements came late (the run's typical publish p50 is {}) while sends kept their schedule (schedule lag p99 at most {}) and every connection was up: the broker, not the load generator, was slow",
        ms_text(first.typical_p50_ns),
        ms_text(lag)
    ))
}

/// The producers' blocks as the run's: ones that overlap are one, with the first reason.
fn merge_blocks(producers: &[ProducerResult], start_ns: u64) -> Vec<Block> {
    let spans = producers
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.blocks.iter().map(move |b| (i, b.start_ns, b.end_ns, b)))
        .collect();
    merge_spans(spans)
        .into_iter()
        .map(|(start, end, producers, members)| Block {
            start_s: seconds_since(start_ns, start),
            end_s: end.map(|end| seconds_since(start_ns, end)),
            reason: members[0].reason.clone(),
            producers,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn times() -> Times {
        Times {
            start_ns: 100 * S,
            warmup_end_ns: 101 * S,
            measure_end_ns: 111 * S,
        }
    }

    fn integrity(out_of_order: u64, duplicated: u64) -> brokerbench_model::Integrity {
        brokerbench_model::Integrity {
            checked: true,
            out_of_order,
            duplicated,
            ..Default::default()
        }
    }

    #[test]
    fn client_events_are_named_with_their_seconds_and_what_they_can_explain() {
        let events = brokerbench_driver::ClientEvents {
            retries: vec![(105 * S, 3), (105 * S + 500, 2), (107 * S, 1)],
            retried: "requests sent again",
            // The first is the group settling before the run, the last a consumer closing after
            // the measurement: neither is a rebalance of the run.
            rebalances: vec![(99 * S), (103 * S), (112 * S)],
        };
        let notes = client_event_notes(&events, &times(), &integrity(4, 0));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0]
                .starts_with("CLIENT RETRIES: 6 requests sent again during the run, at 5 s, 7 s;")
                && notes[0].contains("account for the 4 out of order"),
            "{}",
            notes[0]
        );
        assert!(
            notes[1].starts_with(
                "CONSUMER REBALANCES: partitions were taken from consumers once, at 3 s;"
            ),
            "{}",
            notes[1]
        );
        // Nothing reordered: the events are still named, without the explanation.
        let calm = client_event_notes(&events, &times(), &integrity(0, 0));
        assert!(calm.iter().all(|n| !n.contains("account for")), "{calm:?}");
        // Reordered with neither: said so.
        let none = client_event_notes(&Default::default(), &times(), &integrity(2, 0));
        assert_eq!(
            none,
            ["2 out of order with no request retried by the client and no consumer rebalance seen"]
        );
        assert!(client_event_notes(&Default::default(), &times(), &integrity(0, 0)).is_empty());
    }
}
