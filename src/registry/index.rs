//! The name index of the registry: whether a name is an agent, and its record, at the cost
//! of one small file whatever the number of agents.
//!
//! `_state/agents/B.json` holds the records of the agents whose names fall in bucket B, as
//! `agents.json` has them (the first of a name; [`super::bucket`]), and
//! `_state/agents.stamp` says which `agents.json` the folder mirrors and in how many
//! buckets: that file's identity ([`FileId`]: device, inode, size, modification and change
//! times), the folder's own identity once written, and the boot it was written in. A reader
//! trusts the folder only when all three are those of now: a registry changed by another
//! program (or by hand), a file of the folder added or removed by hand, or a crash of the
//! system since (the index is written without a flush) each make it fall back to reading
//! `agents.json` whole, and the index is rebuilt under the state lock (by a reader only when
//! it can take the lock at once). So is a file of the folder that is not what aw writes
//! (a record under another name, a name of another bucket, a file cut short).
//!
//! Every change of `agents.json` goes through [`update`], which writes the files of the
//! buckets of the names that changed and then the stamp, under the state lock (or
//! [`update_aside`], which leaves them to a thread that holds the lock until they are
//! written: a server's start).
//! On a network file system, whose clients tell another host's changes late through
//! `stat`, the index is neither written nor read: the registry is read whole, as without an
//! index.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io;
use std::path::PathBuf;

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use serde::{Deserialize, Serialize};

use super::agent::{Agent, Registry};
use super::bucket;
use crate::error::{Error, Result};
use crate::fs::Dir;
use crate::fs::identity::{FileId, read_versioned};
use crate::instance::Instance;
use crate::names;
use crate::state;

/// The folder of the per-agent files, in `_state/`.
const FOLDER: &str = "agents";
/// The stamp, in `_state/` beside the folder (a file in the folder would change the
/// folder's identity as it is written).
const STAMP: &str = "agents.stamp";
/// The version of the index written (1: a file per agent; 2: a file per bucket).
const VERSION: u32 = 2;

/// What the index says, and why it cannot say.
enum Answer {
    /// The record of the name, or none: the name is no agent.
    Known(Option<Box<Agent>>),
    /// The index does not mirror the registry (or a file of it is damaged): rebuild it.
    Stale,
    /// The index is not used here (a network file system, a name no file can have).
    Unused,
}

/// `_state/agents.stamp`: which registry the folder mirrors.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Stamp {
    version: u32,
    /// `agents.json` as the folder mirrors it.
    registry: FileId,
    /// The folder once its files were written.
    folder: FileId,
    /// The kernel's boot id when it was written.
    boot: String,
    /// How many buckets the names fall in (a power of two).
    buckets: u32,
}

impl Stamp {
    /// The stamp of now: the registry (whose metadata is `registry`, when known) and the
    /// folder as they are, this boot, in `buckets`; `None` when either is missing or not
    /// what it should be, or the boot is unknown.
    fn now(inst: &Instance, registry: Option<std::fs::Metadata>, buckets: u32) -> Option<Stamp> {
        let boot = crate::host::boot_id()?.to_string();
        let registry = match registry {
            Some(m) => m,
            None => std::fs::symlink_metadata(inst.state_file("agents.json")).ok()?,
        };
        let folder = std::fs::symlink_metadata(folder(inst)).ok()?;
        (registry.is_file() && folder.is_dir()).then(|| Stamp {
            version: VERSION,
            registry: FileId::of(&registry),
            folder: FileId::of(&folder),
            boot,
            buckets,
        })
    }

