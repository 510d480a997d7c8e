//! Network file systems: telling them apart, and reading a file that another host replaced.
//!
//! A client of a network file system caches what a name points to. When another host
//! replaces a file by rename (as [`super::atomic_write`] does), this host's cached lookup
//! still names the old file, which the server has removed: opening or reading it fails
//! with `ESTALE` ("Stale file handle"), and immediate retries fail the same way (measured on
//! GlusterFS: 19 of 20 reads right after the other host's rename). Listing the directory
//! makes the client look every name up again; a read after the listing found the new file
//! every time. So on a network file system a state read lists the directory first and
//! retries a stale handle after a new listing ([`super::owned::read_fresh`]). Under the lock a writer
//! took, that read sees what the last writer committed: the rename happened before that
//! writer released the lock, and the listing asks the server.
//!
//! A file another host appends to (the channel and its index) has the opposite problem:
//! the client keeps its length and content for the attribute cache's timeout (measured on
//! GlusterFS with md-cache off: a buffered read saw another host's append after 0.6–0.8 s,
//! an `O_DIRECT` read after 1–5 ms). [`Fresh`] reads such a file with `O_DIRECT`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// How many times a read that met a stale file handle is tried again, each after a new
/// listing of the directory.
pub const STALE_RETRIES: usize = 8;

/// Is `dir` on a file system where other machines' writes may happen unseen by inotify and
/// names may be cached by the client? Told by the statfs magic number: NFS, SMB/CIFS, Ceph,
/// FUSE (GlusterFS, sshfs, ...), 9P, Lustre, GPFS, AFS, Coda, OCFS2, GFS2, OrangeFS.
///
/// Told once per process for an absolute path (every open of a state file, the channel or
/// its index asks again otherwise: about a hundred `statfs` calls in a short workflow);
/// [`KNOWN_DIRS`] answers at most are kept. A file system mounted on that very path after
/// the first answer is not seen by the process that asked.
pub fn is_network_fs(dir: &Path) -> bool {
    if let Some(known) = known(dir) {
        return known;
    }
    match nix::sys::statfs::statfs(dir) {
        Ok(st) => remember(dir, is_network_magic(magic(&st))),
        Err(_) => false,
    }
}

/// How many directories' answers [`is_network_fs`] keeps per process; past that, it asks the
/// kernel each time.
pub const KNOWN_DIRS: usize = 256;

/// The answers given so far, by absolute path.
static KNOWN: std::sync::Mutex<Option<HashMap<PathBuf, bool>>> = std::sync::Mutex::new(None);

fn known(dir: &Path) -> Option<bool> {
    let known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    known.as_ref()?.get(dir).copied()
}

fn remember(dir: &Path, network: bool) -> bool {
    if dir.is_absolute() {
        let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
        let map = known.get_or_insert_with(HashMap::new);
        if map.len() < KNOWN_DIRS {
            map.insert(dir.to_path_buf(), network);
        }
    }
    network
}

#[allow(clippy::unnecessary_cast)] // the magic's type differs between targets
fn magic(st: &nix::sys::statfs::Statfs) -> i64 {
    st.filesystem_type().0 as i64
}

/// [`is_network_fs`] of an open file or directory, asked of the kernel each time.
pub fn is_network_fd(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    match nix::sys::statfs::fstatfs(fd) {
        Ok(st) => is_network_magic(magic(&st)),
        Err(_) => false,
    }
}

fn is_network_magic(magic: i64) -> bool {
    const NETWORK: [i64; 15] = [
        0x6969,      // NFS
        0x517b,      // SMB
        0xfe53_4d42, // SMB2
        0xff53_4d42, // CIFS
        0x00c3_6400, // Ceph
        0x6573_5546, // FUSE
        0x0102_1997, // 9P
        0x0bd0_0bd0, // Lustre
        0x4750_4653, // GPFS
        0x5346_414f, // OpenAFS
        0x6b41_4653, // kAFS
        0x7375_7245, // Coda
        0x7461_636f, // OCFS2
        0x0116_1970, // GFS2
        0x2003_0528, // OrangeFS
    ];
    NETWORK.contains(&magic)
}

/// Make the client look the names of `dir` up again (a listing; errors are for the read
/// that follows to report).
pub fn refresh(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for _ in rd {}
    }
}

/// Is `e` a stale file handle (`ESTALE`)?
pub fn is_stale(e: &io::Error) -> bool {
    e.raw_os_error() == Some(nix::libc::ESTALE)
}

