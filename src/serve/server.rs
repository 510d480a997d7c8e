//! The server of one `aw-run` process in one instance: its `.server` file, locked for its
//! whole life, and beside it the record every agent it serves has until the agent's state
//! first changes; and whether a server or a process still lives.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Weak};

use nix::sys::signal::kill;
use nix::unistd::Pid;

use crate::error::Result;
use crate::fs::{Lock, owned};

/// The lock a server holds for its whole life in one instance, its `.server` file; removed
/// when the last [`Claim`](super::Claim) of the process there is let go.
pub(super) struct Server {
    lock: Lock,
    /// The file's name, as claims name it.
    pub(super) name: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(d) = self.lock.path().parent() {
            let _ = owned::remove(&d.join(record_name(&self.name)));
        }
        // Removed while still locked: whoever opened it before finds it held until the
        // lock goes with the descriptor, and nobody finds it afterwards.
        let _ = owned::remove(self.lock.path());
    }
}

/// `<server>.json`, beside the server file `server`: the record of its agents that have
/// none of their own (see `record.rs`).
pub(super) fn record_name(server: &str) -> String {
    format!("{server}.json")
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

/// The servers of this process, one per serving directory, while any claim holds one.
static SERVERS: std::sync::Mutex<Vec<Weak<Server>>> = std::sync::Mutex::new(Vec::new());

/// This process's server in `d` (`_state/serve`): the one its claims there hold, or a new
/// one. A new one first removes the files of servers there that died.
pub(super) fn server(d: &Path) -> Result<Arc<Server>> {
    let mut servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    servers.retain(|w| w.strong_count() > 0);
    if let Some(s) = of_folder(&servers, d) {
        return Ok(s);
    }
    sweep(d);
    let host = crate::host::this();
    let pid = std::process::id();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos());
    let name = format!("{}.{pid}.{stamp:x}{SERVER_SUFFIX}", host.id);
    let text = format!("{pid}\n{}\n{}\n", host.name, host.id);
    let lock = Lock::create_held(d, &name, text.as_bytes())?;
    let s = Arc::new(Server { lock, name });
    servers.push(Arc::downgrade(&s));
    Ok(s)
}

/// The server among `servers` whose file is in `d`.
fn of_folder(servers: &[Weak<Server>], d: &Path) -> Option<Arc<Server>> {
    servers
        .iter()
        .filter_map(Weak::upgrade)
        .find(|s| s.lock.path().parent() == Some(d))
}

/// The name of this process's server file in `d`, while it has one.
pub(super) fn own_server(d: &Path) -> Option<String> {
    let servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    of_folder(&servers, d).map(|s| s.name.clone())
}

/// Does the server file `name` (`<host_id>.<pid>.<stamp>.server`) name the process `pid` of
/// the host `host_id`?
pub(super) fn names(name: &str, pid: u32, host_id: Option<&str>) -> bool {
    let mut parts = name.split('.');
    parts.next() == host_id && parts.next().and_then(|p| p.parse::<u32>().ok()) == Some(pid)
}

pub(super) const SERVER_SUFFIX: &str = ".server";

/// Is `name` written like the name of a server file?
pub(super) fn is_server_name(name: &str) -> bool {
    name.len() > SERVER_SUFFIX.len()
        && name.ends_with(SERVER_SUFFIX)
        && !name.starts_with('.')
        && !name.contains('/')
}

/// Remove the server files in `d` whose servers died, and those a server killed while it
/// made its file left under their temporary name (best effort).
fn sweep(d: &Path) {
    let Ok(rd) = std::fs::read_dir(d) else {
        return;
    };
    for e in rd.flatten() {
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if is_server_name(&name) {
            let _ = crate::fs::lock::remove_if_free(&e.path());
        } else if let Some(server) = name.strip_suffix(".json").filter(|n| is_server_name(n)) {
            // Its server's file is gone (or just went, its lock free): so is its server.
            let lock = d.join(server);
            if !lock.exists() || crate::fs::lock::remove_if_free(&lock).is_ok_and(|gone| gone) {
                let _ = owned::remove(&e.path());
            }
        } else if let Some(server) = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".tmp"))
            .filter(|n| is_server_name(n))
            && abandoned_server_temp(server, &e)
        {
            let _ = owned::remove(&e.path());
        }
    }
}

/// Was the server file `name` (`<host_id>.<pid>.<stamp>.server`), found under its temporary
/// name, left by a process that no longer makes it: of this host, one whose pid is no running
/// process; of another host, one untouched for [`crate::fs::atomic::ABANDONED_TEMP`].
fn abandoned_server_temp(name: &str, e: &std::fs::DirEntry) -> bool {
    let mut parts = name.split('.');
    let (Some(id), Some(pid)) = (
        parts.next(),
        parts.next().and_then(|p| p.parse::<u32>().ok()),
    ) else {
        return false;
    };
    if crate::host::valid_id(id) && crate::host::is_this(Some(id)) {
        return pid != std::process::id() && !alive(pid);
    }
    e.metadata().and_then(|m| m.modified()).is_ok_and(|t| {
        t.elapsed()
            .is_ok_and(|age| age >= crate::fs::atomic::ABANDONED_TEMP)
    })
}

/// The servers found dead so far by one caller, by file name (one never lives again).
pub(super) type Dead = HashSet<String>;

/// Does the server file `name` in `d` belong to a live server?
pub(super) fn server_live(d: &Path, name: &str, network: bool, dead: &mut Dead) -> Result<bool> {
    if dead.contains(name) {
        return Ok(false);
    }
    let live = crate::fs::lock::held(&d.join(name), network)? == Some(true);
    if !live {
        dead.insert(name.to_string());
    }
    Ok(live)
}

/// Is `pid` a running process of this host?
pub(super) fn alive(pid: u32) -> bool {
    kill(Pid::from_raw(pid as i32), None).is_ok()
}
