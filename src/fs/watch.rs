//! Waiting for a file to change: inotify on the parent directory (a rename-replace would kill
//! a watch on the file itself), with a polling fallback that compares length, nanosecond
//! mtime, inode and device.
//!
//! On a network file system (NFS, SMB, Ceph, FUSE, 9P, Lustre, GPFS, AFS, ...; see
//! [`is_network_fs`]) inotify sees only the writes of this machine: there a waiter watches
//! with inotify *and* polls: every [`NETFS_POLL_FAST`] for [`NETFS_HOT`] after it started or
//! saw the file change (a conversation in progress), then slower and slower, down to every
//! [`NETFS_POLL`] while nothing changes. A poll reads the file's last block with
//! `O_DIRECT`, which the client serves from the server rather than from its attribute cache
//! (on GlusterFS another mount's append is seen in milliseconds; a stat sees it only after
//! the attribute cache expires, up to a second); where `O_DIRECT` is refused it compares
//! stat signatures. `AW_POLL` (see [`POLL_ENV`]) forces either mode.
//!
//! A waiter also tells when the file or its directory stopped being the one it started
//! with: removed, or replaced by another one of the same name (another device, inode or
//! birth time), or made shorter (the file is append-only). A follower uses that to stop
//! instead of reading a new file as if it continued the old one.

use std::ffi::OsString;
use std::fmt;
use std::fs::{File, Metadata};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use crate::error::{Error, Result};

/// Polling interval used when inotify is not available and none was asked for.
pub const DEFAULT_POLL: Duration = Duration::from_millis(250);

/// Polling interval of a waiter on a network file system (beside inotify, which sees this
/// machine's writes at once) once nothing has changed for a while: a remote write wakes it
/// within this, plus the file system's own latency. An idle waiter costs one poll per
/// interval.
pub const NETFS_POLL: Duration = Duration::from_millis(100);

/// Polling interval of a waiter on a network file system for [`NETFS_HOT`] after it started
/// or saw a change: while agents answer each other, a reply from another host wakes it
/// within this. Past [`NETFS_HOT`] the interval doubles at each poll up to [`NETFS_POLL`].
pub const NETFS_POLL_FAST: Duration = Duration::from_millis(10);

/// How long a waiter on a network file system polls every [`NETFS_POLL_FAST`] after it
/// started or saw a change.
pub const NETFS_HOT: Duration = Duration::from_secs(1);

/// The polling interval of a waiter on a network file system that last started or saw a
/// change `quiet` ago and polled at `every` last: fast while hot, then doubling up to
/// [`NETFS_POLL`].
fn netfs_interval(every: Duration, quiet: Duration) -> Duration {
    if quiet < NETFS_HOT {
        NETFS_POLL_FAST
    } else {
        (every * 2).clamp(NETFS_POLL_FAST, NETFS_POLL)
    }
}

/// Environment variable that chooses how waiters wait: unset or `auto` (inotify, plus
/// polling on a network file system, see [`NETFS_POLL`]), `inotify` (never poll), or a
/// number of seconds in (0, 3600] (poll only, at that interval, like `--poll`).
pub const POLL_ENV: &str = "AW_POLL";

/// What to do about a fallback to polling (see [`FileWaiter::fallback`]); a tool adds the
/// option that sets the polling interval, when it has one.
pub const FALLBACK_HINT: &str =
    "raise fs.inotify.max_user_instances or fs.inotify.max_user_watches";

/// Why inotify could not be set up, naming the limit that was reached when one was.
fn inotify_failure(e: Errno) -> String {
    match e {
        Errno::EMFILE => {
            "too many inotify instances (fs.inotify.max_user_instances) or open files".into()
        }
        Errno::ENOSPC => "too many inotify watches (fs.inotify.max_user_watches)".into(),
        e => std::io::Error::from(e).to_string(),
    }
}

