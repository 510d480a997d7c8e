//! Atomic replacement of a file: temp file + fsync + rename + fsync of the directory.
//!
//! The new content is first written to an anonymous file (`O_TMPFILE`) in the target's
//! folder, which vanishes with the process however it dies. Only once it is complete and
//! flushed does it get a name, `.NAME.tmp.HOST.PID.N` (HOST the writer's host id, see
//! [`crate::host`]), and that name is renamed over the target at
//! once. Where the file system has no anonymous files, the content is written to that named
//! temp file directly. Either way the signals that end a process by default (SIGHUP, SIGINT,
//! SIGQUIT, SIGTERM) are held while a temp file has a name, so that they end it only after
//! the rename or the clean-up. A writer killed outright (SIGKILL, power loss) can still leave
//! a named temp file behind: the first write of a process into a folder aw owns (in an
//! instance directory, see [`super::owned`]; never the user's work tree, where a file of that
//! name may be the user's) sweeps from it the temp files whose writer process no longer exists
//! (once per folder and process, so that a write costs the same however many files its
//! folder holds: a server writes its agents' records into one folder; a folder that grows
//! without bound is written with [`atomic_write_unswept`] and swept by its owner with
//! [`sweep_folder`]). Whether it exists is
//! asked of the kernel only for a writer of this host (and pid namespace); another host's temp
//! file is swept only once it is older than [`ABANDONED_TEMP`], which no live write ever lasts.
//! A temp name without a host (written by a version of aw that knew none) is taken for this
//! host's, as it was then.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, openat};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::sys::stat::Mode;
use nix::unistd::linkat;

use super::beneath::Dir;
use crate::error::{Error, IoContext, Result};

/// Replace `path` with `data` so that a reader sees either the old or the new content, never a
/// mix, and a crash leaves one of the two. The folder of `path` is opened by its path.
pub fn atomic_write(path: &Path, data: &[u8]) -> Result<()> {
    write_path(path, data, true, None)
}

/// [`atomic_write`] of a file readable by its owner only (mode 0600, whatever the umask),
/// from its first byte on: for what may hold model output or secrets.
pub fn atomic_write_private(path: &Path, data: &[u8]) -> Result<()> {
    write_path(path, data, true, Some(PRIVATE))
}

/// [`atomic_write_private`] without the flushes to stable storage, as
/// [`atomic_write_unsynced`]: for a private file that is written again before it is used
/// (an agent's MCP configuration, rewritten by every server and before every attempt), or
/// that a crash may lose as it may lose the channel's last entries (a transcript).
pub fn atomic_write_private_unsynced(path: &Path, data: &[u8]) -> Result<()> {
    write_path(path, data, false, Some(PRIVATE))
}

/// [`atomic_write_private_unsynced`] unless `path` already holds exactly `data`, privately
/// (mode 0600) and owned by this user: then nothing is written, and reading a small file
/// costs far less than replacing it. Whether it was written.
pub fn ensure_private_unsynced(path: &Path, data: &[u8]) -> Result<bool> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let same = super::owned::open_read(path).is_ok_and(|mut f| {
        let mut held = Vec::with_capacity(data.len() + 1);
        f.metadata().is_ok_and(|m| {
            m.mode() & 0o7777 == PRIVATE && m.uid() == nix::unistd::geteuid().as_raw()
        }) && f.read_to_end(&mut held).is_ok()
            && held == data
    });
    if same {
        return Ok(false);
    }
    atomic_write_private_unsynced(path, data)?;
    Ok(true)
}

/// [`atomic_write`] without the sweep of the folder's abandoned temp files: for a folder
/// that grows without bound (the cards of a board), where listing it at every process's
/// first write would cost as much as the folder is large. Its owner sweeps it on its
/// recovery path instead, with [`sweep_folder`].
pub fn atomic_write_unswept(path: &Path, data: &[u8]) -> Result<()> {
    let (dir, name) = folder_and_name(path)?;
    write_in(&dir, name, data, true, None)
}

/// Replace `name` in the open folder `dir` with neither the flushes to stable storage nor
/// the sweep of the folder: for a folder of derived files that grows with what it mirrors
/// (the registry's name index, whose stamp names the boot it was written in, so that a
/// crash of the system has it rebuilt), swept by its owner with [`sweep_folder`].
pub fn atomic_write_in(dir: &Dir, name: &OsStr, data: &[u8]) -> Result<()> {
    write_in(dir, name, data, false, None)
}

