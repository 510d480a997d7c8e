//! Which version of a file a path names, told without reading it: [`FileId`], and a read
//! that says which version it read ([`read_versioned`]).
//!
//! aw replaces its state files by rename, so every version is a new inode; a file edited in
//! place keeps its inode but not its size or its times (the change time cannot be put
//! back). Two versions with the same identity are possible only within one tick of the
//! file system's clock, an edit in place that keeps the size, or an inode reused within
//! that tick.

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// What tells one version of a file from another: device, inode, size, modification and
/// change times (seconds and nanoseconds). Stored as a JSON array of those 7 integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileId([i64; 7]);

impl FileId {
    pub fn of(m: &Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId([
            m.dev() as i64,
            m.ino() as i64,
            m.size() as i64,
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        ])
    }
}

/// A file read whole, with the version read.
#[derive(Debug)]
pub struct Versioned {
    /// The file, still open: while it is, its inode cannot be given to another file.
    pub file: File,
    pub bytes: Vec<u8>,
    /// The identity of the file read; `None` when it changed while it was read.
    pub id: Option<FileId>,
}

/// Read the file at `path` whole (opened as [`super::owned::open`] does), its identity taken
/// from the open descriptor before and after the read.
pub fn read_versioned(path: &Path) -> io::Result<Versioned> {
    let file = super::owned::open_read(path)?;
    let before = FileId::of(&file.metadata()?);
    let mut bytes = Vec::new();
    (&file).read_to_end(&mut bytes)?;
    let after = FileId::of(&file.metadata()?);
    Ok(Versioned {
        file,
        bytes,
        id: (before == after).then_some(before),
    })
}
