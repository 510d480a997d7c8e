//! The channel: an append-only Markdown log of entries, with a rebuildable offset index.
//!
//! An entry on disk:
//!
//! ```text
//! ### 10:00:05 [reviewer] #42 <!-- at=2026-11-22T10:00:05.123Z len=19 sum=8c1f0a2b44d1e9f3 to=coder -->
//! @coder please look
//!
//! ```
//!
//! The header line starts with `### `, shows the time and the sender, and carries the entry id
//! and metadata in an HTML comment that Markdown viewers hide. The body follows, escaped: a body
//! line that begins with `###` or `\` gets one `\` in front (Markdown shows it as the original
//! text). `len` is the escaped body's length in bytes and `sum` its FNV-1a 64 hash; the body is
//! followed by one empty line. A reader that finds a header whose body is short, whose sum does
//! not match, or whose terminator is missing treats it as torn and skips to the next header.

use std::io::{self, Write};

use nix::fcntl::OFlag;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::fs::Lock;
use crate::fs::netfs::Fresh;
use crate::fs::owned::{self, CREATE};
use crate::hash::fnv1a;
use crate::instance::Instance;

/// Largest message accepted, in bytes (4 MiB).
pub const MAX_MESSAGE: usize = 4 << 20;

/// How much of the log a streaming read takes at a time, in bytes (more when one entry is
/// longer).
pub const SCAN_CHUNK: u64 = 8 << 20;

/// Bytes per index record: id, offset, length, each a little-endian u64.
pub(crate) const RECORD: u64 = 24;

/// One channel entry, in the JSON form used everywhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub timestamp: String,
    pub from: String,
    pub message: String,
    pub mentions: Vec<String>,
}

impl Entry {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("entry serializes")
    }
}

/// Something wrong found in the channel or its index and worked around: reported on stderr by
/// the tools as a warning, never fatal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// Bytes that are not a whole entry, from where a header was expected up to the next
    /// header line; `at_end` when they run to the end of the file (a torn final entry).
    Unreadable { offset: u64, len: u64, at_end: bool },
    /// A whole entry whose id is not greater than `after`, the id of a valid entry before it.
    OutOfOrder { offset: u64, id: u64, after: u64 },
    /// An append stored its entry but could not update the index, for the reason given.
    IndexNotUpdated { why: String },
    /// An append stored its entry but could not update the mention index, for the reason
    /// given.
    MentionsNotUpdated { why: String },
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Unreadable {
                offset,
                len,
                at_end: true,
            } => write!(
                f,
                "channel.md: torn final entry at byte {offset} ({len} bytes) skipped"
            ),
            Damage::Unreadable { offset, len, .. } => write!(
                f,
                "channel.md: damaged entry at byte {offset} ({len} bytes) skipped"
            ),
            Damage::OutOfOrder { offset, id, after } => write!(
                f,
                "channel.md: entry #{id} at byte {offset} skipped: id not greater than #{after}"
            ),
            Damage::IndexNotUpdated { why } => write!(
                f,
                "channel.idx: cannot write: {why}; the entry is stored, and the index will be \
                 rebuilt"
            ),
            Damage::MentionsNotUpdated { why } => write!(
                f,
                "mentions/: cannot write: {why}; the entry is stored, and the mention index \
                 will catch up"
            ),
        }
    }
}

/// The result of a read: entries plus any damage met on the way.
#[derive(Debug, Default)]
pub struct Batch {
    pub entries: Vec<Entry>,
    pub damage: Vec<Damage>,
}

/// Escape a message body: lines starting with `###` or `\` get a leading `\`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.starts_with("###") || line.starts_with('\\') {
            out.push('\\');
        }
        out.push_str(line);
    }
    out
}

/// Undo [`escape`].
pub fn unescape(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    for (i, line) in body.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(line.strip_prefix('\\').unwrap_or(line));
    }
    out
}

