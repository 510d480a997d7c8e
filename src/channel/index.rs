//! The mention index (`_state/mentions/`): for each agent, the ids of the entries that are in
//! its inbox, so that an inbox, or its unread count, costs what it holds and not the channel.
//!
//! ```text
//! _state/mentions/_head    40 bytes: "awmi", version (u32), the index record (id,
//!                          offset, length, u64 each) of the last entry covered, and
//!                          the largest id the agents' files may hold (u64)
//! _state/mentions/AGENT    the ids (u64 each) of the entries covered that mention AGENT
//!                          and are not from AGENT, ascending
//! ```
//!
//! All numbers are little-endian. Appends keep the index under the channel lock: the head
//! says which ids may be written, the ids go to the agents' files, then the head names the
//! new last entry. A reader trusts only
//! the ids up to the head's entry, and only when the log holds that entry where the head says
//! (as `channel.idx` is checked). An index behind the log (a crash between the two steps, an
//! append by an older aw or another program) is caught up from the log under the channel
//! lock, after cutting any id past the head; one that does not match the log (missing, damaged,
//! the log replaced) is rebuilt whole. An index of a newer version is left alone, and the
//! inbox is read from the log as before.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use super::format::{Entry, RECORD, Record};
use super::log::{Log, SCAN_CHUNK, record_valid};
use crate::error::{Error, Result};
use crate::fs::Lock;
use crate::fs::netfs::Fresh;
use crate::fs::owned::{self, CREATE};
use crate::names;

/// Version of the on-disk format, in the head.
pub const VERSION: u32 = 2;
/// The directory of the index under `_state/`.
pub const DIR: &str = "mentions";
/// The head file in that directory (agent names start with a letter).
pub const HEAD: &str = "_head";
const MAGIC: &[u8; 4] = b"awmi";
/// Magic, version, the last entry's record, the largest id written, the number of ids in
/// the agents' files, the boot.
const HEAD_LEN: usize = 8 + RECORD as usize + 24;
/// Bytes per id in an agent's file.
const ID: u64 = 8;
/// How many ids a rebuild holds before writing them out.
const FLUSH_IDS: usize = 1 << 20;

/// What a readable head says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct At {
    /// Entries through this one are covered (id 0: none).
    last: Record,
    /// The agents' files may hold ids up to this one (greater than `last`'s while an append
    /// or a catch-up is under way).
    written: u64,
    /// How many ids the agents' files hold together.
    ids: u64,
    /// The boot of the system that wrote the head ([`this_boot`]).
    boot: u64,
}

/// What the head says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Head {
    /// No index: an instance written before it existed.
    Missing,
    /// Not a head this version can read (short, bad magic, an older version).
    Unusable,
    /// A newer format: left alone.
    Newer(u32),
    At(At),
}

const NOTHING: Record = Record {
    id: 0,
    offset: 0,
    len: 0,
};

/// The boot of this system, as the head records it: a crash (power loss, a kernel panic)
/// is followed by a new boot, and may have kept a write of one file and lost one of
/// another, which the files alone do not show.
fn this_boot() -> u64 {
    crate::host::boot_id().map_or(0, |b| crate::hash::fnv1a(b.as_bytes()))
}

/// Is `e` an error that [`owned::open`] refused (a link, a FIFO)?
fn refused(e: &io::Error) -> bool {
    owned::is_refused(e)
}

/// Files opened under the channel lock before an append writes its entries.
pub(super) struct Prepared {
    /// The head, opened for writing; `None` when there is none.
    head: io::Result<Option<Fresh>>,
    /// The files of the agents the new entries mention, opened for appending.
    files: BTreeMap<String, Fresh>,
}

/// The mention index of one channel, kept from its log.
pub(super) struct MentionIndex<'a> {
    dir: PathBuf,
    chan: &'a Log,
}

