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
//! Reading: a connection has no thread of its own. Whoever waits reads the socket for
//! everyone ([`Session::wait`]), routing other channels' frames to their inboxes and waking
//! the others when it stops reading, so a delivery is handed over by the thread that read it,
//! with no cross-thread wake-up. A producer reads its confirms when it polls, between sends:
//! the kernel stamps each segment as it arrives ([`brokerbench_driver::arrival`]), so a
//! confirm read after the producer's sleep keeps the time it arrived, and no thread wakes for
//! it.
//!
//! Frames are routed by channel into each channel's [`Inbox`]: confirms and returns as
//! [`ChannelEvent`]s, deliveries into one byte arena, replies to synchronous methods, and the
//! channel's end (closed by the broker, consumer cancelled, connection lost).

use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::config::AmqpUri;
use brokerbench_driver::{Clock, DriverError, Envelope};

use crate::probe;
use crate::wire::{self, id, next_frame, Reader, FRAME_BODY, FRAME_HEADER, FRAME_METHOD};

/// How long declaring, binding or deleting one object (or any synchronous method) may take.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long closing a channel or connection may hold up the end of a run.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
pub use brokerbench_driver::CONNECTION_CLOSED;
/// Kind of a send or poll failure after the broker closed the channel.
pub const CHANNEL_CLOSED: &str = "channel_closed";

/// A producer writes its buffer out once it holds this much, without waiting for `poll`.
pub const FLUSH_AT: usize = 64 * 1024;
/// Bytes a read asks for at most.
const READ_CHUNK: usize = 256 * 1024;

mod channel;
mod demux;
mod socket;

use brokerbench_driver::arrival::{recv_now, Received};
use channel::lock;
pub use channel::{Channel, ChannelEvent, ChannelState, Deliveries, Inbox};
use socket::{send_now, wait_fd};

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
    /// Whether the last read left the socket empty (it took less than it had room for): the
    /// next one waits for readiness first instead of trying a read that would find nothing.
    drained: bool,
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
    /// Threads waiting while another one reads for them.
    turn_waiters: AtomicUsize,
    clock: Clock,
}

/// One AMQP connection of the message path.
pub struct Session {
    shared: Arc<Shared>,
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
    pub fn open(uri: &AmqpUri, name: &str) -> Result<Session, DriverError> {
        let heartbeat = uri.heartbeat.unwrap_or(DEFAULT_HEARTBEAT_S);
        let opened = probe::open(uri, OPEN_TIMEOUT, name, heartbeat)
            .map_err(|e| crate::probe_error(uri, e))?;
        Session::start(opened, uri.address())
    }

    /// A session on a connection whose handshake is done.
    fn start(opened: probe::Opened, address: String) -> Result<Session, DriverError> {
        let stream = opened.stream;
        let clone = |s: &TcpStream| {
            s.try_clone()
                .map_err(|e| DriverError::Other(format!("duplicating an AMQP socket: {e}")))
        };
        let read_stream = clone(&stream)?;
        brokerbench_driver::arrival::stamp_arrivals(read_stream.as_raw_fd())
            .map_err(|e| DriverError::Other(format!("asking for receive stamps: {e}")))?;
        let shared = Arc::new(Shared {
            read: Mutex::new(ReadSide {
                stream: read_stream,
                buffer: vec![0; READ_CHUNK.max(opened.frame_max as usize * 2)],
                start: 0,
                end: 0,
                drained: false,
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
            clock: Clock::process(),
        });
        Ok(Session { shared, address })
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

    /// Waits up to `timeout` until `until` holds for `channel`'s inbox, reading the socket
    /// meanwhile unless another thread is; whether it holds.
    pub fn wait(
        &self,
        channel: &ChannelState,
        timeout: Duration,
        until: &dyn Fn(&Inbox) -> bool,
    ) -> bool {
        self.shared.read_until(channel, timeout, until)
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

    /// Sends a heartbeat when one is due.
    fn heartbeat(&self) {
        let Some(every) = self.heartbeat else {
            return;
        };
        let due = lock(&self.write).last_write.elapsed() >= every;
        if due {
            let _ = self.write(&mut wire::HEARTBEAT.to_vec());
        }
    }

    /// After a read found nothing: a broker silent for two heartbeat intervals is gone (a
    /// half-open connection, a paused broker), the spec's rule. Judged only then, so that a
    /// connection nobody read for a while (a producer waiting for its run to start) is not
    /// taken for silent while the broker's heartbeats wait in its socket.
    fn judge_silence(&self) {
        let Some(every) = self.heartbeat else {
            return;
        };
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
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
