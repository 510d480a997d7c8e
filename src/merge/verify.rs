//! The verify command of a request: `sh -c` in the scratch work tree, its output in the
//! attempt's log, its process group killed when it runs past its time or its server stops.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::request::Request;
use crate::error::{Error, Result};
use crate::process::{Cut, Spawning};

/// How many lines of the output a failure quotes.
pub const TAIL_LINES: usize = 20;

/// What the verify command did.
pub(super) struct Verified {
    /// Why it failed, if it did.
    pub failed: Option<String>,
    /// The last lines of its output.
    pub tail: String,
}

/// Run `cmd` in `dir` for request `r`, started as `how` says, its output appended to `log`.
/// When `how.stop` is set it is killed, with its process group, and the run ends
/// interrupted.
pub(super) fn run(
    cmd: &str,
    dir: &Path,
    r: &Request,
    log: &mut File,
    how: &Spawning,
) -> Result<Verified> {
    let _ = writeln!(log, "$ {cmd}");
    let _ = log.flush();
    let start = log
        .seek(SeekFrom::End(0))
        .map_err(|e| Error::io("log", e))?;
    let err = |e: std::io::Error| Error::Unavailable(format!("verify command: cannot run: {e}"));
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(err)?)
        .stderr(log.try_clone().map_err(err)?)
        .envs(crate::otel::child_env())
        .env("AW_MERGE_ID", r.id.to_string())
        .env("AW_MERGE_BRANCH", &r.branch)
        .env("AW_MERGE_INTO", &r.into)
        .env("AW_MERGE_AGENT", &r.agent);
    let n = (how.prepare)(&mut c);
    for v in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
    ] {
        c.env_remove(v);
    }
    let child = c.spawn().map_err(err)?;
    let pgid = child.id();
    (how.watch)(n, pgid);
    // What it left running in its group goes with it.
    let limit = Duration::from_secs(r.timeout);
    let (status, cut) = crate::process::wait_killing_group(child, limit, how.stop);
    (how.release)(pgid);
    if cut == Some(Cut::Stopped) {
        let _ = writeln!(log, "# stopped: killed, to be served again");
        return Err(Error::Interrupted);
    }
    let timed_out = cut.is_some();
    let status = status.map_err(err)?;
    let tail = tail(log, start);
    let failed = if timed_out {
        Some(format!("ran past its {} s and was killed", r.timeout))
    } else if status.success() {
        None
    } else {
        Some(match status.code() {
            Some(c) => format!("exit {c}"),
            None => "killed by a signal".to_string(),
        })
    };
    Ok(Verified { failed, tail })
}

/// How much of the end of the output is read for its last lines.
const TAIL_BYTES: u64 = 64 * 1024;

/// The last [`TAIL_LINES`] lines of `log` after `start` (of its last [`TAIL_BYTES`]).
fn tail(log: &mut File, start: u64) -> String {
    use std::io::Read;
    let end = log.seek(SeekFrom::End(0)).unwrap_or(start);
    let from = start.max(end.saturating_sub(TAIL_BYTES));
    let mut buf = Vec::new();
    if log.seek(SeekFrom::Start(from)).is_ok() {
        let _ = Read::by_ref(log).take(end - from).read_to_end(&mut buf);
    }
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}
