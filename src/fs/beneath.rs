//! Paths resolved beneath a directory descriptor, never through a symbolic link.
//!
//! Documents and resources are reached from an open descriptor of their folder, so that a
//! folder swapped for a symlink while a tool runs cannot lead it anywhere else: the kernel
//! resolves the whole path with `openat2(2)` and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`
//! where it has that call, and otherwise each component is opened with `openat(2)` and
//! `O_NOFOLLOW` from the descriptor of the one before. Folders are created with `mkdirat(2)`,
//! and creating, renaming, unlinking and flushing a file all happen relative to the
//! descriptor of its folder. A symlink anywhere on the way fails with `ELOOP`.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, open, openat, openat2, renameat};
use nix::libc;
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};

use crate::error::{Error, Result};

/// What a directory entry or an open file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device: never a document or a resource.
    Other,
}

impl Kind {
    fn of(st: &FileStat) -> Kind {
        match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFREG => Kind::File,
            SFlag::S_IFDIR => Kind::Dir,
            SFlag::S_IFLNK => Kind::Symlink,
            _ => Kind::Other,
        }
    }

    /// The kind of an open file, by `fstat(2)` of its descriptor.
    pub fn of_file(f: &File) -> io::Result<Kind> {
        Ok(Kind::of(&fstat(f)?))
    }
}

/// An open directory and the path it was reached by (for messages only: every operation
/// goes through the descriptor).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
    /// On a network file system (told once, at open): opens look names up afresh.
    network: bool,
}

const DIR_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

/// Cleared once the kernel says it has no `openat2(2)`.
static HAVE_OPENAT2: AtomicBool = AtomicBool::new(true);

impl Dir {
    /// Open the directory at `path`. Symlinks in `path` itself are followed: it names the place
    /// the caller chose to work in; what lies beneath it is reached with [`Dir::dir`].
    pub fn open(path: &Path) -> io::Result<Dir> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let fd = open(path, flags, Mode::empty())?;
        Ok(Dir {
            network: super::netfs::is_network_fs(path),
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The path this directory was reached by, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Is this folder on a network file system (told once, at open)?
    pub fn is_network(&self) -> bool {
        self.network
    }

    /// Open the folder `rel` (components separated by `/`) beneath this one.
    pub fn dir(&self, rel: &str) -> io::Result<Dir> {
        let fd = self.open_beneath(rel, DIR_FLAGS, Mode::empty())?;
        Ok(self.child(fd, rel))
    }

    /// Open the folder `rel` beneath this one, creating the folders that are missing.
    pub fn dir_create(&self, rel: &str) -> io::Result<Dir> {
        match self.dir(rel) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            r => return r,
        }
        let mut cur = self.fd.try_clone()?;
        for comp in components(rel) {
            match mkdirat(&cur, comp, Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e.into()),
            }
            cur = open_component(&cur, comp, DIR_FLAGS, Mode::empty())?;
        }
        Ok(self.child(cur, rel))
    }

    /// Open the file `rel` beneath this one. `O_NOFOLLOW`, `O_NOCTTY` and `O_CLOEXEC` are
    /// always added; `mode` applies when `flags` create the file.
    pub fn open_file(&self, rel: &str, flags: OFlag, mode: Mode) -> io::Result<File> {
        self.open_file_as(rel, flags, mode, true)
    }

    /// [`Dir::open_file`] for a file that is never replaced by a rename and whose content
    /// is not read as another host wrote it (a lock file): on a network file system its
    /// folder is listed only after a stale handle, not before every open.
    pub fn open_file_in_place(&self, rel: &str, flags: OFlag, mode: Mode) -> io::Result<File> {
        self.open_file_as(rel, flags, mode, false)
    }

    fn open_file_as(&self, rel: &str, flags: OFlag, mode: Mode, list: bool) -> io::Result<File> {
        let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
        // Another host may have replaced the file: see the one the server has now.
        let parent = match rel.rsplit_once('/') {
            Some((p, _)) => self.path.join(p),
            None => self.path.clone(),
        };
        let open = || self.open_beneath(rel, flags, mode);
        let fd = if list {
            super::netfs::fresh(&self.path.join(rel), self.network, open)?
        } else {
            super::netfs::unstale(&parent, open)?
        };
        Ok(File::from(fd))
    }

