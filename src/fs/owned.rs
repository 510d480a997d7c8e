//! The folders aw owns, and the one way to open a file in one.
//!
//! An instance directory (and the user's registry of servers) is made known once, when it is
//! named ([`own`]). Every file in it, the channel, its index, the mention index, the JSON
//! state, the locks, the cursors, the transcripts, the serving records, is then opened from
//! a descriptor of that folder with no symbolic link followed on the way
//! ([`super::beneath::Dir`]), and only when it is a regular file: a link planted in the
//! folder (by another user, or committed in a cloned repository) cannot lead a write to a
//! file elsewhere, and a FIFO, socket or device placed there is refused at once instead of
//! blocking the reader. A file outside every owned folder is opened from its own folder,
//! its last component not followed.
//!
//! Only the folders aw owns are swept of the temp files a killed writer left
//! ([`super::atomic`]): a file in the user's work tree is never taken for aw's.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::stat::Mode;

use super::beneath::{Dir, Kind, is_symlink_error};

/// The mode files are created with (less the umask), unless said otherwise.
pub const CREATE: Mode = Mode::from_bits_truncate(0o666);

/// The folders made known, absolute.
static OWNED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Make `dir` (an instance directory, absolute; it need not exist yet) a folder aw owns.
pub fn own(dir: &Path) {
    let mut owned = OWNED.lock().unwrap_or_else(|e| e.into_inner());
    if !owned.iter().any(|d| d == dir) {
        owned.push(dir.to_path_buf());
    }
}

/// The owned folder `path` lies in (the deepest, when one is in another).
fn owner(path: &Path) -> Option<PathBuf> {
    let owned = OWNED.lock().unwrap_or_else(|e| e.into_inner());
    owned
        .iter()
        .filter(|d| path.starts_with(d) && path != d.as_path())
        .max_by_key(|d| d.as_os_str().len())
        .cloned()
}

/// Is the folder `dir` an owned folder or in one?
pub fn is_owned(dir: &Path) -> bool {
    let owned = OWNED.lock().unwrap_or_else(|e| e.into_inner());
    owned.iter().any(|d| dir.starts_with(d))
}

/// Why a file of an owned folder was not opened: it is a symbolic link (or one is on the
/// way), or it is not a regular file. Carried inside an [`io::Error`] of kind
/// `PermissionDenied`.
#[derive(Debug)]
pub struct Refused(&'static str);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Refused {}

const LINK: &str =
    "a symbolic link, or one on the way: aw never follows a link in an instance directory";
const NOT_REGULAR: &str =
    "not a regular file (a FIFO, socket or device): aw opens only regular files here";

fn refused(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, Refused(why))
}

/// Is `e` a refusal of [`open`] (a link, or not a regular file)?
pub fn is_refused(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|r| r.is::<Refused>())
}

/// The folder to open `path` from and the path of the file in it: its owned folder, else
/// its own folder.
fn split(path: &Path) -> io::Result<(PathBuf, String)> {
    let base = match owner(path) {
        Some(b) => b,
        None => path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf(),
    };
    let rel = path
        .strip_prefix(&base)
        .ok()
        .and_then(|r| r.to_str())
        .filter(|r| !r.is_empty())
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    Ok((base, rel.to_string()))
}

/// Open the file at `path` with `flags` (and `mode` when they create it) beneath its owned
/// folder, no link followed, and only when it is a regular file: a link on the way, or a
/// file of another kind, is a [`Refused`] error. A FIFO is never waited for.
pub fn open(path: &Path, flags: OFlag, mode: Mode) -> io::Result<File> {
    open_as(path, flags, mode, true)
}

/// [`open`] for a file aw never replaces by a rename and whose content it does not read as
/// another host wrote it: a lock file (its lock is kept by the server). On a network file
/// system its folder is not listed before the open (see [`Dir::open_file_in_place`]).
/// Not for a channel's log or index, though they are only appended to: on GlusterFS the
/// listing is also what makes the client's `O_DIRECT` reads give another host's last
/// append instead of what it cached.
pub fn open_in_place(path: &Path, flags: OFlag, mode: Mode) -> io::Result<File> {
    open_as(path, flags, mode, false)
}

fn open_as(path: &Path, flags: OFlag, mode: Mode, list: bool) -> io::Result<File> {
    let (base, rel) = split(path)?;
    let open = || open_within(&Dir::open(&base)?, &rel, flags, mode, list);
    // A create that may race another host's creation of the file or of its folders.
    if flags.contains(OFlag::O_CREAT)
        && !flags.contains(OFlag::O_EXCL)
        && super::netfs::is_network_fs(&base)
    {
        return super::netfs::created(&base, path, open);
    }
    open()
}

