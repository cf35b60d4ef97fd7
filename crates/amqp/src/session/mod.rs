//! brokerbench's own AMQP 0-9-1 connections: publishing, confirms, consuming and
//! acknowledging with no async runtime and no per-message allocation or system call, and the
//! synchronous methods (declaring, binding, deleting) through [`Channel::call`].
//!
//! Why not a general client: amqprs (used here before) hands every frame through channels
//! between tasks and writes each publish and each basic.ack with its own system call. Here a producer encodes
//! its publishes into its own buffer and writes them with one non-blocking `send` per burst
//! (per `poll`, or every [`FLUSH_AT`] bytes); a consumer writes the acknowledgements of all
//! the deliveries one read brought with one `send`. Measured on the PerfTest side-by-side
//! (`bench/rabbitmq_perftest.py`), that is where the client's CPU went.
//!
//! # Threads
//!
//! Writing: whoever has frames to send writes them, under the connection's write lock, never
//! blocking: what the socket does not take at once waits in the connection's backlog and is
//! retried on the next write (producers answer backpressure while it is large).
//!
//! Reading ([`Reading`]):
//! - A producer connection has one thread of its own that reads the socket and timestamps
//!   each confirm as it arrives, so a confirm is not late by however long the producer
//!   thread sleeps between sends.
//! - A consumer connection has no thread: whichever consumer waits reads the socket for
//!   everyone (routing other channels' frames to their inboxes, and waking the others when it
//!   stops reading), so a delivery is handed over by the thread that read it, with no
//!   cross-thread wake-up.
//!
//! Frames are routed by channel into each channel's [`Inbox`]: confirms and returns as
//! [`ChannelEvent`]s, deliveries into one byte arena, replies to synchronous methods, and the
//! channel's end (closed by the broker, consumer cancelled, connection lost).

use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::AmqpUri;
use brokerbench_driver::{Clock, DriverError, Envelope};

use crate::probe;
use crate::wire::{self, id, next_frame, Reader, FRAME_BODY, FRAME_HEADER, FRAME_METHOD};

/// How long declaring, binding or deleting one object (or any synchronous method) may take.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long closing a channel or connection may hold up the end of a run.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// Kind of a send or poll failure after the connection was lost.
pub const CONNECTION_CLOSED: &str = "connection_closed";
/// Kind of a send or poll failure after the broker closed the channel.
pub const CHANNEL_CLOSED: &str = "channel_closed";

/// A producer writes its buffer out once it holds this much, without waiting for `poll`.
pub const FLUSH_AT: usize = 64 * 1024;
/// Bytes a read asks for at most.
const READ_CHUNK: usize = 256 * 1024;

/// Who reads a connection's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// A thread of the connection's own, always.
    Thread,
    /// Whichever thread waits in [`Session::wait`].
    Caller,
}

mod channel;
mod demux;
mod socket;

use channel::lock;
pub use channel::{Channel, ChannelEvent, ChannelState, Deliveries, Inbox};
use socket::{recv_now, send_now, wait_fd};

/// Content (a delivery or a returned message) being put together from its frames.
#[derive(Debug)]
struct Content {
    /// Some(delivery tag) for a delivery, None for a basic.return.
    tag: Option<u64>,
    /// Body size from the content header, once it arrived.
    size: Option<u64>,
    body: Vec<u8>,
}

/// The socket's read side and what is half read.
struct ReadSide {
    stream: TcpStream,
    buffer: Vec<u8>,
    /// Unparsed bytes are `buffer[start..end]`.
    start: usize,
    end: usize,
    /// Content being assembled, per channel.
    content: Vec<Option<Content>>,
    /// Scratch: channels to signal after a read.
    touched: Vec<Arc<ChannelState>>,
    /// Scratch: replies the reader owes the broker (close-ok).
    replies: Vec<u8>,
}

struct WriteSide {
    stream: TcpStream,
    /// Bytes the socket has not taken yet; always written before anything newer.
    backlog: Vec<u8>,
    last_write: Instant,
}

