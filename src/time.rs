//! Durations as the tools take them, deadlines that never overflow, and times as shown.
//!
//! Every duration a user gives (a workflow key, a command-line flag, a tool argument) is at
//! most [`MAX_DURATION`]; a longer one is refused where it is read. Every deadline is made with
//! [`deadline`] or [`after`], which saturate instead of panicking, so that a duration from
//! anywhere else (a file of the instance, a server's answer) cannot overflow an `Instant`
//! either.

use std::time::{Duration, Instant};

/// Longest duration accepted anywhere: 365 days.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// How [`MAX_DURATION`] is named in messages.
pub const MAX_DURATION_TEXT: &str = "365 days (31536000 s)";

/// `d` from now, or as far as the clock can go.
pub fn deadline(d: Duration) -> Instant {
    after(Instant::now(), d)
}

/// `d` after `t`, or as far after `t` as the clock can go.
pub fn after(t: Instant, d: Duration) -> Instant {
    let mut d = d;
    loop {
        if let Some(end) = t.checked_add(d) {
            return end;
        }
        // Halved until it fits: a few steps at most, and zero always fits.
        d /= 2;
    }
}

/// `d`, or the error to give when it is longer than [`MAX_DURATION`].
pub fn check(d: Duration) -> Result<Duration, String> {
    if d > MAX_DURATION {
        Err(format!(
            "longer than {MAX_DURATION_TEXT}, the longest duration accepted"
        ))
    } else {
        Ok(d)
    }
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// Elapsed time as a clock: `42s`, `3m05s`, `1h02m`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// `HH:MM:SS` of an entry timestamp.
pub fn hms(ts: &str) -> &str {
    ts.get(11..19).unwrap_or(ts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_saturate_instead_of_overflowing() {
        let now = Instant::now();
        assert_eq!(
            after(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        let far = after(now, Duration::MAX);
        assert!(far > now + MAX_DURATION);
        assert!(deadline(Duration::MAX) > now);
        assert!(deadline(Duration::from_secs(u64::MAX / 2)) > now);
    }

    #[test]
    fn clocks_read_well() {
        assert_eq!(clock(Duration::from_secs(42)), "42s");
        assert_eq!(clock(Duration::from_secs(185)), "3m05s");
        assert_eq!(clock(Duration::from_secs(3720)), "1h02m");
    }

    #[test]
    fn the_maximum_is_accepted_and_more_is_refused() {
        assert_eq!(check(MAX_DURATION), Ok(MAX_DURATION));
        let err = check(MAX_DURATION + Duration::from_nanos(1)).unwrap_err();
        assert!(err.contains("365 days"), "{err}");
    }
}
