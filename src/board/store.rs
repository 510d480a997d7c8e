//! The files of the board: one per card, the counter of ids, the lock.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::card::{Card, State, lapse};
use crate::error::{Error, Result};
use crate::fs::{Lock, atomic_write};
use crate::instance::Instance;

/// The folder of the cards, under the instance.
pub const DIR: &str = "board";

/// The counter of ids, under `_state/`.
const COUNTER: &str = "board.json";

/// The longest title, in bytes.
pub const MAX_TITLE: usize = 200;

/// The longest body, in bytes.
pub const MAX_BODY: usize = 64 * 1024;

/// A card to add.
#[derive(Debug, Clone, Default)]
pub struct NewCard {
    pub title: String,
    pub body: String,
    pub assignee: Option<String>,
    pub labels: Vec<String>,
    pub after: Vec<u64>,
}

/// The counter of ids.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Counter {
    /// The last id given.
    last: u64,
}

/// The folder of the cards of `inst`.
pub fn dir(inst: &Instance) -> PathBuf {
    inst.dir().join(DIR)
}

fn path(inst: &Instance, id: u64) -> PathBuf {
    dir(inst).join(format!("{id}.json"))
}

/// Take the board lock of `inst` (creating the instance and its board folder if needed).
pub(super) fn lock(inst: &Instance) -> Result<Lock> {
    inst.create()?;
    let d = dir(inst);
    crate::fs::owned::folder(&d, true).map_err(|e| Error::create(&d, e))?;
    Lock::exclusive(&inst.state_file("board.lock"))
}

/// Read an id as a user gives it (`7`, or `#7`).
pub fn parse_id(text: &str) -> Result<u64> {
    let t = text.trim().trim_start_matches('#');
    match t.parse::<u64>() {
        Ok(n) if n > 0 && t.chars().all(|c| c.is_ascii_digit()) => Ok(n),
        _ => Err(Error::invalid(format!(
            "card id '{}': expected a number such as 7",
            crate::names::sanitize(text)
        ))),
    }
}

/// The card `id` of `inst`, as stored.
pub(super) fn read(inst: &Instance, id: u64) -> Result<Option<Card>> {
    let p = path(inst, id);
    match crate::fs::owned::read_fresh(&p) {
        Ok(bytes) => serde_json::from_slice::<Card>(&bytes)
            .map_err(|e| Error::Corrupt {
                path: p.clone(),
                why: format!("not a valid card: {e}"),
            })
            .and_then(|c| match c.id == id {
                true => Ok(Some(c)),
                false => Err(Error::Corrupt {
                    path: p,
                    why: format!("holds card {}", c.id),
                }),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(&p, e)),
    }
}

/// The card `id` of `inst`, a claim that ran out shown lapsed.
pub fn show(inst: &Instance, id: u64) -> Result<Card> {
    let mut c = read(inst, id)?.ok_or_else(|| not_found(inst, id))?;
    lapse(inst, &mut c);
    Ok(c)
}

pub(super) fn not_found(inst: &Instance, id: u64) -> Error {
    Error::not_found(format!("no card {id} on the board of {}", inst.name()))
}

/// Every card of `inst` by id, claims that ran out shown lapsed.
pub fn list(inst: &Instance) -> Result<BTreeMap<u64, Card>> {
    let d = dir(inst);
    let names = match crate::fs::owned::files(&d) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(Error::io(&d, e)),
    };
    let mut cards = BTreeMap::new();
    for n in names {
        let Some(id) = n
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| parse_id(n).ok())
        else {
            continue;
        };
        if let Some(mut c) = read(inst, id)? {
            lapse(inst, &mut c);
            cards.insert(id, c);
        }
    }
    Ok(cards)
}

/// Write a card (the caller holds the board lock).
pub(super) fn store(inst: &Instance, c: &Card) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(c).expect("card serializes");
    bytes.push(b'\n');
    atomic_write(&path(inst, c.id), &bytes)
}

/// Is `label` a label: a word of letters, digits, `-`, `_`, `.`, `/` or `:`?
fn check_label(label: &str) -> Result<()> {
    let ok = !label.is_empty()
        && label.len() <= 64
        && label
            .chars()
            .all(|c| c.is_alphanumeric() || "-_./:".contains(c));
    match ok {
        true => Ok(()),
        false => Err(Error::invalid(format!(
            "label '{}': expected a word of letters, digits, - _ . / or :",
            crate::names::sanitize(label)
        ))),
    }
}

