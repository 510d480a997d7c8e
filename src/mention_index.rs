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
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use crate::channel::{Channel, Damage, Entry, RECORD, Record, SCAN_CHUNK, record_valid};
use crate::error::Result;
use crate::fs::Lock;
use crate::fs::netfs::Fresh;
use crate::names;

/// Version of the on-disk format, in the head.
pub const VERSION: u32 = 1;
/// The directory of the index under `_state/`.
pub const DIR: &str = "mentions";
/// The head file in that directory (agent names start with a letter).
pub const HEAD: &str = "_head";
const MAGIC: &[u8; 4] = b"awmi";
const HEAD_LEN: usize = 16 + RECORD as usize;
/// Bytes per id in an agent's file.
const ID: u64 = 8;
/// How many ids a rebuild holds before writing them out.
const FLUSH_IDS: usize = 1 << 20;

/// What the head says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Head {
    /// No index: an instance written before it existed.
    Missing,
    /// Not a head this version can read (short, or bad magic).
    Unusable,
    /// A newer format: left alone.
    Newer(u32),
    /// Entries through this one are covered (id 0: none), and the agents' files may hold
    /// ids up to the second (greater while an append or a catch-up is under way).
    At(Record, u64),
}

const NOTHING: Record = Record {
    id: 0,
    offset: 0,
    len: 0,
};

/// The mention index of one channel.
pub struct MentionIndex {
    dir: PathBuf,
}

impl MentionIndex {
    pub(crate) fn for_channel(ch: &Channel) -> MentionIndex {
        MentionIndex {
            dir: ch.state_dir().join(DIR),
        }
    }

    fn head_path(&self) -> PathBuf {
        self.dir.join(HEAD)
    }

    fn head(&self) -> io::Result<Head> {
        let path = self.head_path();
        match File::open(&path) {
            Ok(f) => read_head(&Fresh::new(f, &path)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Head::Missing),
            Err(e) => Err(e),
        }
    }

