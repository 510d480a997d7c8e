//! Stop requests, `stop.<host_id>.<pid>`, which a server watches for, and the signal sent
//! to a server of a version that knew no hosts.

use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::paths::{state_path, stop_path};
use super::record::Served;
use crate::error::{Error, Result};
use crate::fs::{atomic_write_unsynced, owned};
use crate::instance::Instance;

/// The stop request this process watches for while it serves.
pub fn my_stop_path(inst: &Instance) -> PathBuf {
    stop_path(inst, &crate::host::this().id, std::process::id())
}

/// Remove a stop request left for a former process of this pid and host, before this one
/// records what it serves (it would stop at once). Best effort.
pub fn forget_stop(inst: &Instance) {
    let _ = owned::remove(&my_stop_path(inst));
}

/// What [`request_stop`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// The server was asked to finish (a stop request, or SIGTERM).
    Yes,
    /// Nothing: the record names no host and is not a file of this user, so its pid is
    /// not signalled; why, for people.
    NotMine(String),
}

/// Ask the process serving `s` to finish cleanly, wherever it runs: write its stop request,
/// which it watches for. A record of a version that knew no hosts is of a server of this host
/// that watches for no request: that one gets SIGTERM, the signal a service manager sends
/// (a process already gone is no error), but only when the record is a file of this user
/// that still names that pid; else nothing is done ([`Asked::NotMine`]). No other process is
/// ever signalled.
pub fn request_stop(inst: &Instance, s: &Served) -> Result<Asked> {
    let Some(id) = s.host_id.as_deref() else {
        let path = state_path(inst, &s.agent);
        if let Some(why) = not_mine(&path, s.pid) {
            return Ok(Asked::NotMine(why));
        }
        return match kill(Pid::from_raw(s.pid as i32), Signal::SIGTERM) {
            Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(Asked::Yes),
            Err(e) => Err(Error::io(format!("<pid {}>", s.pid), e.into())),
        };
    };
    if !crate::host::valid_id(id) {
        return Err(Error::Corrupt {
            path: state_path(inst, &s.agent),
            why: format!("host_id {id:?} is not 16 hex digits"),
        });
    }
    let path = stop_path(inst, id, s.pid);
    let asked = format!(
        "{}\n{}\n{}\n",
        std::process::id(),
        crate::host::this().name,
        crate::time::now()
    );
    atomic_write_unsynced(&path, asked.as_bytes()).map(|()| Asked::Yes)
}

/// Why the pid `pid` of the record `path` must not be signalled, if it must not: the file
/// is not this user's (read through the descriptor whose owner is checked), or no longer
/// names that pid.
fn not_mine(path: &Path, pid: u32) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let mut f = match owned::open_read(path) {
        Ok(f) => f,
        Err(e) => return Some(format!("{}: {e}", path.display())),
    };
    let owner = f.metadata().map(|m| m.uid()).unwrap_or(u32::MAX);
    if owner != crate::trust::me() {
        return Some(format!(
            "{} is owned by {}: pid {pid} not signalled",
            path.display(),
            crate::trust::user(owner)
        ));
    }
    let mut bytes = Vec::new();
    let read = (&mut f).take(1 << 20).read_to_end(&mut bytes);
    let named = read
        .ok()
        .and_then(|_| serde_json::from_slice::<Served>(&bytes).ok())
        .map(|r| r.pid);
    (named != Some(pid)).then(|| format!("{} changed: pid {pid} not signalled", path.display()))
}

/// Take back the stop request to the server of `s` once it is no longer needed (the server
/// finished): best effort.
pub fn clear_stop(inst: &Instance, s: &Served) {
    if let Some(id) = s.host_id.as_deref().filter(|id| crate::host::valid_id(id)) {
        let _ = owned::remove(&stop_path(inst, id, s.pid));
    }
}
