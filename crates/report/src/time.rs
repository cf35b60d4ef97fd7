//! UTC calendar dates from nanoseconds since the UNIX epoch, without a date-time dependency.

use brokerbench_model::calendar::civil_from_days;

/// UTC date and time of day of an instant.
pub(crate) struct UtcTime {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub millisecond: u32,
}

impl UtcTime {
    pub(crate) fn from_nanos(nanos_since_epoch: u64) -> Self {
        let seconds = nanos_since_epoch / 1_000_000_000;
        let (year, month, day) = civil_from_days((seconds / 86_400) as i64);
        let second_of_day = (seconds % 86_400) as u32;
        UtcTime {
            year,
            month,
            day,
            hour: second_of_day / 3600,
            minute: second_of_day / 60 % 60,
            second: second_of_day % 60,
            millisecond: (nanos_since_epoch % 1_000_000_000 / 1_000_000) as u32,
        }
    }
}

/// RFC 3339 UTC time with milliseconds, e.g. `2026-11-22T03:19:14.250Z`.
pub fn rfc3339_utc(nanos_since_epoch: u64) -> String {
    let t = UtcTime::from_nanos(nanos_since_epoch);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second, t.millisecond
    )
}

/// Seconds since the epoch with milliseconds (`1763781554.250`), as the HdrHistogram log
/// format and timeseries.csv write them; truncated, not rounded, so it never runs ahead.
pub(crate) fn seconds_with_millis(nanos: u64) -> String {
    format!(
        "{}.{:03}",
        nanos / 1_000_000_000,
        nanos % 1_000_000_000 / 1_000_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: u64 = 1_000_000_000;

    #[test]
    fn rfc3339() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000Z");
        // `date -u -d @1795317554` = Sun Nov 22 03:19:14 UTC 2026
        assert_eq!(
            rfc3339_utc(1_795_317_554 * NS + 250_000_000),
            "2026-11-22T03:19:14.250Z"
        );
        // 2038 rollover of 32-bit time_t: 2^31 seconds.
        assert_eq!(rfc3339_utc(2_147_483_648 * NS), "2038-01-19T03:14:08.000Z");
        assert_eq!(
            rfc3339_utc(951_782_400 * NS + 999_999_999),
            "2000-02-29T00:00:00.999Z"
        );
    }

    #[test]
    fn seconds_text() {
        assert_eq!(
            seconds_with_millis(1_795_317_554 * NS + 250_999_999),
            "1795317554.250"
        );
        assert_eq!(seconds_with_millis(5_000_000), "0.005");
    }
}
