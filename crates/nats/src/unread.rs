//! What a durable pull consumer still holds beyond its position when the drain ends, read from
//! the server's `$JS.API.CONSUMER.INFO` answer: the messages a subscription did not receive
//! that were not consumed yet rather than lost.

use std::time::Duration;

/// The longest a consumer's count of what it left unread may take: more than a pull request's
/// life, which ack policy none waits out.
pub(crate) const UNREAD_WITHIN: Duration = Duration::from_secs(5);

/// What is held beyond the durable consumer's position, by place: `place` (the durable
/// consumer, named alike by every member of the subscription, so counted once) and, with ack
/// policy none, `client` (this member's own: summed over members).
///
/// `num_pending` is what the stream stores beyond the consumer's delivered sequence; messages
/// a limit discarded (discard old) are no longer stored, so they are not counted and stay
/// dropped by the broker.
///
/// With explicit acks, `num_ack_pending` is added: messages delivered and not acknowledged,
/// which the server delivers again after ack_wait. That includes what reached any member's
/// client and was never handed to the engine (prefetched, or arriving after the drain: never
/// acked), so `in_client` is not added again. It may also include acks of messages handed on
/// that the server has not processed yet: at most the acks in flight, and they only matter
/// when a subscription misses messages that were really lost.
///
/// With ack policy none the server forgets a delivery once sent, so what reached this client
/// without being handed on (`in_client`, counted once its pull requests were answered) is
/// held by no one else: neither received nor lost by the broker.
pub(crate) fn held(
    info: &serde_json::Value,
    explicit_acks: bool,
    in_client: u64,
    (place, client): (&str, &str),
) -> Option<Vec<(String, u64)>> {
    let pending = info.get("num_pending")?.as_u64()?;
    if explicit_acks {
        let unacknowledged = info.get("num_ack_pending")?.as_u64()?;
        Some(vec![(place.to_string(), pending + unacknowledged)])
    } else {
        Some(vec![
            (place.to_string(), pending),
            (format!("{place} in client {client}"), in_client),
        ])
    }
}

/// What `held` read, for the summary.
pub(crate) fn evidence(explicit_acks: bool) -> &'static str {
    if explicit_acks {
        "NATS JetStream: the durable consumer's num_pending (stored beyond its delivered sequence) + num_ack_pending (delivered, not acknowledged)"
    } else {
        "NATS JetStream: the durable consumer's num_pending (stored beyond its delivered sequence) + what reached the client after the drain (ack policy none: the server forgets deliveries)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_acks_count_the_unacknowledged_and_ack_none_what_reached_the_client() {
        let info = serde_json::json!({"num_pending": 70, "num_ack_pending": 5});
        let places = ("s/d", "c");
        assert_eq!(held(&info, true, 3, places), Some(vec![("s/d".into(), 75)]));
        assert_eq!(
            held(&info, false, 3, places),
            Some(vec![("s/d".into(), 70), ("s/d in client c".into(), 3)])
        );
        let error = serde_json::json!({"error": {}});
        assert_eq!(held(&error, true, 0, places), None);
        assert!(evidence(true).contains("num_ack_pending"));
        assert!(!evidence(false).contains("num_ack_pending"));
    }
}
