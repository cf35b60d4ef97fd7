//! What a subscription still holds when the drain ends: each partition's `msgBacklog` for the
//! subscription, from the admin API's topic statistics — the entries it stores that no member
//! acknowledged, those delivered and not yet acknowledged included (the broker delivers them
//! again); messages, when the run does not batch (the consumer asks only then). Every member of
//! a subscription names its partitions alike, so each is counted once.

use brokerbench_driver::Unread;

use crate::admin::Admin;

const EVIDENCE: &str = "Apache Pulsar: the subscription's msgBacklog in each partition's statistics from the admin API, what it stores that no consumer acknowledged";

/// The backlog of `subscription` in each of `topics` (full names); None for a non-persistent
/// topic (it stores nothing) or when the admin API does not answer.
pub fn unread(admin: &Admin, topics: &[String], subscription: &str) -> Option<Vec<Unread>> {
    topics
        .iter()
        .map(|topic| {
            let path = topic.strip_prefix("persistent://")?;
            let stats = admin.topic_stats(&format!("persistent/{path}")).ok()?;
            let messages = stats["subscriptions"][subscription]["msgBacklog"].as_u64()?;
            Some(Unread {
                slot: 0,
                place: format!("{topic}/{subscription}"),
                messages,
                evidence: EVIDENCE,
            })
        })
        .collect()
}
