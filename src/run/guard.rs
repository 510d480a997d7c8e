//! The guard: a small process that kills the process groups of aw-run's programs when
//! aw-run dies, however it dies.
//!
//! aw-run starts its programs with `posix_spawn` (see [`crate::run::backend::exec::prepare`]):
//! nothing runs in the child between the fork and the exec, so no parent-death signal is
//! armed there, and the programs a backend starts would not get one anyway. So aw-run starts
//! its own executable again as a guard (when the first program group starts: a run that
//! starts no program starts no guard), in its own process group, with the read end of a
//! pipe on its stdin and `/dev/null` for stdout and stderr. aw-run tells it, on the pipe:
//!
//! - `?N` before it starts its program number N, which gets `AW_RUN_SPAWN=PID/N` in its
//!   environment (PID: aw-run's);
//! - `+PGID N` once it has started as the group PGID (`+PGID` for a group not announced),
//!   in the same write as `?N+1` for the next program: one write per start, not two. A
//!   number announced that no program takes costs the guard, if aw-run dies, one look in
//!   `/proc` that finds nothing; a number is handed to a program only once the guard has
//!   been told of it;
//! - `-PGID` once the group has been killed.
//!
//! The guard keeps the set of groups and the programs announced and not yet started. When
//! the pipe ends (aw-run is gone: every copy of the write end is close-on-exec and only
//! aw-run holds it), the guard sends SIGKILL to each group left in the set; and when aw-run
//! died between the start of a program and its `+PGID N`, it finds the program by its
//! environment (`/proc/*/environ`) and kills its group too. A child of `posix_spawn` holds a
//! copy of the write end until its exec, so the pipe cannot end before the program's
//! environment is in place.
//!
//! Each message is one write of a few bytes, less than `PIPE_BUF`, so it reaches the guard
//! whole or not at all.

