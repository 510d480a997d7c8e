//! The inbox: unread entries that mention an agent, after its ack cursor
//! (`_state/cursors.json`, one entry id per agent).

use serde::Serialize;

use super::index::MentionIndex;
use super::mention::{self, Priority};
use super::{Channel, Damage, Entry, SCAN_CHUNK};
use crate::error::Result;
use crate::instance::Instance;
use crate::names;

pub use super::cursors::{CURSORS, Cursors};

/// Most inbox messages shown in full at once: by a prompt (the newest unread ones) and by
/// the `my_inbox` tool (the oldest unread ones); the others are summarised by count and id
/// range.
pub const MAX_INBOX_MESSAGES: usize = 50;

/// Most bytes of inbox message texts shown in full at once (64 KiB), except that one
/// message (the newest in a prompt, the oldest in `my_inbox`) is always shown whole, however
/// long (up to the largest message, 4 MiB).
pub const MAX_INBOX_BYTES: usize = 64 << 10;

/// One inbox message, as printed by `aw-peek --inbox --json`.
#[derive(Debug, Clone, Serialize)]
pub struct InboxMessage {
    pub entry: Entry,
    pub unread: bool,
    pub priority: Priority,
}

/// The agent's ack cursor (0 when it never acked).
pub fn cursor(inst: &Instance, agent: &str) -> Result<u64> {
    super::cursors::of(inst, agent)
}

/// Does `e` belong in `agent`'s inbox (ignoring the cursor)?
pub fn is_for(e: &Entry, agent: &str) -> bool {
    e.from != agent && e.mentions.iter().any(|m| m == agent)
}

/// Unread messages for `agent`. Reading never acknowledges.
pub fn unread(inst: &Instance, agent: &str) -> Result<(Vec<InboxMessage>, Vec<Damage>)> {
    let (msgs, damage, _) = unread_with_last(inst, agent)?;
    Ok((msgs, damage))
}

/// [`unread`], plus the id of the newest entry read (the cursor when nothing is newer): a
/// follower continues from there without missing what was appended meanwhile.
///
/// Answered from the mention index: the cost is that of the messages returned, not of the
/// channel. Where the index cannot be used, the channel is read after the cursor.
pub fn unread_with_last(
    inst: &Instance,
    agent: &str,
) -> Result<(Vec<InboxMessage>, Vec<Damage>, u64)> {
    names::check_agent(agent)?;
    let after = cursor(inst, agent)?;
    let ch = Channel::new(inst);
    let ix = ch.mentions();
    if let Some(ready) = ix.ready(agent)?
        && let Ok(ids) = ready.ids(after)
    {
        let entries = ch.get_many(&ids)?;
        if trusted(&ix, agent, &ids, &entries) {
            let msgs = entries.into_iter().map(message).collect();
            return Ok((msgs, Vec::new(), ready.through.max(after)));
        }
    }
    unread_scanned(inst, agent, after)
}

/// The unread messages of `agent` after `after` found by reading the channel from there,
/// without the mention index, with the damage met and the id of the newest entry read.
fn unread_scanned(
    inst: &Instance,
    agent: &str,
    after: u64,
) -> Result<(Vec<InboxMessage>, Vec<Damage>, u64)> {
    let batch = Channel::new(inst).read_since(after)?;
    let last = batch.entries.last().map_or(after, |e| e.id);
    let msgs = batch
        .entries
        .into_iter()
        .filter(|e| is_for(e, agent))
        .map(message)
        .collect();
    Ok((msgs, batch.damage, last))
}

/// How many unread messages `agent` has: [`unread`]'s count, without reading them.
pub fn unread_count(inst: &Instance, agent: &str) -> Result<usize> {
    names::check_agent(agent)?;
    let after = cursor(inst, agent)?;
    let ch = Channel::new(inst);
    let ix = ch.mentions();
    if let Some(ready) = ix.ready(agent)?
        && let Ok(n) = ready.count(after)
    {
        return Ok(n as usize);
    }
    let mut n = 0;
    ch.scan_since(after, SCAN_CHUNK, |e| {
        n += usize::from(is_for(&e, agent));
        true
    })?;
    Ok(n)
}

/// Are `entries`, read for the `ids` the mention index gave for `agent`, all there and all
/// for `agent`? When not, the index is damaged: it is rebuilt, and the caller reads the log.
fn trusted(ix: &MentionIndex, agent: &str, ids: &[u64], entries: &[Entry]) -> bool {
    if entries.len() == ids.len() && entries.iter().all(|e| is_for(e, agent)) {
        return true;
    }
    ix.repair();
    false
}

