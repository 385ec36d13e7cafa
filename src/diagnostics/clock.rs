//! `observed_at`: the wall clock as an RFC 3339 UTC timestamp with
//! milliseconds (`2026-12-01T08:30:00.250Z`).
//!
//! Written by hand: the diagnostics views are part of the runtime, which
//! builds without any optional feature, so they cannot use `jiff` (the
//! `time-utils` feature); one formatting function over the proleptic
//! Gregorian calendar does not justify making it a required dependency,
//! and the project keeps chrono out. The day-to-date conversion is the standard era-based
//! arithmetic (400-year eras of 146,097 days, years starting in March so the
//! leap day is last).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `time` as `YYYY-MM-DDTHH:MM:SS.mmmZ`; a time before the Unix epoch
/// (a clock set far back) is reported as the epoch.
pub(crate) fn rfc3339_utc(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let seconds = since.as_secs();
    let (year, month, day) = civil_from_days(seconds / 86_400);
    let of_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3_600,
        of_day % 3_600 / 60,
        of_day % 60,
        since.subsec_millis()
    )
}

/// The date `days` days after 1970-01-01.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shift the origin to 0000-03-01, the start of a 400-year era.
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months counted from March: 0 = March ... 11 = February.
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64, millis: u64) -> String {
        rfc3339_utc(UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_millis(millis))
    }

    #[test]
    fn known_instants_format_exactly() {
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day of a year divisible by 400).
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.007Z");
        // 2024-12-31T23:59:59 (the last second of a leap year).
        assert_eq!(at(1_735_689_599, 999), "2024-12-31T23:59:59.999Z");
        // 2100-03-01 (2100 is not a leap year).
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000Z");
        assert_eq!(at(1_780_000_000, 250), "2026-05-28T20:26:40.250Z");
    }

    #[test]
    fn every_day_of_four_centuries_follows_the_previous_one() {
        let mut previous = civil_from_days(0);
        for days in 1..146_097 * 2 {
            let date = civil_from_days(days);
            let (year, month, day) = previous;
            let next_day = (year, month, day + 1);
            let next_month = (year, month + 1, 1);
            let next_year = (year + 1, 1, 1);
            assert!(
                date == next_day || date == next_month || date == next_year,
                "{previous:?} -> {date:?}"
            );
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
            if date == next_month || date == next_year {
                let length = match month {
                    2 if leap => 29,
                    2 => 28,
                    4 | 6 | 9 | 11 => 30,
                    _ => 31,
                };
                assert_eq!(day, length, "{previous:?} ends its month");
            }
            previous = date;
        }
    }

    #[test]
    fn a_time_before_the_epoch_is_the_epoch() {
        let before = UNIX_EPOCH - Duration::from_secs(10);
        assert_eq!(rfc3339_utc(before), "1970-01-01T00:00:00.000Z");
    }
}