/// What a watch asks inotify for: a change of content, attributes or name of an entry of the
/// folder, and the folder itself removed or moved. Never an open, a read or a close without
/// a write: every reader of the channel does those, and each would wake every watcher.
fn watch_mask() -> AddWatchFlags {
    AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
}

/// An inotify watch on a file's folder, read by the waiter itself (no thread of its own).
struct Watch {
    /// `None` once retired (see [`RETIRED`]).
    inotify: Option<Inotify>,
    wd: WatchDescriptor,
    /// The watched file's name in the folder; `None`: every entry of the folder.
    name: Option<OsString>,
}

/// inotify descriptors whose watch was removed, closed at the next [`Watch::new`] or by the
/// exit. Closing one waits until the kernel has retired the watches removed so far (an RCU
/// grace period, milliseconds, and tens of them on a busy machine); by the next watch or the
/// exit that is usually done in the background, and a waiter dropped just before the exit
/// (aw-run's, at the end of every run) does not wait for it.
static RETIRED: std::sync::Mutex<Vec<Inotify>> = std::sync::Mutex::new(Vec::new());

impl Watch {
    fn new(file: Option<&Path>, dir: &Path) -> std::result::Result<Watch, Errno> {
        let retired = std::mem::take(&mut *RETIRED.lock().unwrap_or_else(|e| e.into_inner()));
        drop(retired);
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        let wd = inotify.add_watch(dir, watch_mask())?;
        Ok(Watch {
            inotify: Some(inotify),
            wd,
            name: file.and_then(|f| f.file_name()).map(|n| n.to_os_string()),
        })
    }

    fn inotify(&self) -> Option<&Inotify> {
        self.inotify.as_ref()
    }

    /// Read every event queued; `true` when one may concern the file or the folder: the
    /// file's name, an event of the folder itself (removed, moved, its watch dropped), a
    /// queue overflow, or an error (the owner rescans).
    fn relevant(&self) -> bool {
        let Some(inotify) = self.inotify() else {
            return false;
        };
        let mut hit = false;
        loop {
            match inotify.read_events() {
                Ok(events) if events.is_empty() => return hit,
                Ok(events) => {
                    hit |= events
                        .iter()
                        .any(|e| e.name.is_none() || self.name.is_none() || e.name == self.name);
                }
                Err(Errno::EAGAIN) => return hit,
                Err(Errno::EINTR) => {}
                Err(_) => return true,
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // A watch still in place when the inotify descriptor is closed makes the close wait
        // for the kernel to retire it: some milliseconds at every exit. Removed first, it
        // is retired in the background, and the descriptor is closed later.
        if let Some(inotify) = self.inotify.take() {
            let _ = inotify.rm_watch(self.wd);
            RETIRED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(inotify);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Signature {
    len: u64,
    mtime_ns: i128,
    ino: u64,
    dev: u64,
}

fn signature(path: &Path) -> Signature {
    match std::fs::metadata(path) {
        Ok(m) => Signature {
            len: m.len(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ino: m.ino(),
            dev: m.dev(),
        },
        Err(_) => Signature::default(),
    }
}

/// Which file a path names: the same path names another file once this changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    /// The birth time, where the file system keeps one (it tells a reused inode number).
    born: Option<SystemTime>,
}

impl Identity {
    fn of(m: &Metadata) -> Identity {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            born: m.created().ok(),
        }
    }
}

/// A watched file or directory that is no longer the one the waiter started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gone {
    pub path: PathBuf,
    pub why: &'static str,
}

impl fmt::Display for Gone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.why)
    }
}

enum Mode {
    Inotify {
        watch: Watch,
    },
    Poll {
        every: Duration,
        probe: Probe,
    },
    /// inotify for this machine's writers, polling for the other hosts' (at `every`, see
    /// [`netfs_interval`]; `since`: when the waiter started or last saw a change).
    Both {
        watch: Watch,
        every: Duration,
        probe: Probe,
        since: Instant,
    },
}

/// How [`FileWaiter::new`] was asked to wait, from `--poll` and [`POLL_ENV`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// inotify, plus polling on a network file system.
    Auto,
    /// inotify only.
    Inotify,
    /// Polling only, at this interval.
    Poll(Duration),
}

