//! Advisory locks on lock files that are created once and never deleted.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};

/// How long a writer waits for a lock before giving up with exit 75.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(30);

/// A held lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct Lock {
    file: File,
    path: PathBuf,
}

impl Lock {
    fn open(path: &Path) -> Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::create(path, e))
    }

    /// Take the exclusive lock, waiting up to [`LOCK_TIMEOUT`].
    pub fn exclusive(path: &Path) -> Result<Lock> {
        Self::exclusive_timeout(path, LOCK_TIMEOUT)
    }

    /// Take the exclusive lock, waiting up to `timeout`.
    pub fn exclusive_timeout(path: &Path, timeout: Duration) -> Result<Lock> {
        let file = Self::open(path)?;
        // Fast path: uncontended.
        match file.try_lock() {
            Ok(()) => {
                return Ok(Lock {
                    file,
                    path: path.to_path_buf(),
                });
            }
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(Error::io(path, e)),
        }
        // Contended: block in flock(2) (fair and cheap) on a helper thread so that we can give
        // up after `timeout`. If we give up, the thread drops the file as soon as it gets the
        // lock, which releases it again.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = file.lock().map(|()| file);
            let _ = tx.send(r);
        });
        match rx.recv_timeout(timeout) {
            Ok(Ok(file)) => Ok(Lock {
                file,
                path: path.to_path_buf(),
            }),
            Ok(Err(e)) => Err(Error::io(path, e)),
            Err(_) => Err(Error::Busy(format!(
                "{}: lock held by another process for over {} s",
                path.display(),
                timeout.as_secs()
            ))),
        }
    }

    /// Try the exclusive lock without waiting; `Ok(None)` when another holder has it.
    pub fn try_exclusive(path: &Path) -> Result<Option<Lock>> {
        let file = Self::open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Lock {
                file,
                path: path.to_path_buf(),
            })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(Error::io(path, e)),
        }
    }

    /// Try a shared lock without waiting; `Ok(None)` when someone holds it exclusively.
    /// Used to probe liveness of a process that holds the lock for its whole life.
    pub fn try_shared(path: &Path) -> Result<Option<Lock>> {
        let file = match OpenOptions::new().read(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path, e)),
        };
        match file.try_lock_shared() {
            Ok(()) => Ok(Some(Lock {
                file,
                path: path.to_path_buf(),
            })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(Error::io(path, e)),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self) -> &File {
        &self.file
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}