use std::collections::HashSet;
use std::io::{BufRead, PipeWriter, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{self, SigHandler, Signal};
use nix::unistd::Pid;

/// Set in the environment of the guard process to aw-run's pid; aw-run started with it is
/// the guard.
pub const GUARD: &str = "AW_RUN_GUARD";

/// The guard's `argv[0]` (what `ps` shows).
pub const ARG0: &str = "aw-run-guard";

/// In the environment of each program aw-run starts in a group of its own: `PID/N`, aw-run's
/// pid and the program's number, by which the guard finds a program whose start aw-run did
/// not live to tell.
pub const SPAWN: &str = "AW_RUN_SPAWN";

/// The number of the last program announced.
static SPAWNED: AtomicU64 = AtomicU64::new(0);

/// A number announced with the last [`watch`] and not yet handed to a program (0: none).
static AHEAD: AtomicU64 = AtomicU64::new(0);

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
        .env(GUARD, std::process::id().to_string())
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

/// Announce a program about to start in a group of its own: its number, for
/// [`watch`], and the value of [`SPAWN`] to put in its environment.
pub fn announce() -> (u64, String) {
    let n = match AHEAD.swap(0, Ordering::AcqRel) {
        0 => {
            let n = SPAWNED.fetch_add(1, Ordering::Relaxed) + 1;
            send(&format!("?{n}"), true);
            n
        }
        // Announced with the last group watched, the guard being there then.
        n => n,
    };
    (n, format!("{}/{n}", std::process::id()))
}

/// Have the guard kill the process group `pgid` if aw-run dies: the group of the program
/// [announced](announce) as `n` (0: not announced).
/// A program's start is followed by the next one's, so the next number is announced with
/// it unless one is announced already.
pub fn watch(n: u64, pgid: u32) {
    if n == 0 || AHEAD.load(Ordering::Acquire) != 0 {
        send(&watch_message(n, pgid, None), true);
        return;
    }
    let next = SPAWNED.fetch_add(1, Ordering::Relaxed) + 1;
    if send(&watch_message(n, pgid, Some(next)), true) {
        // Another thread's number announced meanwhile is left to no program: harmless.
        let _ = AHEAD.compare_exchange(0, next, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// The lines that tell the guard to watch `pgid`, program `n`'s group (0: not announced),
/// and announce program `next`.
fn watch_message(n: u64, pgid: u32, next: Option<u64>) -> String {
    let mut msg = match n {
        0 => format!("+{pgid}"),
        n => format!("+{pgid} {n}"),
    };
    if let Some(next) = next {
        msg.push_str(&format!("\n?{next}"));
    }
    msg
}

/// The process group `pgid` was killed: the guard forgets it, so a later group with the
/// same id is not killed.
pub fn release(pgid: u32) {
    send(&format!("-{pgid}"), false);
}

/// Write `msg` and a newline to the guard, starting it first when `start` and it is wanted:
/// whether the guard got it.
fn send(msg: &str, start: bool) -> bool {
    let mut pipe = PIPE.lock().unwrap_or_else(|e| e.into_inner());
    if start {
        spawn(&mut pipe);
    }
    let Some(w) = pipe.as_mut() else {
        return false;
    };
    if let Err(e) = w.write_all(format!("{msg}\n").as_bytes()) {
        *pipe = None;
        crate::warn::warn(
            "aw-run",
            format!(
                "the guard process is gone ({e}): what backends start may outlive a killed aw-run"
            ),
        );
        return false;
    }
    true
}

/// A message to the guard.
#[derive(Debug, PartialEq, Eq)]
enum Msg {
    /// `?N`: program N is about to start.
    Announce(u64),
    /// `+PGID` or `+PGID N`: watch the group PGID (program N's).
    Watch(i32, Option<u64>),
    /// `-PGID`: the group was killed.
    Release(i32),
}

/// Read one message. Process groups 0 and 1 are never valid (`kill` would take them as this
/// group or as every process), nor is a program number 0.
fn parse(line: &[u8]) -> Option<Msg> {
    let text = std::str::from_utf8(line).ok()?;
    let num = |n: &str| {
        n.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| n.parse::<u64>().ok())?
    };
    let group = |n: &str| {
        num(n)
            .and_then(|g| i32::try_from(g).ok())
            .filter(|g| *g > 1)
    };
    match text.split_at_checked(1)? {
        ("?", n) => num(n).filter(|n| *n > 0).map(Msg::Announce),
        ("+", rest) => match rest.split_once(' ') {
            None => Some(Msg::Watch(group(rest)?, None)),
            Some((g, n)) => Some(Msg::Watch(group(g)?, Some(num(n).filter(|n| *n > 0)?))),
        },
        ("-", n) => group(n).map(Msg::Release),
        _ => None,
    }
}

/// The guard process: keep the set of process groups and of programs announced until the
/// pipe on stdin ends, then kill those left.
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
    // aw-run's pid, which it put in the guard's environment.
    let parent = std::env::var(GUARD)
        .ok()
        .and_then(|p| p.parse::<i32>().ok());
    let mut groups = HashSet::new();
    let mut announced = HashSet::new();
    // A read error counts as the end: nothing more can come.
    for line in std::io::stdin().lock().split(b'\n') {
        let Ok(line) = line else { break };
        match parse(&line) {
            Some(Msg::Announce(n)) => {
                announced.insert(n);
            }
            Some(Msg::Watch(pgid, n)) => {
                groups.insert(pgid);
                if let Some(n) = n {
                    announced.remove(&n);
                }
            }
            Some(Msg::Release(pgid)) => {
                groups.remove(&pgid);
            }
            None => {}
        }
    }
    for pgid in groups {
        let _ = signal::killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
    if let Some(parent) = parent
        && !announced.is_empty()
    {
        kill_unconfirmed(parent, &announced);
    }
    ExitCode::SUCCESS
}

/// Kill the group of every process whose environment says it is one of the programs
/// `announced` by aw-run `parent` (`AW_RUN_SPAWN=PARENT/N`), or one they started: programs
/// that aw-run started but did not live to tell the guard of.
fn kill_unconfirmed(parent: i32, announced: &HashSet<u64>) {
    let prefix = format!("{SPAWN}={parent}/");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let ours = env
            .split(|b| *b == 0)
            .filter_map(|v| v.strip_prefix(prefix.as_bytes()))
            .filter_map(|n| std::str::from_utf8(n).ok()?.parse::<u64>().ok())
            .any(|n| announced.contains(&n));
        if ours && let Ok(pgid) = nix::unistd::getpgid(Some(Pid::from_raw(pid))) {
            // Never the guard's own group, nor the first two.
            if pgid.as_raw() > 1 && pgid != nix::unistd::getpgrp() {
                let _ = signal::killpg(pgid, Signal::SIGKILL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_a_group_above_1_and_a_program_above_0() {
        assert_eq!(parse(b"+1234"), Some(Msg::Watch(1234, None)));
        assert_eq!(parse(b"+1234 7"), Some(Msg::Watch(1234, Some(7))));
        assert_eq!(parse(b"-1234"), Some(Msg::Release(1234)));
        assert_eq!(parse(b"?7"), Some(Msg::Announce(7)));
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
            b"+12 0",
            b"+12 x",
            b"+12 7 8",
            b"-12 7",
            b"?0",
            b"?",
            b"?x",
            b"+\xff",
            b"+99999999999",
        ] {
            assert_eq!(parse(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_start_and_the_next_announcement_are_one_write_the_guard_reads_as_two_messages() {
        let msg = watch_message(7, 1234, Some(8));
        let lines: Vec<_> = msg.split('\n').map(|l| parse(l.as_bytes())).collect();
        assert_eq!(
            lines,
            [Some(Msg::Watch(1234, Some(7))), Some(Msg::Announce(8))]
        );
        assert!(msg.len() < 512, "under PIPE_BUF: {msg}");
        assert_eq!(watch_message(0, 1234, None), "+1234");
    }
}
