//! Where the transcripts of an agent's runs live: `_state/runs/<agent>/<n>.json`, one per
//! attempt, numbered from 1 (the attempt's output as it comes is `<n>.log` beside it). The
//! runner writes them; `aw-ctl runs`, `aw-ctl status`, `aw-ctl top` and the reply wait read
//! them, through [`numbered`] and [`read_all`]: the `<n>.json` files, never the logs. The
//! logs are found with [`log_numbers`] and [`log_path`], which `aw-ctl runs -f` and
//! `aw-ctl top` read while the runner writes.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::usage::Usage;

/// `_state/runs/<agent>`.
pub fn transcript_dir(inst: &Instance, agent: &str) -> PathBuf {
    inst.state_dir().join("runs").join(agent)
}

/// The next free transcript number of `agent` (1 when none exists).
pub fn next_transcript(inst: &Instance, agent: &str) -> u64 {
    let Ok(rd) = std::fs::read_dir(transcript_dir(inst, agent)) else {
        return 1;
    };
    rd.filter_map(|e| {
        let name = e.ok()?.file_name().into_string().ok()?;
        name.strip_suffix(".json")?.parse::<u64>().ok()
    })
    .max()
    .map_or(1, |m| m + 1)
}

/// The transcripts of `agent`, by number: the files named `<n>.json` (`n` from 1, written
/// without leading zeros), never the attempt logs `<n>.log` beside them.
pub fn numbered(inst: &Instance, agent: &str) -> Result<Vec<(u64, PathBuf)>> {
    let dir = transcript_dir(inst, agent);
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&dir, e)),
    };
    let mut found: Vec<(u64, PathBuf)> = rd
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let n: u64 = name.strip_suffix(".json")?.parse().ok()?;
            (n > 0 && name == format!("{n}.json")).then(|| (n, dir.join(&name)))
        })
        .collect();
    found.sort();
    Ok(found)
}

/// Every transcript of `agent` that reads as JSON, in order; those that cannot be read are
/// left out.
pub fn read_all(inst: &Instance, agent: &str) -> Vec<(u64, serde_json::Value)> {
    numbered(inst, agent)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(n, path)| {
            let bytes = crate::fs::owned::read(&path).ok()?;
            Some((n, serde_json::from_slice(&bytes).ok()?))
        })
        .collect()
}

/// What the transcripts of `agent` that `which` takes report it spent, summed; `None` when
/// none reports usage.
pub fn usage_of(
    inst: &Instance,
    agent: &str,
    which: impl Fn(&serde_json::Value) -> bool,
) -> Option<Usage> {
    let mut total: Option<Usage> = None;
    for (_, v) in read_all(inst, agent) {
        if !which(&v) {
            continue;
        }
        if let Ok(u) = serde_json::from_value::<Usage>(v["usage"].clone()) {
            total.get_or_insert_with(Usage::default).add(&u);
        }
    }
    total
}

/// The suffix of an attempt's log file.
pub const LOG_SUFFIX: &str = "log";

/// The numbers of the attempt logs in `dir` (`_state/runs/<agent>`), in order.
pub fn log_numbers(dir: &Path) -> Vec<u64> {
    let mut found: Vec<u64> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                let n: u64 = name
                    .strip_suffix(&format!(".{LOG_SUFFIX}"))?
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)?;
                (name == format!("{n}.{LOG_SUFFIX}")).then_some(n)
            })
            .collect()
        })
        .unwrap_or_default();
    found.sort_unstable();
    found
}

/// The log file of transcript `n` in `dir` (`_state/runs/<agent>`).
pub fn log_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n}.{LOG_SUFFIX}"))
}
