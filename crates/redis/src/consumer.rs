//! A member of a subscription: a consumer (`c<member>`) of the subscription's consumer group
//! (`s<subscription>`) on each of its topic's streams, reading with XREADGROUP (at most
//! `read_count` entries a read, blocking up to [`BLOCK_MS`] when there are none) and
//! acknowledging each read's entries with one XACK per stream, written with the next read.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use brokerbench_driver::{Consumer, Deliveries, Delivery, Unread};

use crate::conn::Conn;
use crate::conn::Reconnector;
use crate::resp::{write_command, Value};

/// How long a read waits for entries when there are none (then the next is sent).
const BLOCK_MS: &[u8] = b"200";

/// How long after a refused read the next is sent.
const RETRY_REFUSED_READ: Duration = Duration::from_millis(100);

/// What a subscription member reads.
pub struct Membership {
    /// The topic's streams, partition 0 first.
    pub streams: Vec<String>,
    pub group: String,
    pub consumer: String,
    pub read_count: u32,
}

/// A reply the consumer waits for, in the order its commands went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Read,
    Ack,
}

pub struct RedisConsumer {
    conn: Conn,
    member: Membership,
    expect: VecDeque<Expect>,
    /// After a new connection: read first what the group delivered to this member and it did
    /// not acknowledge (id `0`), then new entries (`>`).
    history: bool,
    paused: bool,
    /// After a read the server refused (NOGROUP: the stream was deleted), the next waits
    /// until then.
    retry_at: Option<Instant>,
    reconnector: Reconnector,
}

impl Membership {
    /// XREADGROUP of new entries (`>`), or of this member's unacknowledged ones (`0`).
    fn write_read(&self, out: &mut Vec<u8>, history: bool) {
        let count = self.read_count.to_string();
        let mut args: Vec<&[u8]> = vec![
            b"XREADGROUP",
            b"GROUP",
            self.group.as_bytes(),
            self.consumer.as_bytes(),
            b"COUNT",
            count.as_bytes(),
            b"BLOCK",
            BLOCK_MS,
            b"STREAMS",
        ];
        args.extend(self.streams.iter().map(|s| s.as_bytes()));
        let from: &[u8] = if history { b"0" } else { b">" };
        args.extend(std::iter::repeat_n(from, self.streams.len()));
        write_command(out, &args);
    }

    /// The partition of stream `key`.
    fn partition(&self, key: &[u8]) -> Option<usize> {
        self.streams.iter().position(|s| s.as_bytes() == key)
    }
}

impl RedisConsumer {
    pub fn new(conn: Conn, reconnector: Reconnector, member: Membership) -> Self {
        RedisConsumer {
            conn,
            member,
            expect: VecDeque::new(),
            history: false,
            paused: false,
            retry_at: None,
            reconnector,
        }
    }

    /// Connects again when due; the member first reads what it was delivered and did not
    /// acknowledge before the loss.
    fn recover(&mut self, timeout: Duration) {
        if self.reconnector.recover_into(&mut self.conn, timeout) {
            self.expect.clear();
            self.history = true;
        }
    }
}

/// Hands on every entry of a read's reply and writes one XACK per stream for its ids; how
/// many XACKs were written, and whether the reply held any entry.
fn take_read(
    member: &Membership,
    reply: &Value,
    out: &mut Vec<u8>,
    deliveries: Deliveries<'_>,
) -> (usize, bool) {
    let (mut acks, mut any) = (0, false);
    for stream in reply.items() {
        let [key, entries] = stream.items() else {
            continue;
        };
        let key = key.bytes().unwrap_or_default();
        let partition = member.partition(key).unwrap_or(0) as u32;
        let mut ids: Vec<&[u8]> = vec![b"XACK", key, member.group.as_bytes()];
        for entry in entries.items() {
            let [id, fields] = entry.items() else {
                continue;
            };
            // An entry trimmed away since it was delivered has no fields: acknowledged only.
            if let Some(payload) = fields.field("p").and_then(Value::bytes) {
                deliveries(Delivery {
                    stream: partition,
                    payload,
                    received_ns: None,
                    slot: 0,
                });
            }
            ids.extend(id.bytes());
            any = true;
        }
        if ids.len() > 3 {
            write_command(out, &ids);
            acks += 1;
        }
    }
    (acks, any)
}

impl Consumer for RedisConsumer {
    fn poll(&mut self, timeout: Duration, deliveries: Deliveries<'_>) -> Result<(), String> {
        if self.reconnector.is_lost() {
            self.recover(timeout);
            return Ok(());
        }
        if let Some(at) = self.retry_at.take().filter(|at| *at > Instant::now()) {
            std::thread::sleep(timeout.min(at - Instant::now()));
            self.retry_at = Some(at);
            return Ok(());
        }
        let reading = self.expect.contains(&Expect::Read);
        if !reading && !self.paused {
            self.member.write_read(self.conn.link.out(), self.history);
            self.expect.push_back(Expect::Read);
        } else if !reading && self.expect.is_empty() {
            std::thread::sleep(timeout);
            return Ok(());
        }
        let (member, expect) = (&self.member, &mut self.expect);
        let (paused, mut history) = (self.paused, self.history);
        let (mut error, mut refused) = (None, false);
        let result = self.conn.poll(timeout, &mut |value, out| {
            let Some(kind) = expect.pop_front() else {
                error = Some("unexpected_reply".to_string());
                return;
            };
            if let Value::Error(text) = &value {
                error = Some(crate::producer::kind_of(text));
                refused |= kind == Expect::Read;
            }
            if kind == Expect::Ack || refused {
                return;
            }
            let (acks, any) = take_read(member, &value, out, deliveries);
            expect.extend(std::iter::repeat_n(Expect::Ack, acks));
            history &= any;
            if !paused {
                member.write_read(out, history);
                expect.push_back(Expect::Read);
            }
        });
        self.history = history;
        if refused {
            self.retry_at = Some(Instant::now() + RETRY_REFUSED_READ);
        }
        match (result, error) {
            (Err(kind), _) => {
                self.reconnector.lose(&kind);
                Err(kind)
            }
            (Ok(_), Some(kind)) => Err(kind),
            (Ok(_), None) => Ok(()),
        }
    }

    fn assigned(&self, _slot: usize) -> usize {
        self.member.streams.len()
    }

    fn pause(&mut self, paused: bool) -> bool {
        self.paused = paused;
        true
    }

    /// What each stream holds that the subscription's group has not acknowledged (see
    /// [`crate::unread`]), asked on a connection of its own. None when the server cannot tell.
    fn unread(&mut self) -> Option<Vec<Unread>> {
        let mut conn = Conn::connect(self.reconnector.target(), UNREAD_WITHIN).ok()?;
        let mut unread = Vec::new();
        for stream in &self.member.streams {
            let messages =
                crate::unread::held_unread(&mut conn, stream, &self.member.group, UNREAD_WITHIN)?;
            unread.push(Unread {
                slot: 0,
                place: stream.clone(),
                messages,
                evidence: "Redis: what each stream holds after its consumer group's last delivered entry, and the group's pending entries (XINFO STREAM, XINFO GROUPS, XRANGE)",
            });
        }
        Some(unread)
    }
}

/// The longest one question of a consumer's count of what it left unread may take.
const UNREAD_WITHIN: Duration = Duration::from_secs(5);
