//! Human units in workload files: byte sizes (`100B`, `64KiB`), durations (`500ms`, `30s`,
//! `2m`) and rates (`50000`, `10k`, `max`).

use std::time::Duration;

/// Parses a byte size: a whole number with an optional unit B, KB, KiB, MB, MiB, GB, GiB
/// (KB = 1000, KiB = 1024). A bare number means bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.replace('_', "").parse().map_err(|_| {
        format!("'{text}' is not a size; write a number with a unit such as 100B, 64KiB or 1MiB")
    })?;
    let factor: f64 = match unit.trim() {
        "" | "B" | "b" => 1.0,
        "KB" | "kB" | "kb" => 1e3,
        "KiB" | "kib" | "K" | "k" => 1024.0,
        "MB" | "mb" => 1e6,
        "MiB" | "mib" | "M" | "m" => 1024.0 * 1024.0,
        "GB" | "gb" => 1e9,
        "GiB" | "gib" | "G" | "g" => 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(format!(
                "'{text}' has an unknown size unit '{other}'; use B, KB, KiB, MB, MiB, GB or GiB"
            ))
        }
    };
    let bytes = number * factor;
    if bytes.fract() != 0.0 || bytes < 0.0 {
        return Err(format!("'{text}' is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// Serde helper for an optional size in driver files: a number of bytes, or text with a
/// unit (`64MiB`), or null.
pub fn optional_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::Deserialize;
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(u64),
        Text(String),
    }
    match Option::<Raw>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::Number(n)) => Ok(Some(n)),
        Some(Raw::Text(t)) => parse_bytes(&t).map(Some).map_err(serde::de::Error::custom),
    }
}

/// Parses a duration: a number with a unit ns, us, ms, s, m or h. A bare number means seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| {
        format!("'{text}' is not a duration; write a number with a unit such as 500ms, 30s or 2m")
    })?;
    let seconds = match unit.trim() {
        "ns" => number / 1e9,
        "us" | "µs" => number / 1e6,
        "ms" => number / 1e3,
        "" | "s" | "sec" => number,
        "m" | "min" => number * 60.0,
        "h" => number * 3600.0,
        other => {
            return Err(format!(
                "'{text}' has an unknown time unit '{other}'; use ns, us, ms, s, m or h"
            ))
        }
    };
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(format!("'{text}' is not a valid duration"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses a message rate: `max`, or a positive number with an optional k (thousand) or
/// M (million) suffix, in messages per second.
pub fn parse_rate(text: &str) -> Result<Option<f64>, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("max") {
        return Ok(None);
    }
    let (number, factor) = if let Some(n) = text.strip_suffix(['k', 'K']) {
        (n, 1e3)
    } else if let Some(n) = text.strip_suffix('M') {
        (n, 1e6)
    } else {
        (text, 1.0)
    };
    if text == "find" {
        return Err("'find' is a search for the highest sustainable rate, which takes a run per rate it tries: a study, not one run; write `set: {rate: find}` in a study file (with `name:`, and `workload:` naming this file) and run `brokerbench study FILE`".into());
    }
    let value: f64 = number.replace('_', "").parse().map_err(|_| {
        format!("'{text}' is not a rate; write messages per second (50000, 10k) or max")
    })?;
    Ok(Some(value * factor))
}

/// Formats nanoseconds for people: `850 ns`, `12.3 µs`, `4.56 ms`, `1.20 s`.
pub fn format_nanos(nanos: u64) -> String {
    let n = nanos as f64;
    if nanos < 1_000 {
        format!("{nanos} ns")
    } else if nanos < 1_000_000 {
        format!("{:.1} µs", n / 1e3)
    } else if nanos < 1_000_000_000 {
        format!("{:.2} ms", n / 1e6)
    } else {
        format!("{:.2} s", n / 1e9)
    }
}

/// Formats a size for people in binary units: `512 B`, `1.5 KiB`, `64.0 MiB`, `8.00 GiB`.
pub fn format_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1 << 20 {
        format!("{:.1} KiB", b / 1024.0)
    } else if bytes < 1 << 30 {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    } else {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    }
}

/// Formats a size the way it was most likely written: a whole number of the largest binary
/// or decimal unit that divides it (`8 GiB`, `3 MB`), else as [`format_bytes`].
pub fn format_bytes_given(bytes: u64) -> String {
    const UNITS: [(u64, &str); 6] = [
        (1 << 30, "GiB"),
        (1_000_000_000, "GB"),
        (1 << 20, "MiB"),
        (1_000_000, "MB"),
        (1 << 10, "KiB"),
        (1_000, "KB"),
    ];
    match UNITS
        .iter()
        .find(|(unit, _)| bytes > 0 && bytes.is_multiple_of(*unit))
    {
        Some((unit, name)) => format!("{} {name}", bytes / unit),
        None => format_bytes(bytes),
    }
}

/// Formats a count per second for people: `950`, `12.3K`, `2.05M`.
pub fn format_rate(per_second: f64) -> String {
    if per_second < 1e4 {
        format!("{per_second:.0}")
    } else if per_second < 1e6 {
        format!("{:.1}K", per_second / 1e3)
    } else {
        format!("{:.2}M", per_second / 1e6)
    }
}

/// `1800000` → `1,800,000`.
pub fn group_thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_for_people() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(64 << 20), "64.0 MiB");
        assert_eq!(format_bytes(8 << 30), "8.00 GiB");
        assert_eq!(format_bytes_given(8 << 30), "8 GiB");
        assert_eq!(format_bytes_given(3_000_000), "3 MB");
        assert_eq!(format_bytes_given(1500), "1.5 KiB");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("100B"), Ok(100));
        assert_eq!(parse_bytes("100"), Ok(100));
        assert_eq!(parse_bytes("64KiB"), Ok(65536));
        assert_eq!(parse_bytes("1MiB"), Ok(1 << 20));
        assert_eq!(parse_bytes("1KB"), Ok(1000));
        assert!(parse_bytes("12 parsecs")
            .unwrap_err()
            .contains("unknown size unit"));
        assert!(parse_bytes("1.5B").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("5 fortnights").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("max"), Ok(None));
        assert_eq!(parse_rate("50000"), Ok(Some(50000.0)));
        assert_eq!(parse_rate("10k"), Ok(Some(10000.0)));
        assert_eq!(parse_rate("2M"), Ok(Some(2e6)));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("find")
            .unwrap_err()
            .contains("set: {rate: find}"));
    }

    #[test]
    fn readable_units() {
        assert_eq!(format_nanos(850), "850 ns");
        assert_eq!(format_nanos(12_345), "12.3 µs");
        assert_eq!(format_nanos(4_560_000), "4.56 ms");
        assert_eq!(format_rate(2_050_000.0), "2.05M");
    }
}
