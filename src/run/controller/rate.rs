//! The loop guard's limits: at most so many runs within any window, written `N/DURATION`
//! (`20/60s`) or `off`, and their defaults.

use std::time::Duration;

/// The loop guard's limit on the runs of one agent that only other agents' messages
/// started: at most `runs` within any `window`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub runs: u32,
    pub window: Duration,
}

impl Rate {
    /// `N/DURATION` (`20/60s`), or `off` (`None`).
    pub fn parse(v: &str) -> std::result::Result<Option<Rate>, String> {
        if v == "off" {
            return Ok(None);
        }
        let (n, d) = v
            .split_once('/')
            .ok_or("expected RUNS/DURATION (such as 20/60s) or off")?;
        let runs: u32 = n
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or("the runs must be a whole number of at least 1")?;
        let window = crate::run::parse_duration(d)?;
        if window.is_zero() {
            return Err("the duration must be above 0".into());
        }
        Ok(Some(Rate { runs, window }))
    }
}

/// The loop guard's rate limit by default: 20 runs per agent within any 60 s, counting
/// only the runs that messages from other agents served by the same aw-run started.
pub const DEFAULT_RATE: Rate = Rate {
    runs: 20,
    window: Duration::from_secs(60),
};

/// The loop guard's limit on the mentions between two agents by default: 10 within any
/// 60 s, both ways together, counting the runs of one of them on the other's messages alone
/// (in keep mode; the count holds across quiet moments).
pub const DEFAULT_PAIR: Rate = Rate {
    runs: 10,
    window: Duration::from_secs(60),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_or_say_what_is_wrong() {
        assert_eq!(
            Rate::parse("20/60s"),
            Ok(Some(Rate {
                runs: 20,
                window: Duration::from_secs(60)
            }))
        );
        assert_eq!(Rate::parse("off"), Ok(None));
        for bad in ["20", "0/60s", "x/60s", "5/0s", "5/soon"] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
    }
}
