//! A producer: each message a SEND frame with its own `receipt` header; the broker's
//! RECEIPT, sent once it has the message (in its journal, for a durable one), is the
//! acknowledgement.

use std::collections::VecDeque;
use std::time::Duration;

use brokerbench_driver::{Ack, Clock, Envelope, OutgoingMessage, Producer, SendError};

use crate::conn::{Conn, CONNECTION_CLOSED};
use crate::stomp::{parse_number, push_number, write_frame};

struct Pending {
    n: u64,
    envelope: Envelope,
    sent_ns: u64,
    bytes: u32,
}

pub struct ArtemisProducer {
    conn: Conn,
    address: Vec<u8>,
    persistent: &'static [u8],
    receipt: Vec<u8>,
    next: u64,
    pending: VecDeque<Pending>,
    max_outstanding: usize,
    clock: Clock,
    broken: Option<String>,
}

impl ArtemisProducer {
    pub fn new(conn: Conn, address: &str, durable: bool, max_outstanding: u32) -> Self {
        ArtemisProducer {
            conn,
            address: address.as_bytes().to_vec(),
            persistent: if durable { b"true" } else { b"false" },
            receipt: Vec::with_capacity(20),
            next: 0,
            pending: VecDeque::new(),
            max_outstanding: max_outstanding as usize,
            clock: Clock::process(),
            broken: None,
        }
    }

    /// Fails everything in flight with `kind`.
    fn fail_pending(&mut self, kind: &str, acks: &mut dyn FnMut(Ack)) {
        for entry in self.pending.drain(..) {
            acks(Ack {
                envelope: entry.envelope,
                sent_ns: entry.sent_ns,
                bytes: entry.bytes,
                acknowledged_ns: None,
                result: Err(kind.to_string()),
            });
        }
    }
}

/// An ERROR's text as a kind of failure: its AMQ code when it has one (`AMQ229102`), else
/// `broker_error`.
fn kind_of(text: &str) -> String {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .find(|w| {
            w.len() == 9 && w.starts_with("AMQ") && w[3..].bytes().all(|b| b.is_ascii_digit())
        })
        .map_or_else(|| "broker_error".to_string(), str::to_string)
}

impl Producer for ArtemisProducer {
    fn send(&mut self, message: OutgoingMessage<'_>) -> Result<(), SendError> {
        if let Some(kind) = &self.broken {
            return Err(SendError::Failed(kind.clone()));
        }
        if self.pending.len() >= self.max_outstanding {
            return Err(SendError::Backpressure);
        }
        let envelope = Envelope::read(message.payload)
            .map_err(|_| SendError::Failed("bad_envelope".into()))?;
        self.next += 1;
        self.receipt.clear();
        push_number(&mut self.receipt, self.next);
        write_frame(
            self.conn.out(),
            b"SEND",
            &[
                (b"destination", &self.address),
                (b"destination-type", b"MULTICAST"),
                (b"persistent", self.persistent),
                (b"receipt", &self.receipt),
            ],
            message.payload,
        );
        if self.conn.flush().is_err() {
            // Failed in `poll` with what is in flight; this one fails now.
            self.broken = Some(CONNECTION_CLOSED.into());
            return Err(SendError::Failed(CONNECTION_CLOSED.into()));
        }
        self.pending.push_back(Pending {
            n: self.next,
            envelope,
            sent_ns: message.sent_ns,
            bytes: message.payload.len() as u32,
        });
        Ok(())
    }

    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack)) {
        if let Some(kind) = self.broken.clone() {
            self.fail_pending(&kind, acks);
            std::thread::sleep(timeout.min(Duration::from_millis(10)));
            return;
        }
        let pending = &mut self.pending;
        let clock = self.clock;
        let mut refused = None;
        let result = self.conn.poll(timeout, &mut |frame, _| {
            let result = match frame.command {
                b"RECEIPT" => Ok(()),
                b"ERROR" => {
                    let text = frame.error_text();
                    refused = Some(kind_of(&text));
                    Err(kind_of(&text))
                }
                _ => return,
            };
            let Some(n) = frame.header(b"receipt-id").and_then(parse_number) else {
                return;
            };
            let position = if pending.front().is_some_and(|p| p.n == n) {
                Some(0)
            } else {
                pending.iter().position(|p| p.n == n)
            };
            let Some(entry) = position.and_then(|i| pending.remove(i)) else {
                return;
            };
            acks(Ack {
                envelope: entry.envelope,
                sent_ns: entry.sent_ns,
                bytes: entry.bytes,
                acknowledged_ns: Some(clock.now_ns()),
                result,
            });
        });
        // After an ERROR the broker closes the connection: what is in flight fails.
        if let Some(kind) = result.err().or(refused) {
            self.fail_pending(&kind, acks);
            self.broken = Some(kind);
        }
    }

    fn in_flight(&self) -> usize {
        self.pending.len()
    }

    fn abandon(&mut self) {
        self.pending.clear();
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
