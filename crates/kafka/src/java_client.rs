//! Java client properties in librdkafka's terms, for driver files written for the Java client
//! (OpenMessaging Benchmark's): a setting librdkafka knows by another name is renamed, one it
//! has no counterpart for is left out, and a number outside librdkafka's range is moved to the
//! nearest value librdkafka takes. Only what no librdkafka setting can honour is refused, and
//! that is left to [`crate::omb::check_property`].

use rdkafka::config::ClientConfig;

/// Java client settings with no librdkafka counterpart: the Java client's classes and its
/// own buffer, blocking and polling limits.
pub const JAVA_ONLY: &[&str] = &[
    "key.serializer",
    "value.serializer",
    "key.deserializer",
    "value.deserializer",
    "buffer.memory",
    "max.block.ms",
    "interceptor.classes",
    "partitioner.class",
    "metric.reporters",
    "client.dns.lookup",
    "default.api.timeout.ms",
    "max.poll.records",
    "metadata.max.idle.ms",
];

/// A Java client property that librdkafka has under another name.
pub struct Renamed {
    /// The Java client's name, e.g. `max.request.size`.
    pub java: &'static str,
    /// librdkafka's name for the same setting (see librdkafka's CONFIGURATION.md).
    pub librdkafka: &'static str,
    /// What both names set, for the note.
    pub meaning: &'static str,
}

/// Java client properties librdkafka knows by another name. The values mean the same in both
/// clients (bytes, milliseconds); where the Java client has a special value librdkafka lacks,
/// the range check maps it (Java's -1 for "the system's socket buffer" is below librdkafka's
/// minimum of 0, which means the same).
pub const RENAMED: &[Renamed] = &[
    Renamed {
        java: "max.request.size",
        librdkafka: "message.max.bytes",
        meaning: "the largest produce request",
    },
    Renamed {
        java: "fetch.max.wait.ms",
        librdkafka: "fetch.wait.max.ms",
        meaning: "how long the broker may hold a fetch to fill it",
    },
    Renamed {
        java: "send.buffer.bytes",
        librdkafka: "socket.send.buffer.bytes",
        meaning: "the socket send buffer; 0 in librdkafka is the system default",
    },
    Renamed {
        java: "receive.buffer.bytes",
        librdkafka: "socket.receive.buffer.bytes",
        meaning: "the socket receive buffer; 0 in librdkafka is the system default",
    },
];

/// librdkafka's name for `key`, when the Java client calls it something else.
pub fn renamed(key: &str) -> Option<&'static Renamed> {
    RENAMED.iter().find(|r| r.java == key)
}

/// A number librdkafka refuses only because it is outside the property's range, moved to the
/// nearest end of that range.
#[derive(Debug, Clone, PartialEq)]
pub struct Clamped {
    /// The value librdkafka takes, e.g. `900000`.
    pub value: String,
    /// The range as librdkafka reports it, e.g. `1..900000`.
    pub range: String,
    /// Whether the value given was above the range (else below it).
    pub above: bool,
}

/// The nearest value librdkafka takes for `key`, when it refuses `value` for its range alone;
/// None when librdkafka takes the value, or refuses it for another reason (a misspelt name,
/// text where a number belongs). The range is the one librdkafka itself reports, so it follows
/// the librdkafka version in use.
pub fn clamp(key: &str, value: &str) -> Option<Clamped> {
    let range = reported_range(key, value)?;
    let (min, max) = range.split_once("..")?;
    // The given value is compared as written: librdkafka reads integers into a C int, so a
    // Java long such as 9223372036854775807 comes back in its message as -1.
    let given: f64 = value.trim().parse().ok()?;
    let (bound, above) = if given > parse_bound(max)? {
        (max, true)
    } else if given < parse_bound(min)? {
        (min, false)
    } else {
        return None;
    };
    let value = whole_number(bound);
    takes(key, &value).then_some(Clamped {
        value,
        range: range.clone(),
        above,
    })
}

/// The `min..max` of librdkafka's "is outside allowed range min..max" refusal of `value`.
fn reported_range(key: &str, value: &str) -> Option<String> {
    let refusal = refusal(key, value)?;
    let (_, range) = refusal.split_once("outside allowed range ")?;
    Some(range.trim().to_string())
}

/// Why librdkafka refuses `key=value`, in its own words (without rust-rdkafka's echo of the
/// key and value); None when it takes it.
pub fn refusal(key: &str, value: &str) -> Option<String> {
    let mut config = ClientConfig::new();
    config.set(key, value);
    match config.create_native_config().err()? {
        rdkafka::error::KafkaError::ClientConfig(_, description, _, _) => Some(description),
        other => Some(other.to_string()),
    }
}

/// A bound as librdkafka prints it: `%i` for integers, `%g` for floats (`1e+06`).
fn parse_bound(text: &str) -> Option<f64> {
    text.trim().parse().ok()
}

/// `1e+06` → `1000000`: librdkafka's integer properties refuse an exponent.
fn whole_number(bound: &str) -> String {
    match parse_bound(bound) {
        Some(b) if b.fract() == 0.0 && b.abs() < 1e15 => format!("{b:.0}"),
        _ => bound.trim().to_string(),
    }
}

/// Whether librdkafka takes `key=value`.
fn takes(key: &str, value: &str) -> bool {
    refusal(key, value).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_renamed_property_is_unknown_to_librdkafka_under_its_java_name_only() {
        for r in RENAMED {
            assert!(!takes(r.java, "1"), "librdkafka knows {} itself", r.java);
            assert!(takes(r.librdkafka, "100000"), "{}", r.librdkafka);
        }
        for java in JAVA_ONLY {
            assert!(!takes(java, "1"), "librdkafka knows {java}: pass it on");
        }
    }

    #[test]
    fn values_outside_librdkafkas_range_go_to_its_nearest_end() {
        // librdkafka's request.timeout.ms ends at 900000; OMB's throughput file asks 1200000.
        let above = clamp("request.timeout.ms", "1200000").unwrap();
        assert_eq!(above.value, "900000");
        assert_eq!(above.range, "1..900000");
        assert!(above.above);
        // Java's -1 (the system's buffer) is below librdkafka's 0 (the same meaning).
        let below = clamp("socket.send.buffer.bytes", "-1").unwrap();
        assert_eq!((below.value.as_str(), below.above), ("0", false));
        // A Java long past C's int still counts as above.
        assert_eq!(
            clamp("retries", "9223372036854775807").unwrap().value,
            "2147483647"
        );
        // A float property's range.
        assert_eq!(clamp("linger.ms", "1000000").unwrap().value, "900000");
        assert_eq!(clamp("request.timeout.ms", "30000"), None, "in range");
        assert_eq!(clamp("acks", "sometimes"), None, "not a range refusal");
        assert_eq!(clamp("linger.mss", "1"), None, "unknown name");
    }
}
