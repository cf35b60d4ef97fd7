//! One RESP connection to Redis: connect (AUTH, SELECT, PING), commands out through one
//! buffer, replies in cut out of one buffer, and requests that wait for their reply.

use brokerbench_driver::framed::{Framed, Framing};
use std::time::{Duration, Instant};

use crate::config::RedisUrl;
use crate::resp::{next_value, write_command, Value};

pub use brokerbench_driver::CONNECTION_CLOSED;

pub use brokerbench_driver::net::ConnectError;

/// A producer's or consumer's way back to the server after a lost connection.
pub type Reconnector = brokerbench_driver::Reconnector<Conn, RedisUrl>;

/// RESP's frames: replies.
pub struct Resp;

impl Framing for Resp {
    type Frame<'a> = Value;

    fn next(bytes: &[u8]) -> Result<Option<(Value, usize)>, String> {
        next_value(bytes).map_err(|e| format!("malformed_reply: {}", e.0))
    }
}

pub struct Conn {
    /// The connection's socket and buffers: frames are written into `link.out()`, sent by
    /// `link.flush()` or the next poll; `link.last_read()` stamps what a poll hands on.
    pub link: Framed,
    /// A reply timed out: the connection is out of step with its commands, not used again.
    desynced: bool,
}

impl Conn {
    /// A new connection for a producer or consumer that lost its own (an attempt of its
    /// [`Reconnector`]), or None.
    pub fn redial(url: &RedisUrl) -> Option<Conn> {
        Conn::connect(url, brokerbench_driver::REDIAL_TIMEOUT).ok()
    }

    /// Connects, logs in and selects the URL's database within `timeout` in all.
    pub fn connect(url: &RedisUrl, timeout: Duration) -> Result<Conn, ConnectError> {
        let deadline = Instant::now() + timeout;
        let stream =
            brokerbench_driver::net::open(&url.host, url.port, url.tls.as_ref(), deadline)?;
        let mut conn = Conn {
            link: Framed::new(stream),
            desynced: false,
        };
        let logging_in = |e| brokerbench_driver::net::while_logging_in(url.tls.as_ref(), e);
        conn.log_in(url, deadline).map_err(logging_in)?;
        Ok(conn)
    }

    /// AUTH (when the URL has a password), SELECT (another database than 0) and PING, in one
    /// write; each answer checked.
    fn log_in(&mut self, url: &RedisUrl, deadline: Instant) -> Result<(), ConnectError> {
        let mut sent = 0;
        if let Some(password) = url.password() {
            let mut auth: Vec<&[u8]> = vec![b"AUTH"];
            auth.extend(url.user.as_deref().map(str::as_bytes));
            auth.push(password.as_bytes());
            write_command(self.link.out(), &auth);
            sent += 1;
        }
        let db = url.path.to_string();
        if url.path != 0 {
            write_command(self.link.out(), &[b"SELECT", db.as_bytes()]);
            sent += 1;
        }
        write_command(self.link.out(), &[b"PING"]);
        self.link
            .flush()
            .map_err(|e| ConnectError::Unreachable(e.to_string()))?;
        let left = deadline.saturating_duration_since(Instant::now());
        for answer in self
            .replies(sent + 1, left)
            .map_err(ConnectError::Unreachable)?
        {
            match answer {
                Value::Error(text) => return Err(refusal(&text, url)),
                Value::Simple(_) => {}
                other => {
                    return Err(ConnectError::Protocol(format!(
                        "{other:?} instead of OK or PONG: is this a Redis server?"
                    )))
                }
            }
        }
        Ok(())
    }

    /// Sends what is written, then hands every whole reply that has arrived to `on_reply`,
    /// waiting at most `timeout` for the first bytes; `on_reply` may write commands (acks),
    /// sent before it returns. Err([`CONNECTION_CLOSED`]) once the connection is gone.
    pub fn poll(
        &mut self,
        timeout: Duration,
        on_reply: &mut dyn FnMut(Value, &mut Vec<u8>),
    ) -> Result<usize, String> {
        self.link.poll::<Resp>(timeout, &mut |value, out| {
            on_reply(value, out);
            Ok(())
        })
    }

    /// Sends `args` and waits for its reply (an error reply is Err with its text). Only on a
    /// connection with nothing else in flight.
    pub fn call(&mut self, args: &[&[u8]], timeout: Duration) -> Result<Value, String> {
        write_command(self.link.out(), args);
        self.link.send()?;
        match self.replies(1, timeout)?.pop() {
            Some(Value::Error(text)) => Err(text),
            value => Ok(value.expect("one reply")),
        }
    }

    /// The next `n` replies, waiting at most `timeout` in all.
    fn replies(&mut self, n: usize, timeout: Duration) -> Result<Vec<Value>, String> {
        if self.desynced {
            return Err("an earlier reply on this connection did not come in time".into());
        }
        let deadline = Instant::now() + timeout;
        let mut answers = Vec::with_capacity(n);
        while answers.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.desynced = true;
                return Err(format!("no reply within {timeout:?}"));
            }
            self.poll(left, &mut |value, _| answers.push(value))?;
        }
        if answers.len() > n {
            return Err(format!("{} replies more than asked for", answers.len() - n));
        }
        Ok(answers)
    }
}

/// An error answer while logging in: refused credentials, or something else.
fn refusal(text: &str, url: &RedisUrl) -> ConnectError {
    let kind = text.split_whitespace().next().unwrap_or_default();
    let login = matches!(kind, "WRONGPASS" | "NOAUTH" | "NOPERM")
        || text.contains("password")
        || text.contains("AUTH");
    match (login, url.password()) {
        (true, None) => ConnectError::Authentication(format!(
            "{text} (no password given); the server wants one: redis_url: redis://user:password@host:port"
        )),
        (true, Some(_)) => ConnectError::Authentication(format!(
            "{text} (user '{}'); check the user and password in redis_url",
            url.user.as_deref().unwrap_or("default")
        )),
        (false, _) => ConnectError::Protocol(text.to_string()),
    }
}