    /// The stamp stored, if it can be read.
    fn stored(inst: &Instance) -> Option<Stamp> {
        let bytes = crate::fs::owned::read(&inst.state_file(STAMP)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Does the folder mirror the registry (whose metadata is `registry`, when known) now?
    /// In how many buckets, when it does.
    fn holds(inst: &Instance, registry: Option<std::fs::Metadata>) -> Option<u32> {
        let stored = Stamp::stored(inst)?;
        let now = Stamp::now(inst, registry, stored.buckets)?;
        (now == stored && stored.buckets.is_power_of_two()).then_some(stored.buckets)
    }
}

fn folder(inst: &Instance) -> PathBuf {
    inst.state_dir().join(FOLDER)
}

/// Is the index used for this instance? Not on a network file system.
fn used(inst: &Instance) -> bool {
    !crate::fs::netfs::is_network_fs(&inst.state_dir())
}

/// What the index says of `name`.
fn lookup(inst: &Instance, name: &str) -> Answer {
    if !names::is_agent_name(name) || !used(inst) {
        return Answer::Unused;
    }
    let registry = match std::fs::symlink_metadata(inst.state_file("agents.json")) {
        Ok(m) => m,
        // No registry: no agent (what a read of it would say).
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Answer::Known(None),
        Err(_) => return Answer::Unused,
    };
    let Some(buckets) = Stamp::holds(inst, Some(registry)) else {
        return Answer::Stale;
    };
    let b = bucket::of(name, buckets);
    match crate::fs::owned::read(&folder(inst).join(bucket::file_name(b))) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Answer::Known(None),
        Err(_) => Answer::Stale,
        Ok(bytes) => match bucket::find(&bytes, name, b, buckets) {
            Some(a) => Answer::Known(a.map(Box::new)),
            None => Answer::Stale,
        },
    }
}

/// The record of agent `name` of `inst`, or `None` when it has none. Read from the name
/// index when it mirrors the registry, else from the registry whole (the index is then
/// rebuilt).
pub fn find(inst: &Instance, name: &str) -> Result<Option<Agent>> {
    if let Some(reg) = Registry::remembered(inst) {
        return Ok(reg.get(name).cloned());
    }
    match lookup(inst, name) {
        Answer::Known(a) => Ok(a.map(|a| *a)),
        Answer::Stale => {
            let reg = Registry::load_shared(inst)?;
            heal(inst, name);
            Ok(reg.get(name).cloned())
        }
        Answer::Unused => Ok(Registry::load_shared(inst)?.get(name).cloned()),
    }
}

/// Is `name` a registered agent of `inst`? As [`find`].
pub fn is_agent(inst: &Instance, name: &str) -> Result<bool> {
    Ok(find(inst, name)?.is_some())
}

/// Rebuild the index under the state lock, unless another process did meanwhile. Best
/// effort, and never waited for: a reader that cannot (the lock is held, by a writer or
/// by this very process; no right to write) has its answer all the same, and the index is
/// rebuilt by a later one.
fn heal(inst: &Instance, name: &str) {
    let Ok(Some(_lock)) = crate::fs::Lock::try_exclusive(&inst.state_file("state.lock")) else {
        return;
    };
    if matches!(lookup(inst, name), Answer::Stale) {
        let _ = rebuild(inst);
    }
}

/// Read-modify-write `agents.json` under the state lock, as [`state::update`] does, and
/// keep the name index exact: the files of the names that changed are written (or
/// removed), then the stamp. An index that did not mirror the registry before is rebuilt
/// whole. `f` may refuse with an error, in which case nothing is written.
pub fn update<R>(inst: &Instance, f: impl FnOnce(&mut Registry) -> Result<R>) -> Result<R> {
    let (r, index) = change(inst, f)?;
    if let Some(index) = index {
        index.write();
    }
    Ok(r)
}

/// [`update`], the index written aside by a thread that holds the state lock until it is
/// done, while the caller goes on: for a change of thousands of names (a server's start),
/// whose index files the caller need not wait for. Until [`Indexing`] is finished, readers
/// find the index stale and read `agents.json` whole, and writers wait for the lock.
pub fn update_aside<R>(
    inst: &Instance,
    f: impl FnOnce(&mut Registry) -> Result<R>,
) -> Result<(R, Indexing)> {
    let (r, index) = change(inst, f)?;
    let Some(index) = index else {
        return Ok((r, Indexing(None)));
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("aw-index".into())
        .spawn(move || {
            if let Ok(index) = rx.recv() {
                Index::write(index);
            }
        });
    match spawned {
        Ok(handle) => {
            let _ = tx.send(index);
            Ok((r, Indexing(Some(handle))))
        }
        // No thread to be had: written here, as by [`update`].
        Err(_) => {
            index.write();
            Ok((r, Indexing(None)))
        }
    }
}

/// The index files [`update_aside`] is writing; finished (waited for) when dropped.
#[must_use = "dropped at once, it waits for the index"]
pub struct Indexing(Option<std::thread::JoinHandle<()>>);

impl Indexing {
    /// Wait until the index is written and the state lock let go.
    pub fn finish(self) {}
}

impl Drop for Indexing {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}

/// What is left of a change of the registry once `agents.json` is stored: the index to
/// bring to it, under the state lock this holds.
struct Index {
    _lock: crate::fs::Lock,
    inst: Instance,
    /// The registry before the change and the index's buckets, when the index mirrored it
    /// (the files of the names that changed are written); `None`: the index is rebuilt
    /// whole.
    before: Option<(Registry, u32)>,
    after: Registry,
    /// `agents.json` as written; empty when the change left it as it was.
    written: Vec<u8>,
}

impl Index {
    /// Bring the index to the registry. An index that could not follow is stale, read
    /// around and rebuilt by the next reader.
    fn write(self) {
        let _ = match &self.before {
            Some((before, buckets)) => match touched(&before.agents, &self.after.agents) {
                Some(names) => follow(&self.inst, &self.after, &names, &self.written, *buckets),
                None => Ok(()),
            },
            // Just written: from the registry in hand, not read and parsed again.
            None if !self.written.is_empty() => write_all(&self.inst, &self.after, &self.written),
            None => rebuild(&self.inst),
        };
    }
}

/// The change of [`update`] up to `agents.json` stored; the index left to write, if any.
fn change<R>(
    inst: &Instance,
    f: impl FnOnce(&mut Registry) -> Result<R>,
) -> Result<(R, Option<Index>)> {
    let lock = state::lock(inst)?;
    let path = inst.state_file("agents.json");
    let used = used(inst);
    let mirrored = used.then(|| Stamp::holds(inst, None)).flatten();
    let mut reg: Registry = state::load(&path)?;
    let before = reg.clone();
    let r = f(&mut reg)?;
    let (before, written) = if touched(&before.agents, &reg.agents).is_none() {
        // Unchanged: nothing is written, but an index found stale is rebuilt.
        if mirrored.is_some() || !used {
            return Ok((r, None));
        }
        (None, Vec::new())
    } else {
        let bytes = state::encode(&reg);
        crate::fs::atomic_write(&path, &bytes)?;
        if !used {
            return Ok((r, None));
        }
        (mirrored.map(|buckets| (before, buckets)), bytes)
    };
    let index = Index {
        _lock: lock,
        inst: inst.clone(),
        before,
        after: reg,
        written,
    };
    Ok((r, Some(index)))
}

/// The names whose record may differ between the lists `old` and `new`: those of the
/// agents between their longest common start and their longest common end (a change adds,
/// replaces or removes a few agents: the rest is compared, not looked up). `None` when the
/// lists are equal.
fn touched<'a>(old: &'a [Agent], new: &'a [Agent]) -> Option<BTreeSet<&'a str>> {
    let start = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    if start == old.len() && start == new.len() {
        return None;
    }
    let most = old.len().min(new.len()) - start;
    let end = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(most)
        .take_while(|(a, b)| a == b)
        .count();
    let changed = old[start..old.len() - end]
        .iter()
        .chain(&new[start..new.len() - end]);
    Some(changed.map(|a| a.name.as_str()).collect())
}

/// The records of `agents` by bucket (of `buckets`) and name, in the buckets `keep` keeps:
/// the first of a name as a search from the start finds it; names no file can have are
/// left out (the index never answers for them).
fn grouped(
    agents: &[Agent],
    buckets: u32,
    keep: impl Fn(u32) -> bool,
) -> BTreeMap<u32, BTreeMap<&str, &Agent>> {
    let mut groups: BTreeMap<u32, BTreeMap<&str, &Agent>> = BTreeMap::new();
    for a in agents {
        let b = bucket::of(&a.name, buckets);
        if keep(b) && names::is_agent_name(&a.name) {
            groups.entry(b).or_default().entry(&a.name).or_insert(a);
        }
    }
    groups
}

/// Bring a folder that mirrored the registry before a change to mirror `after`, just stored
/// as `written`, by writing (or removing) the files of the buckets of the `touched` names;
/// then stamp it, if `agents.json` is still what was written. A registry grown or shrunk
/// past another number of buckets is written whole.
fn follow(
    inst: &Instance,
    after: &Registry,
    touched: &BTreeSet<&str>,
    written: &[u8],
    buckets: u32,
) -> Result<()> {
    if bucket::count(after.agents.len()) != buckets {
        return write_all(inst, after, written);
    }
    let dir = open_folder(inst)?;
    let changed: BTreeSet<u32> = touched
        .iter()
        .filter(|n| names::is_agent_name(n))
        .map(|n| bucket::of(n, buckets))
        .collect();
    let groups = grouped(&after.agents, buckets, |b| changed.contains(&b));
    for b in changed {
        match groups.get(&b) {
            Some(records) => put(&dir, b, &bucket::encode(records))?,
            None => remove(&dir, b)?,
        }
    }
    stamp(inst, written, buckets)
}

/// Write the whole index from `agents.json` (the caller holds the state lock).
fn rebuild(inst: &Instance) -> Result<()> {
    let path = inst.state_file("agents.json");
    let read = match read_versioned(&path) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(&path, e)),
    };
    if read.id.is_none() {
        return Ok(());
    }
    let reg: Registry = serde_json::from_slice(&read.bytes).map_err(|e| Error::Corrupt {
        path: path.clone(),
        why: format!("not valid state JSON: {e}"),
    })?;
    write_all(inst, &reg, &read.bytes)
}

