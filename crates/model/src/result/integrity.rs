//! The delivery ledger's verdict on a run: lost, duplicated, out-of-order and unacknowledged
//! messages, and those that were dropped by the broker, unconsumed or never promised instead.

use serde::{Deserialize, Serialize};

/// What the delivery ledger found over the whole run (warm-up, measurement and drain).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Integrity {
    /// Whether consumers ran, so that loss could be checked at all.
    pub checked: bool,
    /// Acknowledged, and never received by a subscription that should have received it.
    pub lost: u64,
    /// Received more than once by one subscription.
    pub duplicated: u64,
    /// Received with a lower sequence number than an earlier message of the same producer on
    /// the same partition or queue.
    pub out_of_order: u64,
    /// Received although the send was reported failed or never acknowledged.
    pub received_unacknowledged: u64,
    /// Sent but neither acknowledged nor failed when the drain ended.
    pub unacknowledged: u64,
    /// Messages read that were not sent by this run (older data in a reused topic); ignored.
    pub foreign: u64,
    /// Acknowledged and never received where the broker discards messages by policy (e.g. a
    /// queue length limit with drop-head): counted here instead of as lost.
    #[serde(default)]
    pub dropped_by_broker: u64,
    /// Acknowledged, not received, and still stored beyond the consumers' positions when the
    /// drain ended (the broker said so): a backlog the consumers had not reached, not a loss.
    #[serde(default)]
    pub unconsumed: u64,
    /// Sent at most once (the broker acknowledges nothing in this configuration: no
    /// publisher confirms, QoS 0) and never received: no promise was broken, so not lost.
    #[serde(default)]
    pub undelivered: u64,
    /// What the broker said that tells unconsumed messages from lost ones (e.g. "Kafka high
    /// watermarks less the consumer group's positions"); None when no family could tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconsumed_evidence: Option<String>,
}

impl Integrity {
    pub fn is_clean(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.out_of_order == 0 && self.unacknowledged == 0
    }

    /// Nothing was acknowledged (at-most-once publishing): what was sent and never received
    /// was undelivered, not lost, and does not fail the run. Returns the note that says so,
    /// when any was.
    pub fn at_most_once(&mut self) -> Option<String> {
        let undelivered = self.take_lost(u64::MAX);
        self.undelivered = undelivered;
        (undelivered > 0).then(|| {
            format!(
                "{undelivered} messages sent and never received are undelivered, not lost: sent at most once, with no acknowledgement, so no promise of delivery was broken (publisher confirms, QoS 1 or acks make one, and then count what is missing as lost)"
            )
        })
    }

    /// The broker counted `count` messages it discarded by its `limits`: up to that many of
    /// those acknowledged and never received were dropped by it, not lost. Returns the note
    /// that says so, when any was.
    pub fn dropped_up_to(&mut self, count: u64, limits: &str) -> Option<String> {
        let dropped = self.take_lost(count);
        self.dropped_by_broker += dropped;
        (dropped > 0).then(|| {
            format!(
                "{dropped} messages acknowledged and never received were dropped by the broker past its limits ({limits}: it counted {count} over the run), not lost by brokerbench"
            )
        })
    }

    /// The broker discards messages by policy (`reason`): what was acknowledged and never
    /// received was dropped by it, not lost. Returns the note that says so, when any was.
    pub fn dropped_by_policy(&mut self, reason: &str) -> Option<String> {
        let dropped = self.take_lost(u64::MAX);
        self.dropped_by_broker = dropped;
        (dropped > 0).then(|| {
            format!(
                "{dropped} messages acknowledged and never received were dropped by the broker by policy ({reason}), not lost by brokerbench"
            )
        })
    }

    /// Takes up to `at_most` of the lost messages out of `lost` (to name them otherwise);
    /// how many it took.
    fn take_lost(&mut self, at_most: u64) -> u64 {
        let taken = self.lost.min(at_most);
        self.lost -= taken;
        taken
    }
}
