//! The inbox: unread entries that mention an agent, after its ack cursor
//! (`_state/cursors.json`, one entry id per agent).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::channel::{Channel, Damage, Entry};
use crate::error::Result;
use crate::instance::Instance;
use crate::mention::{self, Priority};
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
pub fn unread_with_last(
    inst: &Instance,
    agent: &str,
) -> Result<(Vec<InboxMessage>, Vec<Damage>, u64)> {
    names::check_agent(agent)?;
    let after = cursor(inst, agent)?;
    let batch = Channel::new(inst).read_since(after)?;
    let last = batch.entries.last().map_or(after, |e| e.id);
    let msgs = batch
        .entries
        .into_iter()
        .filter(|e| is_for(e, agent))
        .map(|e| InboxMessage {
            priority: mention::priority(&e.message, e.mentions.len()),
            entry: e,
            unread: true,
        })
        .collect();
    Ok((msgs, batch.damage, last))
}

/// How much of the log [`unread_each`] reads at a time, in bytes.
const SCAN_CHUNK: u64 = 8 << 20;

/// Hand each unread message for `agent` to `f`, oldest first. The channel is read a chunk
/// at a time: only what `f` keeps is held. Reading never acknowledges.
pub fn unread_each(inst: &Instance, agent: &str, mut f: impl FnMut(InboxMessage)) -> Result<()> {
    names::check_agent(agent)?;
    let after = cursor(inst, agent)?;
    Channel::new(inst).scan_since(after, SCAN_CHUNK, |e| {
        if is_for(&e, agent) {
            f(InboxMessage {
                priority: mention::priority(&e.message, e.mentions.len()),
                entry: e,
                unread: true,
            });
        }
        true
    })?;
    Ok(())
}

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
