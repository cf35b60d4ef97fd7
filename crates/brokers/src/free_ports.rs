//! Free ports for managed nodes, chosen outside the kernel's ephemeral range. A port in that
//! range can be handed to an outgoing connection (a client's, a broker node's own) between the
//! check that it is free and the broker's bind, and the node then fails to start; a port below
//! the range is taken only by another listener, which the check sees.

use std::path::Path;

use crate::process::can_listen;
use crate::BrokerError;

/// Where the kernel says its ephemeral range is.
const RANGE_FILE: &str = "/proc/sys/net/ipv4/ip_local_port_range";
/// Linux's default, when the file cannot be read.
const DEFAULT_RANGE: (u16, u16) = (32768, 60999);
/// The lowest base tried: below it lie many services' well-known ports.
const LOWEST: u16 = 10_000;
/// Candidates tried before giving up.
const TRIES: u32 = 2000;

/// The kernel's ephemeral port range, inclusive.
pub fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string(RANGE_FILE)
        .ok()
        .and_then(|text| parse_range(&text))
        .unwrap_or(DEFAULT_RANGE)
}

fn parse_range(text: &str) -> Option<(u16, u16)> {
    let mut numbers = text.split_whitespace().map(|n| n.parse::<u16>().ok());
    let (low, high) = (numbers.next()??, numbers.next()??);
    (low <= high).then_some((low, high))
}

/// The bases from which `base + offset`, for every offset, stays outside `ephemeral`: below
/// it (from [`LOWEST`], or from 1024 when the offsets are too wide for that), else above it.
fn base_window(max_offset: u16, ephemeral: (u16, u16)) -> Option<(u16, u16)> {
    let (low, high) = ephemeral;
    for lowest in [LOWEST, 1024] {
        if let Some(top) = low.checked_sub(max_offset) {
            if top > lowest {
                return Some((lowest, top - 1));
            }
        }
    }
    let first = high.checked_add(1)?;
    let last = u16::MAX.checked_sub(max_offset)?;
    (first <= last).then_some((first, last))
}

/// A base port `p` such that `p + offset` is free on 127.0.0.1 for every offset, none of them
/// in `taken`, all outside the ephemeral range: the layout of one node of a broker that listens
/// on several ports around one (Kafka: client, controller, exporter).
pub fn free_layout(offsets: &[u16], taken: &[u16]) -> Result<u16, BrokerError> {
    let max_offset = offsets.iter().copied().max().unwrap_or(0);
    let window = base_window(max_offset, ephemeral_range()).ok_or_else(|| no_layout(offsets))?;
    let span = u64::from(window.1 - window.0) + 1;
    let mut state = seed();
    for _ in 0..TRIES {
        state = next(state);
        let base = window.0 + (state % span) as u16;
        let usable = offsets.iter().all(|&offset| {
            let port = base + offset;
            !taken.contains(&port) && can_listen(port)
        });
        if usable {
            return Ok(base);
        }
    }
    Err(no_layout(offsets))
}

/// `count` distinct free ports outside the ephemeral range.
pub fn free_ports(count: usize) -> Result<Vec<u16>, BrokerError> {
    let mut ports = Vec::with_capacity(count);
    for _ in 0..count {
        let port = free_layout(&[0], &ports)?;
        ports.push(port);
    }
    Ok(ports)
}

/// A different start for every process and call: the pid and the clock's nanoseconds.
fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (u64::from(std::process::id()) << 32) ^ nanos
}

/// The next number of a xorshift sequence.
fn next(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

fn no_layout(offsets: &[u16]) -> BrokerError {
    BrokerError::Io {
        action: "finding free ports for a node on",
        path: Path::new("127.0.0.1").to_path_buf(),
        source: std::io::Error::other(format!(
            "no base port with {offsets:?} free outside the ephemeral range {:?} in {TRIES} tries",
            ephemeral_range()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_range_is_read_and_a_bad_file_falls_back() {
        assert_eq!(parse_range("32768\t60999\n"), Some((32768, 60999)));
        assert_eq!(parse_range("garbage"), None);
        assert_eq!(parse_range("5 4"), None);
    }

    #[test]
    fn bases_keep_every_offset_below_the_range_or_go_above_it() {
        let range = (32768, 60999);
        assert_eq!(base_window(312, range), Some((10_000, 32455)));
        // RabbitMQ's offsets reach 20,000 above its base.
        assert_eq!(base_window(20_000, range), Some((10_000, 12767)));
        assert_eq!(base_window(31_000, range), Some((1024, 1767)));
        assert_eq!(base_window(3000, (1024, 60999)), Some((61000, 62535)));
        assert_eq!(base_window(9000, (1024, 60999)), None);
    }

    #[test]
    fn a_layout_is_free_outside_the_range_and_avoids_what_is_taken() {
        let (low, _) = ephemeral_range();
        let first = free_layout(&[0, 1, 312], &[]).unwrap();
        assert!(first + 312 < low || first > ephemeral_range().1, "{first}");
        let taken: Vec<u16> = [0, 1, 312].iter().map(|o| first + o).collect();
        let second = free_layout(&[0, 1, 312], &taken).unwrap();
        assert!(![0, 1, 312].iter().any(|o| taken.contains(&(second + o))));
        let ports = free_ports(4).unwrap();
        let mut distinct = ports.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "{ports:?}");
    }
}