struct Shared {
    read: Mutex<ReadSide>,
    write: Mutex<WriteSide>,
    /// `WriteSide::backlog.len()`, for producers' backpressure check without the lock.
    backlog: AtomicUsize,
    /// Channel states by channel number (0 is the connection's own).
    channels: Mutex<Vec<Option<Arc<ChannelState>>>>,
    next_channel: AtomicU16,
    channel_max: u16,
    frame_max: u32,
    /// Send a heartbeat when nothing was written for this long (None: heartbeats off).
    heartbeat: Option<Duration>,
    /// When a frame last arrived, ns ([`Clock::process`]); with heartbeats on, a broker
    /// silent for two heartbeat intervals is taken as gone.
    last_read_ns: std::sync::atomic::AtomicU64,
    /// Set once the connection is gone.
    lost: AtomicBool,
    /// While the broker blocks publishing on this connection (connection.blocked, a memory
    /// or disk alarm): since when (ns since the UNIX epoch) and the broker's reason.
    blocked: Mutex<Option<(u64, String)>>,
    /// Consumers waiting while another one reads for them ([`Reading::Caller`]).
    turn_waiters: AtomicUsize,
    reading: Reading,
    clock: Clock,
}

/// One AMQP connection of the message path.
pub struct Session {
    shared: Arc<Shared>,
    reader: Option<JoinHandle<()>>,
    address: String,
}

/// How long opening a session may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// The heartbeat interval a session asks for unless the URI says (`?heartbeat=N`, 0 for
/// none): RabbitMQ's own default, so a half-open connection or a silent broker is found
/// within two intervals rather than never. The broker's lower value wins.
pub const DEFAULT_HEARTBEAT_S: u16 = 60;

impl Session {
    /// Opens a connection named `name` (shown in the management UI).
    pub fn open(uri: &AmqpUri, name: &str, reading: Reading) -> Result<Session, DriverError> {
        let heartbeat = uri.heartbeat.unwrap_or(DEFAULT_HEARTBEAT_S);
        let opened = probe::open(uri, OPEN_TIMEOUT, name, heartbeat)
            .map_err(|e| crate::probe_error(uri, e))?;
        Session::start(opened, reading, uri.address())
    }

    /// A session on a connection whose handshake is done.
    fn start(
        opened: probe::Opened,
        reading: Reading,
        address: String,
    ) -> Result<Session, DriverError> {
        let stream = opened.stream;
        let clone = |s: &TcpStream| {
            s.try_clone()
                .map_err(|e| DriverError::Other(format!("duplicating an AMQP socket: {e}")))
        };
        let read_stream = clone(&stream)?;
        let shared = Arc::new(Shared {
            read: Mutex::new(ReadSide {
                stream: read_stream,
                buffer: vec![0; READ_CHUNK.max(opened.frame_max as usize * 2)],
                start: 0,
                end: 0,
                content: Vec::new(),
                touched: Vec::new(),
                replies: Vec::new(),
            }),
            write: Mutex::new(WriteSide {
                stream,
                backlog: Vec::new(),
                last_write: Instant::now(),
            }),
            backlog: AtomicUsize::new(0),
            channels: Mutex::new(vec![Some(Arc::new(ChannelState::default()))]),
            next_channel: AtomicU16::new(1),
            channel_max: if opened.channel_max == 0 {
                u16::MAX
            } else {
                opened.channel_max
            },
            frame_max: opened.frame_max,
            heartbeat: (opened.heartbeat > 0)
                .then(|| Duration::from_secs(u64::from(opened.heartbeat)) / 2),
            lost: AtomicBool::new(false),
            blocked: Mutex::new(None),
            last_read_ns: std::sync::atomic::AtomicU64::new(Clock::process().now_ns()),
            turn_waiters: AtomicUsize::new(0),
            reading,
            clock: Clock::process(),
        });
        let reader = match reading {
            Reading::Caller => None,
            Reading::Thread => {
                let shared = shared.clone();
                let thread = std::thread::Builder::new()
                    .name("amqp-reader".into())
                    .spawn(move || shared.read_forever())
                    .map_err(|e| DriverError::Other(format!("starting a reader thread: {e}")))?;
                Some(thread)
            }
        };
        Ok(Session {
            shared,
            reader,
            address,
        })
    }

    pub fn frame_max(&self) -> u32 {
        self.shared.frame_max
    }

    pub fn is_open(&self) -> bool {
        !self.shared.lost.load(Ordering::Relaxed)
    }

    /// While the broker blocks publishing on this connection: since when (ns since the UNIX
    /// epoch) and its reason (e.g. "low on memory").
    pub fn blocked(&self) -> Option<(u64, String)> {
        lock(&self.shared.blocked).clone()
    }

