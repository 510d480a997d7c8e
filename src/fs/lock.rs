//! Advisory locks on lock files that are created once and never deleted, and on lock
//! files that live as long as their holder ([`Lock::create_held`], [`held`],
//! [`remove_if_free`]).

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::OFlag;

use super::beneath::Dir;
use super::owned::{self, CREATE};
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
    /// Open (create) the lock file at `path`. `content`: its content will be read (a claim,
    /// which another host may have just written): on a network file system its folder is
    /// listed first. Else a lock file is opened as is: it is never replaced, and its lock
    /// is kept by the server.
    fn open(path: &Path, content: bool) -> Result<File> {
        let flags = OFlag::O_RDWR | OFlag::O_CREAT;
        if content {
            owned::open(path, flags, CREATE)
        } else {
            owned::open_in_place(path, flags, CREATE)
        }
        .map_err(|e| Error::create(path, e))
    }

    /// Take the exclusive lock, waiting up to [`LOCK_TIMEOUT`].
    pub fn exclusive(path: &Path) -> Result<Lock> {
        Self::exclusive_timeout(path, LOCK_TIMEOUT)
    }

    /// Take the exclusive lock, waiting up to `timeout`.
    pub fn exclusive_timeout(path: &Path, timeout: Duration) -> Result<Lock> {
        let file = Self::open(path, false)?;
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

    /// Try the exclusive lock without waiting; `Ok(None)` when another holder has it. The
    /// holder may read the file (a claim): on a network file system it is opened as the
    /// server has it now.
    pub fn try_exclusive(path: &Path) -> Result<Option<Lock>> {
        Self::try_file(Self::open(path, true)?, path.to_path_buf())
    }

    /// [`Lock::try_exclusive`] of the lock file `name` in `dir`, a folder opened with
    /// [`owned::folder`]: for many lock files of one folder in a row.
    pub fn try_exclusive_in(dir: &Dir, name: &str) -> Result<Option<Lock>> {
        let path = dir.path().join(name);
        let file = owned::open_in(dir, name, OFlag::O_RDWR | OFlag::O_CREAT, CREATE)
            .map_err(|e| Error::create(&path, e))?;
        Self::try_file(file, path)
    }

    fn try_file(file: File, path: PathBuf) -> Result<Option<Lock>> {
        match file.try_lock() {
            Ok(()) => Ok(Some(Lock { file, path })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(Error::io(&path, e)),
        }
    }

    /// Try a shared lock without waiting; `Ok(None)` when someone holds it exclusively.
    /// Used to probe liveness of a process that holds the lock for its whole life.
    pub fn try_shared(path: &Path) -> Result<Option<Lock>> {
        let file = match owned::open_read(path) {
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

    /// Create `dir/name` with `content` in it and the exclusive lock already held: written as
    /// a dotfile, locked, then renamed into place, so that nobody ever finds the file under
    /// its name without its lock (a file found free under its name was let go for good). The
    /// name must be new; it is never reused.
    pub fn create_held(dir: &Path, name: &str, content: &[u8]) -> Result<Lock> {
        use std::io::Write;
        let temp_name = format!(".{name}.tmp");
        let temp = dir.join(&temp_name);
        let path = dir.join(name);
        let new = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL;
        let mut file = owned::open(&temp, new, CREATE).map_err(|e| Error::create(&temp, e))?;
        let made = file
            .try_lock()
            .map_err(|e| match e {
                TryLockError::Error(e) => e,
                TryLockError::WouldBlock => std::io::ErrorKind::WouldBlock.into(),
            })
            .and_then(|()| file.write_all(content))
            .and_then(|()| owned::folder(dir, false)?.rename(temp_name.as_ref(), name.as_ref()));
        if let Err(e) = made {
            let _ = owned::remove(&temp);
            return Err(Error::create(&path, e));
        }
        Ok(Lock { file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self) -> &File {
        &self.file
    }
}

/// Open `path` for reading as the server of a network file system has the name (`network`):
/// a name not found, or a stale handle, is looked up again after a listing of its directory
/// (a client may remember that a name another host created since did not exist). `None`: no
/// such file.
fn open_existing(path: &Path, network: bool) -> std::io::Result<Option<File>> {
    let gone =
        |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound || super::netfs::is_stale(e);
    match owned::open_read(path) {
        Ok(f) => return Ok(Some(f)),
        Err(e) if gone(&e) && network => {}
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    }
    match super::netfs::fresh(path, true, || owned::open_read(path)) {
        Ok(f) => Ok(Some(f)),
        Err(e) if gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Is the lock at `path` held exclusively now (a shared lock is refused)? `None`: there is
/// no such file. `network`: `path` is on a network file system
/// ([`super::netfs::is_network_fs`]).
pub fn held(path: &Path, network: bool) -> Result<Option<bool>> {
    let Some(file) = open_existing(path, network).map_err(|e| Error::io(path, e))? else {
        return Ok(None);
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(Some(false)),
        Err(TryLockError::WouldBlock) => Ok(Some(true)),
        Err(TryLockError::Error(e)) => Err(Error::io(path, e)),
    }
}

/// Remove the lock file at `path` if nobody holds it exclusively: the file of a holder
/// that died. Removed under a shared lock, so that whoever looks at it meanwhile finds it
/// free too. `true` when removed.
pub fn remove_if_free(path: &Path) -> Result<bool> {
    let file = match owned::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(path, e)),
    };
    match file.try_lock_shared() {
        Ok(()) => match owned::remove(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(path, e)),
        },
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(Error::io(path, e)),
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}
