//! A connection's receive buffer: the bytes read from its socket and not handled yet, kept
//! between two indices of one buffer that is allocated (and zeroed) once. A read goes
//! straight into the free end; nothing is zeroed or truncated per read, and unread bytes are
//! moved to the front only when the free end runs short.

use std::net::TcpStream;
use std::time::Duration;

use crate::arrival::Received;

/// Read into at least this much free room (a socket's worth at the rates measured here).
const MIN_ROOM: usize = 64 * 1024;

/// Bytes read and not yet handled.
#[derive(Debug)]
pub struct ReadBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Default for ReadBuf {
    fn default() -> Self {
        ReadBuf::with_capacity(256 * 1024)
    }
}

impl ReadBuf {
    /// A buffer of `capacity` bytes (grown when a frame needs more).
    pub fn with_capacity(capacity: usize) -> Self {
        ReadBuf {
            buf: vec![0; capacity.max(MIN_ROOM)],
            start: 0,
            end: 0,
        }
    }

    /// What was read and not yet consumed.
    pub fn unread(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Marks the first `n` unread bytes handled.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Takes `n` bytes out of the unread ones, `at` bytes into them (a packet answered out
    /// of turn); those before and after stay unread.
    pub fn remove(&mut self, at: usize, n: usize) {
        let from = self.start + at;
        self.buf.copy_within(from + n..self.end, from);
        self.end -= n;
    }

    /// Reads what `stream` has, waiting up to `timeout` (to the microsecond; see
    /// [`crate::net::read_within`]), after the unread bytes.
    pub fn fill(&mut self, stream: &TcpStream, timeout: Duration) -> std::io::Result<Received> {
        self.make_room();
        let read = crate::net::read_within(stream, &mut self.buf[self.end..], timeout)?;
        self.end += read.bytes;
        Ok(read)
    }

    /// At least [`MIN_ROOM`] free after the unread bytes: moves them to the front, and grows
    /// the buffer when they fill most of it (a frame larger than it).
    fn make_room(&mut self) {
        if self.buf.len() - self.end >= MIN_ROOM {
            return;
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if self.buf.len() - self.end < MIN_ROOM {
            self.buf
                .resize((self.end + MIN_ROOM).max(self.buf.len() * 2), 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    use crate::test_support::loopback_pair as pair;

    fn fill_all(buf: &mut ReadBuf, reader: &TcpStream, want: usize) {
        while buf.unread().len() < want {
            buf.fill(reader, Duration::from_secs(5)).unwrap();
        }
    }

    #[test]
    fn bytes_come_out_in_order_across_moves_and_growth() {
        let (mut writer, reader) = pair();
        let mut buf = ReadBuf::with_capacity(MIN_ROOM);
        let data: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
        let mut out = Vec::new();
        for chunk in data.chunks(30_000) {
            writer.write_all(chunk).unwrap();
            fill_all(&mut buf, &reader, 20_000);
            // Consume some, keep the rest unread across the next read.
            out.extend_from_slice(&buf.unread()[..20_000]);
            buf.consume(20_000);
        }
        drop(writer);
        while buf.fill(&reader, Duration::from_secs(5)).unwrap().bytes > 0 {}
        out.extend_from_slice(buf.unread());
        assert_eq!(out, data);
    }

    #[test]
    fn bytes_taken_out_of_the_middle_leave_those_around_them() {
        let (mut writer, reader) = pair();
        let mut buf = ReadBuf::default();
        writer.write_all(b"abcdefgh").unwrap();
        fill_all(&mut buf, &reader, 8);
        buf.consume(1);
        buf.remove(2, 3);
        assert_eq!(buf.unread(), b"bcgh");
        buf.consume(4);
        assert!(buf.unread().is_empty());
    }

    #[test]
    fn a_frame_larger_than_the_buffer_grows_it() {
        let (mut writer, reader) = pair();
        let mut buf = ReadBuf::with_capacity(MIN_ROOM);
        let frame = vec![7u8; 5 * MIN_ROOM];
        writer.write_all(&frame).unwrap();
        fill_all(&mut buf, &reader, frame.len());
        assert_eq!(buf.unread(), &frame[..]);
        buf.consume(frame.len());
        assert!(buf.unread().is_empty());
    }

    #[test]
    fn nothing_to_read_within_the_timeout_would_block_and_keeps_the_bytes() {
        let (mut writer, reader) = pair();
        let mut buf = ReadBuf::default();
        writer.write_all(b"abc").unwrap();
        fill_all(&mut buf, &reader, 3);
        buf.consume(1);
        let error = buf.fill(&reader, Duration::from_millis(5)).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::WouldBlock);
        assert_eq!(buf.unread(), b"bc");
    }
}
