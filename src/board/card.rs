//! A card, as its file holds it, and who holds it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::holder::Holder;
use crate::instance::Instance;

/// Where a card is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Open,
    Claimed,
    Done,
    Dropped,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Open => "open",
            State::Claimed => "claimed",
            State::Done => "done",
            State::Dropped => "dropped",
        }
    }

    /// Done or dropped: nothing more happens to the card.
    pub fn is_closed(self) -> bool {
        matches!(self, State::Done | State::Dropped)
    }
}

/// One thing that happened to a card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub at: String,
    /// Who did it (`aw` for a claim that lapsed).
    pub by: String,
    /// `added`, `claimed`, `renewed`, `released`, `lapsed`, `done` or `dropped`.
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A card, as its file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Card {
    pub id: u64,
    pub title: String,
    #[serde(default)]
    pub body: String,
    pub state: State,
    /// Who added it.
    pub creator: String,
    /// Who holds it, while it is claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
    /// The agent it is meant for.
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    #[serde(default)]
    pub labels: Vec<String>,
    /// The cards it waits for: it is ready only when all of them are done.
    #[serde(default)]
    pub after: Vec<u64>,
    pub created: String,
    pub updated: String,
    /// What was said when it was done or dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default)]
    pub history: Vec<Event>,
}

impl Card {
    /// Record that `by` did `event` now.
    pub(super) fn event(&mut self, by: &str, event: &str, note: Option<&str>) {
        let at = crate::time::now();
        self.updated.clone_from(&at);
        self.history.push(Event {
            at,
            by: by.to_string(),
            event: event.to_string(),
            note: note.map(str::to_string),
        });
    }

    /// Is it open (or its claim lapsed), not held, and is every card it waits for done?
    pub fn is_ready(&self, cards: &BTreeMap<u64, Card>) -> bool {
        self.state == State::Open
            && self
                .after
                .iter()
                .all(|a| cards.get(a).is_some_and(|c| c.state == State::Done))
    }

    /// The line `aw-ctl board ls` prints.
    pub fn summary(&self) -> String {
        let mut s = format!("{:>4}  {:<7}  {}", self.id, self.state.as_str(), self.title);
        if let Some(h) = &self.holder {
            s.push_str(&format!("  [held by {} until {}]", h.agent, h.until));
        }
        if let Some(f) = &self.assignee {
            s.push_str(&format!("  [for {f}]"));
        }
        if !self.after.is_empty() {
            let ids: Vec<String> = self.after.iter().map(u64::to_string).collect();
            s.push_str(&format!("  [after {}]", ids.join(",")));
        }
        if !self.labels.is_empty() {
            s.push_str(&format!("  [{}]", self.labels.join(",")));
        }
        s
    }

    /// One line of `aw-ctl board ls --json`.
    pub fn to_json_line(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "title": self.title,
            "state": self.state,
            "holder": self.holder.as_ref().map(|h| &h.agent),
            "until": self.holder.as_ref().map(|h| &h.until),
            "for": self.assignee,
            "after": self.after,
            "labels": self.labels,
        })
    }
}

/// When the claim on `c` lapsed: open it again, and say so in its history. Whether it
/// changed.
pub(super) fn lapse(inst: &Instance, c: &mut Card) -> bool {
    let Some(note) = c.holder.as_ref().and_then(|h| h.lapsed(inst)) else {
        return false;
    };
    c.state = State::Open;
    c.holder = None;
    c.event("aw", "lapsed", Some(&note));
    true
}
