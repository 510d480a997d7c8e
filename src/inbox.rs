//! The inbox: unread entries that mention an agent, after its ack cursor
//! (`_state/cursors.json`, one entry id per agent).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::channel::{Channel, Damage, Entry, SCAN_CHUNK};
use crate::error::Result;
use crate::instance::Instance;
use crate::mention::{self, Priority};
use crate::mention_index::MentionIndex;
use crate::names;
use crate::state;

/// Ack cursors: agent → id of the newest acknowledged entry.
pub type Cursors = BTreeMap<String, u64>;

/// The file of the ack cursors under `_state/`.
pub const CURSORS: &str = "cursors.json";

/// One inbox message, as printed by `aw-peek --inbox --json`.
#[derive(Debug, Clone, Serialize)]
pub struct InboxMessage {
    pub entry: Entry,
    pub unread: bool,
    pub priority: Priority,
}

/// The agent's ack cursor (0 when it never acked).
pub fn cursor(inst: &Instance, agent: &str) -> Result<u64> {
    let c: Cursors = state::load(&inst.state_file(CURSORS))?;
    Ok(c.get(agent).copied().unwrap_or(0))
}

/// All cursors.
pub fn cursors(inst: &Instance) -> Result<Cursors> {
    state::load(&inst.state_file(CURSORS))
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
    let ix = MentionIndex::for_channel(&ch);
    if let Some(through) = ix.ready(&ch)?
        && let Ok(ids) = ix.ids(agent, after, through)
    {
        let msgs = ch.get_many(&ids)?.into_iter().map(message).collect();
        return Ok((msgs, Vec::new(), through.max(after)));
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
    let ix = MentionIndex::for_channel(&ch);
    if let Some(through) = ix.ready(&ch)?
        && let Ok(n) = ix.count(agent, after, through)
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

fn message(e: Entry) -> InboxMessage {
    InboxMessage {
        priority: mention::priority(&e.message, e.mentions.len()),
        entry: e,
        unread: true,
    }
}

/// The oldest unread messages for `agent` whose texts fit in `max_bytes` together (at least
/// one), and how many unread messages come after them. Only the messages kept are read
/// (from the mention index; where it cannot be used, the channel is read a chunk at a time).
/// Reading never acknowledges.
pub fn unread_head(
    inst: &Instance,
    agent: &str,
    max_bytes: usize,
) -> Result<(Vec<InboxMessage>, usize)> {
    names::check_agent(agent)?;
    let after = cursor(inst, agent)?;
    let mut h = Head {
        kept: Vec::new(),
        bytes: 0,
        left: 0,
        max_bytes,
    };
    let ch = Channel::new(inst);
    let ix = MentionIndex::for_channel(&ch);
    if let Some(through) = ix.ready(&ch)?
        && let Ok(ids) = ix.ids(agent, after, through)
    {
        // Entries are read in small batches, until one does not fit.
        let mut rest = &ids[..];
        while !rest.is_empty() {
            let (now, later) = rest.split_at(rest.len().min(HEAD_BATCH));
            for e in ch.get_many(now)? {
                h.take(e);
            }
            rest = later;
            if h.left > 0 {
                h.left += rest.len();
                break;
            }
        }
        return Ok((h.kept, h.left));
    }
    ch.scan_since(after, SCAN_CHUNK, |e| {
        if is_for(&e, agent) {
            h.take(e);
        }
        true
    })?;
    Ok((h.kept, h.left))
}

/// What [`unread_head`] keeps, and how many it leaves.
struct Head {
    kept: Vec<InboxMessage>,
    bytes: usize,
    left: usize,
    max_bytes: usize,
}

impl Head {
    fn take(&mut self, e: Entry) {
        self.bytes = self.bytes.saturating_add(e.message.len());
        if self.left == 0 && (self.kept.is_empty() || self.bytes <= self.max_bytes) {
            self.kept.push(message(e));
        } else {
            self.left += 1;
        }
    }
}

/// How many entries [`unread_head`] reads at a time from the index.
const HEAD_BATCH: usize = 64;

/// Move `agent`'s cursor forward to `until` (default: the newest entry). The cursor never
/// moves back, and never past the newest existing entry, so a later message is never
/// acknowledged in advance. Returns the cursor after the ack.
pub fn ack(inst: &Instance, agent: &str, until: Option<u64>) -> Result<u64> {
    names::check_agent(agent)?;
    inst.require()?;
    let channel = Channel::new(inst);
    state::update(inst, CURSORS, |c: &mut Cursors| {
        // Read the newest id under the state lock: an entry appended after this read has a
        // larger id and stays unread.
        let newest = channel.last_id()?;
        let target = until.unwrap_or(newest).min(newest);
        let cur = c.entry(agent.to_string()).or_insert(0);
        if target > *cur {
            *cur = target;
        }
        Ok(*cur)
    })
}
