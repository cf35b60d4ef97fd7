//! The little of Protocol Buffers' wire format Pulsar's commands need: varints and
//! length-delimited fields written, and the fields of a message read back (unknown fields
//! are skipped, as proto2 readers do).

/// Appends `value` as a varint.
pub fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends field `field` with the varint `value`.
pub fn put_u64(out: &mut Vec<u8>, field: u32, value: u64) {
    varint(out, u64::from(field) << 3);
    varint(out, value);
}

/// Appends field `field` with the bytes `value` (a string, bytes, or an encoded message).
pub fn put_bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    varint(out, (u64::from(field) << 3) | 2);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

/// Appends field `field` with the message `write` writes.
pub fn put_message(out: &mut Vec<u8>, field: u32, write: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::with_capacity(32);
    write(&mut inner);
    put_bytes(out, field, &inner);
}

/// A field's value as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// A fixed 32- or 64-bit value (doubles in statistics answers), as its bits.
    Fixed(u64),
}

impl<'a> Value<'a> {
    pub fn as_u64(self) -> Option<u64> {
        match self {
            Value::Varint(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_bytes(self) -> Option<&'a [u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_text(self) -> String {
        self.as_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }
}

/// The fields of an encoded message, in order; a malformed rest ends the iteration.
pub struct Fields<'a> {
    data: &'a [u8],
}

pub fn fields(data: &[u8]) -> Fields<'_> {
    Fields { data }
}

/// The first value of field `field` in `data`.
pub fn field(data: &[u8], field: u32) -> Option<Value<'_>> {
    fields(data).find(|(f, _)| *f == field).map(|(_, v)| v)
}

fn read_varint(data: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = data.split_first()?;
        *data = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

impl<'a> Iterator for Fields<'a> {
    type Item = (u32, Value<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let mut data = self.data;
        let tag = read_varint(&mut data)?;
        let value = match tag & 7 {
            0 => Value::Varint(read_varint(&mut data)?),
            2 => {
                let len = usize::try_from(read_varint(&mut data)?).ok()?;
                let bytes = data.get(..len)?;
                data = &data[len..];
                Value::Bytes(bytes)
            }
            1 => {
                let bytes: [u8; 8] = data.get(..8)?.try_into().ok()?;
                data = &data[8..];
                Value::Fixed(u64::from_le_bytes(bytes))
            }
            5 => {
                let bytes: [u8; 4] = data.get(..4)?.try_into().ok()?;
                data = &data[4..];
                Value::Fixed(u64::from(u32::from_le_bytes(bytes)))
            }
            _ => {
                self.data = &[];
                return None;
            }
        };
        self.data = data;
        Some(((tag >> 3) as u32, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back() {
        let mut out = Vec::new();
        put_u64(&mut out, 1, 300);
        put_bytes(&mut out, 2, b"topic");
        put_message(&mut out, 3, |m| put_u64(m, 1, u64::MAX));
        let read: Vec<_> = fields(&out).collect();
        assert_eq!(read[0], (1, Value::Varint(300)));
        assert_eq!(read[1], (2, Value::Bytes(b"topic")));
        let inner = read[2].1.as_bytes().unwrap();
        assert_eq!(field(inner, 1), Some(Value::Varint(u64::MAX)));
        assert_eq!(out[..3], [0x08, 0xac, 0x02]);
    }
}
