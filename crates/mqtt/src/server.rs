//! What the broker says it is: mosquitto (and other brokers with a `$SYS` tree) publishes its
//! version, retained, at `$SYS/broker/version`.

use std::time::{Duration, Instant};

use crate::conn::Conn;
use crate::packet::{self, Version};

/// How long the version may take to arrive (a broker without `$SYS` sends nothing).
const VERSION_WITHIN: Duration = Duration::from_secs(1);

/// The broker's version and the protocol spoken (`2.0.11 (mosquitto, MQTT 5)`), or None
/// when it tells nothing.
pub fn describe(conn: &mut Conn, version: Version) -> Option<String> {
    Some(described(&ask_version(conn)?, version))
}

/// `mosquitto version 2.0.11` as `2.0.11 (mosquitto, MQTT 5)`: the number first, as the
/// managed broker's status gives it.
fn described(said: &str, version: Version) -> String {
    let v = version.as_str();
    match said.split_once(" version ") {
        Some((name, number)) => format!("{} ({name}, MQTT {v})", number.trim()),
        None => format!("{} (MQTT {v})", said.trim()),
    }
}

fn ask_version(conn: &mut Conn) -> Option<String> {
    let filters = ["$SYS/broker/version".to_string()];
    let granted = conn.subscribe(&filters, 0, VERSION_WITHIN).ok()?;
    if granted.first().is_none_or(|&g| g >= 0x80) {
        return None;
    }
    let deadline = Instant::now() + VERSION_WITHIN;
    let version = conn.version;
    let mut found = None;
    while found.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        conn.poll(left, &mut |p, _| {
            if p.kind == packet::PUBLISH {
                if let Ok(m) = packet::parse_publish(version, p.flags, p.body) {
                    found = Some(String::from_utf8_lossy(m.payload).into_owned());
                }
            }
            Ok(())
        })
        .ok()?;
    }
    found
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_comes_first() {
        use crate::packet::Version;
        assert_eq!(
            super::described("mosquitto version 2.0.11", Version::V5),
            "2.0.11 (mosquitto, MQTT 5)"
        );
        assert_eq!(
            super::described("Broker 9", Version::V311),
            "Broker 9 (MQTT 3.1.1)"
        );
    }
}