/// Check a message before it is written: non-empty, UTF-8 (already a `str`), no NUL, size.
pub fn validate_message(text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::invalid("empty message"));
    }
    if text.contains('\0') {
        return Err(Error::invalid("message contains a NUL byte"));
    }
    if text.len() > MAX_MESSAGE {
        return Err(Error::invalid(format!(
            "message is {} bytes, over the limit of {} bytes",
            text.len(),
            MAX_MESSAGE
        ))
        .hint("use a resource or a document for long content"));
    }
    Ok(())
}

/// Render one entry as it is stored.
pub fn render(e: &Entry) -> Vec<u8> {
    let body = escape(&e.message);
    let time = e.timestamp.get(11..19).unwrap_or("00:00:00");
    let mut head = format!(
        "### {time} [{}] #{} <!-- at={} len={} sum={:016x}",
        e.from,
        e.id,
        e.timestamp,
        body.len(),
        fnv1a(body.as_bytes())
    );
    if !e.mentions.is_empty() {
        head.push_str(" to=");
        head.push_str(&e.mentions.join(","));
    }
    head.push_str(" -->\n");
    let mut out = Vec::with_capacity(head.len() + body.len() + 2);
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(body.as_bytes());
    out.extend_from_slice(b"\n\n");
    out
}

struct Header<'a> {
    id: u64,
    from: &'a str,
    at: &'a str,
    len: usize,
    sum: u64,
    /// The mentions, separated by commas.
    to: &'a str,
}

fn parse_header(line: &str) -> Option<Header<'_>> {
    let rest = line.strip_prefix("### ")?;
    let (_time, rest) = rest.split_once(' ')?;
    let rest = rest.strip_prefix('[')?;
    let (from, rest) = rest.split_once("] #")?;
    let (id, rest) = rest.split_once(' ')?;
    let meta = rest.strip_prefix("<!-- ")?.strip_suffix(" -->")?;
    let id: u64 = id.parse().ok()?;
    let (mut at, mut len, mut sum, mut to) = (None, None, None, "");
    for kv in meta.split(' ') {
        let (k, v) = kv.split_once('=')?;
        match k {
            "at" => at = Some(v),
            "len" => len = Some(v.parse().ok()?),
            "sum" => sum = Some(u64::from_str_radix(v, 16).ok()?),
            "to" => to = v,
            _ => {} // unknown keys are ignored, for forward compatibility
        }
    }
    let at = at.filter(|a| !a.is_empty())?;
    if id == 0 {
        return None;
    }
    Some(Header {
        id,
        from,
        at,
        len: len?,
        sum: sum?,
        to,
    })
}

/// Try to parse one entry at the start of `buf`. `Some((entry, bytes used))` when whole.
fn parse_entry(buf: &[u8]) -> Option<(Entry, usize)> {
    let nl = buf.iter().position(|&b| b == b'\n')?;
    let line = std::str::from_utf8(&buf[..nl]).ok()?;
    let h = parse_header(line)?;
    let start = nl + 1;
    let end = start.checked_add(h.len)?;
    let used = end.checked_add(2)?;
    if buf.get(end..used)? != b"\n\n" {
        return None;
    }
    let body = &buf[start..end];
    if fnv1a(body) != h.sum {
        return None;
    }
    let body = std::str::from_utf8(body).ok()?;
    Some((
        Entry {
            id: h.id,
            timestamp: h.at.to_string(),
            from: h.from.to_string(),
            message: unescape(body),
            mentions: h
                .to
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        },
        used,
    ))
}

