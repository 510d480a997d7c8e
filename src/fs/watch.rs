//! Waiting for a file to change: inotify on the parent directory (a rename-replace would kill
//! a watch on the file itself), with a polling fallback that compares length, nanosecond
//! mtime and inode.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher as _};

use crate::error::Result;

/// Polling interval used when inotify is not available and none was asked for.
pub const DEFAULT_POLL: Duration = Duration::from_millis(250);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Signature {
    len: u64,
    mtime_ns: i128,
    ino: u64,
}

fn signature(path: &Path) -> Signature {
    match std::fs::metadata(path) {
        Ok(m) => Signature {
            len: m.len(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ino: m.ino(),
        },
        Err(_) => Signature::default(),
    }
}

enum Mode {
    Inotify {
        rx: Receiver<()>,
        _watcher: notify::RecommendedWatcher,
    },
    Poll {
        every: Duration,
        last: Signature,
    },
}

/// Wakes its owner when `file` may have changed. Spurious wake-ups are allowed: the owner
/// always rescans what is new after a wake-up.
pub struct FileWaiter {
    file: PathBuf,
    mode: Mode,
}

impl FileWaiter {
    /// Watch `file` (its directory must exist). `poll` forces polling at that interval;
    /// otherwise inotify is used, falling back to polling (with a warning on stderr) when
    /// inotify cannot be set up.
    pub fn new(file: &Path, poll: Option<Duration>) -> Result<FileWaiter> {
        let file = file.to_path_buf();
        if let Some(every) = poll {
            return Ok(Self::polling(file, every));
        }
        match Self::inotify(&file) {
            Ok(mode) => Ok(FileWaiter { file, mode }),
            Err(e) => {
                eprintln!(
                    "warning: cannot watch {}: {e}; polling every {} ms instead",
                    file.display(),
                    DEFAULT_POLL.as_millis()
                );
                eprintln!(
                    "hint: raise fs.inotify.max_user_watches / max_user_instances, or pass --poll SECS"
                );
                Ok(Self::polling(file, DEFAULT_POLL))
            }
        }
    }

    fn polling(file: PathBuf, every: Duration) -> FileWaiter {
        let last = signature(&file);
        FileWaiter {
            file,
            mode: Mode::Poll { every, last },
        }
    }

    fn inotify(file: &Path) -> notify::Result<Mode> {
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        let name = file.file_name().map(|n| n.to_os_string());
        let (tx, rx) = mpsc::channel();
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
                let relevant = ev.need_rescan()
                    || ev.paths.is_empty()
                    || ev.paths.iter().any(|p| p.file_name() == name.as_deref());
                if relevant {
                    let _ = tx.send(());
                }
            })?;
        watcher.watch(&dir, RecursiveMode::NonRecursive)?;
        Ok(Mode::Inotify {
            rx,
            _watcher: watcher,
        })
    }

    /// Is this waiter polling (rather than using inotify)?
    pub fn is_polling(&self) -> bool {
        matches!(self.mode, Mode::Poll { .. })
    }

    /// Block until the file may have changed or `timeout` passes. Returns `true` on a
    /// (possible) change, `false` on timeout.
    pub fn wait(&mut self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(|t| Instant::now() + t);
        match &mut self.mode {
            Mode::Inotify { rx, .. } => {
                let got = match deadline {
                    None => rx.recv().is_ok(),
                    Some(d) => match rx.recv_timeout(d.saturating_duration_since(Instant::now())) {
                        Ok(()) => true,
                        Err(RecvTimeoutError::Timeout) => false,
                        Err(RecvTimeoutError::Disconnected) => false,
                    },
                };
                // Coalesce a burst of events into one wake-up.
                while rx.try_recv().is_ok() {}
                got
            }
            Mode::Poll { every, last } => loop {
                let now = signature(&self.file);
                if now != *last {
                    *last = now;
                    return true;
                }
                let nap = match deadline {
                    Some(d) => {
                        let left = d.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            return false;
                        }
                        left.min(*every)
                    }
                    None => *every,
                };
                std::thread::sleep(nap);
            },
        }
    }
}
