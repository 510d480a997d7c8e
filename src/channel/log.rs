//! The log, `channel.md`, and its offset index, `_state/channel.idx`: the append under the
//! channel lock, and the reads, which find where to start through the index and check every
//! record they rely on against the log (see [`format`](super::format) for the entries).

use std::io::{self, Write};

use nix::fcntl::OFlag;
use std::path::{Path, PathBuf};

use super::format::{
    Batch, Damage, Entry, RECORD, Record, parse_all, parse_entry, parse_header, render,
    validate_message,
};
use crate::error::{Error, IoContext, Result};
use crate::fs::Lock;
use crate::fs::netfs::Fresh;
use crate::fs::owned::{self, CREATE};
use crate::instance::Instance;

/// How much of the log a streaming read takes at a time, in bytes (more when one entry is
/// longer).
pub const SCAN_CHUNK: u64 = 8 << 20;

/// Bytes `from..size` of the log.
fn read_range(log: &Fresh, from: u64, size: u64) -> std::io::Result<Vec<u8>> {
    log.read_range(from, size)
}

/// Where a read starts: a byte offset of the log, the id that entries from there must exceed
/// to be valid, and, when the index names it, the id and offset of the first valid entry the
/// read must meet (a check of the index, not of the log).
#[derive(Debug, Clone, Copy)]
struct Start {
    offset: u64,
    floor: u64,
    first: Option<(u64, u64)>,
}

const FROM_THE_START: Start = Start {
    offset: 0,
    floor: 0,
    first: None,
};

impl Start {
    fn at(offset: u64, floor: u64) -> Start {
        Start {
            offset,
            floor,
            first: None,
        }
    }
}

/// What a read returns.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// Entries with an id greater than this.
    After(u64),
    /// The last so many entries.
    Last(usize),
}

/// The index as an append finds it, under the channel lock.
struct IndexFile {
    file: Fresh,
    /// Its size, and how many of its bytes are records to keep.
    len: u64,
    keep: u64,
    /// The last record kept: the log is parsed from where its entry ends.
    base: Option<Record>,
    /// A reader marked the index as wrong: it is rebuilt and the mark removed.
    marked: bool,
}

impl IndexFile {
    /// Cut off what is not kept, then append `records`.
    fn update(&mut self, records: &[u8]) -> std::io::Result<()> {
        if self.len != self.keep {
            self.file.file().set_len(self.keep)?;
        }
        self.file.file().write_all(records)
    }
}

/// The log of one instance's channel, with its offset index.
pub(super) struct Log {
    log: PathBuf,
    index: PathBuf,
    stale: PathBuf,
    lock: PathBuf,
}

impl Log {
    pub(super) fn new(inst: &Instance) -> Log {
        Log {
            log: inst.channel_path(),
            index: inst.state_file("channel.idx"),
            stale: inst.state_file("channel.idx.stale"),
            lock: inst.state_file("channel.lock"),
        }
    }

    /// `channel.md`.
    pub(super) fn path(&self) -> &Path {
        &self.log
    }

    /// The lock file every writer of the channel takes.
    pub(super) fn lock_path(&self) -> &Path {
        &self.lock
    }

    /// The directory of the channel's state files (`_state/`).
    pub(super) fn state_dir(&self) -> &Path {
        self.lock.parent().unwrap_or(Path::new("."))
    }

