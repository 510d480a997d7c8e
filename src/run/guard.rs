//! The guard: a small process that kills the process groups of aw-run's backends when
//! aw-run dies, however it dies.
//!
//! A backend gets SIGKILL when its parent thread dies (the parent-death signal), but the
//! programs it started do not: that signal is not inherited. So aw-run starts its own
//! executable again as a guard (when the first backend group starts: a run that starts no
//! program starts no guard), in its own process group, with the read end of a pipe on its
//! stdin and `/dev/null` for stdout and stderr. aw-run writes `+PGID` on the pipe when a
//! backend's group starts and `-PGID` once the group has been killed; the guard keeps the
//! set. When the pipe ends (aw-run is gone: every copy of the write end is close-on-exec and
//! only aw-run holds it), the guard sends SIGKILL to each group left in the set and exits.
//!
//! Each message is one write of a few bytes, less than `PIPE_BUF`, so it reaches the guard
//! whole or not at all.

use std::collections::HashSet;
use std::io::{BufRead, PipeWriter, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{self, SigHandler, Signal};
use nix::unistd::Pid;

/// Set in the environment of the guard process; aw-run started with it is the guard.
pub const GUARD: &str = "AW_RUN_GUARD";

/// The guard's `argv[0]` (what `ps` shows).
pub const ARG0: &str = "aw-run-guard";

/// The write end of the pipe to the guard, once started; `None` again after a failed write.
static PIPE: Mutex<Option<PipeWriter>> = Mutex::new(None);

/// Set by [`start`]: the guard is wanted, and starts with the first group to watch.
static WANTED: AtomicBool = AtomicBool::new(false);

/// Is this process the guard?
pub fn is_guard() -> bool {
    std::env::var_os(GUARD).is_some()
}

/// Ask for the guard. Call it once, before any backend starts; without it, backends run
/// unguarded. The process itself starts just before the first program that gets a group of
/// its own ([`ensure`], or the first [`watch`]), so that a run that starts no program (mock
/// agents, API backends) costs no process: a failure to start it is then reported on
/// stderr, once.
pub fn start() -> std::io::Result<()> {
    WANTED.store(true, Ordering::SeqCst);
    Ok(())
}

/// Start the guard now if it is wanted and not running yet. Called before a program that
/// will have its own group starts, so that the guard is there when [`watch`] names it.
pub fn ensure() {
    spawn(&mut PIPE.lock().unwrap_or_else(|e| e.into_inner()));
}

/// Start the guard process into `pipe` (its lock held) if it is wanted and not running.
fn spawn(pipe: &mut Option<PipeWriter>) {
    if pipe.is_some() || !WANTED.swap(false, Ordering::SeqCst) {
        return;
    }
    match spawn_guard() {
        Ok(w) => *pipe = Some(w),
        Err(e) => crate::warn::warn(
            "aw-run",
            format!(
                "cannot start the guard process ({e}): what backends start may outlive a killed aw-run"
            ),
        ),
    }
}

fn spawn_guard() -> std::io::Result<PipeWriter> {
    let (reader, writer) = std::io::pipe()?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg0(ARG0)
        .env(GUARD, "1")
        .current_dir("/")
        .stdin(reader)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Out of aw-run's group: a signal to that group (Ctrl-C, `kill -9 %1`) leaves the
        // guard there to clean up after it.
        .process_group(0);
    // SAFETY: the closure runs between fork and exec and makes one system call.
    unsafe {
        cmd.pre_exec(|| {
            // Descriptors that aw-run inherited without close-on-exec are not for the guard
            // (an error means an old kernel: they stay open, as they do for backends).
            nix::libc::syscall(
                nix::libc::SYS_close_range,
                3,
                nix::libc::c_uint::MAX,
                nix::libc::CLOSE_RANGE_CLOEXEC,
            );
            Ok(())
        });
    }
    // Never waited for: it exits after aw-run.
    cmd.spawn()?;
    Ok(writer)
}

/// Have the guard kill the process group `pgid` if aw-run dies.
pub fn watch(pgid: u32) {
    send('+', pgid);
}

/// The process group `pgid` was killed: the guard forgets it, so a later group with the
/// same id is not killed.
pub fn release(pgid: u32) {
    send('-', pgid);
}

fn send(op: char, pgid: u32) {
    let mut pipe = PIPE.lock().unwrap_or_else(|e| e.into_inner());
    if op == '+' {
        spawn(&mut pipe);
    }
    let Some(w) = pipe.as_mut() else { return };
    if let Err(e) = w.write_all(format!("{op}{pgid}\n").as_bytes()) {
        *pipe = None;
        crate::warn::warn(
            "aw-run",
            format!(
                "the guard process is gone ({e}): what backends start may outlive a killed aw-run"
            ),
        );
    }
}

/// A message to the guard: a process group to watch (`+PGID`) or to release (`-PGID`).
/// Process groups 0 and 1 are never valid (`kill` would take them as this group or as
/// every process).
fn parse(line: &[u8]) -> Option<(bool, i32)> {
    let text = std::str::from_utf8(line).ok()?;
    let (add, num) = match text.split_at_checked(1)? {
        ("+", n) => (true, n),
        ("-", n) => (false, n),
        _ => return None,
    };
    if !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let pgid: i32 = num.parse().ok()?;
    (pgid > 1).then_some((add, pgid))
}

/// The guard process: keep the set of process groups until the pipe on stdin ends, then
/// kill those left.
pub fn serve() -> ExitCode {
    // Only aw-run's end stops the guard: not the terminal's signals, nor a stray SIGTERM.
    for sig in [
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGTERM,
    ] {
        // SAFETY: ignoring a signal installs no handler.
        let _ = unsafe { signal::signal(sig, SigHandler::SigIgn) };
    }
    let mut groups = HashSet::new();
    // A read error counts as the end: nothing more can come.
    for line in std::io::stdin().lock().split(b'\n') {
        let Ok(line) = line else { break };
        match parse(&line) {
            Some((true, pgid)) => groups.insert(pgid),
            Some((false, pgid)) => groups.remove(&pgid),
            None => false,
        };
    }
    for pgid in groups {
        let _ = signal::killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_a_group_above_1() {
        assert_eq!(parse(b"+1234"), Some((true, 1234)));
        assert_eq!(parse(b"-1234"), Some((false, 1234)));
        for bad in [
            &b""[..],
            b"+",
            b"+1",
            b"+0",
            b"+-5",
            b"*12",
            b"12",
            b"++12",
            b"+12 ",
            b"+\xff",
        ] {
            assert_eq!(parse(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