    /// Hands `bytes` to the connection (emptying it) and writes what the socket takes now.
    pub fn write(&self, bytes: &mut Vec<u8>) -> Result<(), &'static str> {
        self.shared.write(bytes)
    }

    /// Bytes written and not yet taken by the socket.
    pub fn backlog(&self) -> usize {
        self.shared.backlog.load(Ordering::Relaxed)
    }

    /// Sends a heartbeat if one is due.
    pub fn heartbeat(&self) {
        self.shared.heartbeat();
    }

    /// Writes the backlog out, waiting for the socket up to `deadline`; true when all is out.
    pub fn flush_until(&self, deadline: Instant) -> bool {
        loop {
            if self.shared.write(&mut Vec::new()).is_err() {
                return false;
            }
            if self.backlog() == 0 {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let fd = lock(&self.shared.write).stream.as_raw_fd();
            wait_fd(
                fd,
                libc::POLLOUT,
                Some(left.min(Duration::from_millis(100))),
            );
        }
    }

    /// Waits up to `timeout` until `until` holds for `channel`'s inbox (reading the socket
    /// meanwhile when no thread does); whether it holds.
    pub fn wait(
        &self,
        channel: &ChannelState,
        timeout: Duration,
        until: &dyn Fn(&Inbox) -> bool,
    ) -> bool {
        match self.shared.reading {
            Reading::Thread => channel.wait_signalled(timeout, until),
            Reading::Caller => self.shared.read_until(channel, timeout, until),
        }
    }

    /// Opens a channel (channel.open, within [`ADMIN_TIMEOUT`]).
    pub fn channel(self: &Arc<Self>) -> Result<Channel, DriverError> {
        let shared = &self.shared;
        if !self.is_open() {
            return Err(DriverError::Other(format!(
                "opening an AMQP channel: the connection to {} is closed",
                self.address
            )));
        }
        let number = shared.next_channel.fetch_add(1, Ordering::Relaxed);
        if number == 0 || number > shared.channel_max {
            return Err(DriverError::Other(format!(
                "opening an AMQP channel: the broker allows {} channels per connection; lower channels_per_connection",
                shared.channel_max
            )));
        }
        let state = Arc::new(ChannelState::default());
        {
            let mut channels = lock(&shared.channels);
            let slot = number as usize;
            if channels.len() <= slot {
                channels.resize(slot + 1, None);
            }
            channels[slot] = Some(state.clone());
        }
        // Dropped unopened on failure: it then only leaves the channel table.
        let mut channel = Channel {
            session: self.clone(),
            state,
            number,
            open: false,
        };
        let mut frame = Vec::new();
        wire::method(&mut frame, number, id::CHANNEL_OPEN, |out| {
            wire::put_short_string(out, "")
        });
        channel
            .call(frame, id::CHANNEL_OPEN_OK, ADMIN_TIMEOUT)
            .map_err(|e| DriverError::Other(format!("opening an AMQP channel: {e}")))?;
        channel.open = true;
        Ok(channel)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let shared = &self.shared;
        if !shared.lost.load(Ordering::Relaxed) && shared.backlog.load(Ordering::Relaxed) == 0 {
            let connection = lock(&shared.channels)[0].clone().expect("channel 0");
            lock(&connection.inbox).reply = None;
            let mut frame = Vec::new();
            wire::close(&mut frame, 0, id::CONNECTION_CLOSE, "brokerbench done");
            let deadline = Instant::now() + CLOSE_TIMEOUT;
            if shared.write(&mut frame).is_ok() && self.flush_until(deadline) {
                let left = deadline.saturating_duration_since(Instant::now());
                self.wait(&connection, left, &|inbox| {
                    inbox.reply.is_some() || inbox.ended.is_some()
                });
            }
        }
        shared.lost.store(true, Ordering::Relaxed);
        let _ = lock(&shared.write).stream.shutdown(Shutdown::Both);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

impl Shared {
    fn write(&self, bytes: &mut Vec<u8>) -> Result<(), &'static str> {
        self.write_on(None, bytes)
    }

    /// Writes `bytes`, unless they belong to `channel` and it has ended: the reader sets
    /// `ended` before it writes the channel.close-ok, and this checks it under the write lock,
    /// so no frame of a channel follows its close-ok (the broker would close the whole
    /// connection for it).
    fn write_on(
        &self,
        channel: Option<&ChannelState>,
        bytes: &mut Vec<u8>,
    ) -> Result<(), &'static str> {
        if self.lost.load(Ordering::Relaxed) {
            bytes.clear();
            return Err(CONNECTION_CLOSED);
        }
        let result = {
            let mut guard = lock(&self.write);
            if channel.is_some_and(ChannelState::has_ended) {
                bytes.clear();
                return Err(CHANNEL_CLOSED);
            }
            let side = &mut *guard;
            let result = if side.backlog.is_empty() {
                send_now(&side.stream, bytes).map(|n| side.backlog.extend_from_slice(&bytes[n..]))
            } else {
                side.backlog.extend_from_slice(bytes);
                send_now(&side.stream, &side.backlog).map(|n| {
                    side.backlog.drain(..n);
                })
            };
            if !bytes.is_empty() {
                side.last_write = Instant::now();
            }
            self.backlog.store(side.backlog.len(), Ordering::Relaxed);
            result
        };
        bytes.clear();
        result.map_err(|e| {
            self.lose(format!("writing to the socket: {e}"));
            CONNECTION_CLOSED
        })
    }

    /// Sends a heartbeat when one is due, and finds a broker that has been silent for two
    /// heartbeat intervals gone (a half-open connection, a paused broker): the spec's rule.
    fn heartbeat(&self) {
        let Some(every) = self.heartbeat else {
            return;
        };
        let due = lock(&self.write).last_write.elapsed() >= every;
        if due {
            let _ = self.write(&mut wire::HEARTBEAT.to_vec());
        }
        // `every` is half the negotiated interval: silence for four of them is two intervals.
        let silent_ns = self
            .clock
            .now_ns()
            .saturating_sub(self.last_read_ns.load(Ordering::Relaxed));
        let limit = every * 4;
        if silent_ns > limit.as_nanos() as u64 && !self.lost.load(Ordering::Relaxed) {
            self.lose(format!(
                "nothing from the broker for {:.1} s (heartbeat {} s): it is silent",
                silent_ns as f64 / 1e9,
                (every * 2).as_secs()
            ));
        }
    }

    /// Marks the connection and every channel lost, waking their owners.
    fn lose(&self, reason: String) {
        self.lost.store(true, Ordering::Relaxed);
        let channels: Vec<_> = lock(&self.channels).iter().flatten().cloned().collect();
        for channel in channels {
            channel.end(CONNECTION_CLOSED, reason.clone());
        }
    }

    fn channel(&self, number: u16) -> Option<Arc<ChannelState>> {
        lock(&self.channels)
            .get(number as usize)
            .and_then(Clone::clone)
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("address", &self.address)
            .field("reading", &self.shared.reading)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use crate::probe::{BrokerInfo, Opened};
    use crate::wire::Publisher;

    const FRAME_MAX: u32 = 4096 + wire::FRAME_OVERHEAD as u32;

    /// A session over loopback whose other end the test plays as the broker.
    fn pair(reading: Reading) -> (Arc<Session>, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let opened = Opened {
            stream: client,
            info: BrokerInfo {
                product: "test".into(),
                version: String::new(),
            },
            frame_max: FRAME_MAX,
            channel_max: 0,
            heartbeat: 0,
        };
        let session = Session::start(opened, reading, "test".into()).unwrap();
        (Arc::new(session), server)
    }

    /// Reads one frame from the broker's side: (kind, channel, payload).
    fn read_frame(server: &mut TcpStream) -> (u8, u16, Vec<u8>) {
        let mut header = [0u8; 7];
        server.read_exact(&mut header).unwrap();
        let size = u32::from_be_bytes(header[3..7].try_into().unwrap()) as usize;
        let mut payload = vec![0; size + 1];
        server.read_exact(&mut payload).unwrap();
        assert_eq!(payload.pop(), Some(wire::FRAME_END));
        (
            header[0],
            u16::from_be_bytes([header[1], header[2]]),
            payload,
        )
    }

    fn method_of(payload: &[u8]) -> (u16, u16) {
        Reader::new(payload).method_id().unwrap()
    }

    /// Writes `bytes` in pieces of `step` bytes, pausing between them, so the client reads
    /// frames cut anywhere.
    fn dribble(server: &mut TcpStream, bytes: &[u8], step: usize) {
        for piece in bytes.chunks(step) {
            server.write_all(piece).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn content(out: &mut Vec<u8>, channel: u16, body: &[u8]) {
        let start = wire::begin_frame(out, FRAME_HEADER, channel);
        out.extend_from_slice(&[0, 60, 0, 0]);
        out.extend_from_slice(&(body.len() as u64).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        wire::end_frame(out, start);
        for chunk in body.chunks(4096) {
            let start = wire::begin_frame(out, FRAME_BODY, channel);
            out.extend_from_slice(chunk);
            wire::end_frame(out, start);
        }
    }

    fn deliver(out: &mut Vec<u8>, channel: u16, tag: u64, body: &[u8]) {
        wire::method(out, channel, id::BASIC_DELIVER, |out| {
            wire::put_short_string(out, "ctag");
            out.extend_from_slice(&tag.to_be_bytes());
            out.push(0);
            wire::put_short_string(out, "ex");
            wire::put_short_string(out, "key");
        });
        content(out, channel, body);
    }

    /// Opens a channel, lets the test's broker send `frames` on it (cut every 3 bytes), and
    /// returns why the channel ended: a broker that breaks the protocol loses its connection.
    fn ended_by(frames: impl FnOnce(u16) -> Vec<u8> + Send + 'static) -> (&'static str, String) {
        let (session, mut server) = pair(Reading::Caller);
        let broker = std::thread::spawn(move || {
            let (_, channel, _) = read_frame(&mut server);
            let mut out = Vec::new();
            wire::method(&mut out, channel, id::CHANNEL_OPEN_OK, |out| {
                out.extend_from_slice(&[0; 4])
            });
            out.extend(frames(channel));
            dribble(&mut server, &out, 3);
            server
        });
        let channel = session.channel().unwrap();
        assert!(
            session.wait(channel.state(), Duration::from_secs(10), &|i| i
                .ended
                .is_some()),
            "the channel did not end"
        );
        let _server = broker.join().unwrap();
        assert!(
            channel.state().inbox().deliveries.is_empty(),
            "nothing delivered"
        );
        channel.ended().unwrap()
    }

    #[test]
    fn a_broker_that_breaks_the_protocol_loses_its_connection_with_the_reason() {
        let header = |out: &mut Vec<u8>, channel: u16, size: u64| {
            let start = wire::begin_frame(out, FRAME_HEADER, channel);
            out.extend_from_slice(&[0, 60, 0, 0]);
            out.extend_from_slice(&size.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            wire::end_frame(out, start);
        };
        let body = |out: &mut Vec<u8>, channel: u16, bytes: &[u8]| {
            let start = wire::begin_frame(out, FRAME_BODY, channel);
            out.extend_from_slice(bytes);
            wire::end_frame(out, start);
        };
        let deliver_method = |out: &mut Vec<u8>, channel: u16| {
            wire::method(out, channel, id::BASIC_DELIVER, |out| {
                wire::put_short_string(out, "ctag");
                out.extend_from_slice(&7u64.to_be_bytes());
                out.push(0);
                wire::put_short_string(out, "ex");
                wire::put_short_string(out, "key");
            });
        };
        for (frames, says) in [
            (
                Box::new(move |channel| {
                    let mut out = Vec::new();
                    deliver_method(&mut out, channel);
                    body(&mut out, channel, b"early");
                    out
                }) as Box<dyn FnOnce(u16) -> Vec<u8> + Send>,
                "a body frame before its content header",
            ),
            (
                Box::new(move |channel| {
                    let mut out = Vec::new();
                    deliver_method(&mut out, channel);
                    header(&mut out, channel, 4);
                    body(&mut out, channel, b"more than four");
                    out
                }),
                "14 body bytes for content of 4",
            ),
            (
                Box::new(move |channel| {
                    let mut out = Vec::new();
                    deliver_method(&mut out, channel);
                    header(&mut out, channel, 1 << 40);
                    out
                }),
                "announcing 1099511627776 bytes",
            ),
            (
                Box::new(move |channel| {
                    let mut out = Vec::new();
                    wire::method(&mut out, channel, id::BASIC_ACK, |out| {
                        out.extend_from_slice(&[0, 0, 1])
                    });
                    out
                }),
                "a confirm without its delivery tag",
            ),
            (
                Box::new(move |channel| {
                    let mut out = Vec::new();
                    wire::method(&mut out, channel, id::BASIC_DELIVER, |out| {
                        wire::put_short_string(out, "ctag");
                        out.extend_from_slice(&[0, 0]);
                    });
                    out
                }),
                "a delivery without its delivery tag",
            ),
            (
                Box::new(move |channel| {
                    // A body frame announcing more than frame_max (only its header is sent:
                    // the client must not wait for the rest).
                    let mut out = vec![FRAME_BODY];
                    out.extend_from_slice(&channel.to_be_bytes());
                    out.extend_from_slice(&(FRAME_MAX + 1).to_be_bytes());
                    out
                }),
                "larger than the frame_max",
            ),
            (
                Box::new(move |channel| {
                    let mut out = Vec::new();
                    deliver_method(&mut out, channel);
                    // The frame-end byte of the method frame replaced.
                    *out.last_mut().unwrap() = 0xAB;
                    out
                }),
                "without the frame-end byte",
            ),
        ] {
            let (kind, reason) = ended_by(frames);
            assert_eq!(kind, CONNECTION_CLOSED, "{reason}");
            assert!(
                (reason.contains("broke the protocol") || reason.contains("not an AMQP broker"))
                    && reason.contains(says),
                "{reason} / {says}"
            );
        }
    }

    #[test]
    fn a_connection_close_from_the_broker_is_answered_and_ends_every_channel_with_its_code() {
        let (session, mut server) = pair(Reading::Caller);
        let broker = std::thread::spawn(move || {
            let mut numbers = Vec::new();
            let mut out = Vec::new();
            for _ in 0..2 {
                let (_, channel, _) = read_frame(&mut server);
                numbers.push(channel);
                wire::method(&mut out, channel, id::CHANNEL_OPEN_OK, |out| {
                    out.extend_from_slice(&[0; 4])
                });
                server.write_all(&out).unwrap();
                out.clear();
            }
            wire::close(
                &mut out,
                0,
                id::CONNECTION_CLOSE,
                "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'",
            );
            // close() writes reply code 200: the broker's is 320.
            let code_at = 7 + 4;
            out[code_at..code_at + 2].copy_from_slice(&320u16.to_be_bytes());
            dribble(&mut server, &out, 5);
            // The client answers with connection.close-ok before it lets go.
            let (kind, channel, payload) = read_frame(&mut server);
            assert_eq!((kind, channel), (FRAME_METHOD, 0));
            assert_eq!(method_of(&payload), id::CONNECTION_CLOSE_OK);
        });
        let channels = [session.channel().unwrap(), session.channel().unwrap()];
        for channel in &channels {
            assert!(
                session.wait(channel.state(), Duration::from_secs(10), &|i| i
                    .ended
                    .is_some())
            );
            let (kind, reason) = channel.ended().unwrap();
            assert_eq!(kind, CONNECTION_CLOSED);
            assert!(
                reason.contains("320") && reason.contains("CONNECTION_FORCED"),
                "{reason}"
            );
        }
        broker.join().unwrap();
    }

    #[test]
    fn a_consumer_that_does_not_take_its_deliveries_holds_back_the_shared_connection() {
        let (session, mut server) = pair(Reading::Caller);
        let sent = Arc::new(AtomicUsize::new(0));
        let counted = sent.clone();
        let broker = std::thread::spawn(move || {
            let mut numbers = Vec::new();
            for _ in 0..2 {
                let (_, channel, _) = read_frame(&mut server);
                numbers.push(channel);
                let mut out = Vec::new();
                wire::method(&mut out, channel, id::CHANNEL_OPEN_OK, |out| {
                    out.extend_from_slice(&[0; 4])
                });
                server.write_all(&out).unwrap();
            }
            // Deliveries for the second channel only, as fast as the socket takes them,
            // until the client lets go (64 MiB at most).
            let body = vec![7u8; 64 * 1024];
            let mut out = Vec::new();
            for tag in 1..=1024u64 {
                out.clear();
                deliver(&mut out, numbers[1], tag, &body);
                if server.write_all(&out).is_err() {
                    break;
                }
                counted.fetch_add(body.len(), Ordering::Relaxed);
            }
        });
        let quiet = session.channel().unwrap();
        let flooded = session.channel().unwrap();
        // The first channel's consumer reads for both for a second; the second's never polls.
        assert!(!session.wait(quiet.state(), Duration::from_secs(1), &|i| !i
            .deliveries
            .is_empty()));
        let held = flooded.state().inbox().deliveries.bytes();
        assert!(held >= demux::INBOX_LIMIT, "held {held}");
        // What one read can bring beyond the limit, and no more.
        assert!(
            held <= demux::INBOX_LIMIT + READ_CHUNK.max(2 * FRAME_MAX as usize),
            "held {held}"
        );
        assert!(
            sent.load(Ordering::Relaxed) < 64 << 20,
            "the broker was held back"
        );
        // Once the second consumer takes its deliveries, reading goes on.
        flooded.state().inbox().deliveries.clear();
        session.wait(quiet.state(), Duration::from_millis(300), &|_| false);
        assert!(flooded.state().inbox().deliveries.bytes() > 0);
        drop((quiet, flooded, session));
        broker.join().unwrap();
    }

    #[test]
    fn a_consumer_cancelled_by_the_broker_is_told_to_its_channel() {
        let (session, mut server) = pair(Reading::Caller);
        let broker = std::thread::spawn(move || {
            let (_, channel, _) = read_frame(&mut server);
            let mut out = Vec::new();
            wire::method(&mut out, channel, id::CHANNEL_OPEN_OK, |out| {
                out.extend_from_slice(&[0; 4])
            });
            // basic.cancel: consumer tag, no-wait (the queue was deleted).
            wire::method(&mut out, channel, id::BASIC_CANCEL, |out| {
                wire::put_short_string(out, "ctag");
                out.push(1);
            });
            dribble(&mut server, &out, 2);
            server
        });
        let channel = session.channel().unwrap();
        assert!(
            session.wait(channel.state(), Duration::from_secs(10), &|i| i.cancelled),
            "the cancel was not told"
        );
        assert!(
            channel.ended().is_none(),
            "a cancel leaves the channel open"
        );
        drop(broker.join().unwrap());
    }

    #[test]
    fn random_bytes_from_the_broker_end_the_connection_with_a_reason() {
        for seed in 1..=5u64 {
            let (kind, reason) = ended_by(move |_| {
                let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                (0..1_500)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect()
            });
            assert_eq!(kind, CONNECTION_CLOSED, "seed {seed}: {reason}");
        }
    }

    #[test]
    fn deliveries_cut_anywhere_are_put_together_and_a_broker_close_ends_the_channel() {
        let (session, mut server) = pair(Reading::Caller);
        let broker = std::thread::spawn(move || {
            let (kind, channel, payload) = read_frame(&mut server);
            assert_eq!(
                (kind, method_of(&payload)),
                (FRAME_METHOD, id::CHANNEL_OPEN)
            );
            let mut out = Vec::new();
            wire::method(&mut out, channel, id::CHANNEL_OPEN_OK, |out| {
                out.extend_from_slice(&[0; 4])
            });
            let big: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
            deliver(&mut out, channel, 1, &big);
            deliver(&mut out, channel, 2, b"");
            deliver(&mut out, channel, 3, b"small");
            dribble(&mut server, &out, 997);
            // The client acknowledges what it received, in one write.
            let acks: Vec<_> = (0..2).map(|_| read_frame(&mut server)).collect();
            let mut out = Vec::new();
            wire::method(&mut out, channel, id::CHANNEL_CLOSE, |out| {
                out.extend_from_slice(&404u16.to_be_bytes());
                wire::put_short_string(out, "NOT_FOUND - no queue 'q'");
                out.extend_from_slice(&[0, 60, 0, 20]);
            });
            server.write_all(&out).unwrap();
            let (_, _, close_ok) = read_frame(&mut server);
            // Nothing of the channel may follow its close-ok.
            server
                .set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let mut after = [0u8; 1];
            let more = server.read(&mut after);
            (big, acks, method_of(&close_ok), more, server)
        });
        let channel = session.channel().unwrap();
        let mut got = Vec::new();
        let mut out = Vec::new();
        let started = Instant::now();
        while got.len() < 3 && started.elapsed() < Duration::from_secs(10) {
            session.wait(channel.state(), Duration::from_millis(100), &|i| {
                !i.deliveries.is_empty()
            });
            let mut inbox = channel.state().inbox();
            for (tag, body) in inbox.deliveries.iter() {
                got.push((tag, body.to_vec()));
                if tag != 2 {
                    wire::basic_ack(&mut out, channel.number(), tag, false);
                }
            }
            inbox.deliveries.clear();
        }
        session.write(&mut out).unwrap();
        assert!(
            session.wait(channel.state(), Duration::from_secs(10), &|i| i
                .ended
                .is_some())
        );
        let mut late = Vec::new();
        wire::basic_ack(&mut late, channel.number(), 3, false);
        assert_eq!(channel.write(&mut late), Err(CHANNEL_CLOSED));
        let (big, acks, close_ok, more, _server) = broker.join().unwrap();
        assert!(
            more.as_ref()
                .is_err_and(|e| e.kind() == io::ErrorKind::WouldBlock),
            "{more:?}"
        );
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], (1, big));
        assert_eq!(got[1], (2, Vec::new()));
        assert_eq!(got[2], (3, b"small".to_vec()));
        let acked: Vec<u64> = acks
            .iter()
            .map(|(_, _, p)| {
                let mut r = Reader::new(p);
                assert_eq!(r.method_id(), Some(id::BASIC_ACK));
                r.u64().unwrap()
            })
            .collect();
        assert_eq!(acked, vec![1, 3]);
        assert_eq!(close_ok, id::CHANNEL_CLOSE_OK);
        let (kind, reason) = channel.ended().unwrap();
        assert_eq!(kind, CHANNEL_CLOSED);
        assert!(reason.contains("404 NOT_FOUND"), "{reason}");
    }

    #[test]
    fn confirms_and_returns_reach_a_waiting_producer_and_a_lost_connection_ends_every_channel() {
        let (session, mut server) = pair(Reading::Thread);
        let broker = std::thread::spawn(move || {
            let (_, channel, _) = read_frame(&mut server);
            let mut out = Vec::new();
            wire::method(&mut out, channel, id::CHANNEL_OPEN_OK, |out| {
                out.extend_from_slice(&[0; 4])
            });
            server.write_all(&out).unwrap();
            // Two publishes arrive as method, header and body frames.
            let frames: Vec<_> = (0..6).map(|_| read_frame(&mut server)).collect();
            std::thread::sleep(Duration::from_millis(50));
            let mut out = Vec::new();
            wire::method(&mut out, channel, id::BASIC_RETURN, |out| {
                out.extend_from_slice(&312u16.to_be_bytes());
                wire::put_short_string(out, "NO_ROUTE");
                wire::put_short_string(out, "ex");
                wire::put_short_string(out, "key");
            });
            content(&mut out, channel, &frames[5].2);
            wire::method(&mut out, channel, id::BASIC_ACK, |out| {
                out.extend_from_slice(&2u64.to_be_bytes());
                out.push(1);
            });
            server.write_all(&out).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            drop(server);
            frames
        });
        let channel = session.channel().unwrap();
        let publisher = Publisher::new(channel.number(), "ex", "key", true, false, &[], FRAME_MAX);
        let mut out = Vec::new();
        for sequence in 0..2 {
            let mut body = vec![0; 30];
            Envelope {
                producer: 7,
                sequence,
                intended_ns: 5,
            }
            .write(&mut body);
            publisher.publish(&mut out, &body);
        }
        session.write(&mut out).unwrap();
        let before = Clock::process().now_ns();
        assert!(
            session.wait(channel.state(), Duration::from_secs(10), &|i| i
                .events
                .len()
                >= 2)
        );
        let events = std::mem::take(&mut channel.state().inbox().events);
        match &events[..] {
            [ChannelEvent::Returned(envelope), ChannelEvent::Confirm {
                tag: 2,
                multiple: true,
                ack: true,
                at_ns,
            }] => {
                assert_eq!((envelope.producer, envelope.sequence), (7, 1));
                assert!(*at_ns >= before + 40_000_000, "stamped on arrival");
            }
            other => panic!("{other:?}"),
        }
        let frames = broker.join().unwrap();
        let kinds: Vec<u8> = frames.iter().map(|f| f.0).collect();
        assert_eq!(kinds, [FRAME_METHOD, FRAME_HEADER, FRAME_BODY].repeat(2));
        assert!(
            session.wait(channel.state(), Duration::from_secs(10), &|i| i
                .ended
                .is_some())
        );
        assert_eq!(channel.ended().unwrap().0, CONNECTION_CLOSED);
        assert!(!session.is_open());
        let mut more = vec![1];
        assert_eq!(session.write(&mut more), Err(CONNECTION_CLOSED));
    }
}
