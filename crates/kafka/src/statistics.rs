//! What a producer client sent again, read from librdkafka's statistics reports: the requests
//! its brokers retried or timed out, and the messages its partitions transmitted more than
//! once. A flat scan of the JSON: the report is large with many partitions (80 KB for 40
//! topics), and only these fields are wanted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use brokerbench_driver::Clock;

/// Requests sent again: the brokers' `txretries` (retried after an error) and `req_timeouts`
/// (timed out; their messages go out again on a new connection).
pub(crate) fn requests_sent_again(report: &[u8]) -> u64 {
    sum_of(report, b"\"txretries\":") + sum_of(report, b"\"req_timeouts\":")
}

/// Messages transmitted again: the sum over the report's partitions of what each transmitted
/// (`txmsgs`, counted each time a message goes into a request) beyond what was produced to it
/// (`msgs`). After an error answer for a partition (a new topic's partition with no leader
/// yet, say) or a request's timeout, librdkafka puts the messages back in the partition's
/// queue and builds them into a new request, counting no retried request for the first.
/// Messages still queued hide as many resent ones until they go out. In a partition's object
/// `txmsgs` comes first; the report's own total `txmsgs`, at its end, has no `msgs` after it.
pub(crate) fn messages_sent_again(report: &[u8]) -> u64 {
    const TRANSMITTED: &[u8] = b"\"txmsgs\":";
    const PRODUCED: &[u8] = b"\"msgs\":";
    let mut total = 0u64;
    // Each part after a `txmsgs` up to the next: one partition's (or the report's totals).
    let mut next_at = find(report, TRANSMITTED);
    while let Some(at) = next_at {
        let rest = &report[at + TRANSMITTED.len()..];
        let next = find(rest, TRANSMITTED);
        let part = &rest[..next.unwrap_or(rest.len())];
        if let Some(produced_at) = find(part, PRODUCED) {
            let produced = number_at(&part[produced_at + PRODUCED.len()..]);
            total = total.saturating_add(number_at(part).saturating_sub(produced));
        }
        next_at = next.map(|n| at + TRANSMITTED.len() + n);
    }
    total
}

/// A total read from report after report, and each increase with when it was seen. The
/// highest total so far is kept: queued messages that hid resent ones in one report do not
/// count them twice when they show in a later one.
#[derive(Default)]
pub(crate) struct Increases {
    highest: AtomicU64,
    seen: Mutex<Vec<(u64, u64)>>,
}

impl Increases {
    /// A report's total.
    pub(crate) fn report(&self, total: u64) {
        let before = self.highest.fetch_max(total, Ordering::Relaxed);
        if total > before {
            if let Ok(mut seen) = self.seen.lock() {
                seen.push((Clock::process().now_ns(), total - before));
            }
        }
    }

    /// Every increase: (ns since the UNIX epoch, how many).
    pub(crate) fn list(&self) -> Vec<(u64, u64)> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// The sum of the whole numbers that follow each `key` in `text`.
fn sum_of(text: &[u8], key: &[u8]) -> u64 {
    let mut total = 0u64;
    let mut rest = text;
    while let Some(at) = find(rest, key) {
        rest = &rest[at + key.len()..];
        total = total.saturating_add(number_at(rest));
    }
    total
}

/// Where `key` first occurs in `text`.
fn find(text: &[u8], key: &[u8]) -> Option<usize> {
    text.windows(key.len()).position(|w| w == key)
}

/// The whole number `text` starts with, after any spaces (0 if none).
fn number_at(text: &[u8]) -> u64 {
    let text = &text[text.iter().take_while(|b| **b == b' ').count()..];
    let digits = text.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&text[..digits])
        .ok()
        .and_then(|d| d.parse::<u64>().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retried_requests_are_the_sum_over_brokers() {
        let report = br#"{"name":"p","brokers":{"a:9092/1":{"txretries":3,"req_timeouts":1},"GroupCoordinator":{"txretries":0},"b:9092/2":{"txretries":4}},"topics":{}}"#;
        assert_eq!(requests_sent_again(report), 8);
        assert_eq!(requests_sent_again(b"{}"), 0);
    }

    #[test]
    fn only_increases_of_the_highest_total_are_kept() {
        let totals = Increases::default();
        for total in [0, 7, 7, 9, 8, 10] {
            totals.report(total);
        }
        let counts: Vec<u64> = totals.list().iter().map(|(_, n)| *n).collect();
        // 8 after 9 is queued messages hiding resent ones, not an increase from 8 to 10.
        assert_eq!(counts, [7, 2, 1]);
    }

    /// A topic's partitions as librdkafka 2.16 reported them (fields between `leader_epoch`
    /// and `txmsgs` left out), 200 ms after the last of 500 messages produced to a topic
    /// created just before: partition 0 transmitted 11 of them twice (its `next_err_seq`
    /// says an error answer came) with no request retried; the unassigned partition (-1),
    /// where messages wait for the topic's metadata, produced 1 and transmitted none. Then
    /// the report's own totals.
    const PARTITIONS_OF_A_NEW_TOPIC: &[u8] = br#"{ "brokers":{ "127.0.0.1:9092/1": { "txretries":0, "req_timeouts":0 } }, "topics":{ "st-0": { "topic":"st-0", "partitions":{ "0": { "partition":0, "broker":1, "leader":1, "leader_epoch":0, "txmsgs":511, "txbytes":51100, "rxmsgs":0, "rxbytes":0, "msgs": 500, "rx_ver_drops": 0, "msgs_inflight": 0, "next_ack_seq": 0, "next_err_seq": 10, "acked_msgid": 0} , "-1": { "partition":-1, "broker":-1, "leader":-1, "leader_epoch":-1, "txmsgs":0, "txbytes":0, "rxmsgs":0, "rxbytes":0, "msgs": 1, "rx_ver_drops": 0, "msgs_inflight": 0, "next_ack_seq": 0, "next_err_seq": 0, "acked_msgid": 0} } } } , "tx":2470, "tx_bytes":2504191, "rx":2470, "rx_bytes":191838, "txmsgs":20069, "txmsg_bytes":2006900, "rxmsgs":0, "rxmsg_bytes":0}"#;

    #[test]
    fn messages_a_partition_transmitted_again_are_counted_without_a_retried_request() {
        assert_eq!(messages_sent_again(PARTITIONS_OF_A_NEW_TOPIC), 11);
        assert_eq!(requests_sent_again(PARTITIONS_OF_A_NEW_TOPIC), 0);
        // Messages queued but not yet transmitted are not negative resends.
        let queued = br#"{"topics":{"t":{"partitions":{"0":{"txmsgs":90, "msgs": 100}}}}}"#;
        assert_eq!(messages_sent_again(queued), 0);
    }
}
