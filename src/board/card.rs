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
    /// `added`, `edited`, `claimed`, `renewed`, `released`, `lapsed`, `done`, `dropped` or
    /// `reopened` (a hook said it was not done yet).
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
    /// The agents it is meant for: one, a pool of several, or none (anyone).
    #[serde(
        default,
        rename = "for",
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub assignee: Vec<String>,
    #[serde(default)]
    pub labels: Vec<String>,
    /// The cards it waits for: it is ready only when all of them are done.
    #[serde(default)]
    pub after: Vec<u64>,
    /// The cards that wait for it (kept with it, so that finishing it finds them at once).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<u64>,
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

    /// Is it meant for `who`, alone or in a pool?
    pub fn is_for(&self, who: &str) -> bool {
        self.assignee.iter().any(|a| a == who)
    }

    /// ` @a @b`: the mentions of the agents it is meant for (nothing when for no one).
    pub(super) fn mentions(&self) -> String {
        self.assignee.iter().map(|a| format!(" @{a}")).collect()
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
        if !self.assignee.is_empty() {
            s.push_str(&format!("  [for {}]", self.assignee.join(",")));
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

/// When the claim on `c` lapsed: open it again, and say so in its history. Why it lapsed,
/// when it did.
pub(super) fn lapse(inst: &Instance, c: &mut Card) -> Option<String> {
    let note = c.holder.as_ref().and_then(|h| h.lapsed(inst))?;
    c.state = State::Open;
    c.holder = None;
    c.event("aw", "lapsed", Some(&note));
    Some(note)
}

/// `for` as a card file holds it: a list of agents, or one name (as files made before
/// pools were had it).
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<OneOrMany>::deserialize(d)? {
        None => Vec::new(),
        Some(OneOrMany::One(a)) => vec![a],
        Some(OneOrMany::Many(v)) => v,
    })
}
