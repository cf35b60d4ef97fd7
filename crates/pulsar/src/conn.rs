//! One connection to a Pulsar broker over its binary protocol: connect (CONNECT, CONNECTED
//! or ERROR), commands out through one buffer, frames in cut out of one buffer, requests
//! that wait for the answer carrying their request id, and the broker's PINGs answered.

use brokerbench_driver::arrival::LastRead;
use brokerbench_driver::ReadBuf;
use std::io::Write;
use std::net::TcpStream;

use std::time::{Duration, Instant};

use crate::commands::{self, kind, next_frame, Frame};
use crate::config::PulsarUrl;

pub use brokerbench_driver::CONNECTION_CLOSED;

pub use brokerbench_driver::net::ConnectError;

/// A producer's or consumer's way back to the broker after a lost connection; it sets itself
/// up again on the new connection (its producers, its subscriptions).
pub type Reconnector = brokerbench_driver::Reconnector<Conn, PulsarUrl>;

/// An answer to a request, copied out of the buffer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub kind: u32,
    pub command: Vec<u8>,
}

impl Answer {
    fn frame(&self) -> Frame<'_> {
        Frame {
            kind: self.kind,
            command: &self.command,
            rest: &[],
        }
    }

    pub fn number(&self, field: u32) -> Option<u64> {
        self.frame().number(field)
    }

    pub fn text(&self, field: u32) -> String {
        self.frame().text(field)
    }

    pub fn error(&self) -> String {
        self.frame().error()
    }
}

pub struct Conn {
    stream: TcpStream,
    inbox: ReadBuf,
    out: Vec<u8>,
    /// When the bytes of the last read arrived (the stamp of acknowledgements it brought).
    read_at: LastRead,
    /// Whole frames that came while a request waited for its answer (deliveries, a change
    /// of the active consumer): handed out first by the next poll.
    stash: Vec<u8>,
    next_request: u64,
    /// CONNECTED's `server_version`: `Pulsar Server4.0.8`.
    pub server: String,
}

impl Conn {
    /// When the bytes of the last read arrived; what a poll hands on came with it.
    pub fn last_read(&self) -> LastRead {
        self.read_at.clone()
    }

    /// Connects and logs in within `timeout` in all.
    /// A new connection for a producer or consumer that lost its own (an attempt of its
    /// [`Reconnector`]), or None.
    pub fn redial(url: &PulsarUrl) -> Option<Conn> {
        Conn::connect(url, brokerbench_driver::REDIAL_TIMEOUT).ok()
    }

    pub fn connect(url: &PulsarUrl, timeout: Duration) -> Result<Conn, ConnectError> {
        let deadline = Instant::now() + timeout;
        let mut conn = Conn {
            stream: open(url, deadline)?,
            inbox: ReadBuf::default(),
            out: Vec::with_capacity(64 * 1024),
            read_at: LastRead::default(),
            stash: Vec::new(),
            next_request: 1,
            server: String::new(),
        };
        commands::connect(&mut conn.out, credentials(url));
        let logging_in = |e| brokerbench_driver::net::while_logging_in(url.tls.as_ref(), e);
        conn.flush()
            .map_err(|e| logging_in(ConnectError::Unreachable(e.to_string())))?;
        conn.server = conn
            .await_connected(deadline, timeout)
            .map_err(logging_in)?;
        Ok(conn)
    }