/// Write `name` in the open folder `dir`, unsynced and unswept, for a file that is most
/// often not there yet and whose readers parse it whole, taking one empty or cut short for
/// none (the registry's name index, whose files a server of many agents makes as it
/// starts). A new file is made with its content in one write, with no temp name and no
/// rename: a reader finds nothing, an empty file, or all of it (a local file system grows
/// a file's size only once the bytes are in; a JSON object cut short does not parse
/// anyway), and a write that fails removes it. A file already there, or any on a network
/// file system (whose other clients may see a new file empty for a second), is replaced
/// as [`atomic_write_in`] does.
pub fn create_or_replace_in(dir: &Dir, name: &OsStr, data: &[u8]) -> Result<()> {
    if dir.is_network() {
        return write_in(dir, name, data, false, None);
    }
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let path = || dir.path().join(name);
    match openat(dir.fd(), name, flags, super::owned::CREATE) {
        Ok(fd) => File::from(fd).write_all(data).inspect_err(|_| {
            let _ = dir.unlink(name);
        }),
        Err(Errno::EEXIST) => return write_in(dir, name, data, false, None),
        Err(e) => return Err(Error::create(path(), e.into())),
    }
    .at(path())
}

/// Sweep the open folder `dir` as the first write of this process into it does, unless one
/// did: for a process that would rather pay for it now (a server's start, which lists its
/// records' folder once) than at its first replacement there (its first agent's run).
pub fn sweep_once(dir: &Dir) {
    sweep(dir);
}

/// Remove the temp files of `folder` (one aw owns) whose writers no longer run, as the first
/// write of a process into a folder does; for the folders written with
/// [`atomic_write_unswept`].
pub fn sweep_folder(folder: &Path) -> Result<()> {
    let dir = Dir::open(folder).at(folder)?;
    SWEPT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|k| k.2 != folder);
    sweep(&dir);
    Ok(())
}

/// Replace the file at `path`: flushed (the file, then its folder) when `sync`, created with
/// `mode` when given.
fn write_path(path: &Path, data: &[u8], sync: bool, mode: Option<u32>) -> Result<()> {
    let (dir, name) = folder_and_name(path)?;
    sweep(&dir);
    write_in(&dir, name, data, sync, mode)
}

/// Replace `name` in `dir`, as [`write_path`] says, the folder swept or not.
fn write_in(dir: &Dir, name: &OsStr, data: &[u8], sync: bool, mode: Option<u32>) -> Result<()> {
    if !write_anonymous_as(dir, name, data, sync, mode)? {
        write_named_mode(dir, name, data, sync, mode)?;
    }
    if sync {
        dir.sync().at(dir.path())?;
    }
    Ok(())
}

/// The mode of private files.
pub const PRIVATE: u32 = 0o600;

/// The mode of private folders.
pub const PRIVATE_DIR: u32 = 0o700;

/// Make `dir` (and its missing parents) a folder of mode 0700, whatever the umask; one that
/// exists is made 0700 too, unless another user owns it (its mode is theirs to choose).
pub fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR)
        .create(dir)
        .map_err(|e| Error::create(dir, e))?;
    let meta = std::fs::metadata(dir).at(dir)?;
    if meta.permissions().mode() & 0o7777 != PRIVATE_DIR {
        let set = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(PRIVATE_DIR));
        not_owner_is_fine(set).at(dir)?;
    }
    Ok(())
}

/// Make the open file `f` (at `path`) private: mode 0600, whatever the umask or its mode was,
/// unless another user owns it.
pub fn make_private(f: &File, path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    not_owner_is_fine(f.set_permissions(std::fs::Permissions::from_mode(PRIVATE))).at(path)
}

/// A change of mode refused because the file is another user's (`EPERM`) is no error.
fn not_owner_is_fine(r: std::io::Result<()>) -> std::io::Result<()> {
    match r {
        Err(e) if e.raw_os_error() == Some(nix::libc::EPERM) => Ok(()),
        r => r,
    }
}

/// The open folder of `path`, and its file name.
fn folder_and_name(path: &Path) -> Result<(Dir, &OsStr)> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::invalid(format!("{}: no parent directory", path.display())))?;
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{}: not a file name", path.display())))?;
    Ok((super::owned::folder(dir, false).at(dir)?, name))
}

