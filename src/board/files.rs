//! The files of the board: one per card, and its lock.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::card::Card;
use crate::error::{Error, Result};
use crate::fs::{Lock, atomic_write_unswept};
use crate::instance::Instance;

/// The folder of the cards, under the instance.
pub const DIR: &str = "board";

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

pub(super) fn not_found(inst: &Instance, id: u64) -> Error {
    Error::not_found(format!("no card {id} on the board of {}", inst.name()))
}

/// Every card file of `inst`, by id, as stored.
pub(super) fn read_all(inst: &Instance) -> Result<BTreeMap<u64, Card>> {
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
        if let Some(c) = read(inst, id)? {
            cards.insert(id, c);
        }
    }
    Ok(cards)
}

/// Write a card (the caller holds the board lock).
pub(super) fn store(inst: &Instance, c: &Card) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(c).expect("card serializes");
    bytes.push(b'\n');
    atomic_write_unswept(&path(inst, c.id), &bytes)
}

/// The cards `after` names, each once, every one of them read (66 when one is missing).
pub(super) fn read_after(inst: &Instance, after: &[u64]) -> Result<Vec<Card>> {
    let mut out: Vec<Card> = Vec::new();
    for a in after {
        if out.iter().any(|c| c.id == *a) {
            continue;
        }
        let c = read(inst, *a)?
            .ok_or_else(|| not_found(inst, *a).hint("the cards it waits for must exist first"))?;
        out.push(c);
    }
    Ok(out)
}
