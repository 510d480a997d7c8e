//! The `exec` backend: run an argument vector (never a shell string) with the prompt on
//! stdin. Exit 0 is success and stdout is the final reply.
//!
//! The child runs in its own process group, started with `posix_spawn` (see [`prepare`]);
//! its group is killed when the thread that waits for it unwinds ([`GroupGuard`]), and the
//! [guard](crate::run::guard) kills it if aw-run dies. One poll(2) loop feeds it the prompt and reads its stdout and
//! stderr. On a timeout, a stop, or when it writes nothing on either for its idle timeout,
//! its whole group gets SIGTERM, then SIGKILL after [`GRACE`].
//!
//! CLI backends ([`run_and_read`]) read stdout line by line as it streams (a
//! [`LineReader`]), so a long stream is never held whole; the outcome keeps the first
//! [`MAX_CAPTURE`](crate::run::capture::MAX_CAPTURE) bytes of each stream.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, poll};
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use super::{Backend, RunContext, RunOutcome, Status};
use crate::run::attempt_log::{AttemptLog, Stream};
use crate::run::capture::{Capture, MAX_CAPTURE};

/// How long a process group has between SIGTERM and SIGKILL; also how long the output left
/// in the pipes is read once the program is gone, in all (counted from its end, whatever
/// comes meanwhile): a descendant that left the group (`setsid`) and keeps the pipes open
/// does not hold the run, the pipes are closed after it.
pub const GRACE: Duration = Duration::from_millis(500);

/// Most of an `exec` program's stdout kept for its final reply: one byte more than a channel
/// message may hold, so that a longer reply is refused as too long rather than cut. The
/// rest is counted, not kept (the transcript keeps the first [`MAX_CAPTURE`] bytes).
pub const MAX_REPLY: usize = crate::channel::MAX_MESSAGE + 1;

/// How often a running child is checked for its end, its timeouts, or a stop.
const TICK: Duration = Duration::from_millis(20);

/// How long a `claude` or `codex` run may write nothing (stdout or stderr) before it is
/// killed, unless the agent sets `idle_timeout`. An `exec` program has no idle timeout unless
/// it sets one.
pub const CLI_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// Longest stdout line a [`LineReader`] is given, in bytes (16 MiB); a longer line is
/// skipped.
pub const MAX_LINE: usize = 16 << 20;

pub struct Exec {
    /// Program first; a relative program path is already resolved. Shared: the agents of a
    /// server that run one command hold it once.
    pub argv: Arc<[String]>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Kill the run when the program writes nothing on stdout or stderr for this long.
    pub idle_timeout: Option<Duration>,
}

/// Make a command safe to start from aw-run: with `own_group` its own process group, which
/// the [guard](crate::run::guard) kills if aw-run dies (the program's number for
/// [`guard::watch`](crate::run::guard::watch) is returned; 0 without `own_group`).
///
/// Nothing runs in the child between fork and exec, so that std starts it with
/// `posix_spawn` (the group set through its attributes, the signal mask emptied: aw-run
/// blocks signals in its threads): no copy of aw-run's memory is made, and the wake of an
/// agent does not grow with the server. The one exception: when aw-run had to raise its
/// limit of open files ([`crate::process::open_files_for`]), a program gets the user's
/// limit back, which only the child can set before its exec.
pub fn prepare(cmd: &mut Command, own_group: bool) -> u64 {
    let mut n = 0;
    if own_group {
        cmd.process_group(0);
        // The guard is there, and knows the program is coming, before it starts: no instant
        // where it runs unguarded.
        crate::run::guard::ensure();
        let (number, marker) = crate::run::guard::announce();
        cmd.env(crate::run::guard::SPAWN, marker);
        n = number;
    }
    cmd.env_remove(crate::spawn::READY_FD);
    // The span it runs under, so that a program that traces joins the trace.
    cmd.envs(crate::otel::child_env());
    if let Some(open_files) = crate::process::open_files_at_start() {
        // SAFETY: the closure runs between fork and exec and makes one system call.
        unsafe {
            cmd.pre_exec(move || crate::process::give_back_open_files(Some(open_files)));
        }
    }
    n
}

