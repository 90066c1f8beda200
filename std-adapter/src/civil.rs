//! Civil time from Unix seconds, in UTC: what the pstats table's date and the push log's
//! stamps print.

/// A moment as a calendar shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Civil {
    pub year: i64,
    /// 1 to 12.
    pub month: u32,
    /// 1 to 31.
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    /// 0 for Sunday.
    pub weekday: u32,
}

/// `seconds` since 1970-01-01T00:00:00Z as a UTC date and time (days to a date by Howard
/// Hinnant's algorithm).
pub(crate) fn utc(seconds: i64) -> Civil {
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    Civil {
        year: yoe + era * 400 + i64::from(month <= 2),
        month,
        day,
        hour: (secs / 3600) as u32,
        minute: (secs % 3600 / 60) as u32,
        second: (secs % 60) as u32,
        weekday: (days + 4).rem_euclid(7) as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_as_calendars_give_them() {
        let c =
            |year, month, day, hour, minute, second, weekday| Civil { year, month, day, hour, minute, second, weekday };
        assert_eq!(utc(0), c(1970, 1, 1, 0, 0, 0, 4));
        assert_eq!(utc(-1), c(1969, 12, 31, 23, 59, 59, 3));
        // 2000-02-29 (a leap day of a century divisible by 400), 12:34:56, a Tuesday.
        assert_eq!(utc(951_827_696), c(2000, 2, 29, 12, 34, 56, 2));
        // 2026-12-04T23:59:59Z, a Friday.
        assert_eq!(utc(1_796_428_799), c(2026, 12, 4, 23, 59, 59, 5));
    }
}
