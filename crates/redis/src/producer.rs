//! A producer: each message one XADD to one of its topic's streams (one per partition), sent
//! without waiting for replies (pipelined, at most `max_outstanding` in flight; the XADDs of a
//! burst in one write, at the next poll); the server's reply — the entry's id — is the
//! acknowledgement, and replies come in the order of the commands.

use std::collections::VecDeque;
use std::time::Duration;

use brokerbench_driver::{fail_all, Ack, OutgoingMessage, Producer, SendError, Sent};

use crate::conn::Reconnector;
use crate::conn::{Conn, CONNECTION_CLOSED};
use crate::resp::{push_number, write_command, Value};

/// Bytes of XADDs written before they are sent without waiting for the next poll.
const FLUSH_AT: usize = 64 * 1024;

/// How each XADD trims its stream: `MAXLEN`, `=` or `~`, the length (as text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trim {
    pub approximate: bool,
    pub max_len: u64,
}

pub struct RedisProducer {
    conn: Conn,
    streams: Vec<Vec<u8>>,
    /// The next stream for a message without a key.
    turn: usize,
    trim: Option<(&'static [u8], Vec<u8>)>,
    pending: VecDeque<Sent>,
    max_outstanding: usize,
    reconnector: Reconnector,
}

impl RedisProducer {
    pub fn new(
        conn: Conn,
        reconnector: Reconnector,
        streams: &[String],
        trim: Option<Trim>,
        max_outstanding: u32,
    ) -> Self {
        let trim = trim.map(|t| {
            let mut len = Vec::new();
            push_number(&mut len, t.max_len);
            (if t.approximate { &b"~"[..] } else { &b"="[..] }, len)
        });
        RedisProducer {
            conn,
            streams: streams.iter().map(|s| s.as_bytes().to_vec()).collect(),
            turn: 0,
            trim,
            pending: VecDeque::new(),
            max_outstanding: max_outstanding as usize,
            reconnector,
        }
    }

    /// The stream of a message: by its key's hash, else the next in turn.
    fn stream_for(&mut self, key: Option<&[u8]>) -> usize {
        let n = self.streams.len();
        match key {
            Some(key) => brokerbench_driver::naming::key_partition(key, n),
            None => {
                self.turn = (self.turn + 1) % n;
                self.turn
            }
        }
    }

    /// The connection is gone: what is in flight fails; later sends wait for a new one, or
    /// fail at once without reconnecting.
    fn lose(&mut self, kind: &str, acks: &mut dyn FnMut(Ack)) {
        fail_all(self.pending.drain(..), kind, acks);
        self.reconnector.lose(kind);
    }
}

/// An error reply as a kind of failure: `redis_` and its first word (`redis_oom`).
pub(crate) fn kind_of(text: &str) -> String {
    let word = text.split_whitespace().next().unwrap_or("error");
    format!("redis_{}", word.to_ascii_lowercase())
}

impl Producer for RedisProducer {
    fn send(&mut self, message: OutgoingMessage<'_>) -> Result<(), SendError> {
        let in_flight = self.pending.len();
        let envelope = self
            .reconnector
            .admit(in_flight, self.max_outstanding, message.payload)?;
        let stream = self.stream_for(message.key);
        let key = &self.streams[stream];
        let out = self.conn.link.out();
        match &self.trim {
            Some((how, len)) => write_command(
                out,
                &[
                    b"XADD",
                    key,
                    b"MAXLEN",
                    how,
                    len,
                    b"*",
                    b"p",
                    message.payload,
                ],
            ),
            None => write_command(out, &[b"XADD", key, b"*", b"p", message.payload]),
        }
        // Written with the next poll (the engine polls before it waits for a next send time,
        // and every 64 sends at the maximum rate): the XADDs of a burst go in one system call.
        if self.conn.link.out().len() >= FLUSH_AT && self.conn.link.flush().is_err() {
            // Failed in `poll` with what is in flight; this one waits or fails now.
            self.reconnector.lose(CONNECTION_CLOSED);
            return Err(self.reconnector.unavailable(CONNECTION_CLOSED));
        }
        self.pending.push_back(Sent::of(envelope, &message));
        Ok(())
    }

    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack)) {
        if let Some(kind) = self.reconnector.lost_as() {
            fail_all(self.pending.drain(..), kind, acks);
            self.reconnector.recover_into(&mut self.conn, timeout);
            return;
        }
        let pending = &mut self.pending;
        let arrived = self.conn.link.last_read();
        let mut stray = false;
        let result = self.conn.poll(timeout, &mut |value, _| {
            let Some(entry) = pending.pop_front() else {
                stray = true;
                return;
            };
            let result = match &value {
                Value::Error(text) => Err(kind_of(text)),
                _ => Ok(()),
            };
            acks(entry.settled(Some(arrived.get()), result));
        });
        match (result, stray) {
            (Err(kind), _) => self.lose(&kind, acks),
            (Ok(_), true) => self.lose("unexpected_reply", acks),
            _ => {}
        }
    }

    fn in_flight(&self) -> usize {
        self.pending.len()
    }

    fn stamps_acknowledgements(&self) -> bool {
        // Each reply keeps the time it reached the socket, however late `poll` reads it.
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
    fn errors_are_kinds_by_their_first_word() {
        assert_eq!(
            super::kind_of("OOM command not allowed when used memory > 'maxmemory'."),
            "redis_oom"
        );
        assert_eq!(super::kind_of(""), "redis_error");
    }
}
