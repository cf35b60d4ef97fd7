//! Messages on the wire: the MessageMetadata brokerbench writes for a single message or a
//! batch (several messages in one entry, each behind its SingleMessageMetadata), and the
//! payloads read back out of a MESSAGE (a batch's one by one). brokerbench does not compress.

use crate::proto::{self, put_bytes, put_u64};

const BROKER_ENTRY_MAGIC: [u8; 2] = [0x0e, 0x02];
const CHECKSUM_MAGIC: [u8; 2] = [0x0e, 0x01];

/// MessageMetadata of a single message.
pub fn single_metadata(
    out: &mut Vec<u8>,
    producer: &str,
    sequence_id: u64,
    publish_ms: u64,
    key: Option<&[u8]>,
) {
    put_bytes(out, 1, producer.as_bytes());
    put_u64(out, 2, sequence_id);
    put_u64(out, 3, publish_ms);
    if let Some(key) = key {
        put_bytes(out, 6, key);
    }
}

/// MessageMetadata of a batch of `count` messages, `size` bytes of batch payload.
pub fn batch_metadata(
    out: &mut Vec<u8>,
    producer: &str,
    sequence_id: u64,
    publish_ms: u64,
    count: u32,
    size: usize,
) {
    single_metadata(out, producer, sequence_id, publish_ms, None);
    put_u64(out, 9, size as u64);
    put_u64(out, 11, u64::from(count));
}

/// Appends one message of a batch: its SingleMessageMetadata, then the payload.
pub fn push_batched(out: &mut Vec<u8>, key: Option<&[u8]>, payload: &[u8]) {
    let mut single = Vec::with_capacity(16);
    if let Some(key) = key {
        put_bytes(&mut single, 2, key);
    }
    put_u64(&mut single, 3, payload.len() as u64);
    out.extend_from_slice(&(single.len() as u32).to_be_bytes());
    out.extend_from_slice(&single);
    out.extend_from_slice(payload);
}

fn take_u32(data: &mut &[u8]) -> Option<usize> {
    let (head, rest) = data.split_at_checked(4)?;
    *data = rest;
    Some(u32::from_be_bytes(head.try_into().ok()?) as usize)
}

fn take<'a>(data: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
    let (head, rest) = data.split_at_checked(len)?;
    *data = rest;
    Some(head)
}

/// The payloads of a MESSAGE's `rest` (what follows its command), handed to `each` in order;
/// how many, or why they cannot be read.
pub fn payloads(mut rest: &[u8], each: &mut dyn FnMut(&[u8])) -> Result<u32, String> {
    const BAD: &str = "malformed_message";
    if rest.starts_with(&BROKER_ENTRY_MAGIC) {
        rest = &rest[2..];
        let size = take_u32(&mut rest).ok_or(BAD)?;
        take(&mut rest, size).ok_or(BAD)?;
    }
    if rest.starts_with(&CHECKSUM_MAGIC) {
        take(&mut rest, 6).ok_or(BAD)?;
    }
    let size = take_u32(&mut rest).ok_or(BAD)?;
    let metadata = take(&mut rest, size).ok_or(BAD)?;
    if proto::field(metadata, 8)
        .and_then(|v| v.as_u64())
        .unwrap_or(0)
        != 0
    {
        return Err("compressed_message".into());
    }
    let Some(count) = proto::field(metadata, 11).and_then(|v| v.as_u64()) else {
        each(rest);
        return Ok(1);
    };
    for _ in 0..count {
        let size = take_u32(&mut rest).ok_or(BAD)?;
        let single = take(&mut rest, size).ok_or(BAD)?;
        let len = proto::field(single, 3)
            .and_then(|v| v.as_u64())
            .ok_or(BAD)? as usize;
        each(take(&mut rest, len).ok_or(BAD)?);
    }
    Ok(count as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(rest: &[u8]) -> Vec<Vec<u8>> {
        let mut seen = Vec::new();
        payloads(rest, &mut |p| seen.push(p.to_vec())).unwrap();
        seen
    }

    #[test]
    fn single_and_batched_messages_read_back() {
        let mut meta = Vec::new();
        single_metadata(&mut meta, "p", 1, 2, Some(b"k"));
        let mut rest = (meta.len() as u32).to_be_bytes().to_vec();
        rest.extend_from_slice(&meta);
        rest.extend_from_slice(b"one");
        assert_eq!(read(&rest), vec![b"one".to_vec()]);

        let mut batch = Vec::new();
        push_batched(&mut batch, None, b"a");
        push_batched(&mut batch, Some(b"k"), b"bc");
        let mut meta = Vec::new();
        batch_metadata(&mut meta, "p", 1, 2, 2, batch.len());
        let mut rest = vec![0x0e, 0x01, 0, 0, 0, 0];
        rest.extend_from_slice(&(meta.len() as u32).to_be_bytes());
        rest.extend_from_slice(&meta);
        rest.extend_from_slice(&batch);
        assert_eq!(read(&rest), vec![b"a".to_vec(), b"bc".to_vec()]);
        assert!(payloads(&rest[..rest.len() - 1], &mut |_| {}).is_err());
    }
}