    /// The log opened for reading, with its size; `None` when there is no log yet.
    pub(super) fn open_log(&self) -> Result<Option<(Fresh, u64)>> {
        let log = match owned::open_read(&self.log) {
            Ok(f) => Fresh::new(f, &self.log),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&self.log, e)),
        };
        let size = log.size().at(&self.log)?;
        Ok(Some((log, size)))
    }

    /// Where the entry `id` lies in `log` (of `size` bytes), as the index records it and the
    /// log confirms; `None` when the index has no such record or the log disagrees.
    pub(super) fn locate(&self, log: &Fresh, size: u64, id: u64) -> Option<Record> {
        let recs = owned::open_read(&self.index)
            .and_then(|f| Records::open(Fresh::new(f, &self.index)))
            .ok()?;
        locate_in(&recs, log, size, id)
    }

    /// The entries with these ids (ascending), in order; an id the log does not hold is left
    /// out. Each entry is found through the index and read alone: the cost is that of the
    /// entries returned. Where the index does not lead to an entry, the log is read from the
    /// first id asked for.
    pub(super) fn get_many(&self, ids: &[u64]) -> Result<Vec<Entry>> {
        let Some(&first) = ids.first() else {
            return Ok(Vec::new());
        };
        let Some((log, size)) = self.open_log()? else {
            return Ok(Vec::new());
        };
        let recs =
            owned::open_read(&self.index).and_then(|f| Records::open(Fresh::new(f, &self.index)));
        let mut out = Vec::with_capacity(ids.len());
        if let Ok(recs) = &recs {
            for &id in ids {
                let Some(r) = locate_in(recs, &log, size, id) else {
                    break;
                };
                let buf = read_range(&log, r.offset, r.end()).at(&self.log)?;
                match parse_entry(&buf) {
                    Some((e, used)) if e.id == id && used as u64 == r.len => out.push(e),
                    _ => break,
                }
            }
            if out.len() == ids.len() {
                return Ok(out);
            }
        }
        // Read the log itself, as far as the last id asked for.
        out.clear();
        let last = *ids.last().expect("not empty");
        let mut want = ids.iter().copied().peekable();
        self.scan_since(first.saturating_sub(1), SCAN_CHUNK, |e| {
            while want.next_if(|&w| w < e.id).is_some() {}
            let more = e.id < last;
            if want.next_if_eq(&e.id).is_some() {
                out.push(e);
            }
            more && want.peek().is_some()
        })?;
        Ok(out)
    }

    /// The append of [`Channel::append_many`](super::Channel::append_many) (see there), with
    /// `prepare` called under the lock with the new entries before they are written (an error
    /// there writes nothing), and `after` once they are written: with what `prepare` gave, the
    /// log, its new size, the record of the entry before them and the new entries with their
    /// records. A failure of `after` is returned as [`Damage::MentionsNotUpdated`]: the
    /// entries are written.
    pub(super) fn append_many_with<P>(
        &self,
        from: &str,
        messages: Vec<(String, Vec<String>)>,
        sync: bool,
        prepare: impl FnOnce(&[Entry]) -> Result<P>,
        after: impl FnOnce(P, &Fresh, u64, Option<Record>, &[(&Entry, Record)]) -> io::Result<()>,
    ) -> Result<(Vec<Entry>, Vec<Damage>)> {
        if messages.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        for (message, _) in &messages {
            validate_message(message)?;
        }
        let _lock = Lock::exclusive(&self.lock)?;
        let log = owned::open(
            &self.log,
            OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CREAT,
            CREATE,
        )
        .map_err(|e| Error::create(&self.log, e))?;
        // On a network file system the end of the log and of the index are read as the
        // server has them: another host's append may not be in this host's cache yet.
        let log = Fresh::new(log, &self.log);
        let size = log.size().at(&self.log)?;
        // The index is derived data: when it cannot be read, the log is parsed whole.
        let index = match self.open_index(&log, size) {
            // A link or a FIFO planted as the index: refused before anything is written.
            Err(e) if owned::is_refused(&e) => return Err(Error::io(&self.index, e)),
            r => r,
        };
        let base = index.as_ref().ok().and_then(|ix| ix.base);
        let unindexed = base.map_or(0, |r| r.end());
        let buf = read_range(&log, unindexed, size).at(&self.log)?;
        let (found, mut damage) = parse_all(&buf, unindexed, base.map_or(0, |r| r.id));
        // Only a newline goes between a torn entry and the next one, and only when the torn
        // entry lacks one: an entry cut just before its final newline would become whole again
        // with it, and valid entries would share an id.
        let torn = matches!(damage.last(), Some(Damage::Unreadable { at_end: true, .. }))
            && buf.last() != Some(&b'\n');
        let before = found.last().map(|(_, r)| *r).or(base);
        let last = before.map_or(0, |r| r.id);
        let first = last
            .checked_add(1)
            .filter(|f| f.checked_add(messages.len() as u64 - 1).is_some())
            .ok_or_else(|| Error::Corrupt {
                path: self.log.clone(),
                why: if last == u64::MAX {
                    format!(
                        "entry #{last} has the largest id there is; nothing can be appended after it"
                    )
                } else {
                    format!("entry #{last} leaves too few ids for {} entries", messages.len())
                },
            })?;
        let timestamp = crate::time::now();
        let mut bytes = Vec::new();
        if torn {
            bytes.push(b'\n');
        }
        let mut records = Vec::with_capacity((found.len() + messages.len()) * RECORD as usize);
        for (_, r) in &found {
            records.extend_from_slice(&r.encode());
        }
        let mut entries = Vec::with_capacity(messages.len());
        let mut added = Vec::with_capacity(messages.len());
        for (id, (message, mentions)) in (first..).zip(messages) {
            let entry = Entry {
                id,
                timestamp: timestamp.clone(),
                from: from.to_string(),
                message,
                mentions,
            };
            let start = bytes.len() as u64;
            bytes.extend_from_slice(&render(&entry));
            let rec = Record {
                id,
                offset: size + start,
                len: bytes.len() as u64 - start,
            };
            records.extend_from_slice(&rec.encode());
            added.push(rec);
            entries.push(entry);
        }
        let prepared = prepare(&entries)?;
        log.file().write_all(&bytes).at(&self.log)?;
        if sync {
            log.file().sync_data().at(&self.log)?;
        }
        match index.and_then(|mut ix| ix.update(&records).map(|()| ix.marked)) {
            Ok(true) => {
                let _ = owned::remove(&self.stale);
            }
            Ok(false) => {}
            Err(e) => damage.push(Damage::IndexNotUpdated { why: e.to_string() }),
        }
        let new: Vec<(&Entry, Record)> = entries.iter().zip(added).collect();
        let size = size + bytes.len() as u64;
        if let Err(e) = after(prepared, &log, size, before, &new) {
            damage.push(Damage::MentionsNotUpdated { why: e.to_string() });
        }
        Ok((entries, damage))
    }

    /// Under the lock: open the index and decide how much of it to keep. A last record that
    /// does not match the log (log replaced or cut) or a reader's mark discards it all.
    fn open_index(&self, log: &Fresh, size: u64) -> std::io::Result<IndexFile> {
        let rw = OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CREAT;
        let file = owned::open(&self.index, rw, CREATE)?;
        let file = Fresh::new(file, &self.index);
        let len = file.size()?;
        let whole = len - len % RECORD;
        let marked = std::fs::symlink_metadata(&self.stale).is_ok();
        let last = if marked {
            None
        } else {
            // An end that reads short of the length (a cache lagging the server) is not
            // trusted: the index is rebuilt from the log.
            match read_last_record(&file, whole) {
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => None,
                r => r?,
            }
        };
        let base = last.filter(|r| record_valid(log, r, size));
        Ok(IndexFile {
            file,
            len,
            keep: if base.is_some() { whole } else { 0 },
            base,
            marked,
        })
    }

    /// Entries with an id greater than `after`, in order. Costs what is new, not the log.
    pub(super) fn read_since(&self, after: u64) -> Result<Batch> {
        self.read(Want::After(after))
    }

    /// Entries with an id greater than `after`, in order, given to `f` until it returns
    /// `false`: the log is read `chunk` bytes at a time (more when one entry is longer), so
    /// that a long tail is never held whole. The damage met is returned.
    pub(super) fn scan_since(
        &self,
        after: u64,
        chunk: u64,
        mut f: impl FnMut(Entry) -> bool,
    ) -> Result<Vec<Damage>> {
        let log = match owned::open_read(&self.log) {
            Ok(f) => Fresh::new(f, &self.log),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(&self.log, e)),
        };
        let size = log.size().at(&self.log)?;
        let start = self.start(&log, size, Want::After(after));
        let (mut pos, mut floor, mut check) = (start.offset, start.floor, start.first);
        let mut chunk = chunk.max(1);
        let mut damage = Vec::new();
        while pos < size {
            let end = size.min(pos.saturating_add(chunk));
            let buf = read_range(&log, pos, end).at(&self.log)?;
            let (found, mut met) = parse_all(&buf, pos, floor);
            if found.is_empty() && end < size {
                // No whole entry: read again, larger.
                chunk = chunk.saturating_mul(2);
                continue;
            }
            if let Some(first) = check.take()
                && found.first().map(|(_, r)| (r.id, r.offset)) != Some(first)
            {
                // The index named an entry the log does not hold there: the whole read
                // checks and falls back as it knows how.
                let batch = self.read_since(after)?;
                for e in batch.entries {
                    if !f(e) {
                        break;
                    }
                }
                return Ok(batch.damage);
            }
            // A cut through an entry is read again with the next chunk.
            let next = match found.last() {
                Some((_, r)) if end < size => r.end(),
                _ => end,
            };
            met.retain(|d| match d {
                Damage::Unreadable { offset, .. } | Damage::OutOfOrder { offset, .. } => {
                    *offset < next
                }
                Damage::IndexNotUpdated { .. } | Damage::MentionsNotUpdated { .. } => true,
            });
            damage.extend(met);
            for (e, _) in found {
                floor = e.id;
                if e.id > after && !f(e) {
                    return Ok(damage);
                }
            }
            pos = next;
        }
        Ok(damage)
    }

    /// The last `n` entries.
    pub(super) fn tail(&self, n: usize) -> Result<Batch> {
        self.read(Want::Last(n))
    }

    /// Id of the newest entry (0 when the channel is empty).
    pub(super) fn last_id(&self) -> Result<u64> {
        let r = self.tail(1)?;
        Ok(r.entries.last().map_or(0, |e| e.id))
    }

    fn read(&self, want: Want) -> Result<Batch> {
        let log = match owned::open_read(&self.log) {
            Ok(f) => Fresh::new(f, &self.log),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Batch::default()),
            Err(e) => return Err(Error::io(&self.log, e)),
        };
        let size = log.size().at(&self.log)?;
        let start = self.start(&log, size, want);
        let (batch, as_said) = self.read_at(&log, size, start, want)?;
        let short = matches!(want, Want::Last(n) if batch.entries.len() < n);
        if as_said && !(short && start.offset > 0) {
            return Ok(batch);
        }
        // The index named an entry the log does not hold there, or counted entries that are
        // not there: read the log from its start, and have the next append rebuild the index.
        self.mark_stale();
        if start.offset == 0 {
            return Ok(batch);
        }
        Ok(self.read_at(&log, size, FROM_THE_START, want)?.0)
    }

    /// Read from `start` to `size`; the batch, and whether the first valid entry is the one
    /// the index named.
    fn read_at(&self, log: &Fresh, size: u64, start: Start, want: Want) -> Result<(Batch, bool)> {
        let buf = read_range(log, start.offset, size).at(&self.log)?;
        let (found, damage) = parse_all(&buf, start.offset, start.floor);
        let as_said = start
            .first
            .is_none_or(|f| found.first().map(|(_, r)| (r.id, r.offset)) == Some(f));
        let mut entries: Vec<Entry> = found.into_iter().map(|(e, _)| e).collect();
        match want {
            Want::After(after) => entries.retain(|e| e.id > after),
            Want::Last(n) => {
                entries.drain(..entries.len().saturating_sub(n));
            }
        }
        Ok((Batch { entries, damage }, as_said))
    }

    /// Where a read for `want` starts, taken from the index. Every record relied on is checked
    /// against the header it points at; without a usable index, the log is read from its
    /// start, and a record that does not match the log marks the index for rebuilding.
    fn start(&self, log: &Fresh, size: u64, want: Want) -> Start {
        let Ok(recs) =
            owned::open_read(&self.index).and_then(|f| Records::open(Fresh::new(f, &self.index)))
        else {
            return FROM_THE_START;
        };
        // When the last record does not match, the index is not this log's (the log was
        // replaced or cut): the next append rebuilds it without being told.
        let Some(last) = recs.last.filter(|l| record_valid(log, l, size)) else {
            return FROM_THE_START;
        };
        match recs.start(log, size, last, want) {
            Ok(Some(s)) => s,
            Ok(None) => {
                self.mark_stale();
                FROM_THE_START
            }
            Err(_) => FROM_THE_START,
        }
    }

    /// Ask the next append to rebuild the index. Readers never change the index itself; one
    /// that may not write to `_state/` leaves no mark.
    fn mark_stale(&self) {
        let new = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL;
        let _ = owned::open(&self.stale, new, CREATE);
    }
}