impl<'a> MentionIndex<'a> {
    pub(super) fn for_log(chan: &'a Log) -> MentionIndex<'a> {
        MentionIndex {
            dir: chan.state_dir().join(DIR),
            chan,
        }
    }

    fn head_path(&self) -> PathBuf {
        self.dir.join(HEAD)
    }

    fn head(&self) -> io::Result<Head> {
        let path = self.head_path();
        match owned::open_read(&path) {
            Ok(f) => read_head(&Fresh::new(f, &path)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Head::Missing),
            Err(e) => Err(e),
        }
    }

    fn write_head(&self, at: &At) -> io::Result<()> {
        let f = owned::open(&self.head_path(), OFlag::O_WRONLY | OFlag::O_CREAT, CREATE)?;
        write_head(&f, at)
    }

    /// The entry the head names, when the log (of `size` bytes) holds it there, with what
    /// the head says.
    fn covered(&self, log: &Fresh, size: u64) -> io::Result<Option<At>> {
        Ok(match self.head()? {
            Head::At(at) if at.last == NOTHING || record_valid(log, &at.last, size) => Some(at),
            _ => None,
        })
    }

    /// Under the channel lock, before an append of `entries`: open the head and the files
    /// of the agents they mention. A link or a FIFO in their place is refused here, before
    /// anything is written.
    pub(super) fn prepare(&self, entries: &[Entry]) -> Result<Prepared> {
        let path = self.head_path();
        let head = match owned::open(&path, OFlag::O_RDWR, Mode::empty()) {
            Ok(f) => Ok(Some(Fresh::new(f, &path))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) if refused(&e) => return Err(Error::io(path, e)),
            Err(e) => Err(e),
        };
        let mut files = BTreeMap::new();
        let mut ids = BTreeMap::new();
        for e in entries {
            collect(&mut ids, e);
        }
        if matches!(head, Ok(Some(_))) && !ids.is_empty() {
            match owned::folder(&self.dir, true) {
                Err(e) if refused(&e) => return Err(Error::io(&self.dir, e)),
                // Told by the append that needs it.
                _ => {}
            }
            for agent in ids.keys() {
                let path = self.dir.join(agent);
                match self.open_agent(&path) {
                    Ok(f) => {
                        files.insert(agent.clone(), f);
                    }
                    Err(e) if refused(&e) => return Err(Error::io(path, e)),
                    // Told by the append that needs it.
                    Err(_) => {}
                }
            }
        }
        Ok(Prepared { head, files })
    }

    /// `path`, an agent's file, opened for appending (created when missing).
    fn open_agent(&self, path: &Path) -> io::Result<Fresh> {
        let flags = OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CREAT;
        Ok(Fresh::new(owned::open(path, flags, CREATE)?, path))
    }

    /// Under the channel lock, after an append of `new` to a log (now `size` bytes) whose
    /// last entry was `before`: record the new entries' mentions, or catch up from the log.
    /// With `sync`, the ids and the head are flushed to stable storage with the entries.
    pub(super) fn appended(
        &self,
        prepared: Prepared,
        (log, size): (&Fresh, u64),
        before: Option<Record>,
        new: &[(&Entry, Record)],
        sync: bool,
    ) -> io::Result<()> {
        let Some(&(_, last)) = new.last() else {
            return Ok(());
        };
        let Prepared { head, mut files } = prepared;
        let Some(f) = head? else {
            return self.catch_up(log, size, sync);
        };
        // The head names the entry that was last, where it was: the index covers the log.
        let at = match read_head(&f)? {
            Head::Newer(_) => return Ok(()),
            Head::At(at) if at.last == before.unwrap_or(NOTHING) && at.written == at.last.id => at,
            _ => return self.catch_up(log, size, sync),
        };
        if at.boot != this_boot() && !self.whole(&at)? {
            return self.rebuild(log, size, sync);
        }
        let mut ids = BTreeMap::new();
        let mut added = 0;
        for (e, _) in new {
            added += collect(&mut ids, e) as u64;
        }
        let done = At {
            last,
            written: last.id,
            ids: at.ids + added,
            boot: this_boot(),
        };
        if !ids.is_empty() {
            // Said before the ids are written, so that an append that stops half way is
            // caught up (and its ids cut) by the next one.
            let pending = At {
                written: last.id,
                ..at
            };
            write_head(f.file(), &pending)?;
            let first = new[0].0.id;
            for (agent, bytes) in &ids {
                let file = match files.remove(agent) {
                    Some(file) => file,
                    None => self.open_agent(&self.dir.join(agent))?,
                };
                let held = Ids::new(&file)?;
                // A file cut through an id, or holding ids this append is to write: damaged.
                if held.size % ID != 0 || held.last()?.is_some_and(|l| l >= first) {
                    return self.rebuild(log, size, sync);
                }
                file.file().write_all(bytes)?;
                if sync {
                    file.file().sync_data()?;
                }
            }
        }
        write_head(f.file(), &done)?;
        if sync {
            f.file().sync_data()?;
        }
        Ok(())
    }

    /// Do the agents' files hold what the head `at` says: whole ids, none past its entry, as
    /// many as it counts? Asked after a new boot: a crash may have kept the head and lost
    /// ids written before it, neither file being flushed.
    fn whole(&self, at: &At) -> io::Result<bool> {
        let mut n = 0;
        for agent in self.agents()? {
            let Some(f) = self.open(&agent)? else {
                return Ok(false);
            };
            let ids = Ids::new(&f)?;
            if ids.size % ID != 0 || ids.last()?.is_some_and(|l| l > at.last.id) {
                return Ok(false);
            }
            n += ids.count;
        }
        Ok(n == at.ids)
    }

    /// Under the channel lock: rebuild the index whole from the log.
    fn rebuild(&self, log: &Fresh, size: u64, sync: bool) -> io::Result<()> {
        self.write_head(&At {
            last: NOTHING,
            written: u64::MAX,
            ids: 0,
            boot: this_boot(),
        })?;
        self.catch_up(log, size, sync)
    }

    /// Under the channel lock: bring the index up to the log, from the head's entry when the
    /// log holds it there, else from scratch.
    fn catch_up(&self, log: &Fresh, size: u64, sync: bool) -> io::Result<()> {
        let (head, written) = match self.head()? {
            Head::Newer(_) => return Ok(()),
            Head::At(at) if at.last == NOTHING || record_valid(log, &at.last, size) => {
                (at.last, at.written)
            }
            _ => (NOTHING, u64::MAX),
        };
        let from = head.id;
        if written == from && from >= self.chan.last_id().map_err(io::Error::other)? {
            // Caught up already (by the append a reader waited for).
            return Ok(());
        }
        owned::folder(&self.dir, true)?;
        self.write_head(&At {
            last: head,
            written: u64::MAX,
            ids: 0,
            boot: this_boot(),
        })?;
        // Ids past the head are from an append that did not finish: cut them.
        let mut kept = 0;
        for agent in self.agents()? {
            kept += self.cut(&agent, from)?;
        }
        let mut ids = BTreeMap::new();
        let (mut pending, mut last, mut first_new) = (0usize, from, from + 1);
        let mut failed = None;
        let mut added = 0;
        self.chan
            .scan_since(from, SCAN_CHUNK, |e| {
                last = e.id;
                pending += collect(&mut ids, &e);
                if pending >= FLUSH_IDS {
                    if let Err(err) = self.add(&ids, first_new, sync) {
                        failed = Some(err);
                        return false;
                    }
                    added += pending as u64;
                    ids.clear();
                    pending = 0;
                    first_new = e.id + 1;
                }
                true
            })
            .map_err(io::Error::other)?;
        if let Some(err) = failed {
            return Err(err);
        }
        self.add(&ids, first_new, sync)?;
        added += pending as u64;
        let at = |last: Record| At {
            last,
            written: last.id,
            ids: kept + added,
            boot: this_boot(),
        };
        if last == from {
            return self.write_head(&at(head));
        }
        match self.chan.locate(log, size, last) {
            Some(r) => self.write_head(&at(r)),
            // The index of the log does not lead to its last entry: leave the head where it
            // was; the next catch-up reads again from there.
            None => Ok(()),
        }
    }

    /// The agents that have a file.
    fn agents(&self) -> io::Result<Vec<String>> {
        let names = match owned::files(&self.dir) {
            Ok(names) => names,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(names
            .into_iter()
            .filter_map(|n| n.into_string().ok())
            .filter(|n| names::is_agent_name(n))
            .collect())
    }

    /// Cut `agent`'s file to the ids not greater than `through`; how many it keeps.
    fn cut(&self, agent: &str, through: u64) -> io::Result<u64> {
        let path = self.dir.join(agent);
        let f = owned::open(&path, OFlag::O_RDWR, Mode::empty())?;
        let f = Fresh::new(f, &path);
        let ids = Ids::new(&f)?;
        let keep = ids.first_after(through)?;
        if keep < ids.count || ids.size % ID != 0 {
            f.file().set_len(keep * ID)?;
        }
        Ok(keep)
    }

    /// Append the ids to the agents' files; ids from `first` on that a file already holds
    /// (an append that did not finish) are cut first.
    fn add(&self, ids: &BTreeMap<String, Vec<u8>>, first: u64, sync: bool) -> io::Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        owned::folder(&self.dir, true)?;
        for (agent, bytes) in ids {
            let f = self.open_agent(&self.dir.join(agent))?;
            let held = Ids::new(&f)?;
            let keep = held.first_after(first - 1)?;
            if keep < held.count || held.size % ID != 0 {
                f.file().set_len(keep * ID)?;
            }
            f.file().write_all(bytes)?;
            if sync {
                f.file().sync_data()?;
            }
        }
        Ok(())
    }

    /// How far the index covers the log for `agent`, catching it up first when it is behind
    /// and rebuilding it when it is damaged (under the channel lock). `None` when it cannot
    /// be used: a newer version, or a catch-up that could not be made (no right to write,
    /// ...); the caller then reads the log.
    pub(super) fn ready(&self, agent: &str) -> Result<Option<Ready>> {
        // On a network file system another host's client may not show a new agent file or
        // its new length yet (metadata cache): the inbox is read from the channel there.
        if self
            .chan
            .path()
            .parent()
            .is_some_and(crate::fs::netfs::is_network_fs)
        {
            return Ok(None);
        }
        let Some((log, size)) = self.chan.open_log()? else {
            return Ok(Some(Ready::EMPTY));
        };
        let newest = self.chan.last_id()?;
        if let Ok(Some(at)) = self.covered(&log, size)
            && at.last.id >= newest
            && let Some(file) = self.sound(&at, agent)
        {
            return Ok(Some(Ready {
                through: at.last.id,
                file,
            }));
        }
        if matches!(self.head(), Ok(Head::Newer(_))) {
            return Ok(None);
        }
        let Ok(_lock) = Lock::exclusive(self.chan.lock_path()) else {
            return Ok(None);
        };
        let Some((log, size)) = self.chan.open_log()? else {
            return Ok(Some(Ready::EMPTY));
        };
        let damaged =
            matches!(self.covered(&log, size), Ok(Some(at)) if self.sound(&at, agent).is_none());
        let done = if damaged {
            self.rebuild(&log, size, false)
        } else {
            self.catch_up(&log, size, false)
        };
        if done.is_err() {
            return Ok(None);
        }
        Ok(match self.covered(&log, size) {
            Ok(Some(at)) if at.last.id >= newest => self.sound(&at, agent).map(|file| Ready {
                through: at.last.id,
                file,
            }),
            _ => None,
        })
    }

    /// Can `agent`'s file be trusted, by what the head `at` says? Whole ids, none past the
    /// head's entry; after a new boot, every agent's file so, and as many ids as it counts.
    /// When it can, the file as it was checked (`None`: the agent has none, no ids); the
    /// inbox is read from that same open file.
    fn sound(&self, at: &At, agent: &str) -> Option<Option<Fresh>> {
        if at.written != at.last.id {
            return None;
        }
        if at.boot != this_boot() && !self.whole(at).unwrap_or(false) {
            return None;
        }
        let f = match self.open(agent) {
            Ok(Some(f)) => f,
            Ok(None) => return Some(None),
            Err(_) => return None,
        };
        let whole = Ids::new(&f).is_ok_and(|ids| {
            ids.size % ID == 0 && ids.last().is_ok_and(|l| l.is_none_or(|l| l <= at.last.id))
        });
        whole.then_some(Some(f))
    }

    /// Under the channel lock it takes: rebuild the index whole, when one of its files
    /// turned out wrong (an id whose entry does not mention its agent). Best effort: the
    /// caller reads the log.
    pub(super) fn repair(&self) {
        let Ok(_lock) = Lock::exclusive(self.chan.lock_path()) else {
            return;
        };
        if let Ok(Some((log, size))) = self.chan.open_log() {
            let _ = self.rebuild(&log, size, false);
        }
    }

    fn open(&self, agent: &str) -> io::Result<Option<Fresh>> {
        let path = self.dir.join(agent);
        match owned::open_read(&path) {
            Ok(f) => Ok(Some(Fresh::new(f, &path))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// What [`MentionIndex::ready`] found: how far the index covers the log, and the agent's
/// file as it was checked (`None`: no ids).
pub(super) struct Ready {
    /// The id of the last entry the index covers.
    pub(super) through: u64,
    file: Option<Fresh>,
}

impl Ready {
    /// An index of an empty channel.
    const EMPTY: Ready = Ready {
        through: 0,
        file: None,
    };

    /// The ids in the agent's inbox greater than `after` and not greater than `through`.
    pub(super) fn ids(&self, after: u64) -> io::Result<Vec<u64>> {
        let Some(f) = &self.file else {
            return Ok(Vec::new());
        };
        let ids = Ids::new(f)?;
        let from = ids.first_after(after)?;
        let to = ids.first_after(self.through)?;
        if to <= from {
            return Ok(Vec::new());
        }
        let b = f.read_range(from * ID, to * ID)?;
        Ok(b.chunks_exact(ID as usize)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }

    /// How many ids [`Ready::ids`] would return, without reading them.
    pub(super) fn count(&self, after: u64) -> io::Result<u64> {
        let Some(f) = &self.file else {
            return Ok(0);
        };
        let ids = Ids::new(f)?;
        Ok(ids
            .first_after(self.through)?
            .saturating_sub(ids.first_after(after)?))
    }
}

fn read_head(f: &Fresh) -> io::Result<Head> {
    let mut b = [0u8; HEAD_LEN];
    let n = match f.read_exact_at(&mut b, 0) {
        Ok(()) => HEAD_LEN,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            let got = f.read_range(0, HEAD_LEN as u64)?;
            let n = got.len().min(HEAD_LEN);
            b[..n].copy_from_slice(&got[..n]);
            n
        }
        Err(e) => return Err(e),
    };
    if n < 8 || &b[..4] != MAGIC {
        return Ok(Head::Unusable);
    }
    let version = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes"));
    if version > VERSION {
        return Ok(Head::Newer(version));
    }
    if version != VERSION || n < HEAD_LEN {
        return Ok(Head::Unusable);
    }
    let r = 8 + RECORD as usize;
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    Ok(Head::At(At {
        last: Record::decode(&b[8..r]),
        written: u64_at(r),
        ids: u64_at(r + 8),
        boot: u64_at(r + 16),
    }))
}

fn write_head(f: &std::fs::File, at: &At) -> io::Result<()> {
    let mut b = [0u8; HEAD_LEN];
    let r = 8 + RECORD as usize;
    b[..4].copy_from_slice(MAGIC);
    b[4..8].copy_from_slice(&VERSION.to_le_bytes());
    b[8..r].copy_from_slice(&at.last.encode());
    b[r..r + 8].copy_from_slice(&at.written.to_le_bytes());
    b[r + 8..r + 16].copy_from_slice(&at.ids.to_le_bytes());
    b[r + 16..].copy_from_slice(&at.boot.to_le_bytes());
    f.write_all_at(&b, 0)
}

/// Add the inbox ids of `e` to `ids` (agent → encoded ids); how many were added.
fn collect(ids: &mut BTreeMap<String, Vec<u8>>, e: &Entry) -> usize {
    let mut n = 0;
    for (i, m) in e.mentions.iter().enumerate() {
        // Each agent once, never the sender, and only names that can be a file name.
        if *m == e.from || e.mentions[..i].contains(m) || !names::is_agent_name(m) {
            continue;
        }
        ids.entry(m.clone())
            .or_default()
            .extend_from_slice(&e.id.to_le_bytes());
        n += 1;
    }
    n
}

/// The ids of one agent's file, read lazily.
struct Ids<'a> {
    file: &'a Fresh,
    size: u64,
    count: u64,
}

impl<'a> Ids<'a> {
    fn new(file: &'a Fresh) -> io::Result<Ids<'a>> {
        let size = file.size()?;
        Ok(Ids {
            file,
            size,
            count: size / ID,
        })
    }

    fn get(&self, k: u64) -> io::Result<u64> {
        let mut b = [0u8; ID as usize];
        self.file.read_exact_at(&mut b, k * ID)?;
        Ok(u64::from_le_bytes(b))
    }

    /// The last id (of the whole ids), `None` when there is none.
    fn last(&self) -> io::Result<Option<u64>> {
        match self.count {
            0 => Ok(None),
            n => self.get(n - 1).map(Some),
        }
    }

    /// The first slot whose id is greater than `after` (`count` when there is none).
    fn first_after(&self, after: u64) -> io::Result<u64> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.get(mid)? <= after {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }
}
