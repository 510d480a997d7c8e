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

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::fs::Lock;
use crate::instance::Instance;

/// Largest message accepted, in bytes (4 MiB).
pub const MAX_MESSAGE: usize = 4 << 20;

/// Bytes per index record: id, offset, length, each a little-endian u64.
const RECORD: u64 = 24;

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

/// Something odd found while reading: reported on stderr by the tools, never fatal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub offset: u64,
    pub len: u64,
    /// True when the damage runs to the end of the file (a torn final entry).
    pub at_end: bool,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.at_end {
            write!(
                f,
                "channel.md: torn final entry at byte {} ({} bytes) skipped",
                self.offset, self.len
            )
        } else {
            write!(
                f,
                "channel.md: damaged entry at byte {} ({} bytes) skipped",
                self.offset, self.len
            )
        }
    }
}

/// The result of a read: entries plus any damage met on the way.
#[derive(Debug, Default)]
pub struct Batch {
    pub entries: Vec<Entry>,
    pub damage: Vec<Damage>,
}

/// FNV-1a, 64 bits: cheap, and enough to tell a torn or zero-filled body from a whole one.
fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
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
            "message is {} bytes, over the limit of {} bytes (hint: use a resource or a document for long content)",
            text.len(),
            MAX_MESSAGE
        )));
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
    to: Vec<&'a str>,
}

fn parse_header(line: &str) -> Option<Header<'_>> {
    let rest = line.strip_prefix("### ")?;
    let (_time, rest) = rest.split_once(' ')?;
    let rest = rest.strip_prefix('[')?;
    let (from, rest) = rest.split_once("] #")?;
    let (id, rest) = rest.split_once(' ')?;
    let meta = rest.strip_prefix("<!-- ")?.strip_suffix(" -->")?;
    let mut h = Header {
        id: id.parse().ok()?,
        from,
        at: "",
        len: usize::MAX,
        sum: 0,
        to: Vec::new(),
    };
    let mut have_sum = false;
    for kv in meta.split(' ') {
        let (k, v) = kv.split_once('=')?;
        match k {
            "at" => h.at = v,
            "len" => h.len = v.parse().ok()?,
            "sum" => {
                h.sum = u64::from_str_radix(v, 16).ok()?;
                have_sum = true;
            }
            "to" => h.to = v.split(',').filter(|s| !s.is_empty()).collect(),
            _ => {} // unknown keys are ignored, for forward compatibility
        }
    }
    if h.at.is_empty() || h.len == usize::MAX || !have_sum || h.id == 0 {
        return None;
    }
    Some(h)
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
            mentions: h.to.iter().map(|s| s.to_string()).collect(),
        },
        used,
    ))
}

