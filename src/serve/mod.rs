//! Who serves which agent: the files an `aw-run` keeps under `_state/serve/` while it runs.
//!
//! - `<host_id>.<pid>.<stamp>.server`: the server's own lock, held (flock, exclusive) for its
//!   whole life, with its pid, host name and host id inside (one a line). It is created as
//!   a dotfile, locked, then renamed into place, so that it is never found free under its
//!   name while its server lives; the server removes it when it ends, and a file found free
//!   (its server died) is removed by the next server that starts there, as is one left under
//!   its temporary name by a server killed while it made it. One per server,
//!   whatever the number of agents it serves: a server's open descriptors do not grow with
//!   its agents.
//! - `<agent>.lock`: the agent's claim: pid, host name, host id and the name of the server
//!   file of the process that serves the agent, one a line. It is taken under a short
//!   exclusive flock (open, lock, read, write in place, close; never replaced by rename, so
//!   that another host reads it fresh) and let go by emptying it the same way. A claim is
//!   live while the server file it names is locked: a second server is refused at once,
//!   and a server that died (even by SIGKILL) frees its agents at once.
//! - `<agent>.json`: that agent's controller as the server sees it ([`Served`]), replaced
//!   atomically (without fsync: it means nothing after a crash) on every change of state.
//! - `stop.<host_id>.<pid>`: a request to the server `pid` of host `host_id` to finish
//!   ([`request_stop`]); the server watches for it and removes it when it has seen it.
//!
//! An earlier version held the flock of `<agent>.lock` itself for its whole life and wrote
//! three lines (or the pid alone) in it. A claim that names no server file is of that kind:
//! it is live while its own flock is held, so a server of this version never takes an agent
//! from an older one. The other way round does not hold: an older version sees no flock on
//! this version's claims and takes them as free, so servers of both versions must not serve
//! one instance at once.
//!
//! flock holds across the clients of a network file system and across containers, so an
//! agent is served by one process wherever its servers run; a `.json` left by a server that
//! died is stale and ignored. A pid is never probed or signalled unless its record names
//! this host ([`crate::host`]), and never signalled when it is read from a file another
//! user owns ([`request_stop`]).
//!
//! Each server also leaves an entry in the user's registry of servers ([`user_dir`]): a
//! file `<pid>.<instance>` holding the instance directory, so that `aw-ctl ps --all-roots`
//! and `aw-ctl stop --all-roots` find servers of every root. It is written and read only
//! when it is private to the user (its directory and the one above are the user's, and
//! nobody else may write in them). The server removes its entry when it
//! ends ([`Listed`]); an entry whose process serves nothing there any more (it was killed)
//! is ignored and removed by whoever reads it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fs::{Lock, atomic_write_unsynced, owned};
use crate::instance::Instance;

crate::keyword_enum! {
    /// The state of one agent's controller.
    pub enum ControllerState {
        /// Waiting for a mention.
        Idle = "idle",
        /// Its backend is running.
        Running = "running",
        /// Its last run failed for good; it waits for new activity or the end of the cooldown.
        Cooldown = "cooldown",
        /// The loop guard paused it: it ran too often on other agents' messages, and waits
        /// for a message from outside them.
        Paused = "paused",
        /// Its server is finishing.
        Stopped = "stopped",
    }
}

/// `_state/serve/<agent>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Served {
    pub instance: String,
    pub agent: String,
    pub pid: u32,
    /// The server's host name; `None` in a record of a version that knew no hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The server's host id ([`crate::host`]); `None` as for `host` (then: this host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_id: Option<String>,
    pub state: ControllerState,
    /// Runs started since the server started (retries are attempts of the same run).
    pub runs: u64,
    /// The workflow file, absolute; `null` for `aw-run --serve`.
    pub workflow: Option<String>,
    /// When the server started.
    pub started: String,
    /// The caps of the server, handed on to a detached server started for a worker this
    /// agent spawns (absent in records of older servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caps: Option<Caps>,
}

