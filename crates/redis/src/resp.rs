//! RESP2, the Redis serialization protocol: commands out as arrays of bulk strings, replies in
//! as the five kinds of value, cut out of a buffer as whole values or not at all.

/// A reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `+OK`.
    Simple(String),
    /// `-ERR …`: the text, its first word the kind (`ERR`, `NOAUTH`, `OOM`, …).
    Error(String),
    Integer(i64),
    /// `$n`; None for the null bulk string (`$-1`).
    Bulk(Option<Vec<u8>>),
    /// `*n`; None for the null array (`*-1`: a blocking read that timed out).
    Array(Option<Vec<Value>>),
}

impl Value {
    /// The elements of an array (none for a null one or another kind).
    pub fn items(&self) -> &[Value] {
        match self {
            Value::Array(Some(items)) => items,
            _ => &[],
        }
    }

    /// The bytes of a bulk or simple string.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bulk(Some(b)) => Some(b),
            Value::Simple(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// A string or bulk string as text.
    pub fn text(&self) -> Option<String> {
        self.bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// An integer, or a string holding one.
    pub fn integer(&self) -> Option<i64> {
        match self {
            Value::Integer(n) => Some(*n),
            other => other.text()?.parse().ok(),
        }
    }

    /// The error text of an error reply.
    pub fn error(&self) -> Option<&str> {
        match self {
            Value::Error(e) => Some(e),
            _ => None,
        }
    }

    /// The value of `key` in a flat list of key, value, key, value (XINFO's answers).
    pub fn field(&self, key: &str) -> Option<&Value> {
        let items = self.items();
        items
            .chunks(2)
            .find(|pair| pair[0].bytes() == Some(key.as_bytes()))
            .and_then(|pair| pair.get(1))
    }
}

/// Appends the command `args` (`XADD`, key, …) as RESP.
pub fn write_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    push_number(out, args.len() as u64);
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.push(b'$');
        push_number(out, arg.len() as u64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Numbers are written in decimal as every family writes them.
pub use brokerbench_driver::push_number;

/// Bytes that are not RESP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

/// The first whole value in `buf` and the bytes it took, None when it has not all arrived
/// (found out from the lengths alone, without building anything: a large reply arrives in many
/// reads).
pub fn next_value(buf: &[u8]) -> Result<Option<(Value, usize)>, Malformed> {
    if end_of_value(buf, 0)?.is_none() {
        return Ok(None);
    }
    let mut at = 0;
    Ok(value_at(buf, &mut at)?.map(|v| (v, at)))
}

/// Where the value starting at `at` ends, None when it has not all arrived.
fn end_of_value(buf: &[u8], at: usize) -> Result<Option<usize>, Malformed> {
    let Some(line) = line_at(buf, at) else {
        return Ok(None);
    };
    let after = line + 2;
    match buf[at] {
        b'$' => {
            let len = number(&buf[at + 1..line])?;
            let end = after + len.max(0) as usize + if len < 0 { 0 } else { 2 };
            Ok((buf.len() >= end).then_some(end))
        }
        b'*' => {
            let mut end = after;
            for _ in 0..number(&buf[at + 1..line])?.max(0) {
                match end_of_value(buf, end)? {
                    Some(next) => end = next,
                    None => return Ok(None),
                }
            }
            Ok(Some(end))
        }
        _ => Ok(Some(after)),
    }
}

fn value_at(buf: &[u8], at: &mut usize) -> Result<Option<Value>, Malformed> {
    let Some(line) = line_at(buf, *at) else {
        return Ok(None);
    };
    let (kind, text) = (buf[*at], &buf[*at + 1..line]);
    let after = line + 2;
    let value = match kind {
        b'+' => Value::Simple(String::from_utf8_lossy(text).into_owned()),
        b'-' => Value::Error(String::from_utf8_lossy(text).into_owned()),
        b':' => Value::Integer(number(text)?),
        b'$' => {
            let len = number(text)?;
            if len < 0 {
                *at = after;
                return Ok(Some(Value::Bulk(None)));
            }
            let end = after + len as usize;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            *at = end + 2;
            return Ok(Some(Value::Bulk(Some(buf[after..end].to_vec()))));
        }
        b'*' => {
            let len = number(text)?;
            *at = after;
            if len < 0 {
                return Ok(Some(Value::Array(None)));
            }
            let mut items = Vec::with_capacity(len.min(1024) as usize);
            for _ in 0..len {
                match value_at(buf, at)? {
                    Some(item) => items.push(item),
                    None => return Ok(None),
                }
            }
            return Ok(Some(Value::Array(Some(items))));
        }
        other => {
            return Err(Malformed(format!(
                "a reply starting with {:?}",
                other as char
            )))
        }
    };
    *at = after;
    Ok(Some(value))
}

/// Where the line starting at `at` ends (its `\r`), None when it has not all arrived.
fn line_at(buf: &[u8], at: usize) -> Option<usize> {
    let rest = buf.get(at..)?;
    let cr = rest.windows(2).position(|w| w == b"\r\n")?;
    Some(at + cr)
}

fn number(text: &[u8]) -> Result<i64, Malformed> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| {
            Malformed(format!(
                "{:?} is not a number",
                String::from_utf8_lossy(text)
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        write_command(&mut out, &[b"XADD", b"s", b"*"]);
        assert_eq!(out, b"*3\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n");
    }

    #[test]
    fn replies_are_cut_whole_or_not_at_all() {
        let reply = b"*2\r\n*2\r\n$3\r\nk-0\r\n*2\r\n$1\r\np\r\n$2\r\nhi\r\n$-1\r\n:7\r\n";
        let (value, used) = next_value(reply).unwrap().unwrap();
        assert_eq!(&reply[used..], b":7\r\n");
        let entry = &value.items()[0];
        assert_eq!(entry.items()[0].text().as_deref(), Some("k-0"));
        assert_eq!(
            entry.items()[1].field("p").and_then(Value::bytes),
            Some(&b"hi"[..])
        );
        assert_eq!(value.items()[1], Value::Bulk(None));
        for cut in 0..used {
            assert_eq!(next_value(&reply[..cut]).unwrap(), None, "{cut}");
        }
        assert_eq!(
            next_value(b"*-1\r\n").unwrap(),
            Some((Value::Array(None), 5))
        );
        assert_eq!(
            next_value(b"-NOAUTH Authentication required.\r\n")
                .unwrap()
                .unwrap()
                .0
                .error(),
            Some("NOAUTH Authentication required.")
        );
        assert!(next_value(b"?x\r\n").is_err());
    }
}
