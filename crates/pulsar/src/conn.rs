//! One connection to a Pulsar broker over its binary protocol: connect (CONNECT, CONNECTED
//! or ERROR), commands out through one buffer, frames in cut out of one buffer, requests
//! that wait for the answer carrying their request id, and the broker's PINGs answered.

use brokerbench_driver::framed::{Framed, Framing};
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

/// Pulsar's frames: commands, with their payloads.
pub struct Pulsar;

impl Framing for Pulsar {
    type Frame<'a> = Frame<'a>;

    fn next(bytes: &[u8]) -> Result<Option<(Frame<'_>, usize)>, String> {
        next_frame(bytes).map_err(|e| format!("malformed_frame: {e}"))
    }
}

pub struct Conn {
    /// The connection's socket and buffers: frames are written into `link.out()`, sent by
    /// `link.flush()` or the next poll; `link.last_read()` stamps what a poll hands on.
    pub link: Framed,
    /// Whole frames that came while a request waited for its answer (deliveries, a change
    /// of the active consumer): handed out first by the next poll.
    stash: Vec<u8>,
    next_request: u64,
    /// CONNECTED's `server_version`: `Pulsar Server4.0.8`.
    pub server: String,
}

impl Conn {
    /// A new connection for a producer or consumer that lost its own (an attempt of its
    /// [`Reconnector`]), or None.
    pub fn redial(url: &PulsarUrl) -> Option<Conn> {
        Conn::connect(url, brokerbench_driver::REDIAL_TIMEOUT).ok()
    }

    /// Connects and logs in within `timeout` in all.
    pub fn connect(url: &PulsarUrl, timeout: Duration) -> Result<Conn, ConnectError> {
        let deadline = Instant::now() + timeout;
        let mut conn = Conn {
            link: Framed::new(open(url, deadline)?),
            stash: Vec::new(),
            next_request: 1,
            server: String::new(),
        };
        commands::connect(conn.link.out(), credentials(url));
        let unanswered =
            format!("no CONNECTED within {timeout:?}: is this Pulsar's binary port (6650)?");
        conn.server = conn.link.log_in::<Pulsar, _>(
            url.tls.as_ref(),
            deadline,
            unanswered,
            &mut |frame| match frame.kind {
                kind::PING => None,
                kind::CONNECTED => Some(Ok(frame.text(1))),
                kind::ERROR => Some(Err(refusal(&frame))),
                other => Some(Err(ConnectError::Protocol(format!(
                    "command {other} instead of CONNECTED"
                )))),
            },
        )?;
        Ok(conn)
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
        self.link.send()?;
        let mut handled = self.drain_stash(on_frame)?;
        handled += self.drain(on_frame)?;
        if handled == 0 && self.link.receive(timeout)? {
            handled = self.drain(on_frame)?;
        }
        self.link.send()?;
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
        write(self.link.out());
        self.link.send()?;
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
            self.link.receive(left)?;
        }
    }

    /// Goes through the whole frames in the buffer up to the answer carrying request id
    /// `id`, which it takes out; the others are stashed for the next poll (PINGs answered).
    fn take_answer(&mut self, id: u64) -> Result<Option<Answer>, String> {
        loop {
            let unread = self.link.unread();
            let Some((frame, used)) = Pulsar::next(unread)? else {
                return Ok(None);
            };
            let ping = frame.kind == kind::PING;
            let answer =
                (!ping && frame.request_id() == Some(id) && is_answer(frame.kind)).then(|| {
                    Answer {
                        kind: frame.kind,
                        command: frame.command.to_vec(),
                    }
                });
            if !ping && answer.is_none() {
                self.stash.extend_from_slice(&unread[..used]);
            }
            self.link.consume(used);
            if ping {
                commands::pong(self.link.out());
                self.link.send()?;
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
        while let Some((frame, used)) = Pulsar::next(&stash[at..])? {
            on_frame(frame, self.link.out());
            at += used;
            handled += 1;
        }
        Ok(handled)
    }

    /// Handles every whole frame in the buffer; PINGs are answered, not handed on.
    fn drain(
        &mut self,
        on_frame: &mut dyn FnMut(Frame<'_>, &mut Vec<u8>),
    ) -> Result<usize, String> {
        self.link.drain::<Pulsar>(&mut |frame, out| {
            if frame.kind == kind::PING {
                commands::pong(out);
            } else {
                on_frame(frame, out);
            }
            Ok(())
        })
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