/// The caps an `aw-run` serves its agents under, as a detached worker server is given them
/// (`aw-run --serve --keep`, started by `spawn_agent`): the workflow's budget is shared
/// through the instance's ledger, these through the command line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Caps {
    /// `--max-runs`.
    pub max_runs: u64,
    /// `--max-rate` as `N/SECSs`; `None`: off.
    pub max_rate: Option<String>,
    /// `--max-pair`, the same way.
    #[serde(default)]
    pub max_pair: Option<String>,
    /// When the server's `--timeout` ends, in milliseconds since the Unix epoch.
    pub timeout_at: Option<u64>,
    /// `--retries`.
    pub retries: u32,
    /// `--backoff` and `--cooldown`, in seconds.
    pub backoff: f64,
    pub cooldown: f64,
}

/// A duration as `aw-run` reads one (`1.5s`), never zero.
fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64().max(0.001))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Caps {
    /// The caps of a server started now with these limits.
    pub fn new(
        max_runs: u64,
        rate: Option<(u32, Duration)>,
        pair: Option<(u32, Duration)>,
        timeout: Option<Duration>,
        retries: u32,
        backoff: Duration,
        cooldown: Duration,
    ) -> Caps {
        Caps {
            max_runs,
            max_rate: rate.map(|(n, w)| format!("{n}/{}", secs(w))),
            max_pair: pair.map(|(n, w)| format!("{n}/{}", secs(w))),
            timeout_at: timeout
                .map(|t| now_ms().saturating_add(u64::try_from(t.as_millis()).unwrap_or(u64::MAX))),
            retries,
            backoff: backoff.as_secs_f64(),
            cooldown: cooldown.as_secs_f64(),
        }
    }

    /// The options of `aw-run` that give a server these caps; its `--timeout` is what is
    /// left of this one's.
    pub fn args(&self) -> Vec<String> {
        let mut v = vec![
            "--max-runs".to_string(),
            self.max_runs.max(1).to_string(),
            "--max-rate".to_string(),
            self.max_rate.clone().unwrap_or_else(|| "off".into()),
            "--max-pair".to_string(),
            self.max_pair.clone().unwrap_or_else(|| "off".into()),
            "--retries".to_string(),
            self.retries.max(1).to_string(),
            "--backoff".to_string(),
            secs(Duration::try_from_secs_f64(self.backoff).unwrap_or_default()),
            "--cooldown".to_string(),
            secs(Duration::try_from_secs_f64(self.cooldown).unwrap_or_default()),
        ];
        if let Some(at) = self.timeout_at {
            let left = Duration::from_millis(at.saturating_sub(now_ms()));
            v.extend(["--timeout".to_string(), secs(left)]);
        }
        v
    }
}

/// `_state/serve`.
pub fn dir(inst: &Instance) -> PathBuf {
    inst.state_dir().join("serve")
}

fn lock_path(inst: &Instance, agent: &str) -> PathBuf {
    dir(inst).join(format!("{agent}.lock"))
}

fn state_path(inst: &Instance, agent: &str) -> PathBuf {
    dir(inst).join(format!("{agent}.json"))
}

/// The stop request to the server `pid` of host `host_id`.
fn stop_path(inst: &Instance, host_id: &str, pid: u32) -> PathBuf {
    dir(inst).join(format!("stop.{host_id}.{pid}"))
}

/// The stop request this process watches for while it serves.
pub fn my_stop_path(inst: &Instance) -> PathBuf {
    stop_path(inst, &crate::host::this().id, std::process::id())
}

/// Remove a stop request left for a former process of this pid and host, before this one
/// records what it serves (it would stop at once). Best effort.
pub fn forget_stop(inst: &Instance) {
    let _ = owned::remove(&my_stop_path(inst));
}

/// How long a claim locked by someone else is tried again while it names no live server
/// nor live process: a reader ([`is_served`]) or a server taking or letting it go holds
/// it for an instant.
const TAKE_RETRY: Duration = Duration::from_millis(100);

/// At most this much of a claim is read (it is four short lines).
const CLAIM_MAX: u64 = 4096;

/// The lock a server holds for its whole life in one instance, its `.server` file; removed
/// when the last [`Claim`] of the process there is let go.
struct Server {
    lock: Lock,
    /// The file's name, as claims name it.
    name: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Removed while still locked: whoever opened it before finds it held until the
        // lock goes with the descriptor, and nobody finds it afterwards.
        let _ = owned::remove(self.lock.path());
    }
}