/// Write the whole index of `reg`, stored as `written` (the caller holds the state lock):
/// every bucket's file whose content differs, no other file, then the stamp.
fn write_all(inst: &Instance, reg: &Registry, written: &[u8]) -> Result<()> {
    let buckets = bucket::count(reg.agents.len());
    let dir = open_folder(inst)?;
    let groups = grouped(&reg.agents, buckets, |_| true);
    // Only writers under the state lock, which this process holds, write in the folder:
    // whatever is not the file of a bucket goes (a temp file a killed writer left, the
    // files of an older index).
    let mut present = HashSet::new();
    for (entry, _) in dir.entries().map_err(|e| Error::io(dir.path(), e))? {
        match entry.to_str().and_then(bucket::number) {
            Some(b) if groups.contains_key(&b) => {
                present.insert(b);
            }
            _ => {
                let _ = dir.unlink(&entry);
            }
        }
    }
    for (b, records) in &groups {
        let bytes = bucket::encode(records);
        if !present.contains(b) || read_in(&dir, *b).as_deref() != Some(&bytes[..]) {
            put(&dir, *b, &bytes)?;
        }
    }
    stamp(inst, written, buckets)
}

/// The folder of the index, made when missing.
fn open_folder(inst: &Instance) -> Result<Dir> {
    let path = folder(inst);
    crate::fs::owned::folder(&path, true).map_err(|e| Error::io(&path, e))
}