/// The cards that `id` waits for, directly or not, would lead back to `id`: the path of
/// the cycle, when one is.
fn cycle(cards: &BTreeMap<u64, Card>, id: u64, after: &[u64]) -> Option<Vec<u64>> {
    let mut stack: Vec<Vec<u64>> = after.iter().map(|a| vec![id, *a]).collect();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = *path.last().expect("a path is never empty");
        if last == id {
            return Some(path);
        }
        if !seen.insert(last) {
            continue;
        }
        for next in cards.get(&last).map_or(&[][..], |c| &c.after[..]) {
            let mut p = path.clone();
            p.push(*next);
            stack.push(p);
        }
    }
    None
}

/// Add a card made by `by`; the card as stored.
pub fn add(inst: &Instance, by: &str, new: NewCard) -> Result<Card> {
    let title = new.title.trim();
    if title.is_empty() || title.contains(['\n', '\r']) || title.len() > MAX_TITLE {
        return Err(Error::invalid(format!(
            "card title: expected one line of 1 to {MAX_TITLE} bytes"
        )));
    }
    if new.body.len() > MAX_BODY {
        return Err(Error::invalid(format!(
            "card body: over the limit of {MAX_BODY} bytes"
        )));
    }
    if let Some(a) = &new.assignee {
        crate::names::check_agent(a)?;
    }
    for l in &new.labels {
        check_label(l)?;
    }
    let _lock = lock(inst)?;
    let cards = list(inst)?;
    let mut after: Vec<u64> = Vec::new();
    for a in &new.after {
        if !cards.contains_key(a) {
            return Err(not_found(inst, *a).hint("the cards it waits for must exist first"));
        }
        if !after.contains(a) {
            after.push(*a);
        }
    }
    let id = crate::state::update_locked(inst, COUNTER, |c: &mut Counter| {
        // Past every card there is too, should the counter have been lost.
        c.last = c.last.max(cards.keys().next_back().copied().unwrap_or(0)) + 1;
        Ok(c.last)
    })?;
    if let Some(path) = cycle(&cards, id, &after) {
        let ids: Vec<String> = path.iter().map(u64::to_string).collect();
        return Err(Error::invalid(format!(
            "card {id} would wait for itself: {}",
            ids.join(" -> ")
        )));
    }
    let now = crate::time::now();
    let mut card = Card {
        id,
        title: title.to_string(),
        body: new.body,
        state: State::Open,
        creator: by.to_string(),
        holder: None,
        assignee: new.assignee,
        labels: new.labels,
        after,
        created: now.clone(),
        updated: now,
        note: None,
        history: Vec::new(),
    };
    card.event(by, "added", None);
    store(inst, &card)?;
    Ok(card)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst() -> (tempfile::TempDir, Instance) {
        let dir = tempfile::tempdir().unwrap();
        let inst = crate::instance::Root::new(dir.path())
            .instance("t")
            .unwrap();
        (dir, inst)
    }

    fn card(title: &str, after: &[u64]) -> NewCard {
        NewCard {
            title: title.into(),
            after: after.to_vec(),
            ..NewCard::default()
        }
    }

    #[test]
    fn ids_grow_and_are_never_given_again() {
        let (_d, inst) = inst();
        assert_eq!(add(&inst, "lead", card("a", &[])).unwrap().id, 1);
        assert_eq!(add(&inst, "lead", card("b", &[1])).unwrap().id, 2);
        crate::fs::owned::remove(&path(&inst, 2)).unwrap();
        assert_eq!(add(&inst, "lead", card("c", &[])).unwrap().id, 3);
        let e = add(&inst, "lead", card("d", &[9])).unwrap_err();
        assert_eq!(e.exit_code(), 66);
    }

    #[test]
    fn a_cycle_is_found_with_its_path() {
        let mut cards = BTreeMap::new();
        for (id, after) in [(1, vec![3]), (2, vec![1]), (3, vec![])] {
            let mut c = add_plain(id);
            c.after = after;
            cards.insert(id, c);
        }
        assert_eq!(cycle(&cards, 3, &[2]), Some(vec![3, 2, 1, 3]));
        assert_eq!(cycle(&cards, 4, &[2]), None);
    }

    fn add_plain(id: u64) -> Card {
        Card {
            id,
            title: "t".into(),
            body: String::new(),
            state: State::Open,
            creator: "x".into(),
            holder: None,
            assignee: None,
            labels: Vec::new(),
            after: Vec::new(),
            created: String::new(),
            updated: String::new(),
            note: None,
            history: Vec::new(),
        }
    }
}