/// Run `f` (an open and read of the file at `path`) so that it sees the file the server has:
/// on a network file system (`network`), after a listing of its folder; and again after a
/// new listing while it meets a stale file handle, or finds no file by a name that a `stat`
/// finds, [`STALE_RETRIES`] times at most. On a local disk, `f` once.
///
/// The second: GlusterFS's md-cache may answer a listing with a file another host has
/// replaced since, for seconds, and the open of that name then fails with "not found"
/// (`performance.stat-prefetch`, README "Several hosts and containers"). A name that still
/// cannot be opened is a stale file handle, never "no such file": a read-modify-write of
/// the registry or the cursors must not start from nothing.
pub fn fresh<T>(path: &Path, network: bool, mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    if !network {
        return f();
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    refresh(dir);
    let mut tries = 0;
    loop {
        match f() {
            Err(e) if is_stale(&e) || named_but_not_found(&e, path) => {
                if tries == STALE_RETRIES {
                    return Err(io::Error::from_raw_os_error(nix::libc::ESTALE));
                }
                tries += 1;
                refresh(dir);
            }
            r => return r,
        }
    }
}

/// Is `e` a "not found" of the file at `path` while a `stat` of that name finds one?
fn named_but_not_found(e: &io::Error, path: &Path) -> bool {
    e.kind() == io::ErrorKind::NotFound && std::fs::symlink_metadata(path).is_ok()
}

/// Run `f` (an open in `dir`), and again after a new listing of `dir` while it meets a stale
/// file handle, [`STALE_RETRIES`] times at most: for a name another host may have just made.
pub fn unstale<T>(dir: &Path, mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut tries = 0;
    loop {
        match f() {
            Err(e) if is_stale(&e) && tries < STALE_RETRIES => {
                tries += 1;
                refresh(dir);
            }
            r => return r,
        }
    }
}

/// Run `f`, an open of the file at `path` beneath the folder `base` that creates it when
/// missing (`O_CREAT` without `O_EXCL`) on a network file system, and again after new
/// listings of `base`'s parent and of every folder from `base` to the file's while it fails
/// as such a create does when another host makes the same file or folders at the same
/// moment, [`STALE_RETRIES`] times at most: "file exists" (GlusterFS answers the create of
/// a file that another client made since this one looked it up so, which such an open must
/// never give), "not found" (a folder both hosts made at once, which this client does not
/// see as the server has it yet) and a stale file handle.
pub fn created<T>(base: &Path, path: &Path, mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut tries = 0;
    loop {
        match f() {
            Err(e)
                if tries < STALE_RETRIES
                    && (is_stale(&e)
                        || matches!(
                            e.raw_os_error(),
                            Some(nix::libc::EEXIST | nix::libc::ENOENT)
                        )) =>
            {
                tries += 1;
                if let Some(up) = base.parent() {
                    refresh(up);
                }
                let folders: Vec<&Path> = path
                    .ancestors()
                    .skip(1)
                    .take_while(|d| d.starts_with(base))
                    .collect();
                for d in folders.into_iter().rev() {
                    refresh(d);
                }
            }
            r => return r,
        }
    }
}

/// Alignment and size unit of an `O_DIRECT` read (a multiple of any logical block size).
pub const BLOCK: usize = 4096;
/// How much one `O_DIRECT` read asks for.
const DIRECT_CHUNK: usize = 16 * BLOCK;

/// A zeroed buffer of `len` bytes whose start is aligned to [`BLOCK`]: the buffer and the
/// offset of the aligned window in it.
fn aligned(len: usize) -> (Vec<u8>, usize) {
    let buf = vec![0u8; len + BLOCK];
    let skew = buf.as_ptr() as usize % BLOCK;
    let start = (BLOCK - skew) % BLOCK;
    (buf, start)
}

/// Read `f` (opened with `O_DIRECT`) from `off` (a multiple of [`BLOCK`]) until `until` or
/// its end, whichever comes first; what was read, and whether the end came first.
fn read_direct(f: &File, mut off: u64, until: Option<u64>) -> io::Result<(Vec<u8>, bool)> {
    let (mut buf, start) = aligned(DIRECT_CHUNK);
    let mut out = Vec::new();
    loop {
        if until.is_some_and(|u| off >= u) {
            return Ok((out, false));
        }
        let window = &mut buf[start..start + DIRECT_CHUNK];
        match f.read_at(window, off) {
            Ok(n) => {
                out.extend_from_slice(&window[..n]);
                if n < DIRECT_CHUNK {
                    return Ok((out, true));
                }
                off += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The length of `f` (opened with `O_DIRECT`) as the server has it, read from the block of
/// `known` on (a length seen before; the file is append-only). Where the file is shorter
/// than `known`, read from its start.
pub fn direct_len(f: &File, known: u64) -> io::Result<u64> {
    let from = known - known % BLOCK as u64;
    let (got, _) = read_direct(f, from, None)?;
    if got.is_empty() && from > 0 {
        return direct_len(f, 0);
    }
    Ok(from + got.len() as u64)
}

/// Open the file `f` is open on, again, for reading with `O_DIRECT` (through its
/// `/proc/self/fd` link: the same file, whatever its name leads to now); `None` where the
/// file system refuses it.
pub fn reopen_direct(f: &File) -> io::Result<Option<File>> {
    use nix::fcntl::OFlag;
    use std::os::fd::AsRawFd;
    let link = format!("/proc/self/fd/{}", f.as_raw_fd());
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECT | OFlag::O_CLOEXEC;
    match nix::fcntl::open(link.as_str(), flags, nix::sys::stat::Mode::empty()) {
        Ok(fd) => Ok(Some(File::from(fd))),
        Err(nix::errno::Errno::EINVAL) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// An append-only file read as the server has it. On a local disk, reads of the file
/// itself. On a network file system, reads through a second descriptor opened with
/// `O_DIRECT`, which the client serves from the server: the kernel's cached length and
/// pages may lag another host's append by the attribute cache's timeout (a second on
/// GlusterFS with `md-cache` off), and a buffered read stops at that length or, rarely,
/// comes up short of it.
pub struct Fresh {
    file: File,
    direct: Option<File>,
}

impl Fresh {
    /// `file` was opened from `path` (just before; the `O_DIRECT` descriptor opens the same
    /// file again). Where `O_DIRECT` is refused or fails, reads go through `file`.
    pub fn new(file: File, path: &Path) -> Fresh {
        let dir = path.parent().unwrap_or(Path::new("."));
        let direct = if is_network_fs(dir) {
            reopen_direct(&file).ok().flatten()
        } else {
            None
        };
        Fresh { file, direct }
    }

    /// [`Fresh::new`] reading through `O_DIRECT` on any file system that allows it.
    #[cfg(test)]
    fn direct(file: File) -> Fresh {
        let direct = reopen_direct(&file).ok().flatten();
        Fresh { file, direct }
    }

    /// The file itself (for writes, and for what the kernel caches).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Its length, as the server has it.
    pub fn size(&self) -> io::Result<u64> {
        let stat = self.file.metadata()?.len();
        match &self.direct {
            Some(d) => direct_len(d, stat),
            None => Ok(stat),
        }
    }

    /// Fill `buf` from `off`; an [`io::ErrorKind::UnexpectedEof`] when the file ends first.
    pub fn read_exact_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let Some(d) = &self.direct else {
            return self.file.read_exact_at(buf, off);
        };
        let got = self.read_direct_range(d, off, off + buf.len() as u64)?;
        if got.len() < buf.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&got);
        Ok(())
    }

    /// Bytes `from..to`, or fewer when the file ends first.
    pub fn read_range(&self, from: u64, to: u64) -> io::Result<Vec<u8>> {
        let n = to.saturating_sub(from);
        match &self.direct {
            Some(d) => self.read_direct_range(d, from, to),
            None => {
                let mut buf = Vec::with_capacity(n as usize);
                let mut f = &self.file;
                f.seek(SeekFrom::Start(from))?;
                f.take(n).read_to_end(&mut buf)?;
                Ok(buf)
            }
        }
    }

    fn read_direct_range(&self, d: &File, from: u64, to: u64) -> io::Result<Vec<u8>> {
        if to <= from {
            return Ok(Vec::new());
        }
        let skip = from % BLOCK as u64;
        let (mut got, _) = read_direct(d, from - skip, Some(to))?;
        got.truncate((to - from + skip).min(got.len() as u64) as usize);
        got.drain(..(skip as usize).min(got.len()));
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_magics_are_told_from_local_ones() {
        assert!(is_network_magic(0x6573_5546), "FUSE");
        assert!(is_network_magic(0x6969), "NFS");
        assert!(is_network_magic(0x00c3_6400), "Ceph");
        assert!(!is_network_magic(0xef53), "ext4");
        assert!(!is_network_magic(0x0102_1994), "tmpfs");
        let d = tempfile::tempdir().unwrap();
        assert_eq!(
            is_network_fs(d.path()),
            is_network_fd(std::os::fd::AsFd::as_fd(
                &std::fs::File::open(d.path()).unwrap()
            ))
        );
    }

    #[test]
    fn direct_reads_give_what_buffered_reads_give() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("log");
        let data: Vec<u8> = (0..3 * DIRECT_CHUNK + 1234)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let plain = Fresh::new(File::open(&path).unwrap(), &path);
        let direct = Fresh::direct(File::open(&path).unwrap());
        if direct.direct.is_none() {
            return; // a file system without O_DIRECT (tmpfs): nothing to compare
        }
        let n = data.len() as u64;
        assert_eq!(plain.size().unwrap(), n);
        assert_eq!(direct.size().unwrap(), n);
        assert_eq!(
            direct_len(direct.direct.as_ref().unwrap(), n + 10 * BLOCK as u64).unwrap(),
            n
        );
        for (from, to) in [
            (0, n),
            (1, 2),
            (4095, 4097),
            (5000, n + 99),
            (n - 3, n),
            (n, n + 1),
            (70_000, 200_000),
        ] {
            assert_eq!(
                direct.read_range(from, to).unwrap(),
                plain.read_range(from, to).unwrap(),
                "{from}..{to}"
            );
        }
        let mut a = [0u8; 48];
        let mut b = [0u8; 48];
        direct.read_exact_at(&mut a, n - 48).unwrap();
        plain.read_exact_at(&mut b, n - 48).unwrap();
        assert_eq!(a, b);
        let short = direct.read_exact_at(&mut a, n - 47).unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_stale_handle_is_retried_a_bounded_number_of_times() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("f");
        let mut calls = 0;
        let stale = || io::Error::from_raw_os_error(nix::libc::ESTALE);
        let r: io::Result<()> = fresh(&path, true, || {
            calls += 1;
            Err(stale())
        });
        assert!(is_stale(&r.unwrap_err()));
        assert_eq!(calls, STALE_RETRIES + 1);
        let mut calls = 0;
        let r = fresh(&path, true, || {
            calls += 1;
            if calls < 3 { Err(stale()) } else { Ok(calls) }
        });
        assert_eq!(r.unwrap(), 3);
        // A local disk: once, whatever happens.
        let mut calls = 0;
        let r: io::Result<()> = fresh(&path, false, || {
            calls += 1;
            Err(stale())
        });
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_name_that_a_stat_finds_and_an_open_does_not_is_stale_never_missing() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("agents.json");
        let missing = || io::Error::from(io::ErrorKind::NotFound);
        // No such name: "not found" at the first open, nothing tried again.
        let mut calls = 0;
        let r: io::Result<()> = fresh(&path, true, || {
            calls += 1;
            Err(missing())
        });
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(calls, 1);
        // The name is there: an open that says otherwise is tried again...
        std::fs::write(&path, b"{}").unwrap();
        let mut calls = 0;
        let r = fresh(&path, true, || {
            calls += 1;
            if calls < 2 {
                Err(missing())
            } else {
                std::fs::read(&path)
            }
        });
        assert_eq!(r.unwrap(), b"{}");
        assert_eq!(calls, 2);
        // ...within the bound, and then it is a stale handle, not a missing file.
        let mut calls = 0;
        let r: io::Result<()> = fresh(&path, true, || {
            calls += 1;
            Err(missing())
        });
        assert!(is_stale(&r.unwrap_err()));
        assert_eq!(calls, STALE_RETRIES + 1);
        // A local disk: once.
        let mut calls = 0;
        let r: io::Result<()> = fresh(&path, false, || {
            calls += 1;
            Err(missing())
        });
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_create_that_raced_another_hosts_is_tried_again_within_the_bound() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("_state/channel.lock");
        let os = io::Error::from_raw_os_error;
        // "File exists", then "not found", then the open: three tries.
        let mut calls = 0;
        let r = created(d.path(), &path, || {
            calls += 1;
            match calls {
                1 => Err(os(nix::libc::EEXIST)),
                2 => Err(os(nix::libc::ENOENT)),
                _ => Ok(calls),
            }
        });
        assert_eq!(r.unwrap(), 3);
        // A folder that stays missing: "not found" once the bound is reached.
        let mut calls = 0;
        let r: io::Result<()> = created(d.path(), &path, || {
            calls += 1;
            Err(os(nix::libc::ENOENT))
        });
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(calls, STALE_RETRIES + 1);
        // Any other error at once.
        let mut calls = 0;
        let r: io::Result<()> = created(d.path(), &path, || {
            calls += 1;
            Err(os(nix::libc::EACCES))
        });
        assert_eq!(r.unwrap_err().raw_os_error(), Some(nix::libc::EACCES));
        assert_eq!(calls, 1);
    }
}