/// Kills the group of a program started with [`prepare`] if the thread that waits for it
/// ends without doing so (a panic unwinding it): the parent-death signal did that once.
pub struct GroupGuard(Option<u32>);

impl GroupGuard {
    /// Watch the group `pgid`, the program's number being `n` (see [`prepare`]).
    pub fn watch(n: u64, pgid: u32) -> GroupGuard {
        crate::run::guard::watch(n, pgid);
        GroupGuard(Some(pgid))
    }

    /// The group has been killed and waited for: the guard forgets it.
    pub fn release(mut self) {
        if let Some(pgid) = self.0.take() {
            crate::run::guard::release(pgid);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            let _ = signal::killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL);
            crate::run::guard::release(pgid);
        }
    }
}

/// SIGTERM the group of `child`, then SIGKILL it after [`GRACE`] if it is still there.
pub fn kill_group(child: &mut Child) {
    let pgid = Pid::from_raw(child.id() as i32);
    let _ = signal::killpg(pgid, Signal::SIGTERM);
    let end = crate::time::deadline(GRACE);
    while Instant::now() < end {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(TICK);
    }
    // The leader may be gone while others of its group remain.
    let _ = signal::killpg(pgid, Signal::SIGKILL);
    let _ = child.wait();
}

/// `10m`, `1h`, `90s`, `1.5s`: a duration as a workflow file writes it.
pub fn short_duration(d: Duration) -> String {
    let (secs, whole) = (d.as_secs(), d.subsec_nanos() == 0 && d.as_secs() > 0);
    if whole && secs.is_multiple_of(3600) {
        format!("{}h", secs / 3600)
    } else if whole && secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

/// The first [`MAX_CAPTURE`] bytes of a stream, and how long it was.
#[derive(Default)]
struct Head {
    kept: Vec<u8>,
    total: u64,
}

impl Head {
    fn push(&mut self, bytes: &[u8]) {
        let room = MAX_CAPTURE.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.total += bytes.len() as u64;
    }

    fn capture(&self) -> Capture {
        Capture {
            text: String::from_utf8_lossy(&self.kept).into_owned(),
            cut: self.total - self.kept.len() as u64,
        }
    }
}

/// The child's pipes, moved by one loop: the prompt in, the output out.
struct Pipes {
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    prompt: Vec<u8>,
    written: usize,
    out: Head,
    err: Head,
    buf: Vec<u8>,
    /// Readable once the child has exited (Linux 5.3 and later): its exit ends a wait at
    /// once instead of at the next tick.
    exited: Option<OwnedFd>,
    /// Where stdout and stderr go too, as they come.
    log: Option<std::sync::Arc<AttemptLog>>,
}

/// A pidfd of `pid`, when the kernel has them.
fn pidfd(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid as nix::libc::pid_t, 0) };
    // SAFETY: a non-negative result is a descriptor this process now owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

impl Pipes {
    fn new(child: &mut Child, prompt: &[u8]) -> Pipes {
        // Written without blocking: a program that does not read its stdin must not hold
        // the run. Closed at once for an empty prompt.
        let stdin = child.stdin.take().filter(|w| {
            !prompt.is_empty() && fcntl(w, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).is_ok()
        });
        Pipes {
            stdin,
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            prompt: prompt.to_vec(),
            written: 0,
            out: Head::default(),
            err: Head::default(),
            buf: vec![0; 64 * 1024],
            exited: pidfd(child.id()),
            log: None,
        }
    }

    /// Can more output come?
    fn open(&self) -> bool {
        self.stdout.is_some() || self.stderr.is_some()
    }