/// Index records of a reader, loaded lazily.
struct Records {
    file: Fresh,
    count: u64,
    last: Option<Record>,
}

impl Records {
    fn open(file: Fresh) -> std::io::Result<Records> {
        let size = file.size()?;
        let count = size / RECORD;
        let last = read_last_record(&file, count * RECORD)?;
        Ok(Records { file, count, last })
    }

    fn get(&self, k: u64) -> std::io::Result<Record> {
        let mut b = [0u8; RECORD as usize];
        self.file.read_exact_at(&mut b, k * RECORD)?;
        Ok(Record::decode(&b))
    }

    /// The first slot whose record has an id greater than `after`, with that record: slot
    /// `after` when ids are dense from 1, else found by bisection. `None` when there is none.
    fn first_after(&self, after: u64) -> std::io::Result<Option<(u64, Record)>> {
        if after < self.count {
            let r = self.get(after)?;
            if r.id == after + 1 {
                return Ok(Some((after, r)));
            }
        }
        let (mut lo, mut hi, mut at_hi) = (0, self.count, None);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let r = self.get(mid)?;
            if r.id <= after {
                lo = mid + 1;
            } else {
                hi = mid;
                at_hi = Some(r);
            }
        }
        Ok(at_hi.map(|r| (hi, r)))
    }

    /// Where a read for `want` starts, given the last record (already checked). `None` when a
    /// record it relies on does not match the log.
    fn start(
        &self,
        log: &Fresh,
        size: u64,
        last: Record,
        want: Want,
    ) -> std::io::Result<Option<Start>> {
        let after_last = Start::at(last.end(), last.id);
        let after = match want {
            // Nothing new: the common case of a poll or a follower.
            Want::After(after) if last.id <= after => return Ok(Some(after_last)),
            Want::After(after) => after,
            Want::Last(n) => {
                let s = self.count.saturating_sub(n as u64);
                if s == 0 {
                    return Ok(Some(FROM_THE_START));
                }
                if s >= self.count {
                    return Ok(Some(after_last));
                }
                let r = if s + 1 == self.count {
                    last
                } else {
                    self.get(s)?
                };
                return Ok(record_valid(log, &r, size).then_some(Start::at(r.offset, 0)));
            }
        };
        let Some((k, r)) = self.first_after(after)? else {
            return Ok(None);
        };
        if !record_valid(log, &r, size) {
            return Ok(None);
        }
        let first = Some((r.id, r.offset));
        if k == 0 {
            return Ok(Some(Start {
                first,
                ..FROM_THE_START
            }));
        }
        // Every valid entry before the entry of id `after + 1` is older; the read checks
        // that the entry named is whole there (a damaged one may have a whole copy before).
        if r.id == after + 1 {
            return Ok(Some(Start {
                first,
                ..Start::at(r.offset, after)
            }));
        }
        // The ids jump over `after + 1` (a damaged entry): start where the entry of the record
        // before ends, if that record matches the log, is older, and comes first.
        let p = self.get(k - 1)?;
        Ok(
            (p.id <= after && p.end() <= r.offset && record_valid(log, &p, size)).then_some(
                Start {
                    offset: p.end(),
                    floor: p.id,
                    first,
                },
            ),
        )
    }
}

