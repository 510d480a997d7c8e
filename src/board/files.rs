//! The files of the board: one per card, and its lock.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::card::Card;
use crate::error::{Error, Result};
use crate::fs::records::{self, Record};
use crate::fs::{Lock, atomic_write_unswept};
use crate::instance::Instance;

/// The folder of the cards, under the instance.
pub const DIR: &str = "board";

/// The folder of the cards of `inst`.
pub fn dir(inst: &Instance) -> PathBuf {
    inst.dir().join(DIR)
}

fn path(inst: &Instance, id: u64) -> PathBuf {
    records::path(&dir(inst), id)
}

/// Take the board lock of `inst` (creating the instance and its board folder if needed).
pub(super) fn lock(inst: &Instance) -> Result<Lock> {
    inst.create()?;
    let d = dir(inst);
    crate::fs::owned::folder(&d, true).map_err(|e| Error::create(&d, e))?;
    Lock::exclusive(&inst.state_file("board.lock"))
}

impl Record for Card {
    const NOUN: &'static str = "card";
    const VALID: &'static str = "card";
    const EXAMPLE: u64 = 7;

    fn id(&self) -> u64 {
        self.id
    }
}

/// Read an id as a user gives it (`7`, or `#7`).
pub fn parse_id(text: &str) -> Result<u64> {
    records::parse_id::<Card>(text)
}

/// The card `id` of `inst`, as stored.
pub(super) fn read(inst: &Instance, id: u64) -> Result<Option<Card>> {
    records::read(&dir(inst), id)
}

pub(super) fn not_found(inst: &Instance, id: u64) -> Error {
    Error::not_found(format!("no card {id} on the board of {}", inst.name()))
}

/// Every card file of `inst`, by id, as stored.
pub(super) fn read_all(inst: &Instance) -> Result<BTreeMap<u64, Card>> {
    records::read_all(&dir(inst))
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
