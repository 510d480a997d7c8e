//! How a process of aw is stopped and finds its fellows: the [`Stop`] token that asks every
//! running backend, controller and wait of a process to end, and the path of a
//! [`sibling`] binary (`aw-run`, `aw-send`, `aw-mcp`) installed next to this one, and the
//! wait for a command whose process group is killed past its time
//! ([`wait_killing_group`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A flag that asks every running backend to stop. A [`child`](Stop::child) is set when
/// its parent is, and can be set alone (one controller of many).
///
/// A stop [after the calls](Stop::set_after_calls) (a budget's) stops everything but a
/// model call already waiting for its answer: that answer is read and counted first, for
/// at most [`CALL_GRACE`].
#[derive(Clone, Default)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    parent: Option<Arc<AtomicBool>>,
    /// When a stop after the calls was asked; shared by a stop and its children.
    after_calls: Arc<std::sync::OnceLock<std::time::Instant>>,
}

/// How long a stop [after the calls](Stop::set_after_calls) waits for the answer of a
/// model call under way before abandoning it.
pub const CALL_GRACE: Duration = Duration::from_secs(60);

impl Stop {
    pub fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Stop, letting the model calls under way end first (set on a root stop, it applies
    /// to its children).
    pub fn set_after_calls(&self) {
        let _ = self.after_calls.set(std::time::Instant::now());
    }

    pub fn is_set(&self) -> bool {
        self.after_calls.get().is_some() || self.interrupts_calls()
    }

    /// Is a model call under way to be abandoned: a stop that is not one
    /// [after the calls](Stop::set_after_calls), or one asked [`CALL_GRACE`] ago?
    pub fn interrupts_calls(&self) -> bool {
        self.after_calls
            .get()
            .is_some_and(|t| t.elapsed() >= CALL_GRACE)
            || self.flag.load(Ordering::SeqCst)
            || self
                .parent
                .as_ref()
                .is_some_and(|p| p.load(Ordering::SeqCst))
    }

    /// A flag of its own that is also set whenever this one is.
    pub fn child(&self) -> Stop {
        Stop {
            flag: Arc::default(),
            parent: Some(self.flag.clone()),
            after_calls: self.after_calls.clone(),
        }
    }

    /// Sleep for `d`, waking early (and returning `false`) when the flag is set.
    pub fn sleep(&self, d: Duration) -> bool {
        let step = Duration::from_millis(20);
        let end = crate::time::deadline(d);
        loop {
            if self.is_set() {
                return false;
            }
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(step));
        }
    }
}

/// The path of a sibling binary of this process (`aw-send`, `aw-mcp`), or the bare name.
pub fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Why [`wait_killing_group`] killed a group before its leader exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// It ran past its time.
    Timeout,
    /// The stop it was given was set.
    Stopped,
}

/// How the caller's processes are started: `prepare` makes the command its own process
/// group that dies with the caller (signals, limits), `watch` and `release` tell whoever
/// kills the groups of a caller that dies of them; `stop`, once it interrupts calls, kills
/// a program under way (a hook, a merge's verify command).
pub struct Spawning<'a> {
    pub prepare: &'a dyn Fn(&mut std::process::Command),
    pub watch: &'a dyn Fn(u32),
    pub release: &'a dyn Fn(u32),
    pub stop: Option<&'a Stop>,
}

impl Spawning<'static> {
    /// Its own process group, and nothing else: for a process with no guard of its groups.
    pub const PLAIN: Spawning<'static> = Spawning {
        prepare: &own_group,
        watch: &|_| {},
        release: &|_| {},
        stop: None,
    };
}

/// Make `c` the leader of a process group of its own.
fn own_group(c: &mut std::process::Command) {
    std::os::unix::process::CommandExt::process_group(c, 0);
}

/// Wait for `child`, the leader of a process group of its own, at most `limit`, and while
/// `stop` (when given) is not [set](Stop::is_set), even as a stop after the calls: past either the
/// whole group is killed. Either way, what it left running in its group is killed once it
/// has exited. Its exit status, and why it was cut short if it was.
pub fn wait_killing_group(
    mut child: std::process::Child,
    limit: Duration,
    stop: Option<&Stop>,
) -> (std::io::Result<std::process::ExitStatus>, Option<Cut>) {
    use nix::sys::signal::{Signal, killpg};
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let end = crate::time::deadline(limit);
    let step = Duration::from_millis(50);
    let mut cut = None;
    let status = loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        let wait = if stop.is_some() { left.min(step) } else { left };
        match rx.recv_timeout(wait) {
            Ok(s) => break s,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                break Err(std::io::ErrorKind::Other.into());
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        cut = if left.is_zero() || wait == left {
            Some(Cut::Timeout)
        } else if stop.is_some_and(Stop::is_set) {
            Some(Cut::Stopped)
        } else {
            continue;
        };
        let _ = killpg(group, Signal::SIGKILL);
        break rx
            .recv()
            .unwrap_or_else(|_| Err(std::io::ErrorKind::Other.into()));
    };
    let _ = killpg(group, Signal::SIGKILL);
    (status, cut)
}

/// The limit of open files (soft, hard) this process started with, when
/// [`raise_open_files`] raised it.
static OPEN_FILES_AT_START: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();

/// Raise this process's soft limit of open files to its hard limit: a server's agents open
/// files as they run, many at once, and a soft limit of 1024 (a common default) is soon
/// reached. Programs it starts get the limit back
/// ([`open_files_at_start`]). A failure leaves the limit as it was.
pub fn raise_open_files() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
        && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok()
    {
        let _ = OPEN_FILES_AT_START.set((soft, hard));
    }
}

/// The limit of open files to give back to a program started by this process (soft,
/// hard), when [`raise_open_files`] changed it.
pub fn open_files_at_start() -> Option<(u64, u64)> {
    OPEN_FILES_AT_START.get().copied()
}

/// In a child between fork and exec: set the limit of open files back to `at_start`
/// ([`open_files_at_start`], read before the fork). Async-signal-safe: one system call.
pub fn give_back_open_files(at_start: Option<(u64, u64)>) -> std::io::Result<()> {
    use nix::sys::resource::{Resource, setrlimit};
    match at_start {
        Some((soft, hard)) => {
            setrlimit(Resource::RLIMIT_NOFILE, soft, hard).map_err(std::io::Error::from)
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_after_the_calls_stops_all_but_a_call_under_way() {
        let root = Stop::default();
        let child = root.child();
        root.set_after_calls();
        assert!(child.is_set() && !child.interrupts_calls());
        child.set();
        assert!(child.interrupts_calls() && !root.interrupts_calls());
    }
}