    /// Wait at most `wait` for a pipe to be ready, then move what is ready; stdout goes to
    /// `on_stdout` too. Did the program write anything?
    fn pump(&mut self, wait: Duration, on_stdout: &mut dyn FnMut(&[u8])) -> bool {
        // Which of stdin, stdout, stderr, the exit are ready.
        let mut ready = [false; 4];
        {
            let mut fds = Vec::with_capacity(3);
            let mut slots = Vec::with_capacity(3);
            if let Some(w) = &self.stdin {
                fds.push(PollFd::new(w.as_fd(), PollFlags::POLLOUT));
                slots.push(0);
            }
            if let Some(r) = &self.stdout {
                fds.push(PollFd::new(r.as_fd(), PollFlags::POLLIN));
                slots.push(1);
            }
            if let Some(r) = &self.stderr {
                fds.push(PollFd::new(r.as_fd(), PollFlags::POLLIN));
                slots.push(2);
            }
            if let Some(p) = &self.exited {
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
                slots.push(3);
            }
            if fds.is_empty() {
                std::thread::sleep(wait);
                return false;
            }
            let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
            // An interrupted wait only ends this round early.
            if poll(&mut fds, ms).is_err() {
                return false;
            }
            for (fd, &slot) in fds.iter().zip(&slots) {
                ready[slot] = fd.revents().is_some_and(|r| !r.is_empty());
            }
        }
        if ready[0] {
            self.feed();
        }
        let mut wrote = false;
        if ready[1] {
            let n = read_ready(&mut self.stdout, &mut self.buf);
            if n > 0 {
                self.out.push(&self.buf[..n]);
                if let Some(l) = &self.log {
                    l.push(Stream::Stdout, &self.buf[..n]);
                }
                on_stdout(&self.buf[..n]);
                wrote = true;
            }
        }
        if ready[2] {
            let n = read_ready(&mut self.stderr, &mut self.buf);
            if n > 0 {
                self.err.push(&self.buf[..n]);
                if let Some(l) = &self.log {
                    l.push(Stream::Stderr, &self.buf[..n]);
                }
                wrote = true;
            }
        }
        wrote
    }

    /// Write what stdin takes of the prompt; close it at the end.
    fn feed(&mut self) {
        let Some(w) = &mut self.stdin else { return };
        match w.write(&self.prompt[self.written..]) {
            Ok(n) => self.written += n,
            Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => {}
            // The program closed its stdin: the rest is not for it.
            Err(_) => self.written = self.prompt.len(),
        }
        if self.written >= self.prompt.len() {
            self.stdin = None;
        }
    }

    /// Read what is left once the program is gone: until the pipes close, for [`GRACE`] at
    /// most in all (a descendant outside the group may hold them open and keep writing),
    /// less when `stop` is set; then close them.
    fn drain(&mut self, stop: &dyn Fn() -> bool, on_stdout: &mut dyn FnMut(&[u8])) {
        self.stdin = None;
        // The exit is known: it would make every wait end at once.
        self.exited = None;
        let end = Instant::now() + GRACE;
        while self.open() && !stop() {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.pump(left.min(TICK), on_stdout);
        }
        self.stdout = None;
        self.stderr = None;
    }
}

/// Read what is ready on `pipe` into `buf`: the byte count, 0 for none. At its end (or on
/// an error) the pipe is closed.
fn read_ready<R: Read>(pipe: &mut Option<R>, buf: &mut [u8]) -> usize {
    let Some(r) = pipe else { return 0 };
    match r.read(buf) {
        Ok(0) => {
            *pipe = None;
            0
        }
        Ok(n) => n,
        Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => 0,
        Err(_) => {
            *pipe = None;
            0
        }
    }
}