fn message(e: Entry) -> InboxMessage {
    InboxMessage {
        priority: mention::priority(&e.message, e.mentions.len()),
        entry: e,
        unread: true,
    }
}

/// The unread messages older than those [`unread_tail`] shows: how many, and the ids of the
/// oldest and the newest of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Older {
    pub count: u64,
    pub first: u64,
    pub last: u64,
}

impl Older {
    /// For people: `N ADJ unread messages` (`1 ADJ unread message`) and `ids A to B`
    /// (`id A`).
    pub fn describe(&self, adj: &str) -> (String, String) {
        if self.count == 1 {
            (
                format!("1 {adj} unread message"),
                format!("id {}", self.first),
            )
        } else {
            (
                format!("{} {adj} unread messages", self.count),
                format!("ids {} to {}", self.first, self.last),
            )
        }
    }
}

/// `agent`'s cursor, the channel and, where the mention index can answer, the ids of the
/// unread messages of `agent` (oldest first).
fn unread_ids(inst: &Instance, agent: &str) -> Result<(u64, Channel, Option<Vec<u64>>)> {
    names::check_agent(agent)?;
    let after = cursor(inst, agent)?;
    let ch = Channel::new(inst);
    let ix = ch.mentions();
    let ids = match ix.ready(agent)? {
        Some(ready) => ready.ids(after).ok(),
        None => None,
    };
    Ok((after, ch, ids))
}

/// Hand each message for `agent` after `after` to `f`, oldest first, reading the channel a
/// chunk at a time (where the mention index cannot be used).
fn scan_for(ch: &Channel, after: u64, agent: &str, mut f: impl FnMut(InboxMessage)) -> Result<()> {
    ch.scan_since(after, SCAN_CHUNK, |e| {
        if is_for(&e, agent) {
            f(message(e));
        }
        true
    })?;
    Ok(())
}

/// The newest unread messages for `agent`, oldest first: at most `max_count` of them and
/// `max_bytes` of text together (at least the newest, whole), and a summary of the older
/// ones. Only the messages shown are read (from the mention index; where it cannot be
/// used, the channel is read a chunk at a time and only those shown are held). Reading
/// never acknowledges.
pub fn unread_tail(
    inst: &Instance,
    agent: &str,
    max_count: usize,
    max_bytes: usize,
) -> Result<(Vec<InboxMessage>, Option<Older>)> {
    let (after, ch, ids) = unread_ids(inst, agent)?;
    'indexed: {
        let Some(ids) = ids else { break 'indexed };
        let ix = ch.mentions();
        // Newest first, a small batch at a time, until one does not fit.
        let (mut shown, mut bytes, mut end) = (Vec::new(), 0usize, ids.len());
        'fill: while end > 0 {
            let start = end.saturating_sub(TAIL_BATCH);
            let got = ch.get_many(&ids[start..end])?;
            if !trusted(&ix, agent, &ids[start..end], &got) {
                break 'indexed;
            }
            for e in got.into_iter().rev() {
                let fits = shown.len() < max_count && bytes + e.message.len() <= max_bytes;
                if !shown.is_empty() && !fits {
                    break 'fill;
                }
                bytes += e.message.len();
                shown.push(message(e));
                end -= 1;
            }
        }
        shown.reverse();
        let older = (end > 0).then(|| Older {
            count: end as u64,
            first: ids[0],
            last: ids[end - 1],
        });
        return Ok((shown, older));
    }
    let mut tail = Tail::new(max_count, max_bytes);
    scan_for(&ch, after, agent, |m| tail.push(m))?;
    Ok(tail.done())
}

