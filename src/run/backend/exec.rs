//! The `exec` backend: run an argument vector (never a shell string) with the prompt on
//! stdin. Exit 0 is success and stdout is the final reply.
//!
//! The child runs in its own process group, gets SIGKILL when the thread that started it
//! (its controller) dies, and on a timeout or a stop its whole group gets SIGTERM, then
//! SIGKILL after [`GRACE`].

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use super::{Backend, Capture, RunContext, RunOutcome, Status};

/// How long a process group has between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_millis(500);

/// How often a running child is checked for its end, its timeout, or a stop.
const TICK: Duration = Duration::from_millis(20);

pub struct Exec {
    /// Program first; a relative program path is already resolved.
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

/// Make a command safe to start from aw-run: signals unblocked (aw-run blocks them in its
/// threads), and with `own_group` its own process group that dies with its parent thread.
pub fn prepare(cmd: &mut Command, own_group: bool) {
    if own_group {
        cmd.process_group(0);
    }
    cmd.env_remove(crate::run::runner::READY_FD);
    let parent = std::process::id() as i32;
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe calls.
    unsafe {
        cmd.pre_exec(move || {
            let empty = signal::SigSet::empty();
            signal::pthread_sigmask(signal::SigmaskHow::SIG_SETMASK, Some(&empty), None)
                .map_err(std::io::Error::from)?;
            if own_group {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
                // The parent may have died before the signal was armed.
                if nix::unistd::getppid().as_raw() != parent {
                    return Err(std::io::Error::other("parent exited"));
                }
            }
            Ok(())
        });
    }
}

/// Read a stream to its end on a thread.
fn drain<R: Read + Send + 'static>(r: Option<R>) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut buf);
        }
        buf
    })
}

/// SIGTERM the group of `child`, then SIGKILL it after [`GRACE`] if it is still there.
pub fn kill_group(child: &mut Child) {
    let pgid = Pid::from_raw(child.id() as i32);
    let _ = signal::killpg(pgid, Signal::SIGTERM);
    let end = Instant::now() + GRACE;
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

impl Backend for Exec {
    fn run(&mut self, ctx: &RunContext) -> RunOutcome {
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
        if let Some(d) = &self.cwd {
            cmd.current_dir(d);
        }
        prepare(&mut cmd, true);
        let mut out = RunOutcome::new(Status::Failed);
        out.command = self.argv.clone();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                out.reason = Some(format!("cannot start {}: {e}", self.argv[0]));
                return out;
            }
        };
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let stdin = child.stdin.take();
        let prompt = ctx.prompt.as_bytes().to_vec();
        // A child that does not read its stdin must not block the run.
        let feeder = std::thread::spawn(move || {
            if let Some(mut w) = stdin {
                let _ = w.write_all(&prompt);
            }
        });
        let deadline = ctx.timeout.map(|t| Instant::now() + t);
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
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
            std::thread::sleep(TICK);
        };
        if status.is_some() {
            // Descendants that kept the pipes open must not hold the run.
            let _ = signal::killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
        }
        let _ = feeder.join();
        let so = stdout.join().unwrap_or_default();
        let se = stderr.join().unwrap_or_default();
        out.stdout = Capture::of(&so);
        out.stderr = Capture::of(&se);
        // Kept whatever the status: a backend that reads structured output parses it.
        out.final_text = String::from_utf8_lossy(&so).trim().to_string();
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

/// Run `argv` as [`Exec`] does, then let `read` interpret its output (the final text holds
/// all of stdout) unless the run timed out or was stopped: for CLI backends with structured
/// output.
pub fn run_and_read(
    argv: Vec<String>,
    env: &[(String, String)],
    cwd: Option<&PathBuf>,
    ctx: &RunContext,
    read: fn(&mut RunOutcome),
) -> RunOutcome {
    let mut exec = Exec {
        argv,
        env: env.to_vec(),
        cwd: cwd.cloned(),
    };
    let mut out = exec.run(ctx);
    if !matches!(out.status, Status::Timeout | Status::Killed) {
        read(&mut out);
    }
    out
}
