//! UTC calendar dates from nanoseconds since the UNIX epoch, without a date-time dependency.

/// Year, month (1–12), day (1–31) of a count of days since 1970-01-01, in the proleptic
/// Gregorian calendar (Howard Hinnant's `civil_from_days`).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

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
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(10_957), (2000, 1, 1));
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(19_783), (2024, 3, 1));
        assert_eq!(civil_from_days(47_541), (2100, 3, 1));
    }

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
