//! The records of iterative runs (`aw-run --iter`): one JSON line per iteration, appended
//! to `_state/iterations/<agent>.jsonl` by the runner, read by `aw-run --resume` and
//! `aw-ctl runs`.

use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::usage::Usage;

/// One iteration, as recorded in `_state/iterations/<agent>.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// When the series of iterations began (what `--resume` continues).
    pub series: String,
    pub iteration: u64,
    /// The limit: a count, or a duration in seconds (`1800s`).
    pub limit: String,
    /// `ok` or `failed`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub started: String,
    pub duration_ms: u64,
    /// The channel entry that asked for it.
    pub entry: u64,
    /// The agent's reply, without a done line.
    pub summary: String,
    /// The commit it ended with.
    pub commit: Option<String>,
    /// The files committed.
    #[serde(default)]
    pub files: Vec<String>,
    /// The commit checked out when the series began.
    #[serde(default)]
    pub base: Option<String>,
    pub usage: Option<Usage>,
    /// The agent said the task is done.
    #[serde(default)]
    pub done: bool,
}

/// `_state/iterations/<agent>.jsonl`.
pub fn records_path(inst: &Instance, agent: &str) -> PathBuf {
    inst.state_dir()
        .join("iterations")
        .join(format!("{agent}.jsonl"))
}

/// Every record of `agent` (a line that does not parse, such as one cut short by a crash,
/// is skipped with a warning of `tool`).
pub fn records(inst: &Instance, agent: &str, tool: &str) -> Result<Vec<Record>> {
    let path = records_path(inst, agent);
    let text = match crate::fs::owned::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let mut out = Vec::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Record>(line) {
            Ok(r) => out.push(r),
            Err(e) => crate::warn::warn(
                tool,
                format!("{}:{}: damaged record skipped: {e}", path.display(), i + 1),
            ),
        }
    }
    Ok(out)
}

/// Append `r` as one line, with one write on an append-only descriptor.
pub fn append(inst: &Instance, agent: &str, r: &Record) -> Result<()> {
    use nix::fcntl::OFlag;
    let path = records_path(inst, agent);
    // Private, whatever the umask: a record holds the agent's summary.
    crate::fs::private_dir(path.parent().expect("a folder"))?;
    let mut line = serde_json::to_string(r).expect("json");
    line.push('\n');
    let flags = OFlag::O_WRONLY | OFlag::O_APPEND | OFlag::O_CREAT;
    let mode = nix::sys::stat::Mode::from_bits_truncate(0o600);
    let mut f = crate::fs::owned::open(&path, flags, mode).map_err(|e| Error::create(&path, e))?;
    crate::fs::make_private(&f, &path)?;
    f.write_all(line.as_bytes())
        .and_then(|()| f.sync_data())
        .map_err(|e| Error::io(&path, e))
}
