//! Adding, showing and listing cards, and what a card may hold.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::card::{Card, State};
use super::files::{not_found, read, read_after, read_all};
use super::index::Txn;
use crate::error::{Error, Result};
use crate::instance::Instance;

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
    /// The agents it is meant for (one, a pool, or none).
    pub assignee: Vec<String>,
    pub labels: Vec<String>,
    pub after: Vec<u64>,
}

/// The counter of ids.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Counter {
    /// The last id given.
    last: u64,
}

/// The card `id` of `inst`; a claim found lapsed is lapsed (and announced) first.
pub fn show(inst: &Instance, id: u64) -> Result<Card> {
    let c = read(inst, id)?.ok_or_else(|| not_found(inst, id))?;
    match c.holder.as_ref().and_then(|h| h.lapsed(inst)) {
        Some(_) => Ok(lapse_now(inst, &[id])?
            .pop()
            .ok_or_else(|| not_found(inst, id))?),
        None => Ok(c),
    }
}

/// Lapse the claims on `ids` that lapsed, under the board lock; the cards after.
fn lapse_now(inst: &Instance, ids: &[u64]) -> Result<Vec<Card>> {
    let mut t = Txn::begin(inst)?;
    let mut out = Vec::new();
    for id in ids {
        if let Some(c) = read(inst, *id)? {
            out.push(t.lapse(c)?);
        }
    }
    t.commit()?;
    Ok(out)
}

/// Every card of `inst` by id, the claims that lapsed lapsed (and announced) first.
pub fn list(inst: &Instance) -> Result<BTreeMap<u64, Card>> {
    if !super::files::dir(inst).is_dir() {
        return Ok(BTreeMap::new());
    }
    super::index::sweep(inst)?;
    let mut cards = read_all(inst)?;
    // A claim the index did not know lapsed (its file changed by hand, or it ran out since).
    let lapsed: Vec<u64> = cards
        .values()
        .filter(|c| c.holder.as_ref().is_some_and(|h| h.lapsed(inst).is_some()))
        .map(|c| c.id)
        .collect();
    if !lapsed.is_empty() {
        for c in lapse_now(inst, &lapsed)? {
            cards.insert(c.id, c);
        }
    }
    Ok(cards)
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

/// Would `id`, waiting for `after`, wait for itself, directly or not? The path of the
/// cycle, when one is. `after_of` gives the cards a card waits for; only the cards reached
/// from `after` are looked at.
pub(super) fn cycle(
    mut after_of: impl FnMut(u64) -> Result<Vec<u64>>,
    id: u64,
    after: &[u64],
) -> Result<Option<Vec<u64>>> {
    let mut stack: Vec<Vec<u64>> = after.iter().map(|a| vec![id, *a]).collect();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = *path.last().expect("a path is never empty");
        if last == id {
            return Ok(Some(path));
        }
        if !seen.insert(last) {
            continue;
        }
        for next in after_of(last)? {
            let mut p = path.clone();
            p.push(next);
            stack.push(p);
        }
    }
    Ok(None)
}

/// Refuse (65) a title that is not one line of 1 to [`MAX_TITLE`] bytes; the title trimmed.
pub(super) fn check_title(title: &str) -> Result<&str> {
    let t = title.trim();
    match t.is_empty() || t.contains(['\n', '\r']) || t.len() > MAX_TITLE {
        true => Err(Error::invalid(format!(
            "card title: expected one line of 1 to {MAX_TITLE} bytes"
        ))),
        false => Ok(t),
    }
}

/// Refuse (65) a body over [`MAX_BODY`] bytes.
pub(super) fn check_body(body: &str) -> Result<()> {
    match body.len() > MAX_BODY {
        true => Err(Error::invalid(format!(
            "card body: over the limit of {MAX_BODY} bytes"
        ))),
        false => Ok(()),
    }
}

/// The agents a card is for, checked, each once.
pub(super) fn check_for(agents: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for a in agents {
        crate::names::check_agent(a)?;
        if !out.contains(a) {
            out.push(a.clone());
        }
    }
    Ok(out)
}

/// The labels of a card, checked, each once.
pub(super) fn check_labels(labels: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for l in labels {
        check_label(l)?;
        if !out.contains(l) {
            out.push(l.clone());
        }
    }
    Ok(out)
}

/// Add a card made by `by`; the card as stored. Only the cards it waits for are read (a
/// new card cannot close a cycle: nothing waits for it yet).
pub fn add(inst: &Instance, by: &str, new: NewCard) -> Result<Card> {
    let title = check_title(&new.title)?;
    check_body(&new.body)?;
    let assignee = check_for(&new.assignee)?;
    let labels = check_labels(&new.labels)?;
    let mut t = Txn::begin(inst)?;
    let deps = read_after(inst, &new.after)?;
    let last = t.idx.last;
    let id = crate::state::update_locked(inst, COUNTER, |c: &mut Counter| {
        // Past every card there is too, should the counter have been lost.
        c.last = c.last.max(last) + 1;
        Ok(c.last)
    })?;
    let now = crate::time::now();
    let mut card = Card {
        id,
        title: title.to_string(),
        body: new.body,
        state: State::Open,
        creator: by.to_string(),
        holder: None,
        assignee,
        labels,
        after: deps.iter().map(|d| d.id).collect(),
        blocks: Vec::new(),
        created: now.clone(),
        updated: now,
        note: None,
        history: Vec::new(),
    };
    card.event(by, "added", None);
    t.put(None, &card)?;
    for d in deps {
        let mut with = d.clone();
        with.blocks.push(id);
        t.put(Some(&d), &with)?;
    }
    t.commit()?;
    Ok(card)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::files::dir;

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
        crate::fs::owned::remove(&dir(&inst).join("2.json")).unwrap();
        assert_eq!(add(&inst, "lead", card("c", &[])).unwrap().id, 3);
        let e = add(&inst, "lead", card("d", &[9])).unwrap_err();
        assert_eq!(e.exit_code(), 66);
    }

    #[test]
    fn a_cycle_is_found_with_its_path_reading_only_the_cards_reached() {
        let after: BTreeMap<u64, Vec<u64>> =
            [(1, vec![3]), (2, vec![1]), (3, vec![]), (5, vec![])].into();
        let mut looked = Vec::new();
        let mut of = |n: u64| {
            looked.push(n);
            Ok(after.get(&n).cloned().unwrap_or_default())
        };
        assert_eq!(cycle(&mut of, 3, &[2]).unwrap(), Some(vec![3, 2, 1, 3]));
        assert_eq!(cycle(&mut of, 4, &[2]).unwrap(), None);
        assert!(!looked.contains(&5), "{looked:?}");
    }
}