impl Exec {
    /// Run the program, giving each piece of its stdout to `on_stdout` as it comes. The
    /// outcome has the status, the exit and the first bytes of stdout and stderr; no final
    /// text.
    fn run_with(&self, ctx: &RunContext, on_stdout: &mut dyn FnMut(&[u8])) -> RunOutcome {
        let mut cmd = Command::new(&self.argv[0]);
        cmd.args(&self.argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("AW_ROOT", ctx.root)
            .env("AW_INSTANCE", ctx.inst.name())
            .env("AW_AGENT", ctx.agent)
            .env("AW_RUN", ctx.run.to_string())
            .env("AW_MCP_CONFIG", ctx.mcp_config)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        match ctx.card {
            Some(id) => cmd.env("AW_CARD", id.to_string()),
            None => cmd.env_remove("AW_CARD"),
        };
        if let Some(d) = &self.cwd {
            cmd.current_dir(d);
        }
        let n = prepare(&mut cmd, true);
        let mut out = RunOutcome::new(Status::Failed);
        out.command = self.argv.to_vec();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                // Made all the same, empty: `aw-ctl runs -f` tells of every attempt by it.
                let _ = &**ctx.log;
                out.reason = Some(format!("cannot start {}: {e}", self.argv[0]));
                out.permanent = cannot_start(&e);
                return out;
            }
        };
        let pgid = child.id();
        let group = GroupGuard::watch(n, pgid);
        (ctx.started)();
        // Made now that the program runs: its stdin and stdout wait in their pipes.
        let mut pipes = Pipes::new(&mut child, ctx.prompt.as_bytes());
        pipes.log = (**ctx.log).clone();
        let started = Instant::now();
        let deadline = ctx.timeout.map(|t| crate::time::after(started, t));
        let mut last_output = started;
        let status = loop {
            if pipes.pump(TICK, on_stdout) {
                last_output = Instant::now();
            }
            match child.try_wait() {
                Ok(Some(s)) => {
                    // Descendants that kept the pipes open must not hold the run.
                    let _ = signal::killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL);
                    break Some(s);
                }
                Ok(None) => {}
                Err(e) => {
                    out.reason = Some(format!("cannot wait for {}: {e}", self.argv[0]));
                    kill_group(&mut child);
                    break None;
                }
            }
            if ctx.stop.is_set() {
                kill_group(&mut child);
                out.status = Status::Killed;
                out.reason = Some("stopped".into());
                break None;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                kill_group(&mut child);
                out.status = Status::Timeout;
                let t = ctx.timeout.unwrap_or_default();
                out.reason = Some(format!("timed out after {} s", t.as_secs_f64()));
                break None;
            }
            if let Some(idle) = self.idle_timeout
                && last_output.elapsed() >= idle
            {
                kill_group(&mut child);
                out.status = Status::Timeout;
                out.reason = Some(format!("no output for {}; killed", short_duration(idle)));
                break None;
            }
        };
        // Every way out of the loop sent SIGKILL to the group; what a member was writing
        // when the signal came (a post under way) is in place once the group is gone.
        wait_group_gone(pgid as i32, GRACE);
        group.release();
        pipes.drain(&|| ctx.stop.is_set(), on_stdout);
        if let Some(l) = &pipes.log {
            l.finish();
        }
        out.stdout = pipes.out.capture();
        out.stderr = pipes.err.capture();
        if let Some(s) = status {
            out.exit_code = s.code();
            if s.success() {
                out.status = Status::Ok;
            } else {
                out.reason = Some(match (s.code(), s.signal()) {
                    (Some(c), _) => format!("exit status {c}"),
                    (None, Some(sig)) => format!("killed by signal {sig}"),
                    _ => "failed".into(),
                });
            }
        }
        out
    }
}

impl Backend for Exec {
    fn run(&mut self, ctx: &RunContext) -> RunOutcome {
        let mut all = Vec::new();
        let mut cut = false;
        let mut out = self.run_with(ctx, &mut |b: &[u8]| {
            let room = MAX_REPLY - all.len();
            cut |= b.len() > room;
            all.extend_from_slice(&b[..b.len().min(room)]);
        });
        // Kept whatever the status; a reply longer than a message stays longer than one
        // (untrimmed), so that posting it is refused rather than cut.
        let text = String::from_utf8_lossy(&all);
        out.final_text = if cut {
            text.into_owned()
        } else {
            text.trim().to_string()
        };
        out
    }
}

/// How a child waited for by [`collect`] ended.
#[derive(Debug)]
pub enum Ended {
    Exited(std::process::ExitStatus),
    /// Killed (its group) on a stop.
    Stopped,
    /// Killed (its group) for printing more than it may.
    TooLong,
}