/// The oldest unread messages for `agent`, oldest first: at most `max_count` of them and
/// `max_bytes` of text together (at least the oldest, whole), and a summary of the newer
/// unread ones not returned (how many, the ids of the oldest and the newest of them: the
/// same shape as [`Older`]). What is returned is a prefix of the unread messages, so that
/// acknowledging up to the newest of them acknowledges exactly those returned; the next
/// call returns the next ones. Only the messages returned are read (from the mention
/// index; where it cannot be used, the channel is read a chunk at a time and only those
/// returned are held). Reading never acknowledges.
pub fn unread_head(
    inst: &Instance,
    agent: &str,
    max_count: usize,
    max_bytes: usize,
) -> Result<(Vec<InboxMessage>, Option<Older>)> {
    let (after, ch, ids) = unread_ids(inst, agent)?;
    'indexed: {
        let Some(ids) = ids else { break 'indexed };
        let ix = ch.mentions();
        let mut head = Head::new(max_count, max_bytes);
        'fill: for batch in ids.chunks(TAIL_BATCH) {
            let got = ch.get_many(batch)?;
            if !trusted(&ix, agent, batch, &got) {
                break 'indexed;
            }
            for e in got {
                if !head.push(message(e)) {
                    break 'fill;
                }
            }
        }
        let n = head.shown.len();
        let newer = (n < ids.len()).then(|| Older {
            count: (ids.len() - n) as u64,
            first: ids[n],
            last: ids[ids.len() - 1],
        });
        return Ok((head.shown, newer));
    }
    let mut head = Head::new(max_count, max_bytes);
    scan_for(&ch, after, agent, |m| {
        head.push(m);
    })?;
    Ok((head.shown, head.newer))
}

/// Keeps the oldest messages pushed (oldest first) within the bounds, counts the others.
struct Head {
    shown: Vec<InboxMessage>,
    bytes: usize,
    newer: Option<Older>,
    max_count: usize,
    max_bytes: usize,
}

impl Head {
    fn new(max_count: usize, max_bytes: usize) -> Head {
        Head {
            shown: Vec::new(),
            bytes: 0,
            newer: None,
            max_count,
            max_bytes,
        }
    }

    /// Keep `m` if it fits (the first always does), else count it; `false` once full.
    fn push(&mut self, m: InboxMessage) -> bool {
        let len = m.entry.message.len();
        let fits = self.newer.is_none()
            && (self.shown.is_empty()
                || (self.shown.len() < self.max_count && self.bytes + len <= self.max_bytes));
        if fits {
            self.bytes += len;
            self.shown.push(m);
            return true;
        }
        let id = m.entry.id;
        let o = self.newer.get_or_insert(Older {
            count: 0,
            first: id,
            last: id,
        });
        o.count += 1;
        o.last = id;
        false
    }
}

/// How many entries [`unread_tail`] reads at a time from the index.
const TAIL_BATCH: usize = 64;

/// Keeps the newest messages pushed (oldest first) within the bounds, counts the others.
#[derive(Default)]
pub(crate) struct Tail {
    shown: std::collections::VecDeque<InboxMessage>,
    bytes: usize,
    older: Option<Older>,
    max_count: usize,
    max_bytes: usize,
}

impl Tail {
    pub(crate) fn new(max_count: usize, max_bytes: usize) -> Tail {
        Tail {
            max_count,
            max_bytes,
            ..Tail::default()
        }
    }

    /// What is shown, oldest first, and the summary of the others.
    pub(crate) fn done(self) -> (Vec<InboxMessage>, Option<Older>) {
        (self.shown.into(), self.older)
    }

    pub(crate) fn push(&mut self, m: InboxMessage) {
        self.bytes += m.entry.message.len();
        self.shown.push_back(m);
        while self.shown.len() > 1
            && (self.shown.len() > self.max_count || self.bytes > self.max_bytes)
        {
            let Some(out) = self.shown.pop_front() else {
                break;
            };
            self.bytes -= out.entry.message.len();
            let id = out.entry.id;
            let o = self.older.get_or_insert(Older {
                count: 0,
                first: id,
                last: id,
            });
            o.count += 1;
            o.last = id;
        }
    }
}