    /// The answer to CONNECT: CONNECTED's server version, or why not.
    fn await_connected(
        &mut self,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<String, ConnectError> {
        let mut answer = None;
        while answer.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ConnectError::Protocol(format!(
                    "no CONNECTED within {timeout:?}: is this Pulsar's binary port (6650)?"
                )));
            }
            self.poll(left, &mut |frame, _| {
                answer = Some(match frame.kind {
                    kind::CONNECTED => Ok(frame.text(1)),
                    kind::ERROR => Err(refusal(&frame)),
                    other => Err(ConnectError::Protocol(format!(
                        "command {other} instead of CONNECTED"
                    ))),
                });
            })
            .map_err(ConnectError::Unreachable)?;
        }
        answer.expect("the loop ends with an answer")
    }

    /// The buffer commands are written into; [`Conn::flush`] or the next poll sends them.
    pub fn out(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Sends what is written.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if !self.out.is_empty() {
            self.stream.write_all(&self.out)?;
            self.out.clear();
        }
        Ok(())
    }

    /// A new request id.
    pub fn request_id(&mut self) -> u64 {
        self.next_request += 1;
        self.next_request
    }

    /// Sends what is written, then hands every whole frame that has arrived to `on_frame`
    /// (a PING is answered here), waiting at most `timeout` for the first bytes; `on_frame`
    /// may write commands (acks, permits), sent before it returns. Err([`CONNECTION_CLOSED`])
    /// once the connection is gone.
    pub fn poll(
        &mut self,
        timeout: Duration,
        on_frame: &mut dyn FnMut(Frame<'_>, &mut Vec<u8>),
    ) -> Result<usize, String> {
        self.flush().map_err(|_| CONNECTION_CLOSED.to_string())?;
        let mut handled = self.drain_stash(on_frame)?;
        handled += self.drain(on_frame)?;
        if handled == 0 && self.receive(timeout)? {
            handled = self.drain(on_frame)?;
        }
        self.flush().map_err(|_| CONNECTION_CLOSED.to_string())?;
        Ok(handled)
    }

    /// Sends the command `write` writes with request id `id`, and waits for the answer
    /// carrying that id (an ERROR as Err, with the broker's words); frames that come
    /// meanwhile are kept for the next poll.
    pub fn request(
        &mut self,
        what: &str,
        id: u64,
        timeout: Duration,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> Result<Answer, String> {
        write(&mut self.out);
        self.flush().map_err(|_| CONNECTION_CLOSED.to_string())?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(answer) = self.take_answer(id)? {
                if answer.kind == kind::ERROR {
                    return Err(answer.error());
                }
                return Ok(answer);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("no answer to {what} within {timeout:?}"));
            }
            self.receive(left)?;
        }
    }

    /// Goes through the whole frames in the buffer up to the answer carrying request id
    /// `id`, which it takes out; the others are stashed for the next poll (PINGs answered).
    fn take_answer(&mut self, id: u64) -> Result<Option<Answer>, String> {
        loop {
            let unread = self.inbox.unread();
            let Some((frame, used)) =
                next_frame(unread).map_err(|e| format!("malformed_frame: {e}"))?
            else {
                return Ok(None);
            };
            let ping = frame.kind == kind::PING;
            let mut answer = None;
            if ping {
                commands::pong(&mut self.out);
            } else if frame.request_id() == Some(id) && is_answer(frame.kind) {
                answer = Some(Answer {
                    kind: frame.kind,
                    command: frame.command.to_vec(),
                });
            } else {
                self.stash.extend_from_slice(&unread[..used]);
            }
            self.inbox.consume(used);
            if ping {
                self.flush().map_err(|_| CONNECTION_CLOSED.to_string())?;
            }
            if answer.is_some() {
                return Ok(answer);
            }
        }
    }

    /// Hands the stashed frames to `on_frame`.
    fn drain_stash(
        &mut self,
        on_frame: &mut dyn FnMut(Frame<'_>, &mut Vec<u8>),
    ) -> Result<usize, String> {
        if self.stash.is_empty() {
            return Ok(0);
        }
        let stash = std::mem::take(&mut self.stash);
        let mut at = 0;
        let mut handled = 0;
        while let Some((frame, used)) =
            next_frame(&stash[at..]).map_err(|e| format!("malformed_frame: {e}"))?
        {
            on_frame(frame, &mut self.out);
            at += used;
            handled += 1;
        }
        Ok(handled)
    }

    /// Reads what the socket has, waiting up to `timeout`: whether anything came;
    /// Err([`CONNECTION_CLOSED`]) once the connection is gone. A signal (Ctrl-C) that
    /// interrupts the wait loses nothing.
    fn receive(&mut self, timeout: Duration) -> Result<bool, String> {
        match self.fill(timeout) {
            Ok(0) => Err(CONNECTION_CLOSED.into()),
            Ok(_) => Ok(true),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                Ok(false)
            }
            Err(_) => Err(CONNECTION_CLOSED.into()),
        }
    }

    /// Reads what the socket has, waiting up to `timeout` for it (to the microsecond: a
    /// socket's receive timeout would be rounded up to the kernel's tick, 4 ms here, for every
    /// poll that finds nothing).
    fn fill(&mut self, timeout: Duration) -> std::io::Result<usize> {
        let read = self.inbox.fill(&self.stream, timeout)?;
        self.read_at.set(read.at_ns.unwrap_or_default());
        Ok(read.bytes)
    }

    /// Handles every whole frame in the buffer; PINGs are answered, not handed on.
    fn drain(
        &mut self,
        on_frame: &mut dyn FnMut(Frame<'_>, &mut Vec<u8>),
    ) -> Result<usize, String> {
        let mut handled = 0;
        while let Some((frame, used)) =
            next_frame(self.inbox.unread()).map_err(|e| format!("malformed_frame: {e}"))?
        {
            if frame.kind == kind::PING {
                commands::pong(&mut self.out);
            } else {
                on_frame(frame, &mut self.out);
            }
            self.inbox.consume(used);
            handled += 1;
        }
        Ok(handled)
    }
}

/// Whether a command of `kind` answers a request (and its request id is one of ours).
fn is_answer(kind: u32) -> bool {
    matches!(
        kind,
        kind::SUCCESS
            | kind::ERROR
            | kind::PRODUCER_SUCCESS
            | kind::LOOKUP_RESPONSE
            | kind::PARTITIONED_METADATA_RESPONSE
    )
}

/// A TCP connection to `address` within `timeout`, without Nagle's delay.
/// A connection to the broker before `deadline`, over TLS when the URL asks for it.
fn open(url: &PulsarUrl, deadline: Instant) -> Result<TcpStream, ConnectError> {
    brokerbench_driver::net::open(&url.host, url.port, url.tls.as_ref(), deadline)
}

/// What CONNECT logs in with: the token, else (over TLS with a client certificate)
/// Pulsar's TLS authentication, which takes the certificate's common name as the role.
fn credentials(url: &PulsarUrl) -> Option<(&'static str, &[u8])> {
    if let Some(token) = url.token() {
        return Some(("token", token.as_bytes()));
    }
    let certificate = url.tls.as_ref().is_some_and(|t| t.cert_file.is_some());
    certificate.then_some(("tls", b"".as_slice()))
}

/// An ERROR answer to CONNECT: refused credentials, or something else.
fn refusal(frame: &Frame<'_>) -> ConnectError {
    let text = frame.error();
    if text.starts_with("AuthenticationError") || text.starts_with("AuthorizationError") {
        ConnectError::Authentication(text)
    } else {
        ConnectError::Protocol(text)
    }
}
