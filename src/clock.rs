//! The one clock (a leaf module): the only code that reads the time of day.
//!
//! Two readings, kept apart on purpose:
//! - [`Clock`] stamps what the engine writes and decides by: receipts, notes it renders, log.md
//!   entries, approvals and decisions, work-packet journals, goals, broker records, "today" for
//!   freshness. A vault's clock is `VaultOptions::now` / `today` (`Vault::clock`), so tests and
//!   reproducible runs (`PARAVAULT_NOW`, `PARAVAULT_TODAY`) fix every stamp at once.
//! - [`machine_time`] is this machine's wall clock, for what is compared with the file system's
//!   own times (a file's age, a generation's age) and for unique names. It is never written
//!   into a note or a record that travels.
//!
//! `tests/it/tidy.rs` (`time_is_read_only_by_the_clock`) keeps every other module from reading
//! the time of day itself; `Instant` (elapsed time) is free to use.

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use std::time::{SystemTime, UNIX_EPOCH};

/// The engine's clock: the system's, or one fixed instant and day for reproducible runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock {
    now: Option<DateTime<Utc>>,
    today: Option<NaiveDate>,
}

impl Clock {
    /// The system's clock.
    pub const fn system() -> Clock {
        Clock { now: None, today: None }
    }

    /// A clock whose instant is `now` where given, and whose day is `today` where given (else
    /// the system's).
    pub const fn fixed(now: Option<DateTime<Utc>>, today: Option<NaiveDate>) -> Clock {
        Clock { now, today }
    }

    /// The instant to stamp.
    pub fn now(&self) -> DateTime<Utc> {
        self.now.unwrap_or_else(Utc::now)
    }

    /// The instant to stamp, as RFC 3339 in UTC with `precision`.
    pub fn stamp(&self, precision: SecondsFormat) -> String {
        self.now().to_rfc3339_opts(precision, true)
    }

    /// Today: the configured day, else the day of [`Clock::now`].
    pub fn today(&self) -> NaiveDate {
        self.today.unwrap_or_else(|| self.now().date_naive())
    }
}

/// This machine's wall clock, for comparing with the file system's times and for unique names:
/// never a stamp (see the module documentation).
pub fn machine_time() -> SystemTime {
    SystemTime::now()
}

/// Nanoseconds since the epoch on this machine's wall clock (unique names, file ages).
pub fn machine_nanos() -> u128 {
    machine_time().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// This machine's wall clock as a UTC instant, for ages compared with machine-written stamps
/// (a search generation's `created_at`).
pub fn machine_utc() -> DateTime<Utc> {
    DateTime::<Utc>::from(machine_time())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_clock_stamps_its_instant_and_its_day() {
        let at = DateTime::parse_from_rfc3339("2026-03-04T05:06:07.123456Z").unwrap().to_utc();
        let clock = Clock::fixed(Some(at), None);
        assert_eq!(clock.stamp(SecondsFormat::Micros), "2026-03-04T05:06:07.123456Z");
        assert_eq!(clock.today(), NaiveDate::from_ymd_opt(2026, 3, 4).unwrap());
        let day = NaiveDate::from_ymd_opt(2020, 1, 2).unwrap();
        assert_eq!(Clock::fixed(Some(at), Some(day)).today(), day, "a configured day wins over the instant's");
    }

    #[test]
    fn the_system_clock_moves() {
        let clock = Clock::system();
        let (a, b) = (clock.now(), machine_utc());
        assert!((b - a).num_seconds().abs() < 60);
    }
}
