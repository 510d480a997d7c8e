//! Waiting for a file to change: inotify on the parent directory (a rename-replace would kill
//! a watch on the file itself), with a polling fallback that compares length, nanosecond
//! mtime, inode and device.
//!
//! A waiter also tells when the file or its directory stopped being the one it started
//! with: removed, or replaced by another one of the same name (another device, inode or
//! birth time), or made shorter (the file is append-only). A follower uses that to stop
//! instead of reading a new file as if it continued the old one.

use std::fmt;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant, SystemTime};

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher as _};

use crate::error::{Error, Result};

/// Polling interval used when inotify is not available and none was asked for.
pub const DEFAULT_POLL: Duration = Duration::from_millis(250);

/// What to do about a fallback to polling (see [`FileWaiter::fallback`]); a tool adds the
/// option that sets the polling interval, when it has one.
pub const FALLBACK_HINT: &str = "raise fs.inotify.max_user_watches / max_user_instances";

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
    Inotify { watcher: notify::RecommendedWatcher },
    Poll { every: Duration, last: Signature },
}

/// Wakes its owner when `file` may have changed. Spurious wake-ups are allowed: the owner
/// always rescans what is new after a wake-up, and asks [`FileWaiter::gone`] first.
pub struct FileWaiter {
    file: PathBuf,
    dir: PathBuf,
    dir_id: Identity,
    /// `None` until the file exists.
    file_id: Option<Identity>,
    /// The longest the file has been seen.
    file_len: u64,
    tx: Sender<()>,
    rx: Receiver<()>,
    mode: Mode,
    /// Why inotify could not be used, when the waiter fell back to polling.
    fallback: Option<String>,
}

impl Drop for FileWaiter {
    fn drop(&mut self) {
        // A watch still in place when the inotify descriptor is closed makes the close wait
        // for the kernel to retire it: some milliseconds at every exit. Removed first, it
        // is retired in the background.
        if let Mode::Inotify { watcher } = &mut self.mode {
            let _ = watcher.unwatch(&self.dir);
        }
    }
}

/// Wakes a [`FileWaiter`] from another thread, for a reason of its owner's.
#[derive(Clone)]
pub struct Waker(Sender<()>);

impl Waker {
    pub fn wake(&self) {
        let _ = self.0.send(());
    }
}

impl FileWaiter {
    /// Watch `file` (its directory must exist). `poll` forces polling at that interval;
    /// otherwise inotify is used, falling back to polling when inotify cannot be set up
    /// ([`FileWaiter::fallback`] then tells why, for the caller to warn about).
    pub fn new(file: &Path, poll: Option<Duration>) -> Result<FileWaiter> {
        let file = file.to_path_buf();
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        // Take the identities before arming the watch, so that a replacement in between is
        // seen at the first wake-up.
        let dir_id = std::fs::metadata(&dir)
            .map(|m| Identity::of(&m))
            .map_err(|e| Error::io(&dir, e))?;
        let (file_id, file_len) = match std::fs::metadata(&file) {
            Ok(m) => (Some(Identity::of(&m)), m.len()),
            Err(_) => (None, 0),
        };
        let (tx, rx) = mpsc::channel();
        let mut fallback = None;
        let mode = match poll {
            Some(every) => Self::polling(&file, every),
            None => match Self::inotify(&file, &dir, tx.clone()) {
                Ok(mode) => mode,
                Err(e) => {
                    fallback = Some(format!(
                        "cannot watch {}: {e}; polling every {} ms instead",
                        file.display(),
                        DEFAULT_POLL.as_millis()
                    ));
                    Self::polling(&file, DEFAULT_POLL)
                }
            },
        };
        Ok(FileWaiter {
            file,
            dir,
            dir_id,
            file_id,
            file_len,
            tx,
            rx,
            mode,
            fallback,
        })
    }

    fn polling(file: &Path, every: Duration) -> Mode {
        Mode::Poll {
            every,
            last: signature(file),
        }
    }

    fn inotify(file: &Path, dir: &Path, tx: Sender<()>) -> notify::Result<Mode> {
        let name = file.file_name().map(|n| n.to_os_string());
        let here = dir.to_path_buf();
        let mut watcher =
            notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                let Ok(ev) = res else {
                    // An overflow or error: wake the owner so it rescans.
                    let _ = tx.send(());
                    return;
                };
                if matches!(
                    ev.kind,
                    EventKind::Access(AccessKind::Open(_))
                        | EventKind::Access(AccessKind::Read)
                        | EventKind::Access(AccessKind::Close(AccessMode::Read))
                ) {
                    return;
                }
                // The file, or the directory itself (removed or moved away).
                let relevant = ev.need_rescan()
                    || ev.paths.is_empty()
                    || ev
                        .paths
                        .iter()
                        .any(|p| p.file_name() == name.as_deref() || *p == here);
                if relevant {
                    let _ = tx.send(());
                }
            })?;
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
        Ok(Mode::Inotify { watcher })
    }

    /// A handle that interrupts [`FileWaiter::wait`] from another thread.
    pub fn waker(&self) -> Waker {
        Waker(self.tx.clone())
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

    /// Is this waiter polling (rather than using inotify)?
    pub fn is_polling(&self) -> bool {
        matches!(self.mode, Mode::Poll { .. })
    }

    /// Block until the file may have changed, a [`Waker`] is used, or `timeout` passes.
    /// Returns `true` on a (possible) change or a wake, `false` on timeout.
    pub fn wait(&mut self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(crate::time::deadline);
        let got = match &mut self.mode {
            // The waiter holds a sender itself, so the channel never disconnects.
            Mode::Inotify { .. } => match deadline {
                None => self.rx.recv().is_ok(),
                Some(d) => !matches!(
                    self.rx
                        .recv_timeout(d.saturating_duration_since(Instant::now())),
                    Err(RecvTimeoutError::Timeout)
                ),
            },
            Mode::Poll { every, last } => loop {
                let now = signature(&self.file);
                if now != *last {
                    *last = now;
                    break true;
                }
                let nap = match deadline {
                    Some(d) => {
                        let left = d.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break false;
                        }
                        left.min(*every)
                    }
                    None => *every,
                };
                if self.rx.recv_timeout(nap).is_ok() {
                    break true;
                }
            },
        };
        // Coalesce a burst of events into one wake-up.
        while self.rx.try_recv().is_ok() {}
        got
    }
}