/// The longest polling interval `--poll` and [`POLL_ENV`] accept, in seconds.
pub const MAX_POLL_SECS: f64 = 3600.0;

fn policy(poll: Option<Duration>) -> Result<Policy> {
    if let Some(every) = poll {
        return Ok(Policy::Poll(every));
    }
    let Some(v) = std::env::var_os(POLL_ENV) else {
        return Ok(Policy::Auto);
    };
    let v = v.to_string_lossy();
    match v.trim() {
        "" | "auto" => Ok(Policy::Auto),
        "inotify" => Ok(Policy::Inotify),
        n => match n.parse::<f64>() {
            Ok(secs) if secs > 0.0 && secs <= MAX_POLL_SECS => {
                Ok(Policy::Poll(Duration::from_secs_f64(secs)))
            }
            _ => Err(Error::Usage(format!(
                "{POLL_ENV}={v}: expected auto, inotify or seconds in (0, 3600]"
            ))),
        },
    }
}

pub use super::netfs::is_network_fs;

/// Tells whether a file changed since the last look: by an `O_DIRECT` read from its last
/// block (the file is append-only: a change is a change of length), or, where the file does
/// not exist yet or the file system refuses `O_DIRECT`, by its stat signature.
struct Probe {
    path: PathBuf,
    /// The file opened with `O_DIRECT`; `None` before it exists, or when refused.
    direct: Option<File>,
    /// `O_DIRECT` was refused: stat only from now on.
    refused: bool,
    /// The length the last direct read saw.
    len: u64,
    last: Signature,
}

impl Probe {
    /// `direct`: try `O_DIRECT` reads (on a network file system; a local one is watched
    /// through its page cache, where stat is cheaper and as fresh).
    fn new(path: &Path, direct: bool) -> Probe {
        let mut p = Probe {
            path: path.to_path_buf(),
            direct: None,
            refused: !direct,
            len: 0,
            last: signature(path),
        };
        p.open();
        p
    }

    fn open(&mut self) {
        if self.refused || self.direct.is_some() {
            return;
        }
        match super::owned::open_direct(&self.path) {
            Ok(Some(f)) => {
                self.direct = Some(f);
                self.len = 0;
                match self.direct_len() {
                    Some(n) => self.len = n,
                    None => self.refuse(),
                }
            }
            Ok(None) => self.refuse(),
            Err(_) => {}
        }
    }

    fn refuse(&mut self) {
        self.refused = true;
        self.direct = None;
    }

    /// The file's length as the server sees it, read from the last known block on.
    fn direct_len(&mut self) -> Option<u64> {
        super::netfs::direct_len(self.direct.as_ref()?, self.len).ok()
    }

    /// Has the file changed since the last call?
    fn changed(&mut self) -> bool {
        if self.direct.is_none() && !self.refused {
            // Not there yet (a channel nobody wrote to, a stop request that never comes): a
            // stat asks the server, while an open would list the folder first.
            let now = signature(&self.path);
            if now == Signature::default() {
                let changed = now != self.last;
                self.last = now;
                return changed;
            }
        }
        self.open();
        if self.direct.is_some() {
            let Some(len) = self.direct_len() else {
                // Refused now (a file system that checks at read time): stat from now on.
                self.refuse();
                return true;
            };
            if len != self.len {
                self.len = len;
                return true;
            }
            // A replacement or removal keeps the old file readable: stat tells those.
            let now = signature(&self.path);
            let moved = now.ino != self.last.ino || now.dev != self.last.dev;
            // The client's attributes still show a shorter file: a reader that reads through
            // them (not the channel's, which reads past them) cannot read the new bytes
            // yet, so wake it again until they catch up (at most the attribute cache's
            // timeout).
            let behind = now.len < self.len;
            self.last = now;
            if moved {
                self.direct = None;
            }
            return moved || behind;
        }
        let now = signature(&self.path);
        if now != self.last {
            self.last = now;
            return true;
        }
        false
    }
}

