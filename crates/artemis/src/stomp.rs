//! STOMP 1.2 frames: written into a buffer, and cut out of what the socket delivered.
//!
//! A frame is a command line, header lines, an empty line and a body ended by a NUL byte.
//! Bodies brokerbench sends are binary (an envelope and payload), so every SEND carries
//! `content-length` and a body is read by it when the frame has one.

/// A frame received: its command, its raw header block and its body, borrowed from the
/// connection's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    pub command: &'a [u8],
    headers: &'a [u8],
    pub body: &'a [u8],
}

impl<'a> Frame<'a> {
    /// The value of header `name` (the first, as STOMP 1.2 says), as sent: not unescaped
    /// (brokerbench's names and ids need no escapes, and an `ack` id goes back as it came).
    pub fn header(&self, name: &[u8]) -> Option<&'a [u8]> {
        self.headers.split(|&b| b == b'\n').find_map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let colon = line.iter().position(|&b| b == b':')?;
            (&line[..colon] == name).then(|| &line[colon + 1..])
        })
    }

    /// Header `name` as text (lossy), for messages: STOMP 1.2's escapes (`\c` for `:`,
    /// `\n`, `\r`, `\\`) undone.
    pub fn text(&self, name: &[u8]) -> String {
        let raw = String::from_utf8_lossy(self.header(name).unwrap_or_default()).into_owned();
        unescape(&raw)
    }

    /// What an ERROR frame says: its `message` header and its body's first line.
    pub fn error_text(&self) -> String {
        let body = String::from_utf8_lossy(self.body);
        let detail = body.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        match (self.text(b"message"), detail) {
            (m, "") => m,
            (m, d) if m.is_empty() => d.to_string(),
            (m, d) => format!("{m}: {d}"),
        }
    }
}

/// A header value with STOMP 1.2's escapes undone (an unknown escape is kept as it came).
fn unescape(raw: &str) -> String {
    let mut text = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            text.push(c);
            continue;
        }
        match chars.next() {
            Some('c') => text.push(':'),
            Some('n') => text.push('\n'),
            Some('r') => text.push('\r'),
            Some('\\') => text.push('\\'),
            Some(other) => text.extend(['\\', other]),
            None => text.push('\\'),
        }
    }
    text
}

/// The largest frame read (brokerbench's messages are far smaller).
const MAX_FRAME: usize = 256 << 20;

/// Why the bytes received are not STOMP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

/// The first whole frame in `buffer`, and how many bytes it took (with the end-of-line
/// heart-beats before it); None while it is incomplete.
pub fn next_frame(buffer: &[u8]) -> Result<Option<(Frame<'_>, usize)>, Malformed> {
    let start = buffer
        .iter()
        .position(|&b| b != b'\n' && b != b'\r')
        .unwrap_or(buffer.len());
    let rest = &buffer[start..];
    let Some((head_len, body_start)) = head_end(rest) else {
        return Ok(None);
    };
    let head = &rest[..head_len];
    let (command, headers) = match head.iter().position(|&b| b == b'\n') {
        Some(i) => (&head[..i], &head[i + 1..]),
        None => (head, &head[head.len()..]),
    };
    let command = command.strip_suffix(b"\r").unwrap_or(command);
    let probe = Frame {
        command,
        headers,
        body: &[],
    };
    let body_end = match probe.header(b"content-length") {
        Some(length) => {
            let length: usize = std::str::from_utf8(length)
                .ok()
                .and_then(|l| l.trim().parse().ok())
                .ok_or_else(|| Malformed("a content-length that is not a number".into()))?;
            let end = body_start
                .checked_add(length)
                .filter(|&end| end < MAX_FRAME)
                .ok_or_else(|| Malformed(format!("a content-length of {length} bytes")))?;
            if rest.len() <= end {
                return Ok(None);
            }
            if rest[body_start + length] != 0 {
                return Err(Malformed("a body longer than its content-length".into()));
            }
            body_start + length
        }
        None => match rest[body_start..].iter().position(|&b| b == 0) {
            Some(i) => body_start + i,
            None => return Ok(None),
        },
    };
    let frame = Frame {
        command,
        headers,
        body: &rest[body_start..body_end],
    };
    // The end-of-line heart-beats that follow the frame go with it.
    let after = rest[body_end + 1..]
        .iter()
        .take_while(|&&b| b == b'\n' || b == b'\r')
        .count();
    Ok(Some((frame, start + body_end + 1 + after)))
}

