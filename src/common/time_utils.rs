//! Wall-clock helpers: Unix-epoch clocks, local-time formatting and
//! parsing, and the next minute or midnight for daily jobs.
//!
//! Local time is the system time zone as `jiff` resolves it (the `TZ`
//! variable, else the system's zone). Patterns are `strftime`-style, as
//! [`jiff::fmt::strtime`] reads them; the two pattern constants are the
//! original helpers' formats in that notation. These clocks are the wall
//! clock (they jump with it); deadlines and ages inside the runtime use the
//! monotonic Tokio clock instead.
//!
//! ```
//! use rocketmq_runtime::common::time_utils::{self, YYYYMMDDHHMMSS};
//!
//! let now = time_utils::current_millis();
//! let text = time_utils::time_millis_to_string(now as i64, YYYYMMDDHHMMSS);
//! let parsed = time_utils::parse_date_to_millis(&text, YYYYMMDDHHMMSS).expect("parses");
//! assert_eq!(parsed, now as i64 / 1_000 * 1_000); // whole seconds
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Zoned};

/// `yyyy-MM-dd#HH:mm:ss:SSS` (for example `2026-12-02#08:30:05:123`).
pub const YYYY_MM_DD_HH_MM_SS_SSS: &str = "%Y-%m-%d#%H:%M:%S:%3f";
/// `yyyyMMddHHmmss` (for example `20261202083005`).
pub const YYYYMMDDHHMMSS: &str = "%Y%m%d%H%M%S";

/// `yyyyMMddHHmmssSSS`, the format of [`time_millis_to_human_string`].
const HUMAN: &str = "%Y%m%d%H%M%S%3f";
/// `yyyy-MM-dd HH:mm:ss,SSS`, the format of [`time_millis_to_human_string2`].
const HUMAN2: &str = "%Y-%m-%d %H:%M:%S,%3f";

/// Time since the Unix epoch; zero when the clock is before it.
fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
}

/// Milliseconds since the Unix epoch (0 before the epoch).
pub fn current_millis() -> u64 {
    u64::try_from(since_epoch().as_millis()).unwrap_or(u64::MAX)
}

/// Nanoseconds since the Unix epoch (0 before the epoch).
pub fn current_nano() -> u64 {
    u64::try_from(since_epoch().as_nanos()).unwrap_or(u64::MAX)
}

/// Seconds since the Unix epoch (0 before the epoch).
pub fn current_secs() -> u64 {
    since_epoch().as_secs()
}

/// The system time zone, as `jiff` resolves it.
fn local_zone() -> TimeZone {
    TimeZone::system()
}

fn millis_of(zoned: &Zoned) -> u64 {
    u64::try_from(zoned.timestamp().as_millisecond()).unwrap_or(0)
}

/// The start of the next whole local minute, in Unix-epoch milliseconds.
pub fn compute_next_minutes_time_millis() -> u64 {
    let now = Zoned::now().with_time_zone(local_zone());
    next_minute_after(&now).map_or_else(|| current_millis() + 60_000, |next| millis_of(&next))
}

/// The next local midnight (the first instant of tomorrow, local time), in
/// Unix-epoch milliseconds.
pub fn compute_next_morning_time_millis() -> u64 {
    let now = Zoned::now().with_time_zone(local_zone());
    next_morning_after(&now).map_or_else(|| current_millis() + 86_400_000, |next| millis_of(&next))
}

/// The start of the minute after `now`'s, in `now`'s zone.
pub(crate) fn next_minute_after(now: &Zoned) -> Option<Zoned> {
    let truncated = now.with().second(0).subsec_nanosecond(0).build().ok()?;
    truncated.checked_add(1.minute()).ok()
}

/// The first instant of the day after `now`'s, in `now`'s zone: midnight,
/// or the first existing instant when a transition skips midnight.
pub(crate) fn next_morning_after(now: &Zoned) -> Option<Zoned> {
    let tomorrow = now.date().tomorrow().ok()?;
    tomorrow
        .to_zoned(now.time_zone().clone())
        .ok()?
        .start_of_day()
        .ok()
}

/// `millis` (Unix epoch) in local time with `pattern`; an out-of-range
/// value formats as the epoch, and a pattern `jiff` cannot format yields
/// an empty string.
pub fn time_millis_to_string(millis: i64, pattern: &str) -> String {
    let timestamp = Timestamp::from_millisecond(millis).unwrap_or(Timestamp::UNIX_EPOCH);
    let local = timestamp.to_zoned(local_zone());
    jiff::fmt::strtime::format(pattern, &local).unwrap_or_default()
}