/// [`open`] of the file `name` in `dir`, a folder opened with [`folder`]: for many files of
/// one folder in a row (a server's claims of its agents as it starts), opened from one
/// descriptor of the folder instead of one of the owned folder each.
pub fn open_in(dir: &Dir, name: &str, flags: OFlag, mode: Mode) -> io::Result<File> {
    open_within(dir, name, flags, mode, true)
}

fn open_within(dir: &Dir, rel: &str, flags: OFlag, mode: Mode, list: bool) -> io::Result<File> {
    let flags = flags | OFlag::O_NONBLOCK;
    let f = if list {
        dir.open_file(rel, flags, mode)
    } else {
        dir.open_file_in_place(rel, flags, mode)
    };
    let f = f.map_err(|e| {
        if is_symlink_error(&e) {
            refused(LINK)
        } else {
            e
        }
    })?;
    if Kind::of_file(&f)? != Kind::File {
        return Err(refused(NOT_REGULAR));
    }
    let now = OFlag::from_bits_truncate(fcntl(&f, FcntlArg::F_GETFL)?);
    fcntl(&f, FcntlArg::F_SETFL(now - OFlag::O_NONBLOCK))?;
    Ok(f)
}

/// [`open`] for reading.
pub fn open_read(path: &Path) -> io::Result<File> {
    open(path, OFlag::O_RDONLY, Mode::empty())
}

/// The whole of the file at `path`, opened as [`open`] does.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = open_read(path)?;
    let mut buf = Vec::with_capacity(f.metadata().map_or(0, |m| m.len() as usize) + 1);
    f.read_to_end(&mut buf)?;
    Ok(buf)
}

/// Read the file at `path` (opened as [`open`] does) as the server of a network file system
/// has it ([`super::netfs::fresh`]).
pub fn read_fresh(path: &Path) -> io::Result<Vec<u8>> {
    let dir = path.parent().unwrap_or(Path::new("."));
    super::netfs::fresh(path, super::netfs::is_network_fs(dir), || read(path))
}

/// Open `path` (as [`open`] does) for reading with `O_DIRECT`; `None` where the file system
/// refuses it.
pub fn open_direct(path: &Path) -> io::Result<Option<File>> {
    match open(path, OFlag::O_RDONLY | OFlag::O_DIRECT, Mode::empty()) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.raw_os_error() == Some(nix::libc::EINVAL) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The folder at `path`, opened beneath its owned folder with no link followed; with
/// `create`, made (with its missing parents) when missing.
pub fn folder(path: &Path, create: bool) -> io::Result<Dir> {
    let map = |e: io::Error| {
        if is_symlink_error(&e) {
            refused(LINK)
        } else {
            e
        }
    };
    let Some(base) = owner(path) else {
        if create {
            std::fs::create_dir_all(path)?;
        }
        return Dir::open(path);
    };
    let rel = path
        .strip_prefix(&base)
        .ok()
        .and_then(|r| r.to_str())
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let dir = Dir::open(&base)?;
    if create {
        dir.dir_create(rel).map_err(map)
    } else {
        dir.dir(rel).map_err(map)
    }
}

/// The names of the regular files in the folder at `path` (opened as [`folder`] does).
pub fn files(path: &Path) -> io::Result<Vec<OsString>> {
    Ok(folder(path, false)?
        .entries()?
        .into_iter()
        .filter(|(_, k)| *k == Kind::File)
        .map(|(n, _)| n)
        .collect())
}

/// Remove the file at `path` from its folder (opened as [`folder`] does).
pub fn remove(path: &Path) -> io::Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::ErrorKind::InvalidInput.into());
    };
    folder(parent, false)?.unlink(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_fifos_in_an_owned_folder_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let inst = t.path().join("inst");
        std::fs::create_dir_all(inst.join("_state")).unwrap();
        std::fs::write(t.path().join("target"), "keep").unwrap();
        own(&inst);
        std::os::unix::fs::symlink("../../target", inst.join("_state/link")).unwrap();
        std::os::unix::fs::symlink("..", inst.join("up")).unwrap();
        nix::unistd::mkfifo(&inst.join("_state/fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        let rw = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_TRUNC;
        for rel in [
            "_state/link",
            "_state/fifo",
            "up/target",
            "up/inst/_state/new",
        ] {
            let e = open(&inst.join(rel), rw, Mode::from_bits_truncate(0o644)).unwrap_err();
            assert!(is_refused(&e), "{rel}: {e}");
        }
        assert_eq!(std::fs::read(t.path().join("target")).unwrap(), b"keep");
        assert!(!inst.join("_state/new").exists());
        let f = open(
            &inst.join("_state/made"),
            rw,
            Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        let flags = OFlag::from_bits_truncate(fcntl(&f, FcntlArg::F_GETFL).unwrap());
        assert!(!flags.contains(OFlag::O_NONBLOCK));
        assert!(is_owned(&inst.join("_state")));
        assert!(!is_owned(t.path()));
        assert!(is_refused(&folder(&inst.join("up"), false).unwrap_err()));
    }
}
