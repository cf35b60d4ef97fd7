//! Publisher-confirm bookkeeping of one producer channel: delivery tag → (envelope, actual
//! send time, bytes), turned into [`Ack`]s as the broker's basic.ack / basic.nack frames
//! arrive, single or `multiple`, in any order. A basic.return (mandatory publish that no queue
//! took) marks its message, whose confirm then reports `unroutable`.

use std::collections::VecDeque;

use brokerbench_driver::{Ack, Envelope};

/// Kind of an acknowledgement for a message the broker confirmed after returning it.
pub const UNROUTABLE: &str = "unroutable";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    Returned,
    Done,
}

#[derive(Debug, Clone)]
struct Entry {
    envelope: Envelope,
    sent_ns: u64,
    bytes: u32,
    state: State,
}

/// Unconfirmed messages of one channel in confirm mode.
#[derive(Debug)]
pub struct ConfirmBook {
    /// Delivery tag of `entries[0]`.
    first_tag: u64,
    /// Entries by delivery tag; confirmed ones stay until every earlier one is confirmed too.
    entries: VecDeque<Entry>,
    /// Entries not yet confirmed.
    pending: usize,
    /// Kind reported for a nack (`nacked`, or `rejected` when the queues reject publishes).
    nack_kind: &'static str,
}

impl ConfirmBook {
    /// A book for a channel that has just entered confirm mode (the first tag is 1).
    pub fn new(nack_kind: &'static str) -> Self {
        ConfirmBook {
            first_tag: 1,
            entries: VecDeque::new(),
            pending: 0,
            nack_kind,
        }
    }

    /// Records a message just handed to the client; it gets the channel's next delivery tag.
    pub fn record(&mut self, envelope: Envelope, sent_ns: u64, bytes: u32) {
        self.entries.push_back(Entry {
            envelope,
            sent_ns,
            bytes,
            state: State::Pending,
        });
        self.pending += 1;
    }

    /// Messages recorded and not yet confirmed or failed.
    pub fn in_flight(&self) -> usize {
        self.pending
    }

    /// The delivery tag the next recorded message gets.
    pub fn next_tag(&self) -> u64 {
        self.first_tag + self.entries.len() as u64
    }

    /// Applies a basic.ack (`ack`) or basic.nack for `tag` (and every earlier tag when
    /// `multiple`) that arrived at `at_ns`, reporting each newly confirmed message in tag
    /// order. Unknown or already confirmed tags are ignored.
    pub fn confirm(
        &mut self,
        tag: u64,
        multiple: bool,
        ack: bool,
        at_ns: u64,
        out: &mut dyn FnMut(Ack),
    ) {
        if tag < self.first_tag {
            return;
        }
        let last = (tag - self.first_tag) as usize;
        if last >= self.entries.len() {
            return;
        }
        let first = if multiple { 0 } else { last };
        for entry in self.entries.range_mut(first..=last) {
            if entry.state == State::Done {
                continue;
            }
            let result = match (ack, entry.state) {
                (true, State::Pending) => Ok(()),
                (true, _) => Err(UNROUTABLE.to_string()),
                (false, _) => Err(self.nack_kind.to_string()),
            };
            entry.state = State::Done;
            self.pending -= 1;
            out(Ack {
                envelope: entry.envelope,
                sent_ns: entry.sent_ns,
                bytes: entry.bytes,
                acknowledged_ns: Some(at_ns),
                result,
            });
        }
        self.compact();
    }

    /// Marks the message a basic.return carried; the broker confirms it afterwards.
    pub fn returned(&mut self, envelope: &Envelope) {
        // Sequence numbers of one producer grow with delivery tags.
        if let Ok(i) = self
            .entries
            .binary_search_by_key(&envelope.sequence, |e| e.envelope.sequence)
        {
            let entry = &mut self.entries[i];
            if entry.state == State::Pending && entry.envelope.producer == envelope.producer {
                entry.state = State::Returned;
            }
        }
    }

    /// Fails every unconfirmed message with `kind` (the connection or channel is gone).
    pub fn fail_all(&mut self, kind: &str, out: &mut dyn FnMut(Ack)) {
        let next_tag = self.next_tag();
        for entry in self.entries.drain(..) {
            if entry.state != State::Done {
                out(Ack {
                    envelope: entry.envelope,
                    sent_ns: entry.sent_ns,
                    bytes: entry.bytes,
                    acknowledged_ns: None,
                    result: Err(kind.to_string()),
                });
            }
        }
        self.first_tag = next_tag;
        self.pending = 0;
    }

    /// Forgets every unconfirmed message (the run gave up waiting for them).
    pub fn abandon(&mut self) {
        self.first_tag = self.next_tag();
        self.entries.clear();
        self.pending = 0;
    }