/// Wakes its owner when `file` may have changed. Spurious wake-ups are allowed: the owner
/// always rescans what is new after a wake-up, and asks [`FileWaiter::gone`] first.
///
/// The owner's own thread reads the watch: [`FileWaiter::wait`] polls the inotify
/// descriptor and the [`Waker`]'s event counter together, so a waiter costs no thread and
/// a change no hand-over between threads.
pub struct FileWaiter {
    file: PathBuf,
    dir: PathBuf,
    dir_id: Identity,
    /// `None` until the file exists.
    file_id: Option<Identity>,
    /// The longest the file has been seen.
    file_len: u64,
    /// Written by a [`Waker`], read (and so reset) by the waiter.
    wake: Arc<EventFd>,
    mode: Mode,
    /// Why inotify could not be used, when the waiter fell back to polling.
    fallback: Option<String>,
}

/// Wakes a [`FileWaiter`] from another thread, for a reason of its owner's.
#[derive(Clone)]
pub struct Waker(Arc<EventFd>);

impl Waker {
    pub fn wake(&self) {
        // Only an overflow of the 64-bit counter could refuse it, and then it is set anyway.
        let _ = self.0.write(1);
    }
}

/// A poll(2) timeout of `d`, rounded up to the next millisecond (rounded down, a wait of
/// less than one would return at once and spin until its deadline).
fn poll_timeout(d: Duration) -> PollTimeout {
    let ms = d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128);
    PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
}

impl FileWaiter {
    /// Watch `file` (its directory must exist). `poll` forces polling at that interval;
    /// otherwise inotify is used, falling back to polling when inotify cannot be set up
    /// ([`FileWaiter::fallback`] then tells why, for the caller to warn about).
    pub fn new(file: &Path, poll: Option<Duration>) -> Result<FileWaiter> {
        let dir = file.parent().unwrap_or(Path::new("."));
        Self::make(file, dir, false, poll)
    }

    /// Watch every entry of the folder `dir` (which must exist): a file of it created,
    /// written, renamed in or out, or removed. Polling compares the folder's stat signature
    /// (its change time moves with every entry added, renamed or removed). Not for
    /// [`FileWaiter::gone`].
    pub fn folder(dir: &Path, poll: Option<Duration>) -> Result<FileWaiter> {
        Self::make(dir, dir, true, poll)
    }