/// Move `agent`'s cursor forward to `until` (default: the newest entry). The cursor never
/// moves back, and never past the newest existing entry, so a later message is never
/// acknowledged in advance. Returns the cursor after the ack.
pub fn ack(inst: &Instance, agent: &str, until: Option<u64>) -> Result<u64> {
    names::check_agent(agent)?;
    inst.require()?;
    let channel = Channel::new(inst);
    // The newest id is read under the state lock: an entry appended after this read has a
    // larger id and stays unread.
    super::cursors::advance(inst, agent, super::post::durable(inst), || {
        let newest = channel.last_id()?;
        Ok(until.unwrap_or(newest).min(newest))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The newest messages shown and the older summarised, by the rule of [`Tail`] over
    /// messages given oldest first.
    fn by_scan(msgs: Vec<InboxMessage>, max_count: usize, max_bytes: usize) -> Vec<u64> {
        let mut tail = Tail::new(max_count, max_bytes);
        msgs.into_iter().for_each(|m| tail.push(m));
        let (shown, older) = tail.done();
        let mut ids: Vec<u64> = shown.iter().map(|m| m.entry.id).collect();
        if let Some(o) = older {
            ids.extend([0, o.count, o.first, o.last]);
        }
        ids
    }

    /// A channel of 300 entries of many lengths, most of them for bob.
    fn three_agents() -> (tempfile::TempDir, Instance, Channel) {
        let (dir, inst) = crate::instance::scratch();
        let ch = Channel::new(&inst);
        for i in 0..300usize {
            let (from, to) = match i % 7 {
                0 => ("bob", "amy"),
                3 => ("amy", "cy"),
                _ => ("amy", "bob"),
            };
            let text = format!("{i} {}", "y".repeat(i * 37 % 900));
            ch.append(from, &text, vec![to.into()], false).unwrap();
        }
        (dir, inst, ch)
    }

    /// The bounds tried: (messages, bytes).
    const BOUNDS: [(usize, usize); 5] = [(1, 1), (5, 1 << 20), (50, 2000), (1000, 1 << 20), (3, 0)];

    #[test]
    fn the_tail_read_from_the_index_is_the_tail_of_a_whole_scan() {
        let (_dir, inst, _) = three_agents();
        for ack_at in [None, Some(120), Some(299), Some(300)] {
            if let Some(id) = ack_at {
                ack(&inst, "bob", Some(id)).unwrap();
            }
            for (count, bytes) in BOUNDS {
                let (shown, older) = unread_tail(&inst, "bob", count, bytes).unwrap();
                let mut got: Vec<u64> = shown.iter().map(|m| m.entry.id).collect();
                if let Some(o) = older {
                    got.extend([0, o.count, o.first, o.last]);
                }
                let after = cursor(&inst, "bob").unwrap();
                let (all, _, _) = unread_scanned(&inst, "bob", after).unwrap();
                assert_eq!(
                    got,
                    by_scan(all, count, bytes),
                    "{ack_at:?} {count} {bytes}"
                );
            }
        }
        assert!(unread_tail(&inst, "dave", 5, 100).unwrap().0.is_empty());
    }

    #[test]
    fn the_head_read_from_the_index_is_the_head_of_a_whole_scan() {
        let (_dir, inst, ch) = three_agents();
        for ack_at in [None, Some(120), Some(299), Some(300)] {
            if let Some(id) = ack_at {
                ack(&inst, "bob", Some(id)).unwrap();
            }
            for (count, bytes) in BOUNDS {
                let (shown, newer) = unread_head(&inst, "bob", count, bytes).unwrap();
                let after = cursor(&inst, "bob").unwrap();
                let (msgs, _, _) = unread_scanned(&inst, "bob", after).unwrap();
                let all: Vec<u64> = msgs.iter().map(|m| m.entry.id).collect();
                let got: Vec<u64> = shown.iter().map(|m| m.entry.id).collect();
                // What a read of the channel keeps (where the index cannot be used) is the
                // same.
                let mut head = Head::new(count, bytes);
                msgs.into_iter().for_each(|m| {
                    head.push(m);
                });
                let kept: Vec<u64> = head.shown.iter().map(|m| m.entry.id).collect();
                assert_eq!(
                    (&kept, head.newer),
                    (&got, newer),
                    "{ack_at:?} {count} {bytes}"
                );
                // A prefix, within the bounds, at least one when any is unread.
                assert_eq!(got[..], all[..got.len()], "{ack_at:?} {count} {bytes}");
                assert!(got.len() <= count.max(1));
                assert_eq!(got.is_empty(), all.is_empty());
                let text: usize = shown.iter().map(|m| m.entry.message.len()).sum();
                assert!(got.len() == 1 || text <= bytes);
                let rest = &all[got.len()..];
                let want = (!rest.is_empty()).then(|| Older {
                    count: rest.len() as u64,
                    first: rest[0],
                    last: rest[rest.len() - 1],
                });
                assert_eq!(newer, want, "{ack_at:?} {count} {bytes}");
                // The next one would not have fitted.
                if let Some(next) = rest.first() {
                    let len = ch.get_many(&[*next]).unwrap()[0].message.len();
                    assert!(got.len() == count || text + len > bytes);
                }
            }
        }
        assert!(unread_head(&inst, "dave", 5, 100).unwrap().0.is_empty());
    }
}
