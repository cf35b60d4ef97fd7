//! A connection of a family's own client: the socket, the bytes read and not yet handled, the
//! bytes written and not yet sent, and when the last read arrived and the last write went.
//! A poll sends what is written, hands every whole frame that has arrived on, waiting for the
//! first bytes when none has, and sends what the handler wrote (its acknowledgements). The
//! family says only where a frame ends ([`Framing`]) and what a frame means.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::arrival::LastRead;
use crate::{ReadBuf, CONNECTION_CLOSED};

mod login;

pub use login::Answer;

/// A protocol's frames, as they lie in the bytes read.
pub trait Framing: 'static {
    /// A frame, borrowing from the bytes it was read from.
    type Frame<'a>;

    /// The first whole frame in `bytes` and how many bytes it takes, or None while it is not
    /// all there; Err with the kind of error for bytes that are no frame.
    fn next(bytes: &[u8]) -> Result<Option<(Self::Frame<'_>, usize)>, String>;
}

/// What a poll does with each frame: it may write frames into the buffer it is given, and
/// stop the poll with the kind of an error.
pub type OnFrame<'a, P> =
    dyn FnMut(<P as Framing>::Frame<'_>, &mut Vec<u8>) -> Result<(), String> + 'a;

pub struct Framed {
    stream: TcpStream,
    inbox: ReadBuf,
    out: Vec<u8>,
    /// When the bytes of the last read arrived (the stamp of acknowledgements it brought).
    read_at: LastRead,
    /// When the connection last sent anything.
    sent_at: Instant,
}

impl Framed {
    pub fn new(stream: TcpStream) -> Self {
        Framed {
            stream,
            inbox: ReadBuf::default(),
            out: Vec::with_capacity(64 * 1024),
            read_at: LastRead::default(),
            sent_at: Instant::now(),
        }
    }

    /// When the bytes of the last read arrived; what a poll hands on came with it.
    pub fn last_read(&self) -> LastRead {
        self.read_at.clone()
    }

    /// The socket (to clone it for a TLS connection that starts on it).
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// When the connection last sent anything (or was opened).
    pub fn sent_at(&self) -> Instant {
        self.sent_at
    }

    /// The buffer frames are written into; [`Framed::flush`] or the next poll sends them.
    pub fn out(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Whether frames are written that the next flush or poll sends.
    pub fn unsent(&self) -> bool {
        !self.out.is_empty()
    }

    /// Sends what is written.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if !self.out.is_empty() {
            self.stream.write_all(&self.out)?;
            self.out.clear();
            self.sent_at = Instant::now();
        }
        Ok(())
    }

    /// [`Framed::flush`], Err([`CONNECTION_CLOSED`]) once the connection is gone.
    pub fn send(&mut self) -> Result<(), String> {
        self.flush().map_err(|_| CONNECTION_CLOSED.to_string())
    }

    /// Sends what is written, then hands every whole frame that has arrived to `on_frame`,
    /// waiting at most `timeout` for the first bytes; what `on_frame` writes is sent before
    /// it returns. Err([`CONNECTION_CLOSED`]) once the connection is gone.
    pub fn poll<P: Framing>(
        &mut self,
        timeout: Duration,
        on_frame: &mut OnFrame<'_, P>,
    ) -> Result<usize, String> {
        self.send()?;
        let mut handled = self.drain::<P>(on_frame)?;
        if handled == 0 && self.receive(timeout)? {
            handled = self.drain::<P>(on_frame)?;
        }
        self.send()?;
        Ok(handled)
    }

    /// Reads what the socket has, waiting up to `timeout` for it (to the microsecond: a
    /// socket's receive timeout would be rounded up to the kernel's tick for every poll that
    /// finds nothing): whether anything came. Err([`CONNECTION_CLOSED`]) once the connection
    /// is gone; a signal (Ctrl-C) that interrupts the wait loses nothing.
    pub fn receive(&mut self, timeout: Duration) -> Result<bool, String> {
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

    /// Reads what the socket has, after the unread bytes, waiting up to `timeout`: how many
    /// bytes came (0: the connection is closed).
    pub fn fill(&mut self, timeout: Duration) -> std::io::Result<usize> {
        let read = self.inbox.fill(&self.stream, timeout)?;
        self.read_at.set(read.at_ns.unwrap_or_default());
        Ok(read.bytes)
    }

    /// The bytes read and not yet handed on.
    pub fn unread(&self) -> &[u8] {
        self.inbox.unread()
    }

    /// Marks the first `n` unread bytes handled.
    pub fn consume(&mut self, n: usize) {
        self.inbox.consume(n);
    }

    /// Takes the `len` unread bytes at `at` out (a frame a request waited for; the frames
    /// before it stay for the next poll).
    pub fn remove(&mut self, at: usize, len: usize) {
        self.inbox.remove(at, len);
    }

    /// Hands every whole frame in the buffer to `on_frame`; a frame it refuses stays unread.
    pub fn drain<P: Framing>(&mut self, on_frame: &mut OnFrame<'_, P>) -> Result<usize, String> {
        let mut handled = 0;
        loop {
            let Some((frame, used)) = P::next(self.inbox.unread())? else {
                break;
            };
            on_frame(frame, &mut self.out)?;
            self.inbox.consume(used);
            handled += 1;
        }
        Ok(handled)
    }
}

#[cfg(test)]
mod tests;
