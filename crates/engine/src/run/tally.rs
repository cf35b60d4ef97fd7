//! Adding up the tasks' results: every task's counts, errors and latencies, how many messages
//! each consumer received, and the ledger a shard keeps for the merge.

use super::*;

/// A shard's ledger, for the merge (a whole run reconciles its own and keeps none); the
/// consumers' part is added as they are tallied.
pub(super) fn shard_ledger(
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

/// Every task's counts, errors and latencies added up.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) histograms: WindowHistograms,
    pub(super) window: Counts,
    pub(super) total: Counts,
    pub(super) errors: BTreeMap<String, u64>,
    /// Messages read that this run did not send.
    pub(super) foreign: u64,
}

impl Tally {
    fn add_errors(&mut self, from: &HashMap<String, u64>) {
        for (kind, n) in from {
            *self.errors.entry(kind.clone()).or_default() += n;
        }
    }

    pub(super) fn add_producers(&mut self, producers: &[ProducerResult]) {
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
    pub(super) fn add_consumers(
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

/// How many messages each consumer received, in (topic, subscription, member) order.
pub(super) fn consumer_shares(consumers: &[ConsumerResult]) -> Vec<ConsumerShare> {
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
pub(super) fn shard_integrity(
    integrity: &brokerbench_model::Integrity,
) -> brokerbench_model::Integrity {
    brokerbench_model::Integrity {
        checked: false,
        unacknowledged: integrity.unacknowledged,
        foreign: integrity.foreign,
        ..Default::default()
    }
}