    fn write_head(&self, r: &Record, written: u64) -> io::Result<()> {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.head_path())?;
        write_head(&f, r, written)
    }

    /// The entry the head names, when the log (of `size` bytes) holds it there.
    fn covered(&self, log: &Fresh, size: u64) -> io::Result<Option<Record>> {
        Ok(match self.head()? {
            Head::At(r, _) if r == NOTHING || record_valid(log, &r, size) => Some(r),
            _ => None,
        })
    }

    /// Under the channel lock, after an append of `new` to a log (now `size` bytes) whose
    /// last entry was `before`: record the new entries' mentions, or catch up from the log.
    pub(crate) fn appended(
        &self,
        ch: &Channel,
        log: &Fresh,
        size: u64,
        before: Option<Record>,
        new: &[(&Entry, Record)],
    ) -> io::Result<()> {
        let Some(&(_, last)) = new.last() else {
            return Ok(());
        };
        let path = self.head_path();
        let f = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => Fresh::new(f, &path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return self.catch_up(ch, log, size),
            Err(e) => return Err(e),
        };
        // The head names the entry that was last, where it was: the index covers the log.
        match read_head(&f)? {
            Head::Newer(_) => return Ok(()),
            Head::At(r, written) if r == before.unwrap_or(NOTHING) && written == r.id => {}
            _ => return self.catch_up(ch, log, size),
        }
        let mut ids = BTreeMap::new();
        for (e, _) in new {
            collect(&mut ids, e);
        }
        if !ids.is_empty() {
            // Said before the ids are written, so that an append that stops half way is
            // caught up (and its ids cut) by the next one.
            write_head(f.file(), &before.unwrap_or(NOTHING), last.id)?;
            self.add(&ids, new[0].0.id)?;
        }
        write_head(f.file(), &last, last.id)
    }

    /// Under the channel lock: bring the index up to the log, from the head's entry when the
    /// log holds it there, else from scratch.
    pub(crate) fn catch_up(&self, ch: &Channel, log: &Fresh, size: u64) -> io::Result<()> {
        let (head, written) = match self.head()? {
            Head::Newer(_) => return Ok(()),
            Head::At(r, w) if r == NOTHING || record_valid(log, &r, size) => (r, w),
            _ => (NOTHING, u64::MAX),
        };
        let from = head.id;
        if written == from && from >= ch.last_id().map_err(io::Error::other)? {
            // Caught up already (by the append a reader waited for).
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir)?;
        self.write_head(&head, u64::MAX)?;
        // Ids past the head are from an append that did not finish: cut them.
        for agent in self.agents()? {
            self.cut(&agent, from)?;
        }
        let mut ids = BTreeMap::new();
        let (mut pending, mut last, mut first_new) = (0usize, from, from + 1);
        let mut failed = None;
        ch.scan_since(from, SCAN_CHUNK, |e| {
            last = e.id;
            pending += collect(&mut ids, &e);
            if pending >= FLUSH_IDS {
                if let Err(err) = self.add(&ids, first_new) {
                    failed = Some(err);
                    return false;
                }
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
        self.add(&ids, first_new)?;
        if last == from {
            return self.write_head(&head, from);
        }
        match ch.locate(log, size, last) {
            Some(r) => self.write_head(&r, r.id),
            // The index of the log does not lead to its last entry: leave the head where it
            // was; the next catch-up reads again from there.
            None => Ok(()),
        }
    }

    /// The agents that have a file.
    fn agents(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for d in rd {
            if let Some(name) = d?.file_name().to_str()
                && names::is_agent_name(name)
            {
                out.push(name.to_string());
            }
        }
        Ok(out)
    }

    /// Cut `agent`'s file to the ids not greater than `through`.
    fn cut(&self, agent: &str, through: u64) -> io::Result<()> {
        let path = self.dir.join(agent);
        let f = OpenOptions::new().read(true).write(true).open(&path)?;
        let f = Fresh::new(f, &path);
        let ids = Ids::new(&f)?;
        let keep = ids.first_after(through)?;
        if keep < ids.count || ids.size % ID != 0 {
            f.file().set_len(keep * ID)?;
        }
        Ok(())
    }

    /// Append the ids to the agents' files; ids from `first` on that a file already holds
    /// (an append that did not finish) are cut first.
    fn add(&self, ids: &BTreeMap<String, Vec<u8>>, first: u64) -> io::Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir)?;
        for (agent, bytes) in ids {
            let path = self.dir.join(agent);
            let f = OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .open(&path)?;
            let f = Fresh::new(f, &path);
            let held = Ids::new(&f)?;
            let keep = held.first_after(first - 1)?;
            if keep < held.count || held.size % ID != 0 {
                f.file().set_len(keep * ID)?;
            }
            f.file().write_all(bytes)?;
        }
        Ok(())
    }

    /// How far the index covers the log, catching it up first when it is behind (under the
    /// channel lock). `None` when it cannot be used: a newer version, or a catch-up that
    /// could not be made (no right to write, ...); the caller then reads the log.
    pub(crate) fn ready(&self, ch: &Channel) -> Result<Option<u64>> {
        // On a network file system another host's client may not show a new agent file or
        // its new length yet (metadata cache): the inbox is read from the channel there.
        if ch
            .log_path()
            .parent()
            .is_some_and(crate::fs::netfs::is_network_fs)
        {
            return Ok(None);
        }
        let Some((log, size)) = ch.open_log()? else {
            return Ok(Some(0));
        };
        let newest = ch.last_id()?;
        if let Ok(Some(r)) = self.covered(&log, size)
            && r.id >= newest
        {
            return Ok(Some(r.id));
        }
        if matches!(self.head(), Ok(Head::Newer(_))) {
            return Ok(None);
        }
        let Ok(_lock) = Lock::exclusive(ch.lock_path()) else {
            return Ok(None);
        };
        let Some((log, size)) = ch.open_log()? else {
            return Ok(Some(0));
        };
        if self.catch_up(ch, &log, size).is_err() {
            return Ok(None);
        }
        Ok(match self.covered(&log, size) {
            Ok(Some(r)) if r.id >= newest => Some(r.id),
            _ => None,
        })
    }

    /// The ids in `agent`'s inbox greater than `after` and not greater than `through`.
    pub(crate) fn ids(&self, agent: &str, after: u64, through: u64) -> io::Result<Vec<u64>> {
        let Some(f) = self.open(agent)? else {
            return Ok(Vec::new());
        };
        let ids = Ids::new(&f)?;
        let from = ids.first_after(after)?;
        let to = ids.first_after(through)?;
        if to <= from {
            return Ok(Vec::new());
        }
        let b = f.read_range(from * ID, to * ID)?;
        Ok(b.chunks_exact(ID as usize)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }

    /// How many ids [`MentionIndex::ids`] would return, without reading them.
    pub(crate) fn count(&self, agent: &str, after: u64, through: u64) -> io::Result<u64> {
        let Some(f) = self.open(agent)? else {
            return Ok(0);
        };
        let ids = Ids::new(&f)?;
        Ok(ids
            .first_after(through)?
            .saturating_sub(ids.first_after(after)?))
    }

    fn open(&self, agent: &str) -> io::Result<Option<Fresh>> {
        let path = self.dir.join(agent);
        match File::open(&path) {
            Ok(f) => Ok(Some(Fresh::new(f, &path))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
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
    let written = u64::from_le_bytes(b[HEAD_LEN - 8..].try_into().expect("8 bytes"));
    Ok(Head::At(Record::decode(&b[8..HEAD_LEN - 8]), written))
}

fn write_head(f: &File, r: &Record, written: u64) -> io::Result<()> {
    let mut b = [0u8; HEAD_LEN];
    b[..4].copy_from_slice(MAGIC);
    b[4..8].copy_from_slice(&VERSION.to_le_bytes());
    b[8..HEAD_LEN - 8].copy_from_slice(&r.encode());
    b[HEAD_LEN - 8..].copy_from_slice(&written.to_le_bytes());
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

/// Appending to the channel, defined here, above the log: every append also records the
/// mentions of its entries in the index, under the same lock.
impl Channel {
    /// Append a message; the caller has validated `from` and resolved `mentions`.
    /// Takes the channel lock, assigns the next id, and writes the whole entry with one
    /// `write` on an `O_APPEND` descriptor. With `sync`, the data is fdatasync'd before
    /// returning. Once the entry is written the append has succeeded: a failure to index it
    /// is returned with the damage found at the tail of the log (and worked around).
    pub fn append(
        &self,
        from: &str,
        message: &str,
        mentions: Vec<String>,
        sync: bool,
    ) -> Result<(Entry, Vec<Damage>)> {
        let (mut entries, damage) =
            self.append_many(from, vec![(message.to_string(), mentions)], sync)?;
        let entry = entries.pop().expect("one message gives one entry");
        Ok((entry, damage))
    }

    /// Append several messages from `from`, each with its resolved mentions, as [`append`]
    /// does one: under one lock, with dense ids, the entries written together with one
    /// `write`, each exactly as a single append would write it, and one index record each.
    /// Every message must be valid, or nothing is written. No messages: nothing is done.
    ///
    /// [`append`]: Channel::append
    pub fn append_many(
        &self,
        from: &str,
        messages: Vec<(String, Vec<String>)>,
        sync: bool,
    ) -> Result<(Vec<Entry>, Vec<Damage>)> {
        self.append_many_with(from, messages, sync, |log, size, before, new| {
            MentionIndex::for_channel(self).appended(self, log, size, before, new)
        })
    }
}
