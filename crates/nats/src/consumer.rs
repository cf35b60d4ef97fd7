//! A member of a durable pull consumer: keeps pull requests outstanding so the server always
//! has room to deliver, acknowledges each delivery (ack policy explicit) by publishing to its
//! reply subject, and counts status messages (408 expired requests) out of the outstanding
//! total. Once the drain is over it asks the server what the durable consumer still holds
//! beyond its position (`unread`).

use std::time::{Duration, Instant};

use brokerbench_driver::{Consumer, Deliveries, Delivery, Unread};

use crate::config::{AckPolicy, NatsDriverConfig, NatsUrl};
use crate::conn::{write_publish, Conn, Msg};
use crate::reconnect::{self, reconnector, Reconnector};

/// How long a pull request waits on the server for messages.
const PULL_EXPIRES_NS: u64 = 1_000_000_000;

/// How long after an answer that is no consumer's info `CONSUMER.INFO` is asked again.
const INFO_AGAIN_AFTER: Duration = Duration::from_millis(100);

pub struct NatsConsumer {
    conn: Conn,
    next_subject: Vec<u8>,
    /// `$JS.API.CONSUMER.INFO.<stream>.<durable>`, asked by `unread`.
    info_subject: Vec<u8>,
    /// `<stream>/<durable>`: the place every member of the subscription reads.
    place: String,
    inbox: Vec<u8>,
    pull: Vec<u8>,
    batch: u64,
    outstanding: u64,
    ack: bool,
    /// Knows once the connection is gone (reported once; later polls wait or reconnect).
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
        let reconnector = reconnector(url, config.reconnect, &conn.info);
        NatsConsumer {
            conn,
            next_subject: format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}").into_bytes(),
            info_subject: format!("$JS.API.CONSUMER.INFO.{stream}.{durable}").into_bytes(),
            place: format!("{stream}/{durable}"),
            inbox: inbox.into_bytes(),
            pull: format!("{{\"batch\":{batch},\"expires\":{PULL_EXPIRES_NS}}}").into_bytes(),
            batch,
            outstanding: 0,
            ack: config.ack_policy == AckPolicy::Explicit,
            reconnector,
        }
    }

    /// Receives, or waits out a lost connection: its error is returned once.
    fn receive(&mut self, timeout: Duration, deliveries: Deliveries<'_>) -> Result<(), String> {
        if self.reconnector.is_lost() {
            self.recover(timeout);
            return Ok(());
        }
        let result = self.pull_and_receive(timeout, deliveries);
        if result
            .as_ref()
            .is_err_and(|kind| kind == crate::conn::CONNECTION_CLOSED)
        {
            self.reconnector.lose(crate::conn::CONNECTION_CLOSED);
        }
        result
    }

    /// Connects again when reconnecting, to the pool's next server: the durable consumer on
    /// the server kept its place, and what was delivered and not acknowledged comes again
    /// after its ack wait.
    fn recover(&mut self, timeout: Duration) {
        let inbox = String::from_utf8_lossy(&self.inbox).into_owned();
        if reconnect::recover(&mut self.reconnector, &mut self.conn, timeout, &inbox) {
            self.outstanding = 0;
        }
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

/// A status message (NATS/1.0 408 Request Timeout, 404 No Messages, 409 ..., 100 idle
/// heartbeat): its code, after taking what its pull request left unfilled off `outstanding`.
/// None for a delivery.
fn status<'a>(msg: &Msg<'a>, outstanding: &mut u64) -> Option<&'a [u8]> {
    let headers = msg.headers.filter(|_| msg.payload.is_empty())?;
    let code = headers.get(9..12).unwrap_or_default();
    if code == b"100" {
        return Some(code);
    }
    match header(headers, b"Nats-Pending-Messages") {
        Some(left) => *outstanding = outstanding.saturating_sub(left),
        None => *outstanding = 0,
    }
    Some(code)
}

