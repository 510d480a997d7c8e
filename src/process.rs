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
/// group that dies with the caller (signals, limits) and gives the program a number (0:
/// none), `watch` (with that number and the group) and `release` tell whoever kills the
/// groups of a caller that dies of them; `stop`, once it interrupts calls, kills a program
/// under way (a hook, a merge's verify command).
pub struct Spawning<'a> {
    pub prepare: &'a dyn Fn(&mut std::process::Command) -> u64,
    pub watch: &'a dyn Fn(u64, u32),
    pub release: &'a dyn Fn(u32),
    pub stop: Option<&'a Stop>,
}

impl Spawning<'static> {
    /// Its own process group, and nothing else: for a process with no guard of its groups.
    pub const PLAIN: Spawning<'static> = Spawning {
        prepare: &own_group,
        watch: &|_, _| {},
        release: &|_| {},
        stop: None,
    };
}

/// Make `c` the leader of a process group of its own (a program with no number).
fn own_group(c: &mut std::process::Command) -> u64 {
    std::os::unix::process::CommandExt::process_group(c, 0);
    0
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

/// The limit of open files (soft, hard) this process started with, once
/// [`open_files_for`] raised it.
static OPEN_FILES_AT_START: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();

/// Open files counted for the process itself by [`open_files_for`].
pub const OPEN_FILES_BASE: u64 = 64;

/// Open files counted for each agent served by [`open_files_for`]: a run under way holds its
/// program's pipes, its log and the files it reads, and all may run at once.
pub const OPEN_FILES_PER_AGENT: u64 = 16;

/// Make room for the open files of `agents` agents served at once: when the soft limit of
/// open files is below [`OPEN_FILES_BASE`] and [`OPEN_FILES_PER_AGENT`] for each, raise it to
/// the hard limit (a soft limit of 1024, a common default, is then soon reached). Programs
/// started afterwards get the limit back ([`open_files_at_start`]), which costs their start
/// a child that runs code before its exec: so the limit is raised only when needed, not at
/// every start. A failure leaves the limit as it was.
///
/// Call it as agents are added, before their runs start. A program started by another
/// thread at the very moment of the raise may inherit the raised limit.
pub fn open_files_for(agents: usize) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    use std::sync::atomic::AtomicUsize;
    /// The most agents already made room for.
    static ROOM_FOR: AtomicUsize = AtomicUsize::new(0);
    if agents <= ROOM_FOR.load(Ordering::Relaxed) || OPEN_FILES_AT_START.get().is_some() {
        return;
    }
    let need = OPEN_FILES_BASE.saturating_add(OPEN_FILES_PER_AGENT.saturating_mul(agents as u64));
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    if soft >= need || soft >= hard {
        // As many as the limit holds: the next agents cost no system call.
        let holds = soft.saturating_sub(OPEN_FILES_BASE) / OPEN_FILES_PER_AGENT;
        let holds = usize::try_from(holds).unwrap_or(usize::MAX);
        ROOM_FOR.fetch_max(
            if soft >= hard { usize::MAX } else { holds },
            Ordering::Relaxed,
        );
        return;
    }
    // Known before the limit changes, so that programs started from now on get it back.
    let _ = OPEN_FILES_AT_START.set((soft, hard));
    let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
}

/// The limit of open files to give back to a program started by this process (soft,
/// hard), when [`open_files_for`] changed it.
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

/// Have every thread of the process allocate from one pool. glibc gives threads pools of
/// their own, so that they do not wait for each other's allocations: a server's threads
/// allocate little at once, and with pools of their own the memory the start freed is not
/// used again by the dispatcher's thread, which grows a pool of its own instead (10 MB and
/// more at 10,000 agents; see BENCHMARKS.md, "what a served agent costs"). Call it before
/// any thread starts.
pub fn one_allocation_pool() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` takes no pointer; it sets how many pools the allocator may make.
    unsafe {
        nix::libc::mallopt(nix::libc::M_ARENA_MAX, 1);
    }
}

/// Give back to the system the memory freed so far that the allocator keeps for reuse. The
/// start of a large server frees what it read (the parsed workflow, the registry it
/// wrote) in many small pieces among those it keeps: glibc's allocator would hold those
/// pages for the server's life.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointer; it only returns the allocator's free pages.
    unsafe {
        nix::libc::malloc_trim(0);
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