/// Parsed entries of `buf` (which starts at file offset `base`), with their offsets and
/// lengths, plus damage. Stops at the end of `buf`.
fn parse_all(buf: &[u8], base: u64) -> (Vec<(Entry, u64, u64)>, Vec<Damage>) {
    let mut out = Vec::new();
    let mut damage = Vec::new();
    let mut pos = 0usize;
    // Skip blank separator lines (written after a torn entry).
    while pos < buf.len() {
        if buf[pos] == b'\n' {
            pos += 1;
            continue;
        }
        match parse_entry(&buf[pos..]) {
            Some((e, used)) => {
                out.push((e, base + pos as u64, used as u64));
                pos += used;
            }
            None => {
                // Resynchronise on the next header line. Body lines never start with "###"
                // (they are escaped), so any "\n### " is a header or part of a torn one.
                let next = find(&buf[pos + 1..], b"\n### ").map(|i| pos + 1 + i + 1);
                let stop = next.unwrap_or(buf.len());
                damage.push(Damage {
                    offset: base + pos as u64,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    id: u64,
    offset: u64,
    len: u64,
}

impl Record {
    fn end(&self) -> u64 {
        self.offset.saturating_add(self.len)
    }
    fn encode(&self) -> [u8; RECORD as usize] {
        let mut b = [0u8; RECORD as usize];
        b[0..8].copy_from_slice(&self.id.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b
    }
    fn decode(b: &[u8]) -> Record {
        let u = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap());
        Record {
            id: u(0..8),
            offset: u(8..16),
            len: u(16..24),
        }
    }
}

/// Access to one instance's channel.
pub struct Channel {
    log: PathBuf,
    index: PathBuf,
    lock: PathBuf,
}

impl Channel {
    pub fn new(inst: &Instance) -> Channel {
        Channel {
            log: inst.channel_path(),
            index: inst.state_file("channel.idx"),
            lock: inst.state_file("channel.lock"),
        }
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Append a message; the caller has validated `from` and resolved `mentions`.
    /// Takes the channel lock, assigns the next id, and writes the whole entry with one
    /// `write` on an `O_APPEND` descriptor. With `sync`, the data is fdatasync'd before
    /// returning. Returns the entry and any damage found at the tail (and worked around).
    pub fn append(
        &self,
        from: &str,
        message: &str,
        mentions: Vec<String>,
        sync: bool,
    ) -> Result<(Entry, Vec<Damage>)> {
        validate_message(message)?;
        let _lock = Lock::exclusive(&self.lock)?;
        let mut log = OpenOptions::new()
            .append(true)
            .create(true)
            .read(true)
            .open(&self.log)
            .map_err(|e| Error::create(&self.log, e))?;
        let mut index = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&self.index)
            .map_err(|e| Error::create(&self.index, e))?;
        let size = log.metadata().at(&self.log)?.len();
        let (last, damage, torn_tail) = self.catch_up(&log, &mut index, size)?;
        let id = match last {
            None => 1,
            Some(r) => r.id.checked_add(1).ok_or_else(|| Error::Corrupt {
                path: self.log.clone(),
                why: format!(
                    "entry #{} has the largest id there is; nothing can be appended after it",
                    r.id
                ),
            })?,
        };
        let entry = Entry {
            id,
            timestamp: now(),
            from: from.to_string(),
            message: message.to_string(),
            mentions,
        };
        let mut bytes = Vec::new();
        if torn_tail {
            bytes.push(b'\n');
        }
        let sep = bytes.len() as u64;
        bytes.extend_from_slice(&render(&entry));
        log.write_all(&bytes).at(&self.log)?;
        if sync {
            log.sync_data().at(&self.log)?;
        }
        let rec = Record {
            id: entry.id,
            offset: size + sep,
            len: bytes.len() as u64 - sep,
        };
        index.write_all(&rec.encode()).at(&self.index)?;
        Ok((entry, damage))
    }

    /// Under the lock: make the index cover the whole log. Returns the last record, damage
    /// found in the unindexed tail, and whether the log ends in a torn entry that does not end
    /// with a newline (the next header must start a line of its own).
    fn catch_up(
        &self,
        log: &File,
        index: &mut File,
        size: u64,
    ) -> Result<(Option<Record>, Vec<Damage>, bool)> {
        let isize = index.metadata().at(&self.index)?.len();
        if isize % RECORD != 0 {
            index.set_len(isize - isize % RECORD).at(&self.index)?;
        }
        let mut last = read_last_record(index, isize - isize % RECORD).at(&self.index)?;
        if let Some(r) = last
            && !record_valid(log, &r, size)
        {
            // The index does not match the log (log replaced or truncated): rebuild it.
            index.set_len(0).at(&self.index)?;
            last = None;
        }
        let from = last.map_or(0, |r| r.end());
        if from == size {
            return Ok((last, Vec::new(), false));
        }
        let mut buf = Vec::with_capacity((size - from) as usize);
        let mut f = log;
        f.seek(SeekFrom::Start(from)).at(&self.log)?;
        f.take(size - from).read_to_end(&mut buf).at(&self.log)?;
        let (found, damage) = parse_all(&buf, from);
        let mut records = Vec::with_capacity(found.len() * RECORD as usize);
        let mut torn = false;
        for (e, off, len) in found {
            // Ids only go up; an entry whose id does not cannot be valid and is not indexed.
            if last.is_some_and(|l| e.id <= l.id) {
                continue;
            }
            let r = Record {
                id: e.id,
                offset: off,
                len,
            };
            records.extend_from_slice(&r.encode());
            last = Some(r);
        }
        // Only a newline goes between a torn entry and the next one, and only when the torn
        // entry lacks one: an entry cut just before its final newline would become whole again
        // with it, and valid entries would share an id.
        if let Some(d) = damage.last()
            && d.at_end
            && buf.last() != Some(&b'\n')
        {
            torn = true;
        }
        if !records.is_empty() {
            index.write_all(&records).at(&self.index)?;
        }
        Ok((last, damage, torn))
    }

    /// Entries with an id greater than `after`, in order. Costs what is new, not the log.
    pub fn read_since(&self, after: u64) -> Result<Batch> {
        self.read_from(|recs| recs.position_after(after), Some(after))
    }

    /// The last `n` entries.
    pub fn tail(&self, n: usize) -> Result<Batch> {
        let mut r = self.read_from(|recs| Ok(recs.count.saturating_sub(n as u64)), None)?;
        if r.entries.len() > n {
            r.entries.drain(..r.entries.len() - n);
        }
        Ok(r)
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

    /// Read entries starting at the index slot chosen by `slot`, filtering ids `> after`.
    fn read_from(
        &self,
        slot: impl FnOnce(&Records) -> std::io::Result<u64>,
        after: Option<u64>,
    ) -> Result<Batch> {
        let mut log = match File::open(&self.log) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Batch::default()),
            Err(e) => return Err(Error::io(&self.log, e)),
        };
        let size = log.metadata().at(&self.log)?.len();
        let start = match File::open(&self.index) {
            Ok(f) => {
                let recs = Records::open(f).at(&self.index)?;
                match recs.last {
                    Some(l) if record_valid(&log, &l, size) => {
                        let k = slot(&recs).at(&self.index)?;
                        if k >= recs.count {
                            l.end()
                        } else {
                            recs.get(k).at(&self.index)?.offset
                        }
                    }
                    _ => 0,
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(Error::io(&self.index, e)),
        };
        let mut buf = Vec::with_capacity((size.saturating_sub(start)) as usize);
        log.seek(SeekFrom::Start(start)).at(&self.log)?;
        (&mut log)
            .take(size.saturating_sub(start))
            .read_to_end(&mut buf)
            .at(&self.log)?;
        let (found, damage) = parse_all(&buf, start);
        let mut entries = Vec::with_capacity(found.len());
        let mut max = 0;
        for (e, _, _) in found {
            // Ids only go up; anything else is not a valid entry (see catch_up).
            if e.id <= max {
                continue;
            }
            max = e.id;
            if after.is_none_or(|a| e.id > a) {
                entries.push(e);
            }
        }
        Ok(Batch { entries, damage })
    }
}

/// Index records of a reader, loaded lazily.
struct Records {
    file: File,
    count: u64,
    last: Option<Record>,
}

impl Records {
    fn open(file: File) -> std::io::Result<Records> {
        let size = file.metadata()?.len();
        let count = size / RECORD;
        let last = read_last_record(&file, count * RECORD)?;
        Ok(Records { file, count, last })
    }

    fn get(&self, k: u64) -> std::io::Result<Record> {
        let mut b = [0u8; RECORD as usize];
        self.file.read_exact_at(&mut b, k * RECORD)?;
        Ok(Record::decode(&b))
    }

    /// Index slot of the first record with an id greater than `after`.
    fn position_after(&self, after: u64) -> std::io::Result<u64> {
        // Nothing new: the common case of a poll or a follower.
        if self.last.is_none_or(|l| l.id <= after) {
            return Ok(self.count);
        }
        // Ids are dense from 1, so slot `after` normally holds id `after + 1`.
        if after < self.count && self.get(after)?.id == after + 1 {
            return Ok(after);
        }
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.get(mid)?.id <= after {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }
}

fn read_last_record(f: &File, size: u64) -> std::io::Result<Option<Record>> {
    if size < RECORD {
        return Ok(None);
    }
    let mut b = [0u8; RECORD as usize];
    f.read_exact_at(&mut b, size - RECORD)?;
    Ok(Some(Record::decode(&b)))
}

/// Does the record point at a whole entry with its id inside a log of `size` bytes?
fn record_valid(log: &File, r: &Record, size: u64) -> bool {
    if r.offset.checked_add(r.len).is_none_or(|end| end > size) || r.len < 8 {
        return false;
    }
    let mut b = [0u8; 64];
    let n = (r.len as usize).min(64);
    if log.read_exact_at(&mut b[..n], r.offset).is_err() {
        return false;
    }
    let want = format!("] #{} <", r.id);
    b.starts_with(b"### ") && find(&b[..n], want.as_bytes()).is_some()
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
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
        let (found, damage) = parse_all(&buf, 0);
        assert_eq!(found.len(), 1);
        assert_eq!(damage.len(), 1);
        assert!(damage[0].at_end);
        buf.push(b'\n');
        buf.extend_from_slice(&render(&entry(2, "two again")));
        let (found, damage) = parse_all(&buf, 0);
        assert_eq!(found.len(), 2);
        assert_eq!(found[1].0.message, "two again");
        assert_eq!(damage.len(), 1);
        assert!(!damage[0].at_end);
    }
}