/// `yyyyMMddHHmmssSSS` in local time (for example `20261202083005123`).
pub fn time_millis_to_human_string(millis: i64) -> String {
    time_millis_to_string(millis, HUMAN)
}

/// `yyyy-MM-dd HH:mm:ss,SSS` in local time.
pub fn time_millis_to_human_string2(millis: i64) -> String {
    time_millis_to_string(millis, HUMAN2)
}

/// `yyyyMMddHHmmss` in local time.
pub fn time_millis_to_human_string3(millis: i64) -> String {
    time_millis_to_string(millis, YYYYMMDDHHMMSS)
}

/// Whether the current local hour is one of `when`'s `;`-separated hours
/// (`"04;16"`: 4 a.m. or 4 p.m.). Entries that are not hours are ignored.
pub fn is_it_time_to_do(when: &str) -> bool {
    let hour = Zoned::now().with_time_zone(local_zone()).hour();
    hour_listed(when, hour)
}

fn hour_listed(when: &str, hour: i8) -> bool {
    when.split(';')
        .filter_map(|entry| entry.trim().parse::<i8>().ok())
        .any(|listed| listed == hour)
}

/// `date` read with `pattern` as local time; `None` when it does not match
/// or names a local time that does not exist.
pub fn parse_date(date: &str, pattern: &str) -> Option<SystemTime> {
    let millis = parse_date_to_millis(date, pattern)?;
    let offset = Duration::from_millis(millis.unsigned_abs());
    if millis >= 0 {
        UNIX_EPOCH.checked_add(offset)
    } else {
        UNIX_EPOCH.checked_sub(offset)
    }
}

/// [`parse_date`] as Unix-epoch milliseconds.
pub fn parse_date_to_millis(date: &str, pattern: &str) -> Option<i64> {
    let civil = DateTime::strptime(pattern, date).ok()?;
    let zoned = civil.to_zoned(local_zone()).ok()?;
    Some(zoned.timestamp().as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zoned(text: &str) -> Zoned {
        text.parse().expect("a zoned datetime")
    }

    #[test]
    fn the_next_morning_is_the_first_instant_of_tomorrow() {
        // New York, the day before the spring transition (02:00 skipped).
        let next = next_morning_after(&zoned("2026-03-07T23:30[America/New_York]")).expect("next");
        assert_eq!(
            next.to_string(),
            "2026-03-08T00:00:00-05:00[America/New_York]"
        );
        let next = next_morning_after(&zoned("2026-03-08T12:00[America/New_York]")).expect("next");
        assert_eq!(
            next.to_string(),
            "2026-03-09T00:00:00-04:00[America/New_York]"
        );
        // Santiago skips midnight itself: the day starts at 01:00.
        let next = next_morning_after(&zoned("2026-09-05T12:00[America/Santiago]")).expect("next");
        assert_eq!(
            next.to_string(),
            "2026-09-06T01:00:00-03:00[America/Santiago]"
        );
    }

    #[test]
    fn the_next_minute_is_whole() {
        let next =
            next_minute_after(&zoned("2026-12-02T08:30:59.999[Asia/Kolkata]")).expect("next");
        assert_eq!(next.to_string(), "2026-12-02T08:31:00+05:30[Asia/Kolkata]");
    }

    #[test]
    fn listed_hours_match() {
        assert!(hour_listed("04;16", 16));
        assert!(hour_listed(" 4 ; 16 ", 4));
        assert!(!hour_listed("04;16", 5));
        assert!(!hour_listed("soon;", 0));
    }

    #[test]
    fn every_pattern_constant_parses_its_own_output() {
        let millis = 1_764_664_205_123; // 2025-12-02T08:30:05.123Z
        for (pattern, precision) in [(YYYY_MM_DD_HH_MM_SS_SSS, 1), (YYYYMMDDHHMMSS, 1_000)] {
            let text = time_millis_to_string(millis, pattern);
            assert_eq!(
                parse_date_to_millis(&text, pattern),
                Some(millis / precision * precision),
                "{pattern}: {text}"
            );
            assert!(parse_date(&text, pattern).is_some());
        }
        assert_eq!(parse_date_to_millis("yesterday", YYYYMMDDHHMMSS), None);
    }

    #[test]
    fn out_of_range_formats_as_the_epoch() {
        assert_eq!(
            time_millis_to_human_string(i64::MAX),
            time_millis_to_human_string(0)
        );
    }
}
