//! The board tools: `board_add`, `board_claim`, `board_done` and `board_list`.

use std::time::Duration;

use serde_json::json;

use super::caller::{Caller, Reply};
use super::params;
use crate::board::{self, Card, NewCard};
use crate::error::{Error, Result};

/// How long a claim lasts without renewal, unless the call says.
pub const DEFAULT_CLAIM_TTL: Duration = Duration::from_secs(30 * 60);

/// How the one who holds card `c` finishes it, as a model and a person are told.
pub fn how_to_finish(c: &Card) -> String {
    format!(
        "When it is done, call board_done with id {id} and a note saying what was done \
         (from a shell: aw-ctl board done {id} --note TEXT); the leases you took for it are released then.",
        id = c.id
    )
}

/// A card as the model reads it: its id, title, state, and body.
fn text(c: &Card) -> String {
    let mut s = c.summary().trim_start().to_string();
    if !c.body.trim().is_empty() {
        s.push('\n');
        s.push_str(c.body.trim_end());
    }
    s
}

fn card_json(c: &Card) -> serde_json::Value {
    let mut v = c.to_json_line();
    v["body"] = json!(c.body);
    v["note"] = json!(c.note);
    v
}

fn card_id(n: super::args::Uint) -> Result<u64> {
    board::parse_id(&n.0.to_string())
}

pub(super) fn board_add(s: &Caller, a: params::BoardAdd) -> Result<Reply> {
    let after = a
        .after
        .unwrap_or_default()
        .into_iter()
        .map(card_id)
        .collect::<Result<Vec<u64>>>()?;
    let new = NewCard {
        title: a.title,
        body: a.body.unwrap_or_default(),
        assignee: a.assignee.map(|n| n.0).unwrap_or_default(),
        labels: a.labels.map(|l| l.0).unwrap_or_default(),
        after,
    };
    let c = board::add(&s.inst, &s.agent, new)?;
    Ok(Reply::with(
        format!("Added card {}: {}", c.id, c.title),
        json!({ "id": c.id, "card": card_json(&c) }),
    ))
}

pub(super) fn board_claim(s: &Caller, a: params::BoardClaim) -> Result<Reply> {
    let ttl = a
        .ttl_seconds
        .map_or(DEFAULT_CLAIM_TTL, |t| Duration::from_secs(t.0));
    let c = match (a.id, a.next.is_some_and(|f| f.0)) {
        (Some(_), true) => {
            return Err(Error::invalid(
                "board_claim takes an id or next, not both".to_string(),
            ));
        }
        (Some(id), false) => board::claim(&s.inst, card_id(id)?, &s.agent, ttl)?,
        (None, _) => match board::claim_next(&s.inst, &s.agent, ttl)? {
            Some(c) => c,
            None => {
                return Ok(Reply::with(
                    "No card is ready for you: every open card waits for another, or none is open.",
                    json!({ "card": null }),
                ));
            }
        },
    };
    let until = c.holder.as_ref().map_or("", |h| h.until.as_str());
    Ok(Reply::with(
        format!(
            "You hold card {} until {until} (claim it again to renew).\n{}\n\n{}",
            c.id,
            text(&c),
            how_to_finish(&c)
        ),
        json!({ "id": c.id, "card": card_json(&c) }),
    ))
}

pub(super) fn board_done(s: &Caller, a: params::BoardDone) -> Result<Reply> {
    let id = card_id(a.id)?;
    // The leases taken for the card, which finishing it releases.
    let released: Vec<crate::lease::Lease> = crate::lease::list(&s.inst)?
        .into_iter()
        .filter(|l| l.card == Some(id) && l.agent() == s.agent)
        .collect();
    let c = board::done(&s.inst, id, &s.agent, a.note.as_deref())?;
    // The cards that waited for it and are ready now: only those it blocks are read.
    let mut ready = Vec::new();
    for b in &c.blocks {
        let r = board::show(&s.inst, *b)?;
        let mut waits = Vec::new();
        for w in &r.after {
            waits.push(board::show(&s.inst, *w)?);
        }
        if r.state == board::State::Open && waits.iter().all(|w| w.state == board::State::Done) {
            ready.push(r.id);
        }
    }
    let mut text = format!("Card {id} is done.");
    if !released.is_empty() {
        let ids: Vec<&str> = released.iter().map(|l| l.id.as_str()).collect();
        text.push_str(&format!(" Released your leases {}.", ids.join(", ")));
    }
    if !ready.is_empty() {
        let ids: Vec<String> = ready.iter().map(u64::to_string).collect();
        text.push_str(&format!(" Now ready: card {}.", ids.join(", ")));
    }
    Ok(Reply::with(
        text,
        json!({
            "id": c.id,
            "card": card_json(&c),
            "released": released.iter().map(|l| &l.id).collect::<Vec<_>>(),
            "ready": ready,
        }),
    ))
}

pub(super) fn board_list(s: &Caller, a: params::BoardList) -> Result<Reply> {
    let ready = a.ready.is_some_and(|f| f.0);
    let mine = a.mine.is_some_and(|f| f.0);
    let cards = if s.inst.exists() {
        board::list(&s.inst)?
    } else {
        Default::default()
    };
    let me = s.agent.as_str();
    let shown: Vec<&Card> = cards
        .values()
        .filter(|c| !ready || c.is_ready(&cards))
        .filter(|c| !mine || c.holder.as_ref().is_some_and(|h| h.agent == me) || c.is_for(me))
        .collect();
    let lines: Vec<String> = shown.iter().map(|c| c.summary()).collect();
    let text = match lines.is_empty() {
        true => "No cards.".to_string(),
        false => lines.join("\n"),
    };
    Ok(Reply::with(
        text,
        json!({ "cards": shown.iter().map(|c| c.to_json_line()).collect::<Vec<_>>() }),
    ))
}
