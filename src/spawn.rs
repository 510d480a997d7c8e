//! Starting an agent's server: the readiness protocol between a parent and
//! `aw-run --detach`, and whether aw-run can run a registered agent at all.
//!
//! `aw-run --detach` (and `spawn_agent`, which runs `aw-run --serve --keep --detach` for a
//! worker) starts the same command again in a session of its own, with the write end of a
//! pipe as a descriptor the child inherits and whose number [`READY_FD`] names. The
//! starter reads nothing but its command line: the child reads the workflow and checks it,
//! its output going to the starter through a second pipe (printed on the starter's stderr
//! as it comes) until it knows its instance. From then on its output is appended to that
//! instance's `_state/aw-run.log`, and it writes `L` and three fields, each ended by a NUL
//! byte: the log's size before, its path, and the note its starter prints once it serves.
//! Then it writes `!` and one line for each warning its starter must print (polling instead
//! of inotify, say), then one byte, `1`, once its agents are served and the kickoff is
//! posted; the parent prints the warnings on its stderr, then the child's pid and the note,
//! and exits 0. End of file before that byte means the child ended without serving: the
//! parent shows what it logged (past the size it gave) and exits with its status. The
//! child takes the descriptor only when it is open and not close-on-exec, and marks it
//! close-on-exec at once; the variable itself is removed from the environment of every
//! command aw-run starts (setup and shell tasks, backends, a worker's aw-run), so nothing
//! else reports readiness on its behalf. Both sides are in `src/cli/run_detach.rs`.
//!
//! `runnable` is the check both sides make before a worker is registered or served: a
//! backend aw-run knows, its CLI program in `PATH`, a model or a command where one is
//! needed.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::registry::{Agent, BackendKind};

/// The environment variable that hands a detached server the pipe it reports readiness on
/// (`aw-run --detach`); never passed on to setup commands or backends.
pub const READY_FD: &str = "AW_RUN_READY_FD";

/// Can `aw-run --serve` run this registered agent?
pub(crate) fn runnable(a: &Agent) -> Result<()> {
    match a.backend.as_str() {
        "mock" => Ok(()),
        "claude" if find_program(CLAUDE).is_some() => Ok(()),
        "claude" => Err(missing_program(&a.name, BackendKind::Claude)),
        "codex" if find_program(CODEX).is_some() => Ok(()),
        "codex" => Err(missing_program(&a.name, BackendKind::Codex)),
        "anthropic" | "openai" if a.model.is_none() => Err(Error::invalid(format!(
            "{}: the {} backend needs a model",
            a.name, a.backend
        ))),
        "anthropic" | "openai" => Ok(()),
        "exec" if !a.command.is_empty() => Ok(()),
        "exec" => Err(Error::invalid(format!(
            "{}: an exec agent needs a command (aw-ctl new {} --backend exec -- PROGRAM [ARG...])",
            a.name, a.name
        ))),
        "external" => Err(Error::Unavailable(format!(
            "{}: an external agent is driven from outside, not by aw-run",
            a.name
        ))),
        other => Err(Error::Unavailable(format!(
            "{}: unknown backend '{other}'",
            a.name
        ))),
    }
}

/// The Claude Code program, looked up in `PATH`.
pub(crate) const CLAUDE: &str = "claude";
/// The Codex program, looked up in `PATH`.
pub(crate) const CODEX: &str = "codex";

/// The program a CLI backend runs.
pub(crate) fn program_of(b: BackendKind) -> &'static str {
    match b {
        BackendKind::Codex => CODEX,
        _ => CLAUDE,
    }
}

pub(crate) fn missing_program(agent: &str, b: BackendKind) -> Error {
    Error::Unavailable(format!(
        "{agent}: the {} backend needs its CLI: no '{}' in PATH",
        b.name(),
        program_of(b)
    ))
}

/// `name` found in `PATH`, as an executable file.
pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    find_in(name, &std::env::var_os("PATH")?)
}

/// `name` found in the directories of `path` (a `PATH` value), as an executable file.
pub(crate) fn find_in(name: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| is_executable(&m)))
}

/// A file someone may execute.
pub(crate) fn is_executable(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    m.is_file() && m.permissions().mode() & 0o111 != 0
}