/// The record of entry `id` in `recs`, when the log holds that entry there.
fn locate_in(recs: &Records, log: &Fresh, size: u64, id: u64) -> Option<Record> {
    let (_, r) = recs.first_after(id.checked_sub(1)?).ok()??;
    (r.id == id && record_valid(log, &r, size)).then_some(r)
}

/// The last record of an index file of `size` bytes (whole records), when it follows the
/// record before it: a larger id, and an entry that starts where or after that one ends.
fn read_last_record(f: &Fresh, size: u64) -> std::io::Result<Option<Record>> {
    let n = size.min(2 * RECORD);
    if n < RECORD {
        return Ok(None);
    }
    let mut b = [0u8; 2 * RECORD as usize];
    let b = &mut b[..n as usize];
    f.read_exact_at(b, size - n)?;
    let last = Record::decode(&b[n as usize - RECORD as usize..]);
    if n == 2 * RECORD {
        let prev = Record::decode(&b[..RECORD as usize]);
        if prev.id >= last.id || prev.end() > last.offset {
            return Ok(None);
        }
    }
    Ok(Some(last))
}

/// Does the record point, inside a log of `size` bytes, at the header line of an entry with
/// its id, whose header and `len` add up to the record's length? A header starts a line, as
/// a read of the log finds it. Reads the header, not the body: one `pread` for a header line
/// shorter than 256 bytes.
pub(super) fn record_valid(log: &Fresh, r: &Record, size: u64) -> bool {
    if r.offset.checked_add(r.len).is_none_or(|end| end > size) {
        return false;
    }
    header_at(log, r.offset, r.len) == Some((r.id, r.len))
}

