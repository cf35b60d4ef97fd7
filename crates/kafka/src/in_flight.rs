//! What a producer task remembers of each message in flight, so that librdkafka's broker
//! thread need not read the message to acknowledge it: the opaque given to librdkafka carries
//! the producer id (for routing) and the sequence number, and the task finds the intended and
//! actual send times here, in memory it wrote itself. Reading each payload's header on the
//! broker thread cost a cache miss per message on the client's busiest thread (at 1.5M msg/s,
//! about 0.2 µs per message).

use std::collections::VecDeque;

/// Bits of the opaque that hold the sequence number; the producer id takes the rest.
const SEQUENCE_BITS: u32 = 40;
const SEQUENCE_MASK: u64 = (1 << SEQUENCE_BITS) - 1;

/// The opaque of message `sequence` of producer `producer`.
#[inline]
pub(crate) fn opaque(producer: u32, sequence: u64) -> u64 {
    ((producer as u64) << SEQUENCE_BITS) | (sequence & SEQUENCE_MASK)
}

/// The producer id in an opaque.
#[inline]
pub(crate) fn producer_of(opaque: u64) -> u32 {
    (opaque >> SEQUENCE_BITS) as u32
}

/// The send times of one producer's messages in flight, by sequence number. Acknowledgements
/// of one partition come in order, of several nearly so: the window spans from the oldest
/// message in flight to the newest.
#[derive(Default)]
pub(crate) struct InFlight {
    /// Sequence number of `times[0]`.
    base: u64,
    /// (intended, sent) ns; None once acknowledged, or for a number never sent.
    times: VecDeque<Option<(u64, u64)>>,
}

impl InFlight {
    /// Message `sequence` went to the client.
    #[inline]
    pub(crate) fn sent(&mut self, sequence: u64, intended_ns: u64, sent_ns: u64) {
        if self.times.is_empty() {
            self.base = sequence;
        }
        let Some(index) = sequence.checked_sub(self.base) else {
            return;
        };
        // Numbers skipped (a send that failed at once) are never acknowledged.
        while (self.times.len() as u64) < index {
            self.times.push_back(None);
        }
        if index == self.times.len() as u64 {
            self.times.push_back(Some((intended_ns, sent_ns)));
        }
    }

    /// The send times of the message whose opaque is `opaque`, once; None if unknown.
    #[inline]
    pub(crate) fn acknowledged(&mut self, opaque: u64) -> Option<(u64, u64, u64)> {
        let low = opaque & SEQUENCE_MASK;
        // The full sequence number: the one nearest the window with these low bits.
        let sequence = (self.base & !SEQUENCE_MASK) | low;
        let index = sequence.checked_sub(self.base)?;
        let (intended, sent) = self.times.get_mut(index as usize)?.take()?;
        while matches!(self.times.front(), Some(None)) {
            self.times.pop_front();
            self.base += 1;
        }
        Some((sequence, intended, sent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgements_in_any_order_find_their_times_once() {
        let mut f = InFlight::default();
        for s in 10..20u64 {
            if s != 13 {
                f.sent(s, s * 100, s * 100 + 7);
            }
        }
        assert_eq!(producer_of(opaque(77, 12)), 77);
        assert_eq!(f.acknowledged(opaque(3, 12)), Some((12, 1200, 1207)));
        assert_eq!(f.acknowledged(opaque(3, 12)), None, "once");
        assert_eq!(f.acknowledged(opaque(3, 13)), None, "never sent");
        for s in [11u64, 10, 14, 19, 15, 16, 17, 18] {
            assert_eq!(
                f.acknowledged(opaque(3, s)),
                Some((s, s * 100, s * 100 + 7))
            );
        }
        assert!(
            f.times.is_empty(),
            "the window closes behind the acknowledgements"
        );
        f.sent(20, 1, 2);
        assert_eq!(f.acknowledged(opaque(3, 20)), Some((20, 1, 2)));
    }
}
