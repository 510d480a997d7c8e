//! Network file systems: telling them apart, and reading a file that another host replaced.
//!
//! A client of a network file system caches what a name points to. When another host
//! replaces a file by rename (as [`super::atomic_write`] does), this host's cached lookup
//! still names the old file, which the server has removed: opening or reading it fails
//! with `ESTALE` ("Stale file handle"), and immediate retries fail the same way (measured on
//! GlusterFS: 19 of 20 reads right after the other host's rename). Listing the directory
//! makes the client look every name up again; a read after the listing found the new file
//! every time. So on a network file system a state read lists the directory first and
//! retries a stale handle after a new listing ([`read_fresh`]). Under the lock a writer
//! took, that read sees what the last writer committed: the rename happened before that
//! writer released the lock, and the listing asks the server.

use std::io;
use std::path::Path;

/// How many times a read that met a stale file handle is tried again, each after a new
/// listing of the directory.
pub const STALE_RETRIES: usize = 8;

/// Is `dir` on a file system where other machines' writes may happen unseen by inotify and
/// names may be cached by the client? Told by the statfs magic number: NFS, SMB/CIFS, Ceph,
/// FUSE (GlusterFS, sshfs, ...), 9P, Lustre, GPFS, AFS, Coda, OCFS2, GFS2, OrangeFS.
#[allow(clippy::unnecessary_cast)] // the magic's type differs between targets
pub fn is_network_fs(dir: &Path) -> bool {
    match nix::sys::statfs::statfs(dir) {
        Ok(st) => is_network_magic(st.filesystem_type().0 as i64),
        Err(_) => false,
    }
}

/// [`is_network_fs`] of an open file or directory.
#[allow(clippy::unnecessary_cast)] // the magic's type differs between targets
pub fn is_network_fd(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    match nix::sys::statfs::fstatfs(fd) {
        Ok(st) => is_network_magic(st.filesystem_type().0 as i64),
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

/// Run `f` (an open and read of a file in `dir`) so that it sees the file the server has:
/// on a network file system (`network`), after a listing of `dir`, and again after a new
/// listing while it meets a stale file handle, [`STALE_RETRIES`] times at most. On a local
/// disk, `f` once.
pub fn fresh<T>(dir: &Path, network: bool, mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    if !network {
        return f();
    }
    let mut tries = 0;
    loop {
        refresh(dir);
        match f() {
            Err(e) if is_stale(&e) && tries < STALE_RETRIES => tries += 1,
            r => return r,
        }
    }
}

/// Read the file at `path` as the server has it ([`fresh`]).
pub fn read_fresh(path: &Path) -> io::Result<Vec<u8>> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fresh(dir, is_network_fs(dir), || std::fs::read(path))
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
    fn a_stale_handle_is_retried_a_bounded_number_of_times() {
        let d = tempfile::tempdir().unwrap();
        let mut calls = 0;
        let stale = || io::Error::from_raw_os_error(nix::libc::ESTALE);
        let r: io::Result<()> = fresh(d.path(), true, || {
            calls += 1;
            Err(stale())
        });
        assert!(is_stale(&r.unwrap_err()));
        assert_eq!(calls, STALE_RETRIES + 1);
        let mut calls = 0;
        let r = fresh(d.path(), true, || {
            calls += 1;
            if calls < 3 { Err(stale()) } else { Ok(calls) }
        });
        assert_eq!(r.unwrap(), 3);
        // A local disk: once, whatever happens.
        let mut calls = 0;
        let r: io::Result<()> = fresh(d.path(), false, || {
            calls += 1;
            Err(stale())
        });
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }
}