/// Wait for `child` (the leader of its own group, its stdout piped, nothing else), keeping
/// its stdout, at most `max` bytes: past that its group is killed. With `stop` set its group
/// is killed. Once it has exited, what is left in the pipe is read for [`GRACE`] at most,
/// then the pipe is closed: a background job that kept it open does not hold the wait (the
/// job itself is left running).
pub fn collect(
    child: &mut Child,
    stop: Option<&crate::process::Stop>,
    max: usize,
) -> std::io::Result<(Ended, Vec<u8>)> {
    let mut pipes = Pipes::new(child, b"");
    let mut kept = Vec::new();
    let over = std::cell::Cell::new(false);
    let mut keep = |b: &[u8]| {
        let room = max - kept.len();
        if b.len() > room {
            over.set(true);
        }
        kept.extend_from_slice(&b[..b.len().min(room)]);
    };
    let stopped = || stop.is_some_and(|s| s.is_set());
    let ended = loop {
        pipes.pump(TICK, &mut keep);
        if over.get() {
            kill_group(child);
            break Ended::TooLong;
        }
        match child.try_wait() {
            Ok(Some(s)) => break Ended::Exited(s),
            Ok(None) => {}
            Err(e) => {
                kill_group(child);
                return Err(e);
            }
        }
        if stopped() {
            kill_group(child);
            break Ended::Stopped;
        }
    };
    pipes.drain(&stopped, &mut keep);
    if over.get() && matches!(ended, Ended::Exited(_)) {
        return Ok((Ended::TooLong, kept));
    }
    Ok((ended, kept))
}

/// What a CLI backend makes of its program's stdout, read line by line as it streams.
pub trait LineReader {
    /// One line, without its newline (the last one may have had none).
    fn line(&mut self, line: &[u8]);

    /// Set the outcome from the lines read, once the program ended by itself (not on a
    /// timeout or a stop). `out.stdout` holds the first bytes of the stream.
    fn finish(&mut self, out: &mut RunOutcome);

    /// What the lines read so far say was spent, for a run that was stopped or timed out
    /// (what it spent counts against the budgets all the same).
    fn spent(&self) -> Option<crate::usage::Usage> {
        None
    }
}

/// Cuts a stream into lines for a [`LineReader`]; a line longer than [`MAX_LINE`] is
/// skipped.
#[derive(Default)]
struct Lines {
    partial: Vec<u8>,
    skipping: bool,
}

impl Lines {
    fn push(&mut self, mut bytes: &[u8], reader: &mut dyn LineReader) {
        while let Some(i) = bytes.iter().position(|&b| b == b'\n') {
            self.add(&bytes[..i]);
            if !self.skipping {
                reader.line(&self.partial);
            }
            self.partial.clear();
            self.skipping = false;
            bytes = &bytes[i + 1..];
        }
        self.add(bytes);
    }

    fn add(&mut self, bytes: &[u8]) {
        if self.skipping {
            return;
        }
        if self.partial.len() + bytes.len() > MAX_LINE {
            self.skipping = true;
            self.partial = Vec::new();
            return;
        }
        self.partial.extend_from_slice(bytes);
    }

    /// The last line, when the stream did not end with a newline.
    fn end(&mut self, reader: &mut dyn LineReader) {
        if !self.skipping && !self.partial.is_empty() {
            reader.line(&self.partial);
        }
    }
}

/// Run `exec` as its backend does, its stdout given line by line to `reader`, which then
/// sets the outcome (final text, status, usage) unless the run timed out or was stopped:
/// for CLI backends with structured output.
pub fn run_and_read(exec: &Exec, ctx: &RunContext, reader: &mut dyn LineReader) -> RunOutcome {
    let mut lines = Lines::default();
    let mut out = exec.run_with(ctx, &mut |b: &[u8]| lines.push(b, reader));
    lines.end(reader);
    if matches!(out.status, Status::Timeout | Status::Killed) {
        out.usage = reader.spent();
    } else {
        reader.finish(&mut out);
    }
    out
}