/// The servers of this process, one per serving directory, while any claim holds one.
static SERVERS: std::sync::Mutex<Vec<Weak<Server>>> = std::sync::Mutex::new(Vec::new());

/// This process's server in `d` (`_state/serve`): the one its claims there hold, or a new
/// one. A new one first removes the files of servers there that died.
fn server(d: &Path) -> Result<Arc<Server>> {
    let mut servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    servers.retain(|w| w.strong_count() > 0);
    if let Some(s) = servers
        .iter()
        .filter_map(Weak::upgrade)
        .find(|s| s.lock.path().parent() == Some(d))
    {
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

const SERVER_SUFFIX: &str = ".server";

/// Is `name` written like the name of a server file?
fn is_server_name(name: &str) -> bool {
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
type Dead = HashSet<String>;

/// Does the server file `name` in `d` belong to a live server?
fn server_live(d: &Path, name: &str, network: bool, dead: &mut Dead) -> Result<bool> {
    if dead.contains(name) {
        return Ok(false);
    }
    let live = crate::fs::lock::held(&d.join(name), network)? == Some(true);
    if !live {
        dead.insert(name.to_string());
    }
    Ok(live)
}

/// An agent this process serves: its claim in `_state/serve/<agent>.lock`, naming this
/// process's server file; let go (emptied) when dropped.
#[derive(Debug)]
pub struct Claim {
    path: PathBuf,
    server: Arc<Server>,
    network: bool,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Best effort: a claim left behind names a server that is about to be gone.
        let end = crate::time::deadline(TAKE_RETRY);
        loop {
            match Lock::try_exclusive(&self.path) {
                Ok(Some(lock)) => {
                    let old = read_claim(lock.file(), &self.path, self.network);
                    if let Ok(t) = old
                        && parse(&t).server.as_deref() == Some(&self.server.name)
                    {
                        let _ = write_claim(lock.file(), b"", t.len(), self.network);
                    }
                    return;
                }
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(5)),
                _ => return,
            }
        }
    }
}

/// Read a claim from its open file, as the server of a network file system has it.
fn read_claim(f: &std::fs::File, path: &Path, network: bool) -> std::io::Result<Vec<u8>> {
    if network {
        return crate::fs::netfs::Fresh::new(f.try_clone()?, path).read_range(0, CLAIM_MAX);
    }
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0; CLAIM_MAX as usize];
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(n);
    Ok(buf)
}

/// Write a claim in place through its locked file, over `old` bytes (cut where they were
/// more); flushed to the server of a network file system before the lock is let go.
fn write_claim(f: &std::fs::File, text: &[u8], old: usize, network: bool) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    if !text.is_empty() {
        f.write_all_at(text, 0)?;
    }
    if old > text.len() {
        f.set_len(text.len() as u64)?;
    }
    if network {
        f.sync_data()?;
    }
    Ok(())
}