/// [`atomic_write`] without the flushes to stable storage: readers still see the old or the
/// new content, never a mix, but a crash may lose the change. For state that means nothing
/// after a crash (what a running process is doing) and changes too often to pay for fsync.
pub fn atomic_write_unsynced(path: &Path, data: &[u8]) -> Result<()> {
    write_path(path, data, false, None)
}

/// [`atomic_write`] of the file `name` in the open folder `dir`: the temp file, the rename
/// and the flush all go through the folder's descriptor.
pub fn atomic_write_at(dir: &Dir, name: &OsStr, data: &[u8]) -> Result<()> {
    sweep(dir);
    if !write_anonymous(dir, name, data, true)? {
        write_named(dir, name, data, true)?;
    }
    dir.sync().at(dir.path())
}

/// Write `data` to an anonymous file in `dir`, then name it and rename it over `name`.
/// `Ok(false)` when anonymous files cannot be used here.
fn write_anonymous(dir: &Dir, name: &OsStr, data: &[u8], sync: bool) -> Result<bool> {
    write_anonymous_as(dir, name, data, sync, None)
}

/// [`write_anonymous`], the file of exactly `mode` when one is given (else 0666 less the
/// umask).
fn write_anonymous_as(
    dir: &Dir,
    name: &OsStr,
    data: &[u8],
    sync: bool,
    mode: Option<u32>,
) -> Result<bool> {
    let target = dir.path().join(name);
    let flags = OFlag::O_TMPFILE | OFlag::O_WRONLY | OFlag::O_CLOEXEC;
    let create = Mode::from_bits_truncate(mode.unwrap_or(0o666));
    let fd = match openat(dir.fd(), ".", flags, create) {
        Ok(fd) => fd,
        Err(Errno::EOPNOTSUPP | Errno::EISDIR | Errno::EINVAL | Errno::ENOENT) => {
            return Ok(false);
        }
        Err(e) => return Err(Error::create(target, e.into())),
    };
    let mut f = File::from(fd);
    if let Some(m) = mode {
        set_mode(&f, m).at(&target)?;
    }
    f.write_all(data).at(&target)?;
    if sync {
        f.sync_all().at(&target)?;
    }
    // Giving an anonymous file a name needs its /proc link, or CAP_DAC_READ_SEARCH for
    // AT_EMPTY_PATH; without either, write a named temp file instead.
    let proc_link = format!("/proc/self/fd/{}", f.as_raw_fd());
    let tmp = temp_name(name);
    let _hold = HoldSignals::new();
    let linked = linkat(
        AT_FDCWD,
        proc_link.as_str(),
        dir.fd(),
        tmp.as_os_str(),
        AtFlags::AT_SYMLINK_FOLLOW,
    )
    .or_else(|_| linkat(&f, "", dir.fd(), tmp.as_os_str(), AtFlags::AT_EMPTY_PATH));
    if linked.is_err() {
        return Ok(false);
    }
    rename_or_remove(dir, &tmp, name)?;
    Ok(true)
}

/// Write `data` to a named temp file in `dir` and rename it over `name`.
fn write_named(dir: &Dir, name: &OsStr, data: &[u8], sync: bool) -> Result<()> {
    write_named_mode(dir, name, data, sync, None)
}

/// [`write_named`], the file of exactly `mode` when one is given (else 0666 less the umask).
fn write_named_mode(
    dir: &Dir,
    name: &OsStr,
    data: &[u8],
    sync: bool,
    mode: Option<u32>,
) -> Result<()> {
    let tmp = temp_name(name);
    let tmp_path = dir.path().join(&tmp);
    let _hold = HoldSignals::new();
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut f = match openat(
        dir.fd(),
        tmp.as_os_str(),
        flags,
        Mode::from_bits_truncate(mode.unwrap_or(0o666)),
    ) {
        Ok(fd) => File::from(fd),
        Err(e) => return Err(Error::create(tmp_path, e.into())),
    };
    let written = mode
        .map_or(Ok(()), |m| set_mode(&f, m))
        .and_then(|()| f.write_all(data))
        .and_then(|()| if sync { f.sync_all() } else { Ok(()) })
        .at(&tmp_path);
    if let Err(e) = written {
        let _ = dir.unlink(&tmp);
        return Err(e);
    }
    rename_or_remove(dir, &tmp, name)
}