    /// The kind of `name` in this folder (not following a symlink), or `None` when missing.
    pub fn kind(&self, name: &OsStr) -> io::Result<Option<Kind>> {
        match fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Kind::of(&st))),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Remove the file `name` from this folder.
    pub fn unlink(&self, name: &OsStr) -> io::Result<()> {
        Ok(unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir)?)
    }

    /// Rename `from` to `to`, both in this folder, replacing `to`.
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        Ok(renameat(&self.fd, from, &self.fd, to)?)
    }

    /// Flush the folder's entries to stable storage.
    pub fn sync(&self) -> io::Result<()> {
        Ok(nix::unistd::fsync(&self.fd)?)
    }

    /// The names in this folder (without `.` and `..`) and what each is.
    pub fn entries(&self) -> io::Result<Vec<(OsString, Kind)>> {
        use nix::dir::Type;
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let mut d = nix::dir::Dir::openat(&self.fd, ".", flags, Mode::empty())?;
        let mut out = Vec::new();
        for e in d.iter() {
            let e = e?;
            let name = OsStr::from_bytes(e.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let kind = match e.file_type() {
                Some(Type::File) => Kind::File,
                Some(Type::Directory) => Kind::Dir,
                Some(Type::Symlink) => Kind::Symlink,
                Some(_) => Kind::Other,
                // The file system does not say: ask.
                None => match self.kind(name)? {
                    Some(k) => k,
                    None => continue,
                },
            };
            out.push((name.to_os_string(), kind));
        }
        Ok(out)
    }

    fn child(&self, fd: OwnedFd, rel: &str) -> Dir {
        Dir {
            fd,
            path: self.path.join(rel),
            network: self.network,
        }
    }

    /// Open `rel` beneath this directory without following any symlink.
    fn open_beneath(&self, rel: &str, flags: OFlag, mode: Mode) -> io::Result<OwnedFd> {
        if HAVE_OPENAT2.load(Ordering::Relaxed) {
            // RESOLVE_NO_SYMLINKS refuses a final symlink with ELOOP; O_NOFOLLOW would make
            // that ENOTDIR when O_DIRECTORY is given too.
            let flags = flags - OFlag::O_NOFOLLOW;
            let how = OpenHow::new().flags(flags).mode(mode).resolve(
                ResolveFlag::RESOLVE_BENEATH
                    | ResolveFlag::RESOLVE_NO_SYMLINKS
                    | ResolveFlag::RESOLVE_NO_MAGICLINKS,
            );
            // EAGAIN: a rename elsewhere raced the lookup; the kernel asks to try again.
            for _ in 0..4 {
                match openat2(&self.fd, rel, how) {
                    Err(Errno::EAGAIN) => continue,
                    Err(Errno::ENOSYS) => {
                        HAVE_OPENAT2.store(false, Ordering::Relaxed);
                        break;
                    }
                    // Some sandboxes refuse system calls they do not know with EPERM: walk,
                    // which gives the same answer when the refusal was real.
                    Err(Errno::EPERM) => break,
                    r => return Ok(r?),
                }
            }
        }
        self.walk(rel, flags, mode)
    }

    /// [`Dir::open_beneath`] one component at a time, for kernels without `openat2(2)`.
    fn walk(&self, rel: &str, flags: OFlag, mode: Mode) -> io::Result<OwnedFd> {
        let comps: Vec<&str> = components(rel).collect();
        let Some((last, folders)) = comps.split_last() else {
            return Err(Errno::EINVAL.into());
        };
        let mut cur = None::<OwnedFd>;
        for comp in folders {
            let at = cur.as_ref().map_or(self.fd.as_fd(), |f| f.as_fd());
            cur = Some(open_component(at, comp, DIR_FLAGS, Mode::empty())?);
        }
        let at = cur.as_ref().map_or(self.fd.as_fd(), |f| f.as_fd());
        open_component(at, last, flags | OFlag::O_NOFOLLOW, mode)
    }
}

/// The non-empty components of `rel`.
fn components(rel: &str) -> impl Iterator<Item = &str> {
    rel.split('/').filter(|c| !c.is_empty())
}

/// `openat(at, comp)` without following a symlink, which fails with `ELOOP`.
fn open_component<Fd: AsFd>(at: Fd, comp: &str, flags: OFlag, mode: Mode) -> io::Result<OwnedFd> {
    if !flags.contains(OFlag::O_DIRECTORY) {
        return Ok(openat(at.as_fd(), comp, flags | OFlag::O_NOFOLLOW, mode)?);
    }
    // With O_DIRECTORY, a symlink fails with ENOTDIR as a file does, and looking again
    // afterwards could see something else: pin what is there, then look at it.
    let pin = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let pinned = openat(at.as_fd(), comp, pin, Mode::empty())?;
    match Kind::of(&fstat(&pinned)?) {
        Kind::Dir => Ok(openat(&pinned, ".", flags - OFlag::O_NOFOLLOW, mode)?),
        Kind::Symlink => Err(Errno::ELOOP.into()),
        Kind::File | Kind::Other => Err(Errno::ENOTDIR.into()),
    }
}

/// Open the folder `name` (`documents`, `resources`) of the instance directory `inst`
/// without following a symlink; with `create`, make it when missing. `None` when it (or the
/// instance) is missing and `create` is false.
pub fn instance_folder(inst: &Path, name: &str, create: bool) -> Result<Option<Dir>> {
    let missing = |e: &io::Error| !create && e.kind() == io::ErrorKind::NotFound;
    let fail = |e: io::Error| {
        if is_symlink_error(&e) {
            Error::denied(format!(
                "{name}/ is a symbolic link, which could lead outside the instance directory"
            ))
        } else if create {
            Error::create(inst.join(name), e)
        } else {
            Error::io(inst.join(name), e)
        }
    };
    let base = match Dir::open(inst) {
        Ok(d) => d,
        Err(e) if missing(&e) => return Ok(None),
        Err(e) => return Err(Error::io(inst, e)),
    };
    // Made by another host just now (an instance created by two hosts at once), the folder
    // may be a stale handle here until the instance is listed again.
    let opened = super::netfs::unstale(inst, || {
        if create {
            base.dir_create(name)
        } else {
            base.dir(name)
        }
    });
    match opened {
        Ok(d) => Ok(Some(d)),
        Err(e) if missing(&e) => Ok(None),
        Err(e) => Err(fail(e)),
    }
}

