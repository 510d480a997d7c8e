//! The user's registry of servers, under `XDG_RUNTIME_DIR` or the temporary directory: an
//! entry per process and instance served, read and written only while private to the user.

use std::path::{Path, PathBuf};

use super::record::list;
use super::server::alive;
use crate::error::{Error, Result};
use crate::fs::{atomic_write_unsynced, owned};
use crate::instance::Instance;

/// The user's registry of servers: `$XDG_RUNTIME_DIR/aw/servers` when `XDG_RUNTIME_DIR` is
/// set (an absolute path), else `aw-<uid>/servers` in the temporary directory (`$TMPDIR`
/// or `/tmp`).
pub fn user_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(d) if d.is_absolute() => d.join("aw/servers"),
        _ => std::env::temp_dir()
            .join(format!("aw-{}", nix::unistd::getuid()))
            .join("servers"),
    }
}

/// Create the registry directory, private to the user; refuse one that another user owns
/// (anyone may create a directory in `/tmp`).
fn user_dir_made() -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let d = user_dir();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&d)
        .map_err(|e| Error::create(&d, e))?;
    check_private(&d)?;
    owned::own(&d);
    Ok(d)
}

/// Refuse the registry directory `d` unless it and its parent are directories of this
/// user that nobody else may write: the checks made before writing in it and before
/// reading it.
fn check_private(d: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = crate::trust::me();
    for p in [d, d.parent().unwrap_or(d)] {
        let m = std::fs::symlink_metadata(p).map_err(|e| Error::io(p, e))?;
        if m.uid() != me || m.mode() & 0o022 != 0 || !m.is_dir() {
            return Err(Error::Denied(format!(
                "{}: not a private directory of this user",
                p.display()
            )));
        }
    }
    Ok(())
}

/// The name of this process's entry for `inst` in the user's registry.
fn entry_name(inst: &Instance) -> String {
    format!("{}.{}", std::process::id(), inst.name())
}

/// Put this process's entry for `inst` in the user's registry.
pub(super) fn enlist(inst: &Instance) -> Result<()> {
    let d = user_dir_made()?;
    let path = d.join(entry_name(inst));
    if path.exists() {
        return Ok(());
    }
    let dir = std::path::absolute(inst.dir()).map_err(|e| Error::io(inst.dir(), e))?;
    let mut text = dir.into_os_string().into_encoded_bytes();
    text.push(b'\n');
    atomic_write_unsynced(&path, &text)
}

/// Takes this process's entry for an instance out of the user's registry when dropped, at
/// the end of a run however it ends: the process serves nothing there any more. (Left in
/// place, the entries of every run ever made would pile up, and every write in the
/// registry reads all of them.) Best effort; an entry left by a process killed outright is
/// removed by the next reader of the registry ([`user_instances`]).
pub struct Listed<'a>(pub &'a Instance);

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        let _ = owned::remove(&user_dir().join(entry_name(self.0)));
    }
}

/// The instances where the user's servers run, from the registry: an entry whose process
/// is gone is removed. One whose process lives but serves no agent there is left out and
/// kept: a server that is starting writes its entry before its agents' records. No
/// registry: none. A registry that is not private to the user (another user made it
/// first in the temporary directory) is refused, exit 77, and not read.
pub fn user_instances() -> Result<Vec<Instance>> {
    use std::os::unix::ffi::OsStrExt;
    let d = user_dir();
    match std::fs::symlink_metadata(&d) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        _ => check_private(&d)?,
    }
    let Ok(rd) = std::fs::read_dir(&d) else {
        return Ok(Vec::new());
    };
    let mut found: Vec<Instance> = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name();
        let Some((pid, _)) = name.to_str().and_then(|n| n.split_once('.')) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let inst = owned::read(&e.path()).ok().and_then(|b| {
            let p = std::path::Path::new(std::ffi::OsStr::from_bytes(b.trim_ascii_end()));
            let root = crate::instance::Root::new(p.parent()?);
            root.instance(p.file_name()?.to_str()?).ok()
        });
        match inst {
            Some(i)
                if list(&i)
                    .iter()
                    .any(|s| s.pid == pid && crate::host::is_this(s.host_id.as_deref())) =>
            {
                if !found.iter().any(|f| f.dir() == i.dir()) {
                    found.push(i);
                }
            }
            _ if alive(pid) => {}
            _ => {
                let _ = owned::remove(&e.path());
            }
        }
    }
    found.sort_by(|a, b| a.dir().cmp(b.dir()));
    Ok(found)
}
