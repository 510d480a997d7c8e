//! The format of an entry in the log, and of its record in the offset index.
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

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hash::fnv1a;

/// Largest message accepted, in bytes (4 MiB).
pub const MAX_MESSAGE: usize = 4 << 20;

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

/// What a header line says.
pub(super) struct Header<'a> {
    pub(super) id: u64,
    from: &'a str,
    at: &'a str,
    pub(super) len: usize,
    sum: u64,
    /// The mentions, separated by commas.
    to: &'a str,
}

pub(super) fn parse_header(line: &str) -> Option<Header<'_>> {
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
pub(super) fn parse_entry(buf: &[u8]) -> Option<(Entry, usize)> {
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
pub(super) fn parse_all(
    buf: &[u8],
    base: u64,
    mut floor: u64,
) -> (Vec<(Entry, Record)>, Vec<Damage>) {
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

/// Where one entry lies in the log: its id, the offset of its header and its whole length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) id: u64,
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

impl Record {
    pub(crate) fn end(&self) -> u64 {
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
