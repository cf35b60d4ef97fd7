//! What a queue still holds for its consumers once the drain is over ([`Consumer::unread`]):
//! the queue's ready messages as a passive queue.declare tells them, plus the deliveries that
//! reached the consumer's channel after the drain and were never handed to the engine.
//!
//! Why in this order, on the consumer's own channel:
//! 1. basic.cancel first. Until its cancel-ok, the broker goes on moving messages from ready
//!    to this channel's unacknowledged ones, so a depth read before it would miss what is on
//!    its way. Frames on one channel arrive in order: once cancel-ok is read, every delivery
//!    the broker sent this consumer before it is in the channel's inbox.
//! 2. queue.declare passive: message_count is the queue's ready messages, which no consumer
//!    of this run has received. Messages a length limit discarded are not among them, so they
//!    stay missing and are told as dropped by the broker.
//! 3. The deliveries in the inbox once the declare-ok is read are added, not requeued: with
//!    manual acknowledgements they stay unacknowledged, so the broker still stores them (it
//!    returns them to the queue when the channel closes), yet message_count does not count
//!    them. With automatic acknowledgements the broker forgot them when it sent them: not
//!    counted (they are lost to the run).
//!
//! A quorum queue's message_count is its ready messages too, but a cancelled consumer's
//! checked-out messages are neither ready nor sent to it (measured with prefetch 5: 5 lost,
//! none arrived). So there the handed-over deliveries are acknowledged, the consuming channel
//! is closed (which returns the rest to the queue) and the depth is read on a new channel
//! until two reads agree; a return applied later still would be counted lost (never the
//! other way round).
//!
//! Members of one subscription that share a queue each say its depth plus their own
//! deliveries; the ledger takes the largest, which can only under-count (another member's
//! deliveries on their way are then counted lost): it never takes a real loss for a backlog.
//!
//! Stream queues are not told: their message_count is the whole retained log, not what lies
//! beyond a consumer's offset, and the client cannot tell how far its offset got from it.

use brokerbench_driver::Unread;

use crate::session::{Channel, ADMIN_TIMEOUT};
use crate::wire::{self, id, Reader};

/// What the summary says the unconsumed count rests on.
pub(crate) const EVIDENCE: &str = "RabbitMQ: the queue's ready messages (queue.declare passive) after the consumer was cancelled, plus the deliveries it then held unacknowledged and not yet taken";

/// The place a queue is named by: the same for every consumer of that queue.
pub(crate) fn place(queue: &str) -> String {
    format!("queue {queue}")
}

/// The ready messages of `queue` (queue.declare with the passive bit: nothing is created or
/// changed; a queue that is gone closes the channel with 404).
pub(crate) fn ready_messages(channel: &mut Channel, queue: &str) -> Result<u64, String> {
    let mut frame = Vec::new();
    wire::method(&mut frame, channel.number(), id::QUEUE_DECLARE, |out| {
        out.extend_from_slice(&0u16.to_be_bytes());
        wire::put_short_string(out, queue);
        // passive; not durable, exclusive or auto-delete; wait for the answer.
        out.push(0b1);
        wire::put_table(out, &[]);
    });
    let arguments = channel.call(frame, id::QUEUE_DECLARE_OK, ADMIN_TIMEOUT)?;
    declare_ok_message_count(&arguments)
        .map(u64::from)
        .ok_or_else(|| format!("a queue.declare-ok for '{queue}' without its message count"))
}

/// message_count of a queue.declare-ok's arguments (queue name, message count, consumer count).
fn declare_ok_message_count(arguments: &[u8]) -> Option<u32> {
    let mut r = Reader::new(arguments);
    r.skip_short_string()?;
    r.u32()
}

/// The one place a consumer of `queue` reads, holding `messages`.
pub(crate) fn of_queue(queue: &str, messages: u64) -> Vec<Unread> {
    vec![Unread {
        slot: 0,
        place: place(queue),
        messages,
        evidence: EVIDENCE,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_count_follows_the_queue_name_in_a_declare_ok() {
        let mut arguments = Vec::new();
        wire::put_short_string(&mut arguments, "brokerbench-q0");
        arguments.extend_from_slice(&1234u32.to_be_bytes());
        arguments.extend_from_slice(&1u32.to_be_bytes());
        assert_eq!(declare_ok_message_count(&arguments), Some(1234));
        assert_eq!(declare_ok_message_count(&arguments[..17]), None);
    }
}