/// Where the header block ends (before its last line end) and the body starts: the first
/// empty line, ended by LF or CRLF.
fn head_end(frame: &[u8]) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(i) = frame[from..].iter().position(|&b| b == b'\n') {
        let end = from + i;
        match frame.get(end + 1..) {
            Some([b'\n', ..]) => return Some((end, end + 2)),
            Some([b'\r', b'\n', ..]) => return Some((end, end + 3)),
            _ => from = end + 1,
        }
    }
    None
}

/// Appends a frame: `command`, the `headers` as `name:value` lines, and `body` with its
/// `content-length` (Artemis makes it a bytes message).
pub fn write_frame(out: &mut Vec<u8>, command: &[u8], headers: &[(&[u8], &[u8])], body: &[u8]) {
    write_head(out, command, headers);
    if !body.is_empty() {
        out.extend_from_slice(b"content-length:");
        push_number(out, body.len() as u64);
        out.push(b'\n');
    }
    out.push(b'\n');
    out.extend_from_slice(body);
    out.push(0);
}

/// Appends a frame whose body is `text` with no `content-length`, which Artemis makes a text
/// message (what its management API reads parameters from); `text` holds no NUL.
pub fn write_text_frame(out: &mut Vec<u8>, command: &[u8], headers: &[(&[u8], &[u8])], text: &str) {
    debug_assert!(!text.contains('\0'));
    write_head(out, command, headers);
    out.push(b'\n');
    out.extend_from_slice(text.as_bytes());
    out.push(0);
}

/// The command line and header lines.
fn write_head(out: &mut Vec<u8>, command: &[u8], headers: &[(&[u8], &[u8])]) {
    out.extend_from_slice(command);
    out.push(b'\n');
    for (name, value) in headers {
        out.extend_from_slice(name);
        out.push(b':');
        out.extend_from_slice(value);
        out.push(b'\n');
    }
}

/// Numbers are written in decimal as every family writes them.
pub use brokerbench_driver::push_number;

/// A decimal number, if `text` is one.
pub fn parse_number(text: &[u8]) -> Option<u64> {
    if text.is_empty() || text.len() > 19 {
        return None;
    }
    text.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + (b - b'0') as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_text_undoes_stomp_escapes() {
        assert_eq!(
            unescape(r"Security Error occurred\c User [a\\b]\n\x"),
            "Security Error occurred: User [a\\b]\n\\x"
        );
    }

    #[test]
    fn frames_are_written_and_cut_out_by_content_length() {
        let mut out = Vec::new();
        write_frame(
            &mut out,
            b"SEND",
            &[(b"destination", b"t-0"), (b"receipt", b"7")],
            b"a\0b\n\nc",
        );
        write_frame(&mut out, b"ACK", &[(b"id", b"42")], b"");
        let mut stream = b"\n\n".to_vec();
        stream.extend_from_slice(&out);
        let (first, used) = next_frame(&stream).unwrap().unwrap();
        assert_eq!(first.command, b"SEND");
        assert_eq!(first.header(b"destination"), Some(&b"t-0"[..]));
        assert_eq!(first.header(b"receipt").and_then(parse_number), Some(7));
        assert_eq!(first.body, b"a\0b\n\nc", "a binary body, by its length");
        let (second, rest) = next_frame(&stream[used..]).unwrap().unwrap();
        assert_eq!((second.command, second.body), (&b"ACK"[..], &b""[..]));
        assert_eq!(used + rest, stream.len());
        let first_frame = &out[..used - 2];
        for cut in 0..first_frame.len() {
            assert_eq!(
                next_frame(&first_frame[..cut]).unwrap(),
                None,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn frames_without_a_length_end_at_nul_and_errors_say_what() {
        let text = b"ERROR\r\nmessage:AMQ229031: Unable to validate user\r\n\r\nfrom 127.0.0.1\n\0";
        let (frame, used) = next_frame(text).unwrap().unwrap();
        assert_eq!(used, text.len());
        assert_eq!(frame.command, b"ERROR");
        assert_eq!(
            frame.error_text(),
            "AMQ229031: Unable to validate user: from 127.0.0.1"
        );
        let wrong = b"MESSAGE\ncontent-length:2\n\nabc\0";
        assert!(next_frame(wrong).is_err());
        assert_eq!(parse_number(b"18446"), Some(18446));
        assert_eq!(parse_number(b"1x"), None);
        let mut n = Vec::new();
        push_number(&mut n, 0);
        push_number(&mut n, 907);
        assert_eq!(n, b"0907");
    }
}