/// The id and the whole length of the entry whose header line starts at byte `offset` (the
/// start of the log or of a line), looking at most `limit` bytes (all inside the log) for the
/// end of that line.
fn header_at(log: &Fresh, offset: u64, limit: u64) -> Option<(u64, u64)> {
    // The byte before, when there is one, must end a line.
    let before = u64::from(offset > 0);
    let (offset, limit) = (offset - before, limit + before);
    let mut small = [0u8; 256];
    let mut big = Vec::new();
    let mut want = small.len() as u64;
    loop {
        let n = want.min(limit) as usize;
        let buf = if n <= small.len() {
            &mut small[..n]
        } else {
            big.resize(n, 0);
            &mut big[..]
        };
        log.read_exact_at(buf, offset).ok()?;
        if before == 1 && buf.first() != Some(&b'\n') {
            return None;
        }
        let buf = &buf[before as usize..];
        if let Some(nl) = buf.iter().position(|&b| b == b'\n') {
            let h = parse_header(std::str::from_utf8(&buf[..nl]).ok()?)?;
            let len = (nl as u64 + 1).checked_add(h.len as u64)?.checked_add(2)?;
            return Some((h.id, len));
        }
        if n as u64 == limit {
            return None;
        }
        want = want.saturating_mul(16);
    }
}