impl NatsConsumer {
    /// Ack policy none: waits until every pull request is answered (filled, or expired after
    /// PULL_EXPIRES_NS), so that the server sends nothing more, and counts the deliveries that
    /// arrive meanwhile: they reached this client and are not handed on, and the server, which
    /// forgets a delivery once sent, no longer counts them. None if not answered by `deadline`.
    fn settle_pulls(&mut self, deadline: Instant) -> Option<u64> {
        let mut arrived = 0;
        while self.outstanding > 0 {
            let left = deadline.checked_duration_since(Instant::now())?;
            let outstanding = &mut self.outstanding;
            self.conn
                .poll(left, &mut |msg, _| {
                    if status(&msg, outstanding).is_none() {
                        *outstanding = outstanding.saturating_sub(1);
                        arrived += 1;
                    }
                })
                .ok()?;
        }
        Some(arrived)
    }

    /// The server's `CONSUMER.INFO` answer for this member's durable consumer, asked on the
    /// consumer's own connection (the server answers API requests apart from pull requests),
    /// and the deliveries that arrived before it; they are neither handed on nor acknowledged.
    /// An answer that is no consumer's info (an API error, or no responder while the cluster
    /// elects a leader) is asked again until `deadline`.
    fn consumer_info(&mut self, deadline: Instant) -> Option<(serde_json::Value, u64)> {
        let reply = [self.inbox.as_slice(), b".info"].concat();
        self.conn.subscribe(std::str::from_utf8(&reply).ok()?, 2);
        let mut late = 0;
        loop {
            self.conn
                .publish(&self.info_subject, Some(&reply), None, b"")
                .ok()?;
            let mut answer: Option<Option<serde_json::Value>> = None;
            while answer.is_none() {
                let left = deadline.checked_duration_since(Instant::now())?;
                let outstanding = &mut self.outstanding;
                self.conn
                    .poll(left, &mut |msg, _| {
                        if msg.subject == reply.as_slice() {
                            answer = Some(serde_json::from_slice(msg.payload).ok());
                        } else if status(&msg, outstanding).is_none() {
                            late += 1;
                        }
                    })
                    .ok()?;
            }
            match answer.flatten() {
                Some(info) if info.get("num_pending").is_some() => return Some((info, late)),
                _ => std::thread::sleep(
                    INFO_AGAIN_AFTER.min(deadline.checked_duration_since(Instant::now())?),
                ),
            }
        }
    }

    fn pull_and_receive(
        &mut self,
        timeout: Duration,
        deliveries: Deliveries<'_>,
    ) -> Result<(), String> {
        if self.outstanding < self.batch / 2 + 1 {
            self.conn
                .publish(&self.next_subject, Some(&self.inbox), None, &self.pull)
                .map_err(|_| crate::conn::CONNECTION_CLOSED.to_string())?;
            self.outstanding += self.batch;
        }
        let outstanding = &mut self.outstanding;
        let ack = self.ack;
        let mut status_error = None;
        self.conn.poll(timeout, &mut |msg, out| {
            if let Some(code) = status(&msg, outstanding) {
                if code != b"100" && code != b"408" && code != b"404" {
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
    fn poll(&mut self, timeout: Duration, deliveries: Deliveries<'_>) -> Result<(), String> {
        self.receive(timeout, deliveries)
    }

    fn assigned(&self, _slot: usize) -> usize {
        1
    }

    fn unread(&mut self) -> Option<Vec<Unread>> {
        if self.reconnector.is_lost() {
            return None;
        }
        let deadline = Instant::now() + crate::unread::UNREAD_WITHIN;
        let mut in_client = 0;
        if !self.ack {
            in_client = self.settle_pulls(deadline)?;
        }
        let (info, late) = self.consumer_info(deadline)?;
        let client = String::from_utf8_lossy(&self.inbox);
        let held = crate::unread::held(&info, self.ack, in_client + late, (&self.place, &client))?;
        let evidence = crate::unread::evidence(self.ack);
        let unread = held.into_iter().map(|(place, messages)| Unread {
            slot: 0,
            place,
            messages,
            evidence,
        });
        Some(unread.collect())
    }
}
