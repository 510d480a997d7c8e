//! The hook log of an instance, `_state/hooks.log`: one JSON line per hook run, what it was
//! given and what it answered, so that a hook that failed or timed out is never hidden.

use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::instance::Instance;

/// The file, under `_state/`.
pub const LOG: &str = "hooks.log";

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub at: String,
    /// The event, `on_run_end` and so on.
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The command, as the workflow names it.
    pub run: String,
    /// `ok`, `not yet`, `not yet (not posted)` or `failed`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub secs: f64,
    /// The last lines of its stderr, when it said anything.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
}

/// Append `r` as one line, with one write on an append-only descriptor.
pub fn append(inst: &Instance, r: &Record) -> Result<()> {
    use nix::fcntl::OFlag;
    let path = inst.state_file(LOG);
    crate::fs::private_dir(&inst.state_dir())?;
    let mut line = serde_json::to_string(r).expect("json");
    line.push('\n');
    let flags = OFlag::O_WRONLY | OFlag::O_APPEND | OFlag::O_CREAT;
    let mode = nix::sys::stat::Mode::from_bits_truncate(0o600);
    let mut f = crate::fs::owned::open(&path, flags, mode).map_err(|e| Error::create(&path, e))?;
    f.write_all(line.as_bytes())
        .map_err(|e| Error::io(&path, e))
}
