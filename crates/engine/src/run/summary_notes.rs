//! The summary's notes on what the counts alone do not say: a backlog that fell short, the
//! producers' channels the broker closed, what was not sent, dropped or received, a rate
//! below its target, and what the ledger could not check.

use super::*;

/// Why a backlog the workload asked for did not do what it should have.
pub(super) fn backlog_notes(backlog: Option<&BacklogReport>) -> Vec<String> {
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

/// The first producer's note on acknowledgements, and the broker's own reasons for closing
/// producers' channels, each once, with how many.
pub(super) fn producer_notes(producers: &[ProducerResult]) -> Vec<String> {
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

/// What the messages acknowledged and not received were: unconsumed, or perhaps only late
/// when the drain was cut off.
pub(super) fn delivery_notes(
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
pub(super) fn sending_notes(
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

/// A rate that fell short of the target by more than 5%.
pub(super) fn below_target_note(
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
pub(super) fn checking_notes(
    integrity: &brokerbench_model::Integrity,
    shard: Option<Shard>,
) -> Vec<String> {
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
