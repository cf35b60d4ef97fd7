//! A member of a durable pull consumer: keeps pull requests outstanding so the server always
//! has room to deliver, acknowledges each delivery (ack policy explicit) by publishing to its
//! reply subject, and counts status messages (408 expired requests) out of the outstanding
//! total.

use std::time::Duration;

use brokerbench_driver::{Consumer, Delivery};

use crate::config::{AckPolicy, NatsDriverConfig, NatsUrl};
use crate::conn::{write_publish, Conn, Reconnector};

/// How long a pull request waits on the server for messages.
const PULL_EXPIRES_NS: u64 = 1_000_000_000;

pub struct NatsConsumer {
    conn: Conn,
    next_subject: Vec<u8>,
    inbox: Vec<u8>,
    pull: Vec<u8>,
    batch: u64,
    outstanding: u64,
    ack: bool,
    /// Set once the connection is gone (reported once; later polls wait or reconnect).
    broken: bool,
    reconnector: Reconnector,
}

impl NatsConsumer {
    pub fn new(
        mut conn: Conn,
        url: &NatsUrl,
        stream: &str,
        durable: &str,
        config: &NatsDriverConfig,
    ) -> Self {
        let inbox = crate::unique_inbox();
        conn.subscribe(&inbox, 1);
        let batch = config.pull_batch as u64;
        NatsConsumer {
            conn,
            next_subject: format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}").into_bytes(),
            inbox: inbox.into_bytes(),
            pull: format!("{{\"batch\":{batch},\"expires\":{PULL_EXPIRES_NS}}}").into_bytes(),
            batch,
            outstanding: 0,
            ack: config.ack_policy == AckPolicy::Explicit,
            broken: false,
            reconnector: Reconnector::new(url, config.reconnect),
        }
    }

    /// Receives, or waits out a lost connection: its error is returned once.
    fn receive(
        &mut self,
        timeout: Duration,
        deliveries: &mut dyn FnMut(Delivery<'_>),
    ) -> Result<(), String> {
        if self.broken {
            // Connects again when reconnecting; the durable consumer on the server kept its
            // place, and what was delivered and not acknowledged comes again after its ack
            // wait.
            if !self.reconnector.policy.enabled {
                std::thread::sleep(timeout);
            } else if let Some(conn) = self
                .reconnector
                .attempt(timeout, &String::from_utf8_lossy(&self.inbox))
            {
                self.conn = conn;
                self.outstanding = 0;
                self.broken = false;
            }
            return Ok(());
        }
        let result = self.pull_and_receive(timeout, deliveries);
        if result
            .as_ref()
            .is_err_and(|kind| kind == crate::conn::CONNECTION_CLOSED)
        {
            self.broken = true;
        }
        result
    }
}

/// The value of header `name` in a header block.
fn header(block: &[u8], name: &[u8]) -> Option<u64> {
    block.split(|&b| b == b'\n').find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        line[..colon]
            .eq_ignore_ascii_case(name)
            .then(|| {
                std::str::from_utf8(&line[colon + 1..])
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            })
            .flatten()
    })
}

impl NatsConsumer {
    fn pull_and_receive(
        &mut self,
        timeout: Duration,
        deliveries: &mut dyn FnMut(Delivery<'_>),
    ) -> Result<(), String> {
        if self.outstanding < self.batch / 2 + 1 {
            self.conn
                .publish(&self.next_subject, Some(&self.inbox), None, &self.pull)
                .map_err(|_| "connection_closed".to_string())?;
            self.outstanding += self.batch;
        }
        let outstanding = &mut self.outstanding;
        let ack = self.ack;
        let mut status_error = None;
        self.conn.poll(timeout, &mut |msg, out| {
            if let Some(headers) = msg.headers.filter(|_| msg.payload.is_empty()) {
                // A status message: NATS/1.0 408 Request Timeout, 404 No Messages, 409 ...
                let code = headers.get(9..12).unwrap_or_default();
                if code == b"100" {
                    return; // idle heartbeat
                }
                match header(headers, b"Nats-Pending-Messages") {
                    Some(left) => *outstanding = outstanding.saturating_sub(left),
                    None => *outstanding = 0,
                }
                if code != b"408" && code != b"404" {
                    status_error = Some(format!("status_{}", String::from_utf8_lossy(code)));
                }
                return;
            }
            let stream = msg
                .subject
                .iter()
                .rposition(|&b| b == b'.')
                .and_then(|i| {
                    std::str::from_utf8(&msg.subject[i + 1..])
                        .ok()?
                        .parse()
                        .ok()
                })
                .unwrap_or(0);
            deliveries(Delivery {
                stream,
                payload: msg.payload,
                received_ns: None,
                slot: 0,
            });
            *outstanding = outstanding.saturating_sub(1);
            if ack {
                if let Some(reply) = msg.reply {
                    write_publish(out, reply, None, None, b"");
                }
            }
        })?;
        match status_error {
            Some(kind) => Err(kind),
            None => Ok(()),
        }
    }
}

impl Consumer for NatsConsumer {
    fn poll(
        &mut self,
        timeout: Duration,
        deliveries: &mut dyn FnMut(Delivery<'_>),
    ) -> Result<(), String> {
        self.receive(timeout, deliveries)
    }

    fn assigned(&self, _slot: usize) -> usize {
        1
    }
}