/// Claim each agent for this process, or say which process serves one (exit 75); the
/// claims in the order of `agents`.
///
/// They are taken in one order, by name, whatever the order given: two servers that name
/// the same agents in different orders meet at the first claim, and one of them gets all,
/// instead of each getting one and both giving up. What was taken before a refusal is let
/// go. No descriptor stays open per agent: the claims hold this process's one server lock.
pub fn take(inst: &Instance, agents: &[&str]) -> Result<Vec<Claim>> {
    let d = dir(inst);
    owned::folder(&d, true).map_err(|e| Error::create(&d, e))?;
    let network = crate::fs::netfs::is_network_fs(&d);
    let server = server(&d)?;
    let host = crate::host::this();
    let text = format!(
        "{}\n{}\n{}\n{}\n",
        std::process::id(),
        host.name,
        host.id,
        server.name
    );
    let mut dead = Dead::new();
    let mut order: Vec<usize> = (0..agents.len()).collect();
    order.sort_by_key(|&i| agents[i]);
    let mut held: Vec<Option<Claim>> = agents.iter().map(|_| None).collect();
    for i in order {
        let a = agents[i];
        let path = lock_path(inst, a);
        let end = crate::time::deadline(TAKE_RETRY);
        loop {
            if let Some(lock) = Lock::try_exclusive(&path)? {
                let old =
                    read_claim(lock.file(), &path, network).map_err(|e| Error::io(&path, e))?;
                let who = parse(&old);
                if let Some(s) = &who.server
                    && server_live(&d, s, network, &mut dead)?
                {
                    return Err(busy(inst, a, who));
                }
                write_claim(lock.file(), text.as_bytes(), old.len(), network)
                    .map_err(|e| Error::io(&path, e))?;
                held[i] = Some(Claim {
                    path,
                    server: server.clone(),
                    network,
                });
                break;
            }
            // Locked: by a server of an earlier version for its life, or for an instant.
            let who = holder(&path, network).unwrap_or(Holder::NOBODY);
            let live = match &who.server {
                Some(s) => server_live(&d, s, network, &mut dead)?,
                None => crate::host::is_this(who.host_id.as_deref()) && who.pid.is_some_and(alive),
            };
            if live || Instant::now() >= end {
                return Err(busy(inst, a, who));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    // Best effort: a server that cannot be listed for the user still serves.
    let _ = enlist(inst);
    Ok(held.into_iter().flatten().collect())
}

/// The refusal of `agent`, naming who serves it.
fn busy(inst: &Instance, agent: &str, who: Holder) -> Error {
    let pid = who.pid.map_or("?".to_string(), |p| p.to_string());
    let on = who.host.map(|h| format!(" on {h}")).unwrap_or_default();
    Error::Busy(format!(
        "{agent}@{}: already served by aw-run pid {pid}{on}",
        inst.name()
    ))
}

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
fn enlist(inst: &Instance) -> Result<()> {
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

/// Who an agent's claim names: pid, host name, host id and server file, one a line (an
/// older version wrote three lines, or the pid only, and named no server file).
struct Holder {
    pid: Option<u32>,
    host: Option<String>,
    host_id: Option<String>,
    server: Option<String>,
}

impl Holder {
    const NOBODY: Holder = Holder {
        pid: None,
        host: None,
        host_id: None,
        server: None,
    };
}

fn parse(text: &[u8]) -> Holder {
    let s = String::from_utf8_lossy(text);
    let mut lines = s.lines().map(str::trim);
    let pid = lines.next().and_then(|l| l.parse().ok());
    let host = lines.next().filter(|l| !l.is_empty()).map(str::to_string);
    let host_id = lines
        .next()
        .filter(|l| crate::host::valid_id(l))
        .map(str::to_string);
    let server = lines
        .next()
        .filter(|l| is_server_name(l))
        .map(str::to_string);
    Holder {
        pid,
        host,
        host_id,
        server,
    }
}

/// What is written in an agent's claim, read without its lock.
fn holder(path: &Path, network: bool) -> Option<Holder> {
    let f = owned::open_read(path).ok()?;
    read_claim(&f, path, network).ok().map(|t| parse(&t))
}

fn alive(pid: u32) -> bool {
    kill(Pid::from_raw(pid as i32), None).is_ok()
}

/// Is `agent` served by a running process?
pub fn is_served(inst: &Instance, agent: &str) -> bool {
    served(inst, agent, &mut Dead::new())
}

/// [`is_served`], with the servers already found dead.
fn served(inst: &Instance, agent: &str, dead: &mut Dead) -> bool {
    let path = lock_path(inst, agent);
    if !path.exists() {
        return false;
    }
    let d = dir(inst);
    let network = crate::fs::netfs::is_network_fs(&d);
    // Locked exclusively: by a server of an earlier version for its life, or by a server
    // taking or letting go the agent this instant. Can't tell: served.
    let Ok(Some(lock)) = Lock::try_shared(&path) else {
        return true;
    };
    let Ok(text) = read_claim(lock.file(), &path, network) else {
        return true;
    };
    match parse(&text).server {
        Some(s) => server_live(&d, &s, network, dead).unwrap_or(true),
        // Empty, or of an earlier version whose lock nobody holds.
        None => false,
    }
}

/// Record the state of one controller.
pub fn write(inst: &Instance, s: &Served) -> Result<()> {
    let mut bytes = serde_json::to_vec(s).expect("state serializes");
    bytes.push(b'\n');
    atomic_write_unsynced(&state_path(inst, &s.agent), &bytes)
}

/// The record of `agent` when a running process serves it: what [`list`] has of it, at
/// the cost of that agent's files alone.
pub fn record(inst: &Instance, agent: &str) -> Option<Served> {
    if !is_served(inst, agent) {
        return None;
    }
    let bytes = owned::read(&state_path(inst, agent)).ok()?;
    serde_json::from_slice::<Served>(&bytes)
        .ok()
        .filter(|s| s.agent == agent)
}

/// The served agents of `inst`, by name (stale records left out).
pub fn list(inst: &Instance) -> Vec<Served> {
    let Ok(rd) = std::fs::read_dir(dir(inst)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            Some(name.strip_suffix(".json")?.to_string())
        })
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    let mut dead = Dead::new();
    names
        .into_iter()
        .filter(|n| served(inst, n, &mut dead))
        .filter_map(|n| {
            let bytes = owned::read(&state_path(inst, &n)).ok()?;
            serde_json::from_slice::<Served>(&bytes).ok()
        })
        .collect()
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
    let mut f = match std::fs::File::open(path) {
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

/// Wait until nothing serves `agent` any more, at most `timeout`; `true` when so.
pub fn wait_unserved(inst: &Instance, agent: &str, timeout: Duration) -> bool {
    let end = crate::time::deadline(timeout);
    loop {
        if !is_served(inst, agent) {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_match_their_json() {
        for s in ControllerState::ALL {
            let json = serde_json::to_string(s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.name()));
            assert_eq!(serde_json::from_str::<ControllerState>(&json).unwrap(), *s);
        }
    }

    #[test]
    fn a_held_lock_is_served_and_refuses_a_second_server() {
        let tmp = tempfile::tempdir().unwrap();
        let inst = crate::instance::Root::new(tmp.path())
            .instance("t")
            .unwrap();
        inst.create().unwrap();
        assert!(!is_served(&inst, "alice"));
        let held = take(&inst, &["alice"]).unwrap();
        assert!(is_served(&inst, "alice"));
        let e = take(&inst, &["alice"]).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        drop(held);
        assert!(!is_served(&inst, "alice"));
        assert!(list(&inst).is_empty());
    }

    fn server_files(inst: &Instance) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir(inst))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(SERVER_SUFFIX))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn claims_share_one_server_lock_and_a_dead_server_s_claims_are_taken() {
        let tmp = tempfile::tempdir().unwrap();
        let inst = crate::instance::Root::new(tmp.path())
            .instance("t")
            .unwrap();
        inst.create().unwrap();
        let first = take(&inst, &["a", "b"]).unwrap();
        let worker = take(&inst, &["c"]).unwrap();
        let mine = server_files(&inst);
        assert_eq!(mine.len(), 1, "{mine:?}");
        let claim = std::fs::read_to_string(lock_path(&inst, "c")).unwrap();
        assert_eq!(claim.lines().nth(3), Some(mine[0].as_str()), "{claim}");
        // One claim let go: that agent alone is free, and emptied.
        drop(worker);
        assert!(!is_served(&inst, "c") && is_served(&inst, "a"));
        assert_eq!(std::fs::read(lock_path(&inst, "c")).unwrap(), b"");
        drop(first);
        assert!(server_files(&inst).is_empty());
        // Claims naming a server whose file nobody holds: free, and taken; that file is
        // swept when the next server starts.
        let dead = "0000000000000000.1.1.server";
        std::fs::write(dir(&inst).join(dead), "1\n").unwrap();
        for a in ["a", "b"] {
            std::fs::write(
                lock_path(&inst, a),
                format!("1\nelsewhere\n0000000000000000\n{dead}\n"),
            )
            .unwrap();
        }
        assert!(!is_served(&inst, "a"));
        let again = take(&inst, &["b", "a"]).unwrap();
        assert!(is_served(&inst, "a") && is_served(&inst, "b"));
        let now = server_files(&inst);
        assert_eq!(now.len(), 1, "{now:?}");
        assert_ne!(now[0], dead);
        drop(again);
    }
}
