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

/// What arrived on a channel, in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelEvent {
    /// basic.ack (`ack`) or basic.nack in confirm mode, read at `at_ns` ([`Clock::process`]).
    Confirm {
        tag: u64,
        multiple: bool,
        ack: bool,
        at_ns: u64,
    },
    /// basic.return of a mandatory message no queue took.
    Returned(Envelope),
}

/// Deliveries of one channel, their bodies in one arena.
#[derive(Debug, Default)]
pub struct Deliveries {
    bytes: Vec<u8>,
    /// Delivery tag and where the body lies in `bytes`.
    items: Vec<(u64, usize, usize)>,
}

impl Deliveries {
    fn push(&mut self, tag: u64, body: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(body);
        self.items.push((tag, start, self.bytes.len()));
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Delivery tags and bodies, in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.items
            .iter()
            .map(|&(tag, start, end)| (tag, &self.bytes[start..end]))
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.items.clear();
    }
}

/// What the connection's reader left for a channel's owner.
#[derive(Debug, Default)]
pub struct Inbox {
    pub events: Vec<ChannelEvent>,
    pub deliveries: Deliveries,
    /// The reply to the synchronous method last sent: its ids and arguments.
    reply: Option<((u16, u16), Vec<u8>)>,
    /// Why the channel cannot be used any more: kind and the broker's reason.
    pub ended: Option<(&'static str, String)>,
    /// The broker cancelled the channel's consumer (its queue was deleted).
    pub cancelled: bool,
}

/// One channel's inbox and the owner waiting on it.
#[derive(Debug, Default)]
pub struct ChannelState {
    inbox: Mutex<Inbox>,
    ready: Condvar,
    /// Owners waiting on `ready`; changed only under the `inbox` lock, so a reader that pushes
    /// and then reads it (under the same lock) never misses one; signalling is skipped (a
    /// system call saved) when nobody waits.
    waiting: AtomicUsize,
    /// Set with `Inbox::ended`, read without the lock on every send.
    ended: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl ChannelState {
    pub fn inbox(&self) -> MutexGuard<'_, Inbox> {
        lock(&self.inbox)
    }

    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Relaxed)
    }

    fn end(&self, kind: &'static str, reason: String) {
        let mut inbox = self.inbox();
        if inbox.ended.is_none() {
            inbox.ended = Some((kind, reason));
        }
        self.ended.store(true, Ordering::Relaxed);
        drop(inbox);
        self.ready.notify_all();
    }

    /// Waits up to `timeout` on the connection's reader thread until `until` holds.
    fn wait_signalled(&self, timeout: Duration, until: &dyn Fn(&Inbox) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut inbox = self.inbox();
        loop {
            if until(&inbox) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.waiting.fetch_add(1, Ordering::Relaxed);
            inbox = self
                .ready
                .wait_timeout(inbox, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

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
    /// Set once the connection is gone.
    lost: AtomicBool,
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

impl Session {
    /// Opens a connection named `name` (shown in the management UI).
    pub fn open(uri: &AmqpUri, name: &str, reading: Reading) -> Result<Session, DriverError> {
        let opened = probe::open(uri, OPEN_TIMEOUT, name, uri.heartbeat.unwrap_or(0))
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

    fn heartbeat(&self) {
        let Some(every) = self.heartbeat else {
            return;
        };
        let due = lock(&self.write).last_write.elapsed() >= every;
        if due {
            let _ = self.write(&mut wire::HEARTBEAT.to_vec());
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

    /// The reader thread of a [`Reading::Thread`] connection.
    fn read_forever(&self) {
        let mut side = lock(&self.read);
        while !self.lost.load(Ordering::Relaxed) {
            if !self.read_once(&mut side, self.heartbeat) {
                break;
            }
            self.heartbeat();
        }
    }

    /// Reads (as a [`Reading::Caller`] connection) until `until` holds for `channel` or
    /// `timeout` passes; whether it holds.
    fn read_until(
        &self,
        channel: &ChannelState,
        timeout: Duration,
        until: &dyn Fn(&Inbox) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        let mut first = true;
        loop {
            if until(&channel.inbox()) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if (left.is_zero() && !first) || self.lost.load(Ordering::Relaxed) {
                return false;
            }
            first = false;
            self.heartbeat();
            let Some(mut side) = self.wait_for_turn(channel, left, until) else {
                continue;
            };
            if until(&channel.inbox()) {
                drop(side);
                self.pass_turn();
                return true;
            }
            let alive = self.read_once(&mut side, Some(left));
            drop(side);
            self.pass_turn();
            if !alive {
                return until(&channel.inbox());
            }
        }
    }

    /// The read side if no other consumer of this connection is reading; else waits (up to
    /// `left`) until that one routes something to `channel` or stops reading, and returns
    /// None.
    fn wait_for_turn(
        &self,
        channel: &ChannelState,
        left: Duration,
        until: &dyn Fn(&Inbox) -> bool,
    ) -> Option<MutexGuard<'_, ReadSide>> {
        let mut inbox = channel.inbox();
        loop {
            match self.read.try_lock() {
                Ok(side) => return Some(side),
                Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
            if until(&inbox) {
                return None;
            }
            // The reader passes the turn only after it let go of the read side, and takes
            // this inbox's lock to see `waiting`: registered here under that lock, with the
            // read side seen taken, this waiter cannot miss the wake-up.
            channel.waiting.fetch_add(1, Ordering::Relaxed);
            self.turn_waiters.fetch_add(1, Ordering::Relaxed);
            let (guard, timed_out) = channel
                .ready
                .wait_timeout(inbox, left)
                .unwrap_or_else(|e| e.into_inner());
            inbox = guard;
            channel.waiting.fetch_sub(1, Ordering::Relaxed);
            self.turn_waiters.fetch_sub(1, Ordering::Relaxed);
            if timed_out.timed_out() || until(&inbox) {
                return None;
            }
        }
    }

    /// After a consumer stopped reading: wakes the consumers waiting for their turn.
    fn pass_turn(&self) {
        if self.turn_waiters.load(Ordering::Relaxed) == 0 {
            return;
        }
        let channels: Vec<_> = lock(&self.channels).iter().flatten().cloned().collect();
        for channel in channels {
            let inbox = channel.inbox();
            if channel.waiting.load(Ordering::Relaxed) > 0 {
                drop(inbox);
                channel.ready.notify_all();
            }
        }
    }

    /// Reads once (waiting up to `timeout`, None = as long as it takes) and routes every
    /// complete frame; false once the connection is gone.
    fn read_once(&self, side: &mut ReadSide, timeout: Option<Duration>) -> bool {
        if side.start == side.end {
            side.start = 0;
            side.end = 0;
        } else if side.buffer.len() - side.end < self.frame_max as usize + wire::FRAME_OVERHEAD {
            side.buffer.copy_within(side.start..side.end, 0);
            side.end -= side.start;
            side.start = 0;
        }
        let fd = side.stream.as_raw_fd();
        let got = match recv_now(fd, &mut side.buffer[side.end..]) {
            Ok(Some(n)) => Ok(n),
            Ok(None) if timeout.is_some_and(|t| t.is_zero()) => return true,
            Ok(None) => {
                if !wait_fd(fd, libc::POLLIN, timeout) {
                    return true;
                }
                match recv_now(fd, &mut side.buffer[side.end..]) {
                    Ok(Some(n)) => Ok(n),
                    Ok(None) => return true,
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        match got {
            Ok(0) => {
                self.lose("the broker closed the connection".into());
                return false;
            }
            Ok(n) => side.end += n,
            Err(e) => {
                if !self.lost.load(Ordering::Relaxed) {
                    self.lose(format!("reading from the socket: {e}"));
                }
                return false;
            }
        }
        let at_ns = self.clock.now_ns();
        let mut alive = true;
        loop {
            let frame =
                match next_frame(&side.buffer[side.start..side.end], self.frame_max as usize) {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break,
                    Err(wire::Malformed(why)) => {
                        self.lose(why.into());
                        alive = false;
                        break;
                    }
                };
            let (from, to) = (side.start + frame.payload.0, side.start + frame.payload.1);
            side.start += frame.len;
            let ReadSide {
                buffer,
                content,
                touched,
                replies,
                ..
            } = side;
            if !self.route(
                frame.kind,
                frame.channel,
                &buffer[from..to],
                at_ns,
                content,
                touched,
                replies,
            ) {
                alive = false;
                break;
            }
        }
        if !side.replies.is_empty() {
            let _ = self.write(&mut side.replies);
        }
        for channel in side.touched.drain(..) {
            channel.ready.notify_all();
        }
        alive
    }

    /// Routes one frame to its channel; false when the connection ended.
    #[allow(clippy::too_many_arguments)]
    fn route(
        &self,
        kind: u8,
        number: u16,
        payload: &[u8],
        at_ns: u64,
        content: &mut Vec<Option<Content>>,
        touched: &mut Vec<Arc<ChannelState>>,
        replies: &mut Vec<u8>,
    ) -> bool {
        let Some(channel) = self.channel(number) else {
            // A channel already closed on our side: late frames are dropped.
            return true;
        };
        let slot = number as usize;
        if content.len() <= slot {
            content.resize_with(slot + 1, || None);
        }
        let mut notify = false;
        match kind {
            FRAME_METHOD => {
                let mut r = Reader::new(payload);
                let Some(method) = r.method_id() else {
                    return true;
                };
                let mut inbox = channel.inbox();
                match method {
                    id::BASIC_ACK | id::BASIC_NACK => {
                        let tag = r.u64().unwrap_or(0);
                        let multiple = r.u8().unwrap_or(0) & 1 == 1;
                        inbox.events.push(ChannelEvent::Confirm {
                            tag,
                            multiple,
                            ack: method == id::BASIC_ACK,
                            at_ns,
                        });
                        notify = true;
                    }
                    id::BASIC_DELIVER => {
                        let _ = r.skip_short_string();
                        let tag = r.u64().unwrap_or(0);
                        content[slot] = Some(Content {
                            tag: Some(tag),
                            size: None,
                            body: Vec::new(),
                        });
                    }
                    id::BASIC_RETURN => {
                        content[slot] = Some(Content {
                            tag: None,
                            size: None,
                            body: Vec::new(),
                        });
                    }
                    id::BASIC_CANCEL => {
                        inbox.cancelled = true;
                        notify = true;
                    }
                    id::CHANNEL_CLOSE => {
                        let reason = r.close_reason();
                        if inbox.ended.is_none() {
                            inbox.ended = Some((CHANNEL_CLOSED, reason));
                        }
                        channel.ended.store(true, Ordering::Relaxed);
                        wire::method(replies, number, id::CHANNEL_CLOSE_OK, |_| {});
                        notify = true;
                    }
                    id::CONNECTION_CLOSE => {
                        let reason = r.close_reason();
                        drop(inbox);
                        wire::method(replies, 0, id::CONNECTION_CLOSE_OK, |_| {});
                        let _ = self.write(replies);
                        self.lose(format!("the broker closed the connection: {reason}"));
                        return false;
                    }
                    id::CONNECTION_CLOSE_OK => {
                        inbox.reply = Some((method, Vec::new()));
                        drop(inbox);
                        self.lost.store(true, Ordering::Relaxed);
                        channel.ready.notify_all();
                        return false;
                    }
                    other => {
                        // Replies to synchronous methods (open-ok, select-ok, qos-ok,
                        // consume-ok, close-ok); anything else is not expected and ignored.
                        inbox.reply = Some((other, r.rest().to_vec()));
                        notify = true;
                    }
                }
                if notify && channel.waiting.load(Ordering::Relaxed) > 0 {
                    drop(inbox);
                    if !touched.iter().any(|t| Arc::ptr_eq(t, &channel)) {
                        touched.push(channel);
                    }
                }
            }
            FRAME_HEADER => {
                if let Some(c) = content[slot].as_mut() {
                    let mut r = Reader::new(payload);
                    let size = r.take(4).and_then(|_| r.u64()).unwrap_or(0);
                    c.size = Some(size);
                    if size == 0 {
                        self.complete(&channel, content[slot].take(), &[], touched);
                    }
                }
            }
            FRAME_BODY => {
                let Some(c) = content[slot].as_mut() else {
                    return true;
                };
                let size = c.size.unwrap_or(0) as usize;
                if c.body.is_empty() && payload.len() >= size {
                    // The usual case: the whole body in one frame, copied once.
                    let c = content[slot].take();
                    self.complete(&channel, c, payload, touched);
                } else {
                    c.body.extend_from_slice(payload);
                    if c.body.len() >= size {
                        let mut c = content[slot].take();
                        let body = c.as_mut().map(|c| std::mem::take(&mut c.body));
                        self.complete(&channel, c, body.as_deref().unwrap_or(&[]), touched);
                    }
                }
            }
            _ => {}
        }
        true
    }

    /// Hands a complete delivery or returned message to its channel.
    fn complete(
        &self,
        channel: &Arc<ChannelState>,
        content: Option<Content>,
        body: &[u8],
        touched: &mut Vec<Arc<ChannelState>>,
    ) {
        let Some(content) = content else {
            return;
        };
        let mut inbox = channel.inbox();
        match content.tag {
            Some(tag) => inbox.deliveries.push(tag, body),
            None => {
                if let Ok(envelope) = Envelope::read(body) {
                    inbox.events.push(ChannelEvent::Returned(envelope));
                }
            }
        }
        if channel.waiting.load(Ordering::Relaxed) > 0 {
            drop(inbox);
            if !touched.iter().any(|t| Arc::ptr_eq(t, channel)) {
                touched.push(channel.clone());
            }
        }
    }
}

/// One channel of a [`Session`]; closed (channel.close) when dropped.
pub struct Channel {
    session: Arc<Session>,
    state: Arc<ChannelState>,
    number: u16,
    open: bool,
}

impl Channel {
    pub fn number(&self) -> u16 {
        self.number
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    pub fn state(&self) -> &ChannelState {
        &self.state
    }

    /// Why the channel cannot be used any more, if it cannot: kind and reason.
    pub fn ended(&self) -> Option<(&'static str, String)> {
        if !self.state.has_ended() {
            return None;
        }
        self.state.inbox().ended.clone()
    }

    /// Writes frames of this channel (see [`Session::write`]); nothing once the channel has
    /// ended, whose kind [`Channel::ended`] then tells.
    pub fn write(&self, bytes: &mut Vec<u8>) -> Result<(), &'static str> {
        self.session.shared.write_on(Some(&self.state), bytes)
    }

    /// Sends the method frame `frame` and waits up to `timeout` for the reply `expect`; its
    /// arguments, or why not.
    pub fn call(
        &mut self,
        mut frame: Vec<u8>,
        expect: (u16, u16),
        timeout: Duration,
    ) -> Result<Vec<u8>, String> {
        let deadline = Instant::now() + timeout;
        self.state.inbox().reply = None;
        let gone = |channel: &Channel| {
            channel
                .ended()
                .map_or_else(|| "the connection is closed".to_string(), |(_, r)| r)
        };
        self.write(&mut frame).map_err(|_| gone(self))?;
        // Nobody else may write after this: see that the method leaves.
        if !self.session.flush_until(deadline) {
            return Err(if self.session.is_open() {
                format!("the broker took nothing for {timeout:?}")
            } else {
                gone(self)
            });
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let answered = self.session.wait(&self.state, left, &|inbox| {
            inbox.reply.is_some() || inbox.ended.is_some()
        });
        let mut inbox = self.state.inbox();
        match inbox.reply.take() {
            Some((got, arguments)) if got == expect => Ok(arguments),
            Some((got, _)) => Err(format!(
                "the broker answered method {}.{} instead of {}.{}",
                got.0, got.1, expect.0, expect.1
            )),
            None => Err(match &inbox.ended {
                Some((_, reason)) => reason.clone(),
                None if !answered => format!("no answer within {timeout:?}"),
                None => "no answer".into(),
            }),
        }
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // A socket that does not take what was written (a blocked broker) gets no close
        // handshake: the connection's close, or its end, follows.
        if self.open
            && !self.state.has_ended()
            && self.session.is_open()
            && self.session.backlog() == 0
        {
            let mut frame = Vec::new();
            wire::close(
                &mut frame,
                self.number,
                id::CHANNEL_CLOSE,
                "brokerbench done",
            );
            let _ = self.call(frame, id::CHANNEL_CLOSE_OK, CLOSE_TIMEOUT);
        }
        let mut channels = lock(&self.session.shared.channels);
        if let Some(slot) = channels.get_mut(self.number as usize) {
            *slot = None;
        }
    }
}

/// Sends what the socket takes without blocking: bytes taken (0 when it is full).
fn send_now(stream: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    let mut sent = 0;
    while sent < bytes.len() {
        // SAFETY: the pointer and length describe the live slice `bytes[sent..]`.
        let n = unsafe {
            libc::send(
                stream.as_raw_fd(),
                bytes[sent..].as_ptr().cast(),
                bytes.len() - sent,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            sent += n as usize;
            continue;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => break,
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
    }
    Ok(sent)
}

/// Reads what is there without blocking: Some(bytes read, 0 at the end of the stream) or None
/// when nothing is.
fn recv_now(fd: i32, into: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: the pointer and length describe the live, writable slice `into`.
        let n = unsafe { libc::recv(fd, into.as_mut_ptr().cast(), into.len(), libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
    }
}

/// Waits until `fd` is ready for `events` or `timeout` passes (None: no limit); whether it is
/// ready (or in error, which the next read or write reports).
fn wait_fd(fd: i32, events: i16, timeout: Option<Duration>) -> bool {
    let millis = match timeout {
        None => -1,
        Some(t) => t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32,
    };
    let mut poll = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut poll, 1, millis) };
    n > 0
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
