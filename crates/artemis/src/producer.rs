//! A producer: each message a SEND frame with its own `receipt` header; the broker's
//! RECEIPT, sent once it has the message (in its journal, for a durable one), is the
//! acknowledgement.

use std::collections::VecDeque;
use std::time::Duration;

use brokerbench_driver::{fail_all, Ack, OutgoingMessage, Producer, SendError, Sent};

use crate::conn::Reconnector;
use crate::conn::{Conn, CONNECTION_CLOSED};
use crate::stomp::{parse_number, push_number, write_frame};

struct Pending {
    n: u64,
    sent: Sent,
}

pub struct ArtemisProducer {
    conn: Conn,
    address: Vec<u8>,
    persistent: &'static [u8],
    receipt: Vec<u8>,
    next: u64,
    pending: VecDeque<Pending>,
    max_outstanding: usize,
    reconnector: Reconnector,
}

impl ArtemisProducer {
    pub fn new(
        conn: Conn,
        reconnector: Reconnector,
        address: &str,
        durable: bool,
        max_outstanding: u32,
    ) -> Self {
        ArtemisProducer {
            conn,
            address: address.as_bytes().to_vec(),
            persistent: if durable { b"true" } else { b"false" },
            receipt: Vec::with_capacity(20),
            next: 0,
            pending: VecDeque::new(),
            max_outstanding: max_outstanding as usize,
            reconnector,
        }
    }

    /// The connection is gone: what is in flight fails; later sends wait for a new one, or
    /// fail at once without reconnecting.
    fn lose(&mut self, kind: &str, acks: &mut dyn FnMut(Ack)) {
        fail_pending(&mut self.pending, kind, acks);
        self.reconnector.lose(kind);
    }
}

/// Fails everything in flight with `kind`.
fn fail_pending(pending: &mut VecDeque<Pending>, kind: &str, acks: &mut dyn FnMut(Ack)) {
    fail_all(pending.drain(..).map(|p| p.sent), kind, acks);
}

/// The send whose receipt is `n`, taken out of `pending` (receipts come in order: the first,
/// as a rule).
fn settle(pending: &mut VecDeque<Pending>, n: u64) -> Option<Pending> {
    let position = if pending.front().is_some_and(|p| p.n == n) {
        Some(0)
    } else {
        pending.iter().position(|p| p.n == n)
    };
    position.and_then(|i| pending.remove(i))
}

/// An ERROR's text as a kind of failure: its AMQ code when it has one (`AMQ229102`), else
/// `broker_error`.
pub(crate) fn kind_of(text: &str) -> String {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .find(|w| {
            w.len() == 9 && w.starts_with("AMQ") && w[3..].bytes().all(|b| b.is_ascii_digit())
        })
        .map_or_else(|| "broker_error".to_string(), str::to_string)
}

impl Producer for ArtemisProducer {
    fn send(&mut self, message: OutgoingMessage<'_>) -> Result<(), SendError> {
        let in_flight = self.pending.len();
        let envelope = self
            .reconnector
            .admit(in_flight, self.max_outstanding, message.payload)?;
        self.next += 1;
        self.receipt.clear();
        push_number(&mut self.receipt, self.next);
        write_frame(
            self.conn.link.out(),
            b"SEND",
            &[
                (b"destination", &self.address),
                (b"destination-type", b"MULTICAST"),
                (b"persistent", self.persistent),
                (b"receipt", &self.receipt),
            ],
            message.payload,
        );
        if self.conn.link.flush().is_err() {
            // Failed in `poll` with what is in flight; this one waits or fails now.
            self.reconnector.lose(CONNECTION_CLOSED);
            return Err(self.reconnector.unavailable(CONNECTION_CLOSED));
        }
        self.pending.push_back(Pending {
            n: self.next,
            sent: Sent::of(envelope, &message),
        });
        Ok(())
    }

    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack)) {
        if let Some(kind) = self.reconnector.lost_as() {
            fail_pending(&mut self.pending, kind, acks);
            self.reconnector.recover_into(&mut self.conn, timeout);
            return;
        }
        let pending = &mut self.pending;
        let arrived = self.conn.link.last_read();
        let mut refused = None;
        let result = self.conn.poll(timeout, &mut |frame, _| {
            let result = match frame.command {
                b"RECEIPT" => Ok(()),
                b"ERROR" => Err(kind_of(&frame.error_text())),
                _ => return,
            };
            let entry = frame
                .header(b"receipt-id")
                .and_then(parse_number)
                .and_then(|n| settle(pending, n));
            match (entry, result) {
                (Some(entry), result) => acks(entry.sent.settled(Some(arrived.get()), result)),
                // An ERROR of no send of ours: the broker closes the connection after it.
                (None, Err(kind)) => refused = Some(kind),
                (None, Ok(())) => {}
            }
        });
        // A refused send fails alone (Artemis keeps the connection); a lost connection, or an
        // ERROR of no send, fails what is in flight.
        if let Some(kind) = result.err().or(refused) {
            self.lose(&kind, acks);
        }
    }

    fn in_flight(&self) -> usize {
        self.pending.len()
    }

    fn stamps_acknowledgements(&self) -> bool {
        // Each RECEIPT keeps the time it reached the socket, however late `poll` reads it.
        true
    }

    fn abandon(&mut self) {
        self.pending.clear();
    }

    fn disconnected_since(&self) -> Option<u64> {
        self.reconnector.redial.since_ns()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_are_kinds_by_their_code() {
        assert_eq!(
            super::kind_of("AMQ229102: Address \"x\" is full"),
            "AMQ229102"
        );
        assert_eq!(super::kind_of("something else"), "broker_error");
    }
}