/// The valid entries of `buf`, which holds the log from byte `base`, each with its index
/// record, plus the damage met. An entry is valid when it is whole and its id is greater than
/// `floor` and than the id of every valid entry before it in `buf`; anything else is damage.
fn parse_all(buf: &[u8], base: u64, mut floor: u64) -> (Vec<(Entry, Record)>, Vec<Damage>) {
    let mut out = Vec::new();
    let mut damage = Vec::new();
    let mut pos = 0usize;
    // Skip blank separator lines (written after a torn entry).
    while pos < buf.len() {
        if buf[pos] == b'\n' {
            pos += 1;
            continue;
        }
        let offset = base + pos as u64;
        match parse_entry(&buf[pos..]) {
            Some((e, used)) => {
                if e.id <= floor {
                    damage.push(Damage::OutOfOrder {
                        offset,
                        id: e.id,
                        after: floor,
                    });
                } else {
                    floor = e.id;
                    let r = Record {
                        id: e.id,
                        offset,
                        len: used as u64,
                    };
                    out.push((e, r));
                }
                pos += used;
            }
            None => {
                // Resynchronise on the next header line. Body lines never start with "###"
                // (they are escaped), so any "\n### " is a header or part of a torn one.
                let next = find(&buf[pos + 1..], b"\n### ").map(|i| pos + 1 + i + 1);
                let stop = next.unwrap_or(buf.len());
                damage.push(Damage::Unreadable {
                    offset,
                    len: (stop - pos) as u64,
                    at_end: next.is_none(),
                });
                pos = stop;
            }
        }
    }
    (out, damage)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Bytes `from..size` of the log.
fn read_range(log: &Fresh, from: u64, size: u64) -> std::io::Result<Vec<u8>> {
    log.read_range(from, size)
}

/// Where one entry lies in the log: its id, the offset of its header and its whole length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) id: u64,
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

impl Record {
    fn end(&self) -> u64 {
        self.offset.saturating_add(self.len)
    }
    pub(crate) fn encode(&self) -> [u8; RECORD as usize] {
        let mut b = [0u8; RECORD as usize];
        b[0..8].copy_from_slice(&self.id.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b
    }
    pub(crate) fn decode(b: &[u8]) -> Record {
        let u = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap());
        Record {
            id: u(0..8),
            offset: u(8..16),
            len: u(16..24),
        }
    }
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

/// Access to one instance's channel.
pub struct Channel {
    log: PathBuf,
    index: PathBuf,
    stale: PathBuf,
    lock: PathBuf,
}

impl Channel {
    pub fn new(inst: &Instance) -> Channel {
        Channel {
            log: inst.channel_path(),
            index: inst.state_file("channel.idx"),
            stale: inst.state_file("channel.idx.stale"),
            lock: inst.state_file("channel.lock"),
        }
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The lock file every writer of the channel takes.
    pub(crate) fn lock_path(&self) -> &Path {
        &self.lock
    }

    /// The directory of the channel's state files (`_state/`).
    pub(crate) fn state_dir(&self) -> &Path {
        self.lock.parent().unwrap_or(Path::new("."))
    }

    /// The log opened for reading, with its size; `None` when there is no log yet.
    pub(crate) fn open_log(&self) -> Result<Option<(Fresh, u64)>> {
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
    pub(crate) fn locate(&self, log: &Fresh, size: u64, id: u64) -> Option<Record> {
        let recs = owned::open_read(&self.index)
            .and_then(|f| Records::open(Fresh::new(f, &self.index)))
            .ok()?;
        locate_in(&recs, log, size, id)
    }

    /// The entries with these ids (ascending), in order; an id the log does not hold is left
    /// out. Each entry is found through the index and read alone: the cost is that of the
    /// entries returned. Where the index does not lead to an entry, the log is read from the
    /// first id asked for.
    pub fn get_many(&self, ids: &[u64]) -> Result<Vec<Entry>> {
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

    /// The append of [`Channel::append_many`] (see there), with `prepare` called under the
    /// lock with the new entries before they are written (an error there writes nothing),
    /// and `after` once they are written: with what `prepare` gave, the log, its new size,
    /// the record of the entry before them and the new entries with their records. A
    /// failure of `after` is returned as [`Damage::MentionsNotUpdated`]: the entries are
    /// written.
    pub(crate) fn append_many_with<P>(
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
    pub fn read_since(&self, after: u64) -> Result<Batch> {
        self.read(Want::After(after))
    }

    /// Entries with an id greater than `after`, in order, given to `f` until it returns
    /// `false`: the log is read `chunk` bytes at a time (more when one entry is longer), so
    /// that a long tail is never held whole. The damage met is returned.
    pub fn scan_since(
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
    pub fn tail(&self, n: usize) -> Result<Batch> {
        self.read(Want::Last(n))
    }

    /// Every entry.
    pub fn read_all(&self) -> Result<Batch> {
        self.read_since(0)
    }

    /// Id of the newest entry (0 when the channel is empty).
    pub fn last_id(&self) -> Result<u64> {
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
pub(crate) fn record_valid(log: &Fresh, r: &Record, size: u64) -> bool {
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

/// Format an entry for humans: `#id HH:MM:SS @from: text`, continuation lines indented.
pub fn human_entry(e: &Entry, tag: Option<&str>) -> String {
    let mut s = format!("#{} {} @{}", e.id, crate::time::hms(&e.timestamp), e.from);
    if let Some(t) = tag {
        s.push_str(" [");
        s.push_str(t);
        s.push(']');
    }
    s.push_str(": ");
    let indent = "    ";
    let text = e.message.strip_suffix('\n').unwrap_or(&e.message);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            s.push('\n');
            s.push_str(indent);
        }
        s.push_str(line);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, msg: &str) -> Entry {
        Entry {
            id,
            timestamp: "2026-11-22T10:00:05.123Z".into(),
            from: "alice".into(),
            message: msg.into(),
            mentions: vec!["bob".into()],
        }
    }

    #[test]
    fn a_scan_in_small_chunks_sees_what_a_read_sees() {
        let (_dir, inst) = crate::instance::scratch();
        let ch = Channel::new(&inst);
        for i in 0..30 {
            let text = format!("{i} {}", "y".repeat(i * 37 % 500));
            ch.append("amy", &text, vec!["bob".into()], false).unwrap();
        }
        for after in [0, 1, 17, 30] {
            let whole = ch.read_since(after).unwrap().entries;
            for chunk in [1, 64, 700, 1 << 20] {
                let mut seen = Vec::new();
                let damage = ch
                    .scan_since(after, chunk, |e| {
                        seen.push(e);
                        true
                    })
                    .unwrap();
                assert_eq!(seen, whole, "after {after}, chunks of {chunk}");
                assert!(damage.is_empty(), "{damage:?}");
            }
        }
        let mut n = 0;
        ch.scan_since(0, 64, |_| {
            n += 1;
            n < 5
        })
        .unwrap();
        assert_eq!(n, 5);
    }

    #[test]
    fn escape_round_trip() {
        for s in [
            "plain",
            "### heading\n\\back\n\n  trailing  \r\n",
            "\\\\\n###\n#\n",
            "",
            "\n\n",
        ] {
            assert_eq!(unescape(&escape(s)), s);
        }
        assert_eq!(escape("### x"), "\\### x");
    }

    #[test]
    fn render_parse() {
        let e = entry(7, "### hi\n\\x\n\n");
        let bytes = render(&e);
        let (back, used) = parse_entry(&bytes).unwrap();
        assert_eq!(back, e);
        assert_eq!(used, bytes.len());
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("### 10:00:05 [alice] #7 <!-- "));
        assert_eq!(text.lines().filter(|l| l.starts_with("### ")).count(), 1);
    }

    #[test]
    fn torn_entry_is_skipped_and_resynced() {
        let a = render(&entry(1, "one"));
        let b = render(&entry(2, "two"));
        let mut buf = a.clone();
        buf.extend_from_slice(&b[..b.len() - 5]);
        let (found, damage) = parse_all(&buf, 0, 0);
        assert_eq!(found.len(), 1);
        assert_eq!(damage.len(), 1);
        assert!(matches!(damage[0], Damage::Unreadable { at_end: true, .. }));
        buf.push(b'\n');
        buf.extend_from_slice(&render(&entry(2, "two again")));
        let (found, damage) = parse_all(&buf, 0, 0);
        assert_eq!(found.len(), 2);
        assert_eq!(found[1].0.message, "two again");
        assert_eq!(damage.len(), 1);
        assert!(matches!(
            damage[0],
            Damage::Unreadable { at_end: false, .. }
        ));
    }
}
