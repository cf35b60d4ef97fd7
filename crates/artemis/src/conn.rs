//! One STOMP 1.2 connection to Artemis: connect (CONNECT, CONNECTED or ERROR), frames out
//! through one buffer, frames in cut out of one buffer, and requests that wait for their
//! RECEIPT.

use brokerbench_driver::framed::{Framed, Framing};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::config::ArtemisUrl;
use crate::stomp::{next_frame, write_frame, Frame};

pub use brokerbench_driver::CONNECTION_CLOSED;

pub use brokerbench_driver::net::ConnectError;

/// A producer's or consumer's way back to the broker after a lost connection, with the same
/// client id: a subscription member finds its durable queue as the broker's journal kept it.
pub type Reconnector = brokerbench_driver::Reconnector<Conn, (ArtemisUrl, Option<String>)>;

/// How often a connection promises the broker a frame or a heart-beat (`heart-beat: 10000,0`):
/// without the promise Artemis closes a connection that sends nothing for its connection TTL
/// (60 s by default), such as a consumer with nothing to acknowledge.
const HEART_BEAT: Duration = Duration::from_secs(10);

/// STOMP's frames.
pub struct Stomp;

impl Framing for Stomp {
    type Frame<'a> = Frame<'a>;

    fn next(bytes: &[u8]) -> Result<Option<(Frame<'_>, usize)>, String> {
        next_frame(bytes).map_err(|e| format!("malformed_frame: {}", e.0))
    }
}

pub struct Conn {
    /// The connection's socket and buffers: frames are written into `link.out()`, sent by
    /// `link.flush()` or the next poll; `link.last_read()` stamps what a poll hands on.
    pub link: Framed,
    /// CONNECTED's `server` header: `ActiveMQ-Artemis/2.40.0 ActiveMQ Artemis Messaging Engine`.
    pub server: String,
}

impl Conn {
    /// A new connection for a producer or consumer that lost its own (an attempt of its
    /// [`Reconnector`]), or None.
    pub fn redial((url, client_id): &(ArtemisUrl, Option<String>)) -> Option<Conn> {
        Conn::connect(
            url,
            brokerbench_driver::REDIAL_TIMEOUT,
            client_id.as_deref(),
        )
        .ok()
    }

    /// Connects and logs in within `timeout` in all; `client_id` names the connection (a
    /// durable subscription's owner).
    pub fn connect(
        url: &ArtemisUrl,
        timeout: Duration,
        client_id: Option<&str>,
    ) -> Result<Conn, ConnectError> {
        let deadline = Instant::now() + timeout;
        let mut conn = Conn {
            link: Framed::new(open(url, deadline)?),
            server: String::new(),
        };
        write_frame(
            conn.link.out(),
            b"CONNECT",
            &login_headers(url, client_id),
            b"",
        );
        let unanswered =
            format!("no CONNECTED within {timeout:?}: is this a STOMP port of Artemis?");
        conn.server =
            conn.link
                .log_in::<Stomp, _>(url.tls.as_ref(), deadline, unanswered, &mut |frame| {
                    Some(match frame.command {
                        b"CONNECTED" => Ok(frame.text(b"server")),
                        b"ERROR" => Err(refusal(&frame.error_text())),
                        other => Err(ConnectError::Protocol(format!(
                            "{} instead of CONNECTED",
                            String::from_utf8_lossy(other)
                        ))),
                    })
                })?;
        Ok(conn)
    }

    /// Sends what is written (a heart-beat if nothing was sent for [`HEART_BEAT`]), then
    /// hands every whole frame that has arrived to `on_frame`, waiting at most `timeout` for
    /// the first bytes; `on_frame` may write frames (acks), sent before it returns.
    /// Err([`CONNECTION_CLOSED`]) once the connection is gone.
    pub fn poll(
        &mut self,
        timeout: Duration,
        on_frame: &mut dyn FnMut(Frame<'_>, &mut Vec<u8>),
    ) -> Result<usize, String> {
        self.heart_beat()?;
        self.link.poll::<Stomp>(timeout, &mut |frame, out| {
            on_frame(frame, out);
            Ok(())
        })
    }

    /// Sends what is written, or a heart-beat if nothing was sent for [`HEART_BEAT`].
    pub fn heart_beat(&mut self) -> Result<(), String> {
        if !self.link.unsent() && self.link.sent_at().elapsed() >= HEART_BEAT {
            self.link.out().push(b'\n');
        }
        self.link.send()
    }

    /// Sends `command` with `headers` and a `receipt` header, and waits until the broker
    /// confirms it (its RECEIPT) or refuses it (ERROR: its text). Asked only on a connection
    /// that receives nothing else yet: a MESSAGE meanwhile is an error, not dropped.
    pub fn request(
        &mut self,
        command: &[u8],
        headers: &[(&[u8], &[u8])],
        timeout: Duration,
    ) -> Result<(), String> {
        const RECEIPT: &[u8] = b"brokerbench-request";
        let mut all = headers.to_vec();
        all.push((b"receipt", RECEIPT));
        write_frame(self.link.out(), command, &all, b"");
        let deadline = Instant::now() + timeout;
        let mut answer = None;
        while answer.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "no receipt for {} within {timeout:?}",
                    String::from_utf8_lossy(command)
                ));
            }
            self.poll(left, &mut |frame, _| match frame.command {
                b"RECEIPT" if frame.header(b"receipt-id") == Some(RECEIPT) => answer = Some(Ok(())),
                b"ERROR" => answer = Some(Err(frame.error_text())),
                b"MESSAGE" => answer = Some(Err("a delivery came before the receipt".into())),
                _ => {}
            })?;
        }
        answer.expect("the loop ends with an answer")
    }
}

/// CONNECT's headers: STOMP 1.2, the heart-beats promised, the user if the URL has one, the
/// client id if given.
fn login_headers<'a>(url: &'a ArtemisUrl, client_id: Option<&'a str>) -> Vec<(&'a [u8], &'a [u8])> {
    let mut headers: Vec<(&[u8], &[u8])> = vec![
        (b"accept-version", b"1.2"),
        (b"host", b"/"),
        (b"heart-beat", b"10000,0"),
    ];
    if let Some(user) = &url.user {
        headers.push((b"login", user.as_bytes()));
        headers.push((b"passcode", url.password().unwrap_or("").as_bytes()));
    }
    if let Some(id) = client_id {
        headers.push((b"client-id", id.as_bytes()));
    }
    headers
}

/// A connection to the broker before `deadline`, over TLS when the URL asks for it.
fn open(url: &ArtemisUrl, deadline: Instant) -> Result<TcpStream, ConnectError> {
    brokerbench_driver::net::open(&url.host, url.port, url.tls.as_ref(), deadline)
}

/// An ERROR answer to CONNECT: refused credentials, or something else.
fn refusal(text: &str) -> ConnectError {
    let lower = text.to_ascii_lowercase();
    if lower.contains("security") || lower.contains("validate user") || lower.contains("auth") {
        ConnectError::Authentication(text.to_string())
    } else {
        ConnectError::Protocol(text.to_string())
    }
}
