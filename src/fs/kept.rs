//! Files one process reads again and again, parsed again only when they changed.
//!
//! A server reads some state files at every turn of every agent: the ack cursors before
//! each prompt and after each run. Parsing such a file costs what it holds (one entry per
//! agent), so a chain of a thousand agents would pay, at every hop, for every agent that
//! ran before. A [`Kept`] remembers the value parsed last per file, with the file open and
//! what identifies that version of it; a read that finds the path still naming the same
//! inode, with the same size, modification and change times, costs a `stat`. The file is
//! kept open so that its inode cannot be reused by another file while it is remembered.
//! aw replaces state files by rename, a new inode each time, so a change is always seen.
//!
//! On a network file system, whose clients see another's changes late through `stat`, the
//! file is read afresh every time.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;

use super::identity::{FileId, read_versioned};
use crate::error::{Error, Result};

/// A value remembered: the file's path, the open file, what identified it, the value.
type Remembered<T> = (PathBuf, File, FileId, Arc<T>);

/// The values of up to `N` files (a process serves a few instances), parsed last.
pub struct Kept<T, const N: usize> {
    last: Mutex<Vec<Remembered<T>>>,
}

impl<T: DeserializeOwned + Default, const N: usize> Kept<T, N> {
    pub const fn new() -> Kept<T, N> {
        Kept {
            last: Mutex::new(Vec::new()),
        }
    }

    /// The JSON value of the file at `path` (the default when there is no file): the one
    /// parsed last while the file is unchanged.
    pub fn load(&self, path: &Path) -> Result<Arc<T>> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let fresh = || match super::owned::read_fresh(path) {
            Ok(bytes) => parse(path, &bytes).map(Arc::new),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Arc::new(T::default())),
            Err(e) => Err(Error::io(path, e)),
        };
        if super::netfs::is_network_fs(dir) {
            return fresh();
        }
        let Ok(meta) = std::fs::metadata(path) else {
            return fresh();
        };
        let id = FileId::of(&meta);
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((.., v)) = last.iter().find(|(p, _, i, _)| p == path && *i == id) {
            return Ok(v.clone());
        }
        // Opened first, then read through that descriptor: what is remembered is what the
        // open file held, and its identity is taken from that descriptor.
        let read = match read_versioned(path) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Arc::new(T::default()));
            }
            Err(e) => return Err(Error::io(path, e)),
        };
        let value: Arc<T> = Arc::new(parse(path, &read.bytes)?);
        // Written to while it was read (never done by aw, but by hand it could be): not kept.
        if let Some(id) = read.id {
            keep(&mut last, path, read.file, id, value.clone(), N);
        }
        Ok(value)
    }

    /// The value remembered for the file at `path`, when the path still names that version
    /// of it (a `stat`); at no cost when nothing is remembered.
    pub fn remembered(&self, path: &Path) -> Option<Arc<T>> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_empty() {
            return None;
        }
        let now = std::fs::metadata(path).ok().map(|m| FileId::of(&m));
        let at = last.iter().position(|(p, ..)| p == path)?;
        if Some(last[at].2) == now {
            return Some(last[at].3.clone());
        }
        // Replaced: let the old file go.
        last.remove(at);
        None
    }

    /// Remember `value` as what the file at `path` holds, by the process that has just
    /// written it there and still holds the lock that keeps others from writing it: the
    /// next [`Kept::load`] of that version costs a `stat`, not a parse.
    pub fn remember(&self, path: &Path, value: Arc<T>) {
        let dir = path.parent().unwrap_or(Path::new("."));
        if super::netfs::is_network_fs(dir) {
            return;
        }
        let Ok(file) = super::owned::open_read(path) else {
            return;
        };
        let Ok(meta) = file.metadata() else {
            return;
        };
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        keep(&mut last, path, file, FileId::of(&meta), value, N);
    }
}

impl<T: DeserializeOwned + Default, const N: usize> Default for Kept<T, N> {
    fn default() -> Self {
        Kept::new()
    }
}

/// The value of state JSON `bytes` read from `path` (corrupt when they are not its JSON).
pub fn parse<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::Corrupt {
        path: path.to_path_buf(),
        why: format!("not valid state JSON: {e}"),
    })
}

/// Put `(path, file, id, value)` in `last` in place of what it held for `path`, dropping
/// the oldest beyond `n`.
fn keep<T>(
    last: &mut Vec<Remembered<T>>,
    path: &Path,
    file: File,
    id: FileId,
    value: Arc<T>,
    n: usize,
) {
    last.retain(|(p, ..)| p != path);
    if last.len() >= n {
        last.remove(0);
    }
    last.push((path.to_path_buf(), file, id, value));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    type Map = BTreeMap<String, u64>;

    #[test]
    fn a_change_by_rename_is_seen_and_an_unchanged_file_is_not_parsed_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        let kept: Kept<Map, 2> = Kept::new();
        assert!(kept.load(&path).unwrap().is_empty());
        crate::fs::atomic_write(&path, br#"{"a": 1}"#).unwrap();
        let first = kept.load(&path).unwrap();
        assert_eq!(first.get("a"), Some(&1));
        // The same version: the very value parsed before.
        assert!(Arc::ptr_eq(&first, &kept.load(&path).unwrap()));
        crate::fs::atomic_write(&path, br#"{"a": 2}"#).unwrap();
        assert_eq!(kept.load(&path).unwrap().get("a"), Some(&2));
        // What the writer remembers is what the next load gives, unparsed.
        crate::fs::atomic_write(&path, br#"{"a": 3}"#).unwrap();
        let mine = Arc::new(Map::from([("a".to_string(), 3)]));
        kept.remember(&path, mine.clone());
        assert!(Arc::ptr_eq(&mine, &kept.load(&path).unwrap()));
        std::fs::remove_file(&path).unwrap();
        assert!(kept.load(&path).unwrap().is_empty());
        std::fs::write(&path, b"{").unwrap();
        assert!(kept.load(&path).is_err());
    }

    #[test]
    fn it_keeps_at_most_n_files() {
        let dir = tempfile::tempdir().unwrap();
        let kept: Kept<Map, 2> = Kept::new();
        for i in 0..5 {
            let path = dir.path().join(format!("{i}.json"));
            crate::fs::atomic_write(&path, format!(r#"{{"a": {i}}}"#).as_bytes()).unwrap();
            assert_eq!(kept.load(&path).unwrap().get("a"), Some(&i));
        }
        assert_eq!(kept.last.lock().unwrap().len(), 2);
    }
}
