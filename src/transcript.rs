//! Where the transcripts of an agent's runs live: `_state/runs/<agent>/<n>.json`, one per
//! attempt, numbered from 1 (the attempt's output as it comes is `<n>.log` beside it). The
//! runner writes them; `aw-ctl runs`, `aw-ctl top` and the reply wait read them.

use std::path::PathBuf;

use crate::instance::Instance;

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