/// Give the open file `f` exactly `mode` (what the umask took away too).
fn set_mode(f: &File, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(mode))
}

fn rename_or_remove(dir: &Dir, tmp: &OsStr, name: &OsStr) -> Result<()> {
    dir.rename(tmp, name).map_err(|e| {
        let _ = dir.unlink(tmp);
        Error::io(dir.path().join(name), e)
    })
}

/// Flush a directory's entries (after a rename or a create) to stable storage.
pub fn fsync_dir(dir: &Path) -> Result<()> {
    super::owned::folder(dir, false)
        .and_then(|d| d.sync())
        .at(dir)
}

/// Longest part of the target's name kept in a temp name, so that the temp name stays within
/// the 255 bytes a file name may have (with a 16-digit host, a 10-digit pid and a 20-digit N).
const TEMP_STEM: usize = 200;

/// How old (by its modification time) another host's temp file must be to be swept: no write
/// keeps a temp file that long, so one that old was left by a writer killed outright. The
/// clocks of the hosts (or of the file server) may differ by less than this.
pub const ABANDONED_TEMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// `.NAME.tmp.HOST.PID.N`, unique within this process and host.
fn temp_name(name: &OsStr) -> OsString {
    let stem = &name.as_bytes()[..name.len().min(TEMP_STEM)];
    let mut v = Vec::with_capacity(stem.len() + 56);
    v.push(b'.');
    v.extend_from_slice(stem);
    v.extend_from_slice(
        format!(
            ".tmp.{}.{}.{}",
            crate::host::this().id,
            std::process::id(),
            unique()
        )
        .as_bytes(),
    );
    OsString::from_vec(v)
}

/// The writer of a temp file: its host id (`None`: a name without one, of this host) and pid.
#[derive(Debug, PartialEq, Eq)]
struct Writer {
    host: Option<String>,
    pid: i32,
}

/// The writer of a temp name `.NAME.tmp.HOST.PID.N` or `.NAME.tmp.PID.N` (NAME not empty,
/// HOST 16 hex digits, PID and N decimal); `None` for any other name.
fn temp_owner(name: &OsStr) -> Option<Writer> {
    let rest = name.as_bytes().strip_prefix(b".")?;
    let decimal = |s: &[u8]| !s.is_empty() && s.len() <= 20 && s.iter().all(u8::is_ascii_digit);
    let parse = |n: &[u8], pid: &[u8], stem: Option<&[u8]>| -> Option<i32> {
        let stem = stem?.strip_suffix(b".tmp")?;
        if stem.is_empty() || !decimal(n) || !decimal(pid) {
            return None;
        }
        let pid: i32 = std::str::from_utf8(pid).ok()?.parse().ok()?;
        (pid > 0).then_some(pid)
    };
    let mut parts = rest.rsplitn(4, |&b| b == b'.');
    let (n, pid, host) = (parts.next()?, parts.next()?, parts.next());
    let with_host = host
        .and_then(|h| std::str::from_utf8(h).ok())
        .filter(|h| crate::host::valid_id(h))
        .and_then(|h| Some((h.to_string(), parse(n, pid, parts.next())?)));
    if let Some((host, pid)) = with_host {
        return Some(Writer {
            host: Some(host),
            pid,
        });
    }
    let mut parts = rest.rsplitn(3, |&b| b == b'.');
    let (n, pid) = (parts.next()?, parts.next()?);
    Some(Writer {
        host: None,
        pid: parse(n, pid, parts.next())?,
    })
}

/// The folders this process has swept: device, inode and path.
static SWEPT: std::sync::Mutex<std::collections::BTreeSet<(u64, u64, std::path::PathBuf)>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Is this the first write of this process into `dir`?
fn first_in(dir: &Dir) -> bool {
    let Ok(st) = nix::sys::stat::fstat(dir.fd()) else {
        return true;
    };
    let key = (st.st_dev, st.st_ino, dir.path().to_path_buf());
    SWEPT.lock().unwrap_or_else(|e| e.into_inner()).insert(key)
}