/// Wait, `max` at most, until no process of the group `pgid` runs any more: every one is
/// gone or a zombie (an orphan's zombie may stay until its new parent reaps it). A process
/// killed during a system call finishes that call first: so a post that a member of the
/// group had begun is complete, or never happened, once this returns.
fn wait_group_gone(pgid: i32, max: Duration) {
    let end = crate::time::deadline(max);
    while group_runs(pgid) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Does a process of the group `pgid` still run (one that is not a zombie)?
fn group_runs(pgid: i32) -> bool {
    if signal::killpg(Pid::from_raw(pgid), None) == Err(nix::errno::Errno::ESRCH) {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        let name = e.file_name();
        if !name
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp ...`; the command may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().unwrap_or("Z");
        let pgrp = f.nth(1).and_then(|g| g.parse::<i32>().ok());
        pgrp == Some(pgid) && state != "Z" && state != "X"
    })
}

/// Is a spawn error one that no retry mends: no such program, no permission to run it, or
/// not a program (ENOENT, EACCES, ENOEXEC)?
fn cannot_start(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
    ) || e.raw_os_error() == Some(nix::libc::ENOEXEC)
}

/// Fail `out` for `why`, keeping how the program ended: `why (exit status 1)`.
pub fn fail_keeping_exit(out: &mut RunOutcome, why: &str) {
    out.status = Status::Failed;
    out.reason = Some(match out.reason.take() {
        Some(exit) => format!("{why} ({exit})"),
        None => why.to_string(),
    });
}

/// The outcome of a run that ended with `status` after its program printed `stdout`, as
/// [`run_and_read`] makes it with `reader` (a failed program exited with status 1): for the
/// tests and fuzz targets of output readers.
#[doc(hidden)]
pub fn read_stream(reader: &mut dyn LineReader, stdout: &[u8], status: Status) -> RunOutcome {
    let mut out = RunOutcome::new(status);
    if status == Status::Failed {
        out.exit_code = Some(1);
        out.reason = Some("exit status 1".into());
    }
    let mut head = Head::default();
    head.push(stdout);
    out.stdout = head.capture();
    let mut lines = Lines::default();
    lines.push(stdout, reader);
    lines.end(reader);
    if matches!(out.status, Status::Timeout | Status::Killed) {
        out.usage = reader.spent();
    } else {
        reader.finish(&mut out);
    }
    out
}

/// [`read_stream`] of a text, for the tests of output readers.
#[cfg(test)]
pub fn read_printed(reader: &mut dyn LineReader, stdout: &str, status: Status) -> RunOutcome {
    read_stream(reader, stdout.as_bytes(), status)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects the lines it is given.
    #[derive(Default)]
    struct Collect(Vec<String>);

    impl LineReader for Collect {
        fn line(&mut self, line: &[u8]) {
            self.0.push(String::from_utf8_lossy(line).into_owned());
        }

        fn finish(&mut self, _: &mut RunOutcome) {}
    }

    #[test]
    fn lines_are_whole_however_the_stream_is_cut() {
        let text = "one\ntwo\n\nthree";
        for size in 1..text.len() {
            let mut c = Collect::default();
            let mut lines = Lines::default();
            for piece in text.as_bytes().chunks(size) {
                lines.push(piece, &mut c);
            }
            lines.end(&mut c);
            assert_eq!(c.0, ["one", "two", "", "three"], "pieces of {size}");
        }
    }

    #[test]
    fn a_line_longer_than_the_limit_is_skipped() {
        let mut c = Collect::default();
        let mut lines = Lines::default();
        lines.push(b"a\n", &mut c);
        let long = vec![b'x'; MAX_LINE / 2 + 1];
        lines.push(&long, &mut c);
        lines.push(&long, &mut c);
        lines.push(b"\nb\n", &mut c);
        lines.end(&mut c);
        assert_eq!(c.0, ["a", "b"]);
    }

    #[test]
    fn the_head_keeps_the_first_bytes_and_counts_the_rest() {
        let mut h = Head::default();
        h.push(&vec![b'a'; MAX_CAPTURE - 1]);
        h.push(b"bcd");
        let c = h.capture();
        assert_eq!(c.text.len(), MAX_CAPTURE);
        assert!(c.text.ends_with("ab"));
        assert_eq!(c.cut, 2);
    }

    #[test]
    fn durations_read_as_written() {
        let s = |secs: f64| short_duration(Duration::from_secs_f64(secs));
        assert_eq!(
            [s(600.0), s(7200.0), s(90.0), s(1.0), s(1.5)],
            ["10m", "2h", "90s", "1s", "1.5s"]
        );
    }
}