/// The content of the file of bucket `b` in the folder, if it can be read (never waiting:
/// a FIFO there reads as nothing).
fn read_in(dir: &Dir, b: u32) -> Option<Vec<u8>> {
    use std::io::Read;
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let mut f = dir
        .open_file(&bucket::file_name(b), flags, Mode::empty())
        .ok()?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Write the file of bucket `b` in the folder: created with its content when there is none,
/// else replaced atomically. Never flushed: a crash of the system changes the boot, and the
/// index is rebuilt. A file created and not yet whole (or cut short by a writer killed) is
/// only seen while the stamp does not match, or fails to parse: the reader falls back.
fn put(dir: &Dir, b: u32, bytes: &[u8]) -> Result<()> {
    crate::fs::create_or_replace_in(dir, bucket::file_name(b).as_ref(), bytes)
}

fn remove(dir: &Dir, b: u32) -> Result<()> {
    let file = bucket::file_name(b);
    match dir.unlink(file.as_ref()) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::io(dir.path().join(file), e)),
        _ => Ok(()),
    }
}

/// Write the stamp for the folder as it is, in `buckets`, and the `agents.json` that holds
/// `registry` (the bytes written or read under the lock); none when `agents.json` is no
/// longer that (changed by another program meanwhile: the index stays stale).
fn stamp(inst: &Instance, registry: &[u8], buckets: u32) -> Result<()> {
    let path = inst.state_file("agents.json");
    let read = read_versioned(&path).map_err(|e| Error::io(&path, e))?;
    let Some(id) = read.id.filter(|_| read.bytes == registry) else {
        return Ok(());
    };
    let Some(now) = Stamp::now(inst, None, buckets).filter(|n| n.registry == id) else {
        return Ok(());
    };
    let mut bytes = serde_json::to_vec(&now).expect("a stamp serializes");
    bytes.push(b'\n');
    crate::fs::atomic_write_unsynced(&inst.state_file(STAMP), &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agents(names: &[&str]) -> Vec<Agent> {
        names
            .iter()
            .map(|n| Agent {
                name: n.to_string(),
                backend: "external".into(),
                ..Agent::default()
            })
            .collect()
    }

    fn set<'a>(names: &[&'a str]) -> Option<BTreeSet<&'a str>> {
        Some(names.iter().copied().collect())
    }

    #[test]
    fn touched_names_are_those_between_the_common_start_and_end() {
        let abc = agents(&["a", "b", "c"]);
        assert_eq!(touched(&abc, &abc), None);
        assert_eq!(touched(&abc, &agents(&["a", "b", "c", "d"])), set(&["d"]));
        assert_eq!(touched(&abc, &agents(&["a", "c"])), set(&["b"]));
        assert_eq!(touched(&abc, &agents(&["x", "a", "b", "c"])), set(&["x"]));
        assert_eq!(touched(&abc, &[]), set(&["a", "b", "c"]));
        let mut replaced = abc.clone();
        replaced[1].model = Some("m".into());
        assert_eq!(touched(&abc, &replaced), set(&["b"]));
        // A name twice (by hand): the removal of its first is a change of its record.
        let twice = agents(&["a", "b", "a"]);
        assert_eq!(touched(&twice, &agents(&["b", "a"])), set(&["a"]));
    }
}