    fn make(file: &Path, dir: &Path, folder: bool, poll: Option<Duration>) -> Result<FileWaiter> {
        let file = file.to_path_buf();
        let dir = dir.to_path_buf();
        // Take the identities before arming the watch, so that a replacement in between is
        // seen at the first wake-up.
        let dir_id = std::fs::metadata(&dir)
            .map(|m| Identity::of(&m))
            .map_err(|e| Error::io(&dir, e))?;
        let (file_id, file_len) = match std::fs::metadata(&file) {
            Ok(m) => (Some(Identity::of(&m)), m.len()),
            Err(_) => (None, 0),
        };
        let wake = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| Error::io("<eventfd>", e.into()))?;
        let mut fallback = None;
        let policy = match policy(poll)? {
            Policy::Auto if !is_network_fs(&dir) => Policy::Inotify,
            p => p,
        };
        let named = (!folder).then_some(file.as_path());
        let mode = match policy {
            Policy::Poll(every) => Self::polling(&file, every, folder),
            Policy::Auto | Policy::Inotify => match Watch::new(named, &dir) {
                Ok(watch) if policy == Policy::Auto => Mode::Both {
                    watch,
                    every: NETFS_POLL_FAST,
                    probe: Probe::new(&file, !folder),
                    since: Instant::now(),
                },
                Ok(watch) => Mode::Inotify { watch },
                Err(e) => {
                    fallback = Some(format!(
                        "cannot watch {}: {}; polling every {} ms instead",
                        file.display(),
                        inotify_failure(e),
                        DEFAULT_POLL.as_millis()
                    ));
                    Self::polling(&file, DEFAULT_POLL, folder)
                }
            },
        };
        Ok(FileWaiter {
            file,
            dir,
            dir_id,
            file_id,
            file_len,
            wake: Arc::new(wake),
            mode,
            fallback,
        })
    }

    fn polling(file: &Path, every: Duration, folder: bool) -> Mode {
        let dir = file.parent().unwrap_or(Path::new("."));
        Mode::Poll {
            every,
            probe: Probe::new(file, !folder && is_network_fs(dir)),
        }
    }

    /// A handle that interrupts [`FileWaiter::wait`] from another thread.
    pub fn waker(&self) -> Waker {
        Waker(self.wake.clone())
    }

    /// Has the directory or the file stopped being the one this waiter started with? A file
    /// that did not exist then is adopted when it appears.
    pub fn gone(&mut self) -> Option<Gone> {
        let gone = |path: &Path, why| {
            Some(Gone {
                path: path.to_path_buf(),
                why,
            })
        };
        match std::fs::metadata(&self.dir) {
            Err(_) => return gone(&self.dir, "removed or moved away while watched"),
            Ok(m) if Identity::of(&m) != self.dir_id => {
                return gone(&self.dir, "replaced while watched");
            }
            Ok(_) => {}
        }
        match (std::fs::metadata(&self.file), self.file_id) {
            (Ok(m), None) => {
                self.file_id = Some(Identity::of(&m));
                self.file_len = m.len();
            }
            (Ok(m), Some(id)) if Identity::of(&m) != id => {
                return gone(&self.file, "replaced while watched");
            }
            (Ok(m), Some(_)) if m.len() < self.file_len => {
                return gone(&self.file, "truncated while watched");
            }
            (Ok(m), Some(_)) => self.file_len = m.len(),
            (Err(e), Some(_)) if e.kind() == std::io::ErrorKind::NotFound => {
                return gone(&self.file, "removed or moved away while watched");
            }
            // Another error (such as permission denied) is for the reader to report.
            (Err(_), _) => {}
        }
        None
    }

    /// Why this waiter polls although inotify was asked for (inotify could not be set up),
    /// as a sentence for a warning; `None` when it uses inotify or was asked to poll.
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Is this waiter polling only (rather than using inotify)?
    pub fn is_polling(&self) -> bool {
        matches!(self.mode, Mode::Poll { .. })
    }

    /// Does this waiter poll beside inotify (a network file system)?
    pub fn polls_too(&self) -> bool {
        matches!(self.mode, Mode::Both { .. })
    }

    /// Block until the file may have changed, a [`Waker`] is used, or `timeout` passes.
    /// Returns `true` on a (possible) change or a wake, `false` on timeout.
    pub fn wait(&mut self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(crate::time::deadline);
        let got = loop {
            let every = match &mut self.mode {
                Mode::Inotify { .. } => None,
                Mode::Poll { every, probe } => {
                    if probe.changed() {
                        break true;
                    }
                    Some(*every)
                }
                Mode::Both {
                    every,
                    probe,
                    since,
                    ..
                } => {
                    if probe.changed() {
                        break true;
                    }
                    *every = netfs_interval(*every, since.elapsed());
                    Some(*every)
                }
            };
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                break false;
            }
            let nap = match (left, every) {
                (Some(l), Some(e)) => Some(l.min(e)),
                (l, e) => l.or(e),
            };
            if self.sleep(nap) {
                break true;
            }
        };
        // Coalesce a burst of events into one wake-up.
        self.drain();
        if let (true, Mode::Both { every, since, .. }) = (got, &mut self.mode) {
            // Something moved (a remote or local append, or the owner's own reason): an
            // answer may follow soon.
            *every = NETFS_POLL_FAST;
            *since = Instant::now();
        }
        got
    }

    /// Sleep until a [`Waker`] is used, the watch tells of a change that may concern the
    /// file (`true`), or `nap` passes (`false`; also after events about other files only).
    fn sleep(&self, nap: Option<Duration>) -> bool {
        let watch = match &self.mode {
            Mode::Inotify { watch } | Mode::Both { watch, .. } => Some(watch),
            Mode::Poll { .. } => None,
        };
        let mut fds = vec![PollFd::new(self.wake.as_fd(), PollFlags::POLLIN)];
        if let Some(i) = watch.and_then(Watch::inotify) {
            fds.push(PollFd::new(i.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, nap.map_or(PollTimeout::NONE, poll_timeout)) {
            Ok(0) | Err(Errno::EINTR) => return false,
            Ok(_) => {}
            // poll(2) itself failing (no memory): a spurious wake-up, which is allowed.
            Err(_) => return true,
        }
        let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
        if ready(&fds[0]) {
            return true;
        }
        fds.get(1).is_some_and(ready) && watch.is_some_and(Watch::relevant)
    }

    /// Forget the wake-ups and events already queued: the owner rescans after this.
    fn drain(&self) {
        let _ = self.wake.read();
        if let Mode::Inotify { watch } | Mode::Both { watch, .. } = &self.mode {
            watch.relevant();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fallback_names_the_limit_that_was_reached() {
        let instances = inotify_failure(Errno::EMFILE);
        assert!(
            instances.contains("fs.inotify.max_user_instances"),
            "{instances}"
        );
        let watches = inotify_failure(Errno::ENOSPC);
        assert!(watches.contains("fs.inotify.max_user_watches"), "{watches}");
        let other = inotify_failure(Errno::EACCES);
        assert!(!other.contains("fs.inotify"), "{other}");
    }

    #[test]
    fn a_network_waiter_polls_fast_while_hot_then_slows_down_to_the_idle_interval() {
        let ms = Duration::from_millis;
        assert_eq!(netfs_interval(NETFS_POLL, ms(0)), NETFS_POLL_FAST);
        assert_eq!(netfs_interval(NETFS_POLL, ms(999)), NETFS_POLL_FAST);
        let mut every = NETFS_POLL_FAST;
        let mut seen = Vec::new();
        for _ in 0..6 {
            every = netfs_interval(every, NETFS_HOT);
            seen.push(every.as_millis());
        }
        assert_eq!(seen, [20, 40, 80, 100, 100, 100]);
    }

    #[test]
    fn a_folder_waiter_wakes_on_any_entry_watched_or_polled() {
        let dir = tempfile::tempdir().unwrap();
        for poll in [None, Some(Duration::from_millis(20))] {
            let mut w = FileWaiter::folder(dir.path(), poll).unwrap();
            assert!(
                !w.wait(Some(Duration::from_millis(30))),
                "nothing changed yet"
            );
            let name = format!("{}.json", poll.is_some());
            let tmp = dir.path().join(".tmp");
            std::fs::write(&tmp, "{}").unwrap();
            std::fs::rename(&tmp, dir.path().join(name)).unwrap();
            assert!(w.wait(Some(Duration::from_secs(30))), "poll {poll:?}");
        }
    }

    /// The open descriptors of this process.
    fn open_fds() -> usize {
        std::fs::read_dir("/proc/self/fd").unwrap().count()
    }

    #[test]
    fn waiters_made_and_dropped_one_after_another_keep_no_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("channel.md");
        std::fs::write(&file, "x").unwrap();
        // As a server answering one wait after another: each waiter's inotify descriptor
        // is closed by the next one at the latest.
        let mut w = FileWaiter::new(&file, Some(DEFAULT_POLL)).unwrap();
        drop(w);
        let before = open_fds();
        for _ in 0..50 {
            w = FileWaiter::new(&file, None).unwrap();
            assert!(!w.is_polling() && w.fallback().is_none());
            drop(w);
        }
        // The last one's, retired until the next watch or the exit, and what other tests
        // running meanwhile hold (50 would be left if none were closed).
        assert!(open_fds() <= before + 25, "{} > {before} + 25", open_fds());
    }
}