/// Remove the temp files in `dir` left by writers that no longer run: of this host, when its
/// pid is no running process; of another host, when older than [`ABANDONED_TEMP`]. Done at
/// the first write of this process into `dir` only, and only in a folder aw owns
/// ([`super::owned`]): elsewhere (the user's work tree) a file named like a temp file may be
/// the user's. Best effort: a failure here never stops the write.
fn sweep(dir: &Dir) {
    use nix::sys::signal::kill;
    if !super::owned::is_owned(dir.path()) || !first_in(dir) {
        return;
    }
    let Ok(entries) = dir.entries() else { return };
    let me = std::process::id() as i32;
    let dead = |pid: i32| kill(nix::unistd::Pid::from_raw(pid), None) == Err(Errno::ESRCH);
    for (name, kind) in entries {
        if kind != super::beneath::Kind::File {
            continue;
        }
        let Some(w) = temp_owner(&name) else { continue };
        let gone = if crate::host::is_this(w.host.as_deref()) {
            w.pid != me && dead(w.pid)
        } else {
            abandoned(dir, &name)
        };
        if gone {
            let _ = dir.unlink(&name);
        }
    }
}

/// Was `name` in `dir` last modified [`ABANDONED_TEMP`] ago or longer?
fn abandoned(dir: &Dir, name: &OsStr) -> bool {
    let Ok(m) = nix::sys::stat::fstatat(dir.fd(), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
    else {
        return false;
    };
    let modified = std::time::UNIX_EPOCH
        + std::time::Duration::new(m.st_mtime.max(0) as u64, m.st_mtime_nsec.max(0) as u32);
    std::time::SystemTime::now()
        .duration_since(modified)
        .is_ok_and(|age| age >= ABANDONED_TEMP)
}

/// Holds SIGHUP, SIGINT, SIGQUIT and SIGTERM for the calling thread while alive; a signal
/// that arrives meanwhile is delivered when it is dropped.
struct HoldSignals(Option<SigSet>);

impl HoldSignals {
    fn new() -> HoldSignals {
        let mut set = SigSet::empty();
        for s in [
            Signal::SIGHUP,
            Signal::SIGINT,
            Signal::SIGQUIT,
            Signal::SIGTERM,
        ] {
            set.add(s);
        }
        let mut old = SigSet::empty();
        HoldSignals(
            pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old))
                .ok()
                .map(|()| old),
        )
    }
}