    fn compact(&mut self) {
        while self.entries.front().is_some_and(|e| e.state == State::Done) {
            self.entries.pop_front();
            self.first_tag += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book_with(n: u64) -> ConfirmBook {
        let mut book = ConfirmBook::new("nacked");
        for sequence in 0..n {
            book.record(
                Envelope {
                    producer: 7,
                    sequence,
                    intended_ns: 1000 + sequence,
                },
                2000 + sequence,
                100,
            );
        }
        book
    }

    fn confirm(
        book: &mut ConfirmBook,
        tag: u64,
        multiple: bool,
        ack: bool,
    ) -> Vec<(u64, Result<(), String>)> {
        let mut out = Vec::new();
        book.confirm(tag, multiple, ack, 5000, &mut |a| {
            out.push((a.envelope.sequence, a.result))
        });
        out
    }

    #[test]
    fn single_and_multiple_acks_report_each_message_once_in_order() {
        let mut book = book_with(6);
        assert_eq!((book.in_flight(), book.next_tag()), (6, 7));
        assert_eq!(
            confirm(&mut book, 2, false, true),
            vec![(1, Ok(()))],
            "tag 2 = sequence 1"
        );
        assert_eq!(book.in_flight(), 5);
        assert_eq!(
            confirm(&mut book, 4, true, true),
            vec![(0, Ok(())), (2, Ok(())), (3, Ok(()))],
            "multiple covers tags 1..=4 except the one already confirmed"
        );
        assert!(
            confirm(&mut book, 4, true, true).is_empty(),
            "repeated confirm"
        );
        assert!(
            confirm(&mut book, 99, false, true).is_empty(),
            "unknown tag"
        );
        assert_eq!(confirm(&mut book, 6, false, true), vec![(5, Ok(()))]);
        assert_eq!(confirm(&mut book, 5, false, true), vec![(4, Ok(()))]);
        assert_eq!(book.in_flight(), 0);
        assert_eq!(book.next_tag(), 7, "tags keep counting");
        book.record(
            Envelope {
                producer: 7,
                sequence: 6,
                intended_ns: 0,
            },
            0,
            10,
        );
        assert_eq!(confirm(&mut book, 7, false, true), vec![(6, Ok(()))]);
    }

    #[test]
    fn acks_carry_envelope_send_time_and_size() {
        let mut book = book_with(1);
        let mut acks = Vec::new();
        book.confirm(1, false, true, 3000, &mut |a| acks.push(a));
        assert_eq!(
            acks,
            vec![Ack {
                envelope: Envelope {
                    producer: 7,
                    sequence: 0,
                    intended_ns: 1000
                },
                sent_ns: 2000,
                bytes: 100,
                acknowledged_ns: Some(3000),
                result: Ok(())
            }]
        );
    }

    #[test]
    fn nacks_are_failures_of_the_configured_kind() {
        let mut book = book_with(4);
        assert_eq!(
            confirm(&mut book, 2, true, false),
            vec![(0, Err("nacked".into())), (1, Err("nacked".into()))]
        );
        let mut book = ConfirmBook::new("rejected");
        book.record(
            Envelope {
                producer: 1,
                sequence: 0,
                intended_ns: 0,
            },
            0,
            1,
        );
        assert_eq!(
            confirm(&mut book, 1, false, false),
            vec![(0, Err("rejected".into()))]
        );
    }

    #[test]
    fn a_returned_message_is_confirmed_as_unroutable() {
        let mut book = book_with(3);
        book.returned(&Envelope {
            producer: 7,
            sequence: 1,
            intended_ns: 0,
        });
        book.returned(&Envelope {
            producer: 8,
            sequence: 2,
            intended_ns: 0,
        });
        assert_eq!(
            confirm(&mut book, 3, true, true),
            vec![(0, Ok(())), (1, Err("unroutable".into())), (2, Ok(()))]
        );
    }

    #[test]
    fn a_lost_connection_fails_what_is_unconfirmed() {
        let mut book = book_with(5);
        confirm(&mut book, 3, false, true);
        let mut failed = Vec::new();
        book.fail_all("connection_closed", &mut |a| {
            failed.push((a.envelope.sequence, a.result))
        });
        assert_eq!(
            failed.iter().map(|f| f.0).collect::<Vec<_>>(),
            vec![0, 1, 3, 4]
        );
        assert!(failed
            .iter()
            .all(|f| f.1 == Err("connection_closed".into())));
        assert_eq!(book.in_flight(), 0);
        let mut book = book_with(3);
        book.abandon();
        assert_eq!((book.in_flight(), book.next_tag()), (0, 4));
        assert!(confirm(&mut book, 3, true, true).is_empty());
    }
}
