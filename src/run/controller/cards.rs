//! The cards of an agent that works the board (`board: next` in its workflow): before each
//! run it is given a card, the one it holds or else the next ready one, claimed for it by
//! its server (so that the claim lapses if the server dies); its prompt shows the card and
//! how to finish it; a card the run leaves unfinished is given back, ready again. While the
//! server serves, the claims of its agents are renewed ([`renew_held`]).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::board::{self, Card, State as CardState};
use crate::instance::Instance;

/// How long a claim made for a run lasts without renewal (as one an agent makes with its
/// tools): its server renews it every third of this while it serves.
pub const CARD_TTL: Duration = crate::tools::board::DEFAULT_CLAIM_TTL;

/// The card `agent`'s next run starts from: one it holds (renewed), else the next ready
/// card claimed for it. `None` when none is ready (or the board cannot be read: said).
pub(super) fn take(inst: &Instance, agent: &str) -> Option<Card> {
    let r = board::held_by(inst, agent).and_then(|held| match held.first() {
        Some(id) => board::renew(inst, *id, agent).map(Some),
        None => board::claim_next(inst, agent, CARD_TTL),
    });
    r.unwrap_or_else(|e| {
        crate::warn::warn(
            "aw-run",
            format!("{agent}: no card taken from the board: {e}"),
        );
        None
    })
}

/// After a run on card `id`: when `agent` still holds it (not done, not dropped), give it
/// back, ready again for the next run of whichever agent.
pub(super) fn give_back(inst: &Instance, agent: &str, id: u64) {
    let held = board::show(inst, id).is_ok_and(|c| {
        c.state == CardState::Claimed && c.holder.as_ref().is_some_and(|h| h.agent == agent)
    });
    if held && let Err(e) = board::release(inst, id, agent) {
        crate::warn::warn("aw-run", format!("{agent}: card {id} not given back: {e}"));
    }
}

/// What a run's prompt says of its card.
pub(super) fn prompt_section(c: &Card) -> String {
    let until = c.holder.as_ref().map_or("", |h| h.until.as_str());
    let mut s = format!(
        "\n## Your card\n\nYou hold card {} of the board until {until} (renewed while this \
         server serves you): {}\n",
        c.id, c.title
    );
    if !c.body.trim().is_empty() {
        s.push('\n');
        s.push_str(c.body.trim_end());
        s.push('\n');
    }
    s.push('\n');
    s.push_str(&crate::tools::board::how_to_finish(c));
    s.push_str(" A card left unfinished when this run ends is given back to the board.\n");
    s
}

/// Is a card of `cards` ready for `agent`: meant for it, or for no one?
pub fn ready_for(cards: &BTreeMap<u64, Card>, agent: &str) -> bool {
    cards
        .values()
        .any(|c| c.is_ready(cards) && (c.assignee.is_empty() || c.is_for(agent)))
}

/// Renew the claims that the agents `ours` hold through this server and that are due: a
/// third of their time to live or less left.
pub fn renew_held(inst: &Instance, ours: &[String]) {
    let Ok(cards) = board::list(inst) else {
        return;
    };
    let me = std::process::id();
    for c in cards.values() {
        let Some(h) = c.holder.as_ref().filter(|h| ours.contains(&h.agent)) else {
            continue;
        };
        let left = chrono::DateTime::parse_from_rfc3339(&h.until)
            .map(|t| t.with_timezone(&chrono::Utc) - chrono::Utc::now())
            .ok()
            .and_then(|d| d.to_std().ok())
            .unwrap_or_default();
        if h.pid == me && h.served && left <= Duration::from_secs(h.ttl) / 3 {
            let _ = board::renew(inst, c.id, &h.agent);
        }
    }
}