/// Is `e` the error of a symlink met on the way?
pub fn is_symlink_error(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::EXDEV))
}

/// Read all of `f`, but never more than `limit` bytes: `None` when it holds more.
pub fn read_capped(f: &mut File, limit: usize) -> io::Result<Option<Vec<u8>>> {
    let hint = f.metadata().map_or(0, |m| m.len() as usize).min(limit);
    let mut buf = Vec::with_capacity(hint + 1);
    f.take(limit as u64 + 1).read_to_end(&mut buf)?;
    Ok((buf.len() <= limit).then_some(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk_and_openat2(d: &Dir, rel: &str) -> [Option<i32>; 2] {
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK;
        [
            d.open_file(rel, flags, Mode::empty()).err(),
            d.walk(rel, flags | OFlag::O_NOFOLLOW, Mode::empty())
                .map(drop)
                .err(),
        ]
        .map(|e| e.and_then(|e| e.raw_os_error()))
    }

    #[test]
    fn symlinks_are_never_followed() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path();
        std::fs::create_dir_all(base.join("in/sub")).unwrap();
        std::fs::write(base.join("in/sub/f"), "x").unwrap();
        std::fs::write(base.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink("sub", base.join("in/alias")).unwrap();
        std::os::unix::fs::symlink("sub/f", base.join("in/f-alias")).unwrap();
        std::os::unix::fs::symlink("../secret", base.join("in/up")).unwrap();
        let d = Dir::open(&base.join("in")).unwrap();
        assert_eq!(walk_and_openat2(&d, "sub/f"), [None, None]);
        for rel in ["alias/f", "f-alias", "up"] {
            assert_eq!(
                walk_and_openat2(&d, rel),
                [Some(libc::ELOOP), Some(libc::ELOOP)],
                "{rel}"
            );
        }
        assert_eq!(
            d.dir("alias").unwrap_err().raw_os_error(),
            Some(libc::ELOOP)
        );
        assert_eq!(
            d.dir_create("alias/new").unwrap_err().raw_os_error(),
            Some(libc::ELOOP)
        );
        assert!(!base.join("in/sub/new").exists());
        let made = d.dir_create("a/b/c").unwrap();
        assert!(made.path().ends_with("in/a/b/c"));
        assert!(base.join("in/a/b/c").is_dir());
        let mut names = d.entries().unwrap();
        names.sort();
        let kinds: Vec<(&str, Kind)> = names
            .iter()
            .map(|(n, k)| (n.to_str().unwrap(), *k))
            .collect();
        assert_eq!(
            kinds,
            [
                ("a", Kind::Dir),
                ("alias", Kind::Symlink),
                ("f-alias", Kind::Symlink),
                ("sub", Kind::Dir),
                ("up", Kind::Symlink)
            ]
        );
    }

    /// The component walk (used without `openat2`) against a folder swapped for a symlink
    /// to the outside in a tight loop: it never opens a file out there.
    #[test]
    fn the_walk_holds_against_a_swapped_folder() {
        use nix::fcntl::{RenameFlags, renameat2};
        use std::sync::Arc;
        let t = tempfile::tempdir().unwrap();
        let (inside, outside) = (t.path().join("in"), t.path().join("out"));
        std::fs::create_dir_all(inside.join("d")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(inside.join("d/x"), "inside").unwrap();
        std::fs::write(outside.join("x"), "outside").unwrap();
        std::os::unix::fs::symlink(&outside, inside.join("link")).unwrap();
        let d = Dir::open(&inside).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (stop, fd) = (stop.clone(), d.fd.try_clone().unwrap());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    renameat2(&fd, "d", &fd, "link", RenameFlags::RENAME_EXCHANGE).unwrap();
                }
            })
        };
        let (mut opened, mut refused) = (0, 0);
        for _ in 0..20_000 {
            match d.walk("d/x", OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()) {
                Ok(fd) => {
                    let mut s = String::new();
                    File::from(fd).read_to_string(&mut s).unwrap();
                    assert_eq!(s, "inside");
                    opened += 1;
                }
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
                    refused += 1;
                }
            }
            let _ = d.dir_create("d/new");
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert!(opened + refused == 20_000);
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            1,
            "made outside"
        );
    }

    #[test]
    fn reads_stop_after_the_limit() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        std::fs::write(&p, "12345").unwrap();
        let read = |limit| read_capped(&mut File::open(&p).unwrap(), limit).unwrap();
        assert_eq!(read(5), Some(b"12345".to_vec()));
        assert_eq!(read(4), None);
    }
}
