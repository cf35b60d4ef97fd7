//! What a consumer group has not read of a stream when the drain ends: the entries the stream
//! still holds after the group's last delivered one, and those delivered and not acknowledged.
//!
//! Redis's own `lag` (XINFO GROUPS) is the entries added less the entries the group read, so it
//! counts entries trimmed away unread too: it is used only for a stream nothing was removed
//! from; otherwise the entries after the last delivered one are counted (XRANGE, at most what
//! the stream holds, which its length limit bounds).

use std::time::Duration;

use crate::conn::Conn;
use crate::resp::Value;

/// Entries a page of the count asks for.
const PAGE: usize = 10_000;

/// Entries of `stream` that `group` has not acknowledged and the stream still holds; None when
/// the server does not say (no such group, an old Redis).
pub fn held_unread(conn: &mut Conn, stream: &str, group: &str, within: Duration) -> Option<u64> {
    let key = stream.as_bytes();
    let info = conn.call(&[b"XINFO", b"STREAM", key], within).ok()?;
    let groups = conn.call(&[b"XINFO", b"GROUPS", key], within).ok()?;
    let group = groups
        .items()
        .iter()
        .find(|g| g.field("name").and_then(Value::text).as_deref() == Some(group))?;
    let pending = group.field("pending")?.integer()?.max(0) as u64;
    let length = info.field("length")?.integer()?.max(0) as u64;
    let added = info.field("entries-added")?.integer()?.max(0) as u64;
    let last = group.field("last-delivered-id")?.text()?;
    let undelivered = if info.field("last-generated-id")?.text()? == last {
        0
    } else if added == length {
        group.field("lag")?.integer()?.max(0) as u64
    } else {
        count_after(conn, key, &last, within)?
    };
    Some(undelivered + pending)
}

/// Entries of the stream `key` after the id `last`, counted a page at a time.
fn count_after(conn: &mut Conn, key: &[u8], last: &str, within: Duration) -> Option<u64> {
    let page = PAGE.to_string();
    let mut from = last.to_string();
    let mut counted = 0;
    loop {
        let start = format!("({from}");
        let entries = conn
            .call(
                &[
                    b"XRANGE",
                    key,
                    start.as_bytes(),
                    b"+",
                    b"COUNT",
                    page.as_bytes(),
                ],
                within,
            )
            .ok()?;
        let items = entries.items();
        counted += items.len() as u64;
        if items.len() < PAGE {
            return Some(counted);
        }
        from = items.last()?.items().first()?.text()?;
    }
}