impl Drop for HoldSignals {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(old), None);
        }
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    (N.fetch_add(1, Ordering::Relaxed) << 32) ^ nanos
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn replaces_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.json");
        atomic_write(&p, b"one").unwrap();
        atomic_write(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn the_named_fallback_replaces_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let dir = Dir::open(d.path()).unwrap();
        write_named(&dir, OsStr::new("x"), b"one", true).unwrap();
        write_named(&dir, OsStr::new("x"), b"two", false).unwrap();
        assert_eq!(fs::read(d.path().join("x")).unwrap(), b"two");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_new_file_is_made_under_its_name_and_one_there_replaced() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let dir = Dir::open(d.path()).unwrap();
        create_or_replace_in(&dir, OsStr::new("x.json"), b"one").unwrap();
        let first = fs::metadata(d.path().join("x.json")).unwrap();
        assert_eq!(fs::read(d.path().join("x.json")).unwrap(), b"one");
        assert_eq!(first.nlink(), 1);
        create_or_replace_in(&dir, OsStr::new("x.json"), b"two").unwrap();
        let second = fs::metadata(d.path().join("x.json")).unwrap();
        assert_eq!(fs::read(d.path().join("x.json")).unwrap(), b"two");
        assert_ne!(first.ino(), second.ino(), "replaced, not written in place");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn private_files_and_folders_are_private_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        let dir = d.path().join("a/b");
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let p = dir.join("t.json");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        atomic_write_private(&p, b"new").unwrap();
        assert_eq!(mode(&p), 0o600);
        assert_eq!(fs::read(&p).unwrap(), b"new");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        atomic_write_private_unsynced(&p, b"newer").unwrap();
        assert_eq!(mode(&p), 0o600);
        assert_eq!(fs::read(&p).unwrap(), b"newer");
        let fresh = dir.join("u.json");
        atomic_write_private_unsynced(&fresh, b"{}").unwrap();
        assert_eq!(mode(&fresh), 0o600);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 2, "no temp file left");
        let dir = Dir::open(d.path()).unwrap();
        write_named_mode(&dir, OsStr::new("n"), b"x", false, Some(0o600)).unwrap();
        assert_eq!(mode(&d.path().join("n")), 0o600);
    }

    #[test]
    fn temp_names_are_recognised_exactly() {
        let name = temp_name(OsStr::new("notes.md"));
        assert_eq!(
            temp_owner(&name),
            Some(Writer {
                host: Some(crate::host::this().id.clone()),
                pid: std::process::id() as i32
            })
        );
        let h = "0123456789abcdef";
        let on = |pid| {
            Some(Writer {
                host: Some(h.to_string()),
                pid,
            })
        };
        assert_eq!(temp_owner(OsStr::new(&format!(".a.tmp.{h}.12.3"))), on(12));
        assert_eq!(
            temp_owner(OsStr::new(&format!(".a.b.tmp.{h}.12.3"))),
            on(12)
        );
        assert_eq!(temp_owner(OsStr::new(&format!(".tmp.{h}.12.3"))), None);
        assert_eq!(temp_owner(OsStr::new(&format!(".a.tmp.{h}.0.3"))), None);
        assert_eq!(temp_owner(OsStr::new(&format!(".a.tmp.{h}.12.3.x"))), None);
        assert_eq!(temp_owner(OsStr::new(".a.tmp.0123456789ABCDEF.12.3")), None);
        assert_eq!(temp_owner(OsStr::new(&format!(".a.tmpx.{h}.12.3"))), None);
        let long = "x".repeat(255);
        assert!(temp_name(OsStr::new(&long)).len() <= 255);
        for (n, want) in [
            (".a.tmp.12.3", Some(12)),
            (".a.b.tmp.c.tmp.12.3", Some(12)),
            (".a.tmp.12.", None),
            (".a.tmp..3", None),
            ("..tmp.12.3", None),
            ("a.tmp.12.3", None),
            (".a.tmp.0.3", None),
            (".a.tmp.-1.3", None),
            (".a.tmp.99999999999.3", None),
            (".a.tmp.12.3.bak", None),
            (".a.tmp.1x.3", None),
            (".a.tmpx.12.3", None),
        ] {
            let want = want.map(|pid| Writer { host: None, pid });
            assert_eq!(temp_owner(OsStr::new(n)), want, "{n}");
        }
    }

    #[test]
    fn stale_temp_files_are_swept_and_live_ones_kept() {
        let d = tempfile::tempdir().unwrap();
        super::super::owned::own(d.path());
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = dead.id();
        dead.wait().unwrap();
        let mine = format!(".x.json.tmp.{}.1", std::process::id());
        let stale = format!(".x.json.tmp.{dead_pid}.1");
        let other = format!(".x.json.tmp.{dead_pid}.1.keep");
        for n in [&mine, &stale, &other] {
            fs::write(d.path().join(n), "left").unwrap();
        }
        atomic_write(&d.path().join("y.json"), b"{}").unwrap();
        let mut left: Vec<String> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, [mine, other, "y.json".to_string()]);
    }

    #[test]
    fn an_unswept_write_leaves_stale_temps_to_sweep_folder() {
        let d = tempfile::tempdir().unwrap();
        super::super::owned::own(d.path());
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = dead.id();
        dead.wait().unwrap();
        let stale = format!(".x.json.tmp.{dead_pid}.1");
        fs::write(d.path().join(&stale), "left").unwrap();
        let names = || {
            let mut v: Vec<String> = fs::read_dir(d.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            v.sort();
            v
        };
        atomic_write_unswept(&d.path().join("y.json"), b"{}").unwrap();
        assert_eq!(names(), [stale.clone(), "y.json".to_string()]);
        // Even after this process wrote into the folder: sweep_folder sweeps again.
        atomic_write(&d.path().join("z.json"), b"{}").unwrap();
        fs::write(d.path().join(&stale), "left").unwrap();
        sweep_folder(d.path()).unwrap();
        assert_eq!(names(), ["y.json", "z.json"]);
    }

    #[test]
    fn a_folder_aw_does_not_own_is_never_swept() {
        let d = tempfile::tempdir().unwrap();
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = dead.id();
        dead.wait().unwrap();
        let users = format!(".notes.txt.tmp.{dead_pid}.1");
        fs::write(d.path().join(&users), "mine").unwrap();
        let dir = Dir::open(d.path()).unwrap();
        atomic_write_at(&dir, OsStr::new("notes.txt"), b"new").unwrap();
        assert_eq!(fs::read(d.path().join(&users)).unwrap(), b"mine");
    }
}
