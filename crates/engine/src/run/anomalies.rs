//! What went wrong during a run, found in its per-second counts and the producers' spans, and
//! the notes that name it: outages, stalls, slowdowns, publishing blocks, what the client did
//! on its own, and a run that stopped early.

use super::*;
use brokerbench_model::STALL_SECONDS;

/// What went wrong during a run, as its summary lists it.
pub(super) struct Anomalies {
    pub(super) outages: Vec<Outage>,
    pub(super) stalls: Vec<Stall>,
    pub(super) blocks: Vec<Block>,
    slowdowns: Vec<Slowdown>,
}

impl Anomalies {
    /// Finds them in the producers' spans and the per-second counts; stalls and slowdowns
    /// only when `scheduled` (a target rate, and acknowledgements to say what was due).
    pub(super) fn find(
        producers: &[ProducerResult],
        seconds: &[SecondCounts],
        start_ns: u64,
        scheduled: bool,
    ) -> Self {
        Anomalies {
            outages: merge_outages(producers, start_ns),
            stalls: if scheduled {
                find_stalls(seconds)
            } else {
                Vec::new()
            },
            blocks: merge_blocks(producers, start_ns),
            slowdowns: if scheduled {
                find_slowdowns(seconds)
            } else {
                Vec::new()
            },
        }
    }

    /// The slowdowns as the summary lists them.
    pub(super) fn slowdowns(&self) -> Vec<brokerbench_model::Slowdown> {
        self.slowdowns
            .iter()
            .map(|s| brokerbench_model::Slowdown {
                start_s: s.start_s as f64,
                seconds: s.seconds as f64,
                publish_p99_ms: s.publish_p99_ns as f64 / 1e6,
            })
            .collect()
    }

    /// Whether the broker was gone, stalled or blocking publishers at some point.
    pub(super) fn broker_held_up(&self) -> bool {
        !(self.outages.is_empty() && self.stalls.is_empty() && self.blocks.is_empty())
    }

    /// Their notes, then what the client did on its own and what an outage explains.
    pub(super) fn notes(
        &self,
        events: Option<&brokerbench_driver::ClientEvents>,
        times: &Times,
        integrity: &brokerbench_model::Integrity,
    ) -> Vec<String> {
        let mut notes = outage_notes(&self.outages);
        notes.extend(self.blocks.iter().take(OUTAGE_NOTES).map(block_note));
        notes.extend(self.stalls.iter().take(OUTAGE_NOTES).map(stall_note));
        notes.extend(slowdown_note(&self.slowdowns));
        if let Some(events) = events {
            notes.extend(client_event_notes(events, times, integrity));
        }
        if !self.outages.is_empty() && (integrity.duplicated > 0 || integrity.out_of_order > 0) {
            notes.push(format!(
                "{} duplicated and {} out of order in a run with an outage: deliveries a consumer had not yet acknowledged when its connection went are delivered again (at least once), after newer ones",
                integrity.duplicated, integrity.out_of_order
            ));
        }
        notes
    }
}

fn block_note(b: &Block) -> String {
    let how_long = match b.end_s {
        Some(end) => format!("for {:.1} s", end - b.start_s),
        None => "to the end of the run".to_string(),
    };
    format!(
        "PUBLISHING BLOCKED by the broker at {:.1} s {how_long}: \"{}\" (a resource alarm, e.g. memory or disk; connection.blocked); sends waited meanwhile",
        b.start_s, b.reason
    )
}

fn stall_note(stall: &Stall) -> String {
    format!(
        "BROKER STALLED at {:.0} s: nothing acknowledged for {:.0} s while messages were due ({} sent meanwhile), with every connection up (a paused broker, a long GC or disk stall)",
        stall.start_s, stall.seconds, stall.sent
    )
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
pub(super) fn fail_fast_note(
    seconds: f64,
    failed: u64,
    errors: &BTreeMap<String, u64>,
    settings: &[(&str, &'static str)],
) -> String {
    let mut kinds: Vec<(&String, &u64)> = errors.iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1));
    let named: Vec<String> = kinds
        .iter()
        .take(3)
        .map(|(kind, n)| format!("{kind} ({n})"))
        .collect();
    let fix = kinds
        .first()
        .map_or("the driver file's settings", |(kind, _)| {
            settings.iter().find(|(k, _)| k == kind).map_or(
                "the driver file's settings that this error names",
                |(_, s)| s,
            )
        });
    format!(
        "STOPPED after {seconds:.0} s: nothing was acknowledged and {failed} messages failed ({}); a setting is wrong: check {fix}",
        named.join(", ")
    )
}

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
/// counts: requests it retried and messages it transmitted again, partitions its consumer
/// group moved while the run sent (the groups settle before it starts, and a consumer that
/// closes after the measurement gives its partitions up too), and, when messages came out of
/// order with neither, that too.
fn client_event_notes(
    events: &brokerbench_driver::ClientEvents,
    times: &Times,
    integrity: &brokerbench_model::Integrity,
) -> Vec<String> {
    let mut notes = Vec::new();
    let count = |list: &[(u64, u64)]| list.iter().map(|(_, n)| n).sum::<u64>();
    let sent_again = [
        (count(&events.retries), events.retried),
        (count(&events.resends), events.resent),
    ];
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
    let nothing_sent_again = sent_again.iter().all(|(n, _)| *n == 0);
    if !nothing_sent_again {
        let what: Vec<String> = sent_again
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        let mut seen: Vec<u64> = events
            .retries
            .iter()
            .chain(&events.resends)
            .map(|(ns, _)| *ns)
            .collect();
        seen.sort_unstable();
        notes.push(format!(
            "CLIENT RETRIES: {} during the run, at {}{}",
            what.join(" and "),
            seconds_list(seen.into_iter(), times.start_ns),
            explains("what is sent again can land after something newer unless the producer is idempotent (Kafka: enable.idempotence=true)")
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
    if integrity.out_of_order > 0 && nothing_sent_again && rebalances.is_empty() {
        notes.push(format!(
            "{} out of order with nothing sent again by the client and no consumer rebalance seen",
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
            resends: vec![(106 * S, 40)],
            resent: "messages transmitted again",
            // The first is the group settling before the run, the last a consumer closing after
            // the measurement: neither is a rebalance of the run.
            rebalances: vec![(99 * S), (103 * S), (112 * S)],
        };
        let notes = client_event_notes(&events, &times(), &integrity(4, 0));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0]
                .starts_with("CLIENT RETRIES: 6 requests sent again and 40 messages transmitted again during the run, at 5 s, 6 s, 7 s;")
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
            ["2 out of order with nothing sent again by the client and no consumer rebalance seen"]
        );
        // Messages transmitted again with no request retried: named, and no longer "nothing".
        let resent_only = brokerbench_driver::ClientEvents {
            resends: vec![(101 * S, 10)],
            resent: "messages transmitted again",
            ..Default::default()
        };
        let notes = client_event_notes(&resent_only, &times(), &integrity(10, 0));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with(
                "CLIENT RETRIES: 10 messages transmitted again during the run, at 1 s;"
            ),
            "{}",
            notes[0]
        );
        assert!(client_event_notes(&Default::default(), &times(), &integrity(0, 0)).is_empty());
    }
}
