//! The index of the board, `_state/board-index.json`: the ready cards by whom they are for,
//! the held cards with their holders, and how many cards are in each state. It lets a
//! claim, a sweep of lapsed claims and `aw-ctl status` read a number of files that does not
//! grow with the number of cards.
//!
//! The index is derived from the card files: it is changed under the board lock with the
//! cards, removed while cards are written and written again after, so that a change cut
//! short (a process killed) leaves no index, and one missing, unreadable or found stale is
//! rebuilt from the card files under the lock.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::card::{Card, State};
use super::files::{self, read};
use crate::error::{Error, Result};
use crate::fs::{Lock, atomic_write};
use crate::holder::Holder;
use crate::instance::Instance;

/// The index, under `_state/`.
pub(super) const FILE: &str = "board-index.json";

/// The version of the index's format; another is rebuilt.
const VERSION: u32 = 1;

/// Where a card is, as the index counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// Open, and every card it waits for is done.
    Ready,
    /// Open, and some card it waits for is not done.
    Waiting,
    Claimed,
    Done,
    Dropped,
}

/// How many cards are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Open, and ready to be claimed.
    pub ready: u64,
    /// Open, and waiting for cards not done.
    pub waiting: u64,
    pub claimed: u64,
    pub done: u64,
    pub dropped: u64,
}

impl Counts {
    fn slot(&mut self, class: Class) -> &mut u64 {
        match class {
            Class::Ready => &mut self.ready,
            Class::Waiting => &mut self.waiting,
            Class::Claimed => &mut self.claimed,
            Class::Done => &mut self.done,
            Class::Dropped => &mut self.dropped,
        }
    }

    /// The open cards, ready or waiting.
    pub fn open(&self) -> u64 {
        self.ready + self.waiting
    }

    /// `3 open (2 ready), 1 claimed, 5 done` (and the dropped ones, when there are).
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} open ({} ready), {} claimed, {} done",
            self.open(),
            self.ready,
            self.claimed,
            self.done
        );
        if self.dropped > 0 {
            s.push_str(&format!(", {} dropped", self.dropped));
        }
        s
    }
}

/// The index, as its file holds it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Index {
    version: u32,
    /// The highest card id it has seen.
    pub last: u64,
    pub counts: Counts,
    /// The held cards, and who holds each.
    pub held: BTreeMap<u64, Holder>,
    /// The ready cards meant for no one.
    pub ready_for_anyone: BTreeSet<u64>,
    /// The ready cards meant for each agent (a card for a pool is under each of its agents).
    pub ready_for: BTreeMap<String, BTreeSet<u64>>,
}

impl Index {
    /// The class of `c` as the index has it (for an open card: whether it is among the
    /// ready ones).
    pub fn class_of(&self, c: &Card) -> Class {
        match c.state {
            State::Open => {
                let ready = match c.assignee.first() {
                    None => self.ready_for_anyone.contains(&c.id),
                    Some(a) => self.ready_for.get(a).is_some_and(|s| s.contains(&c.id)),
                };
                match ready {
                    true => Class::Ready,
                    false => Class::Waiting,
                }
            }
            State::Claimed => Class::Claimed,
            State::Done => Class::Done,
            State::Dropped => Class::Dropped,
        }
    }

    /// Count `c` as `class`.
    pub fn insert(&mut self, c: &Card, class: Class) {
        *self.counts.slot(class) += 1;
        self.last = self.last.max(c.id);
        if let (Class::Claimed, Some(h)) = (class, &c.holder) {
            self.held.insert(c.id, h.clone());
        }
        if class == Class::Ready {
            match c.assignee.is_empty() {
                true => {
                    self.ready_for_anyone.insert(c.id);
                }
                false => {
                    for a in &c.assignee {
                        self.ready_for.entry(a.clone()).or_default().insert(c.id);
                    }
                }
            }
        }
    }

    /// Count `c`, which was counted as `class`, no more.
    pub fn remove(&mut self, c: &Card, class: Class) {
        let n = self.counts.slot(class);
        *n = n.saturating_sub(1);
        self.held.remove(&c.id);
        self.ready_for_anyone.remove(&c.id);
        for a in &c.assignee {
            if let Some(s) = self.ready_for.get_mut(a) {
                s.remove(&c.id);
                if s.is_empty() {
                    self.ready_for.remove(a);
                }
            }
        }
    }

    /// The ready cards `who` would claim, in the order it takes them: those meant for it
    /// (alone or in a pool), then those meant for no one, each by lowest id.
    pub fn candidates(&self, who: &str) -> Vec<u64> {
        let mine = self.ready_for.get(who).into_iter().flatten();
        mine.chain(&self.ready_for_anyone).copied().collect()
    }
}

/// The index of `inst`, as stored; `None` when it is missing, unreadable or of another
/// version.
pub(super) fn load(inst: &Instance) -> Option<Index> {
    let bytes = crate::fs::owned::read_fresh(&inst.state_file(FILE)).ok()?;
    serde_json::from_slice::<Index>(&bytes)
        .ok()
        .filter(|i| i.version == VERSION)
}

/// The class of `c` from its card file and those of the cards it waits for.
pub(super) fn class(inst: &Instance, c: &Card) -> Result<Class> {
    Ok(match c.state {
        State::Open => {
            for a in &c.after {
                if !read(inst, *a)?.is_some_and(|d| d.state == State::Done) {
                    return Ok(Class::Waiting);
                }
            }
            Class::Ready
        }
        State::Claimed => Class::Claimed,
        State::Done => Class::Done,
        State::Dropped => Class::Dropped,
    })
}

/// The index rebuilt from every card file of `inst` (the caller holds the board lock); a
/// card whose `blocks` disagrees with the cards that wait for it is written again.
fn rebuild(inst: &Instance) -> Result<Index> {
    // A change cut short leaves no index, and may leave a temp file among the cards (their
    // writes do not sweep the folder, which would cost as much as the board is large).
    crate::fs::sweep_folder(&files::dir(inst))?;
    let mut cards = files::read_all(inst)?;
    let mut blocks: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for c in cards.values() {
        for a in &c.after {
            blocks.entry(*a).or_default().push(c.id);
        }
    }
    for c in cards.values_mut() {
        let b = blocks.remove(&c.id).unwrap_or_default();
        if c.blocks != b {
            c.blocks = b;
            files::store(inst, c)?;
        }
    }
    let mut idx = Index {
        version: VERSION,
        ..Index::default()
    };
    for c in cards.values() {
        let class = match c.state {
            State::Open if c.is_ready(&cards) => Class::Ready,
            State::Open => Class::Waiting,
            State::Claimed => Class::Claimed,
            State::Done => Class::Done,
            State::Dropped => Class::Dropped,
        };
        idx.insert(c, class);
    }
    save(inst, &idx)?;
    Ok(idx)
}

fn save(inst: &Instance, idx: &Index) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(idx).expect("the index serializes");
    bytes.push(b'\n');
    atomic_write(&inst.state_file(FILE), &bytes)
}

/// A change of the board: made under the board lock, with the index, and what it has to
/// say in the channel, posted once the lock is let go.
pub(super) struct Txn<'a> {
    pub inst: &'a Instance,
    lock: Option<Lock>,
    pub idx: Index,
    saved: Index,
    /// The index file is removed while cards are written.
    removed: bool,
    news: Vec<String>,
    /// The cards whose claims lapsed in this change.
    pub lapsed: Vec<Card>,
}

impl<'a> Txn<'a> {
    /// Take the board lock, read the index (rebuilt when it must be) and lapse the claims
    /// that ran out or whose server is gone.
    pub fn begin(inst: &'a Instance) -> Result<Txn<'a>> {
        let lock = files::lock(inst)?;
        let idx = match load(inst) {
            Some(i) => i,
            None => rebuild(inst)?,
        };
        let mut t = Txn {
            inst,
            lock: Some(lock),
            saved: idx.clone(),
            idx,
            removed: false,
            news: Vec::new(),
            lapsed: Vec::new(),
        };
        t.sweep()?;
        Ok(t)
    }

    /// Rebuild the index from the card files: it was found stale.
    pub fn rebuild(&mut self) -> Result<()> {
        self.idx = rebuild(self.inst)?;
        self.saved = self.idx.clone();
        self.removed = false;
        Ok(())
    }

    /// Lapse the claims the index says ran out or lost their server; the index is
    /// rebuilt first when a held card's file disagrees with it.
    fn sweep(&mut self) -> Result<()> {
        let due: Vec<(u64, Holder)> = self
            .idx
            .held
            .iter()
            .filter(|(_, h)| h.lapsed(self.inst).is_some())
            .map(|(id, h)| (*id, h.clone()))
            .collect();
        for (id, h) in due {
            let c = read(self.inst, id)?;
            match c {
                Some(c) if c.holder.as_ref() == Some(&h) => {
                    self.lapse(c)?;
                }
                _ => {
                    self.rebuild()?;
                    return self.sweep_files();
                }
            }
        }
        Ok(())
    }

    /// Lapse the held cards whose files say their claims lapsed (after a rebuild).
    fn sweep_files(&mut self) -> Result<()> {
        let held: Vec<u64> = self.idx.held.keys().copied().collect();
        for id in held {
            if let Some(c) = read(self.inst, id)? {
                self.lapse(c)?;
            }
        }
        Ok(())
    }

    /// When the claim on `c` lapsed: open it again, store it and announce it. The card
    /// after.
    pub fn lapse(&mut self, mut c: Card) -> Result<Card> {
        let old = c.clone();
        let Some(why) = super::card::lapse(self.inst, &mut c) else {
            return Ok(c);
        };
        let class = self.put(Some(&old), &c)?;
        let again = match class {
            Class::Ready => "ready",
            _ => "open",
        };
        self.news.push(format!(
            "card {} \"{}\" lapsed: {why}; it is {again} again{}",
            c.id,
            c.title,
            c.mentions()
        ));
        self.lapsed.push(c.clone());
        Ok(c)
    }

    /// Write `c`, which was `old` (`None`: a new card), and count it again; its class.
    pub fn put(&mut self, old: Option<&Card>, c: &Card) -> Result<Class> {
        if !self.removed {
            crate::fs::owned::remove(&self.inst.state_file(FILE))
                .or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                })
                .map_err(|e| Error::io(self.inst.state_file(FILE), e))?;
            self.removed = true;
        }
        let class = class(self.inst, c)?;
        files::store(self.inst, c)?;
        self.reclass(old, c, class);
        Ok(class)
    }

    /// Count `c`, which was `old`, as `class` (its file unchanged or written).
    pub fn reclass(&mut self, old: Option<&Card>, c: &Card, class: Class) {
        if let Some(o) = old {
            let was = self.idx.class_of(o);
            self.idx.remove(o, was);
        }
        self.idx.insert(c, class);
    }

    /// Say `text` in the channel once the change is made.
    pub fn announce(&mut self, text: String) {
        self.news.push(text);
    }

    /// Store the index when it changed, let go of the lock, and post what there is to say.
    pub fn commit(mut self) -> Result<Vec<Card>> {
        if self.removed || self.idx != self.saved {
            save(self.inst, &self.idx)?;
        }
        drop(self.lock.take());
        announce(self.inst, std::mem::take(&mut self.news));
        Ok(std::mem::take(&mut self.lapsed))
    }
}

/// Is `e` news of the board: a card that became ready again or whose claim lapsed, posted
/// by `system`? An agent that works the board takes such a card itself; the news alone
/// gives its run nothing to do.
pub fn is_news(e: &crate::channel::Entry) -> bool {
    e.from == "system"
        && e.message.starts_with("card ")
        && (e.message.contains("\" is ready") || e.message.contains("\" lapsed: "))
}

/// Post `news` in the channel of `inst` as `system`, with one append; a failure is a
/// warning (the change of the board is made).
fn announce(inst: &Instance, news: Vec<String>) {
    if news.is_empty() {
        return;
    }
    let opts = crate::post::PostOptions::default();
    let failed = match crate::post::post_many(inst, "system", news, &opts) {
        Ok(p) => p.posted.into_iter().filter_map(|r| r.err()).collect(),
        Err(e) => vec![e],
    };
    for e in failed {
        crate::warn::warn("aw", format!("the board's news was not posted: {e}"));
    }
}

/// Lapse (and announce in the channel) the claims of `inst` whose time ran out or whose
/// holder's server is gone; the cards that lapsed. It reads the index and the served
/// records of the holders, takes the board lock only when a claim lapsed, and then reads
/// only the cards that lapsed: its cost grows with the number of held cards, not of cards.
/// Nothing is done on an instance without a board.
pub fn sweep(inst: &Instance) -> Result<Vec<Card>> {
    if !files::dir(inst).is_dir() {
        return Ok(Vec::new());
    }
    if let Some(idx) = load(inst)
        && idx.held.values().all(|h| h.lapsed(inst).is_none())
    {
        return Ok(Vec::new());
    }
    Txn::begin(inst)?.commit()
}

/// How many cards of `inst` are in each state, from the index (claims that lapsed lapsed
/// first); `None` when the instance has no board.
pub fn counts(inst: &Instance) -> Result<Option<Counts>> {
    if !files::dir(inst).is_dir() {
        return Ok(None);
    }
    let t = Txn::begin(inst)?;
    let counts = t.idx.counts;
    t.commit()?;
    Ok(Some(counts))
}

/// The cards `agent` holds, by id, from the index (claims that lapsed lapsed first).
pub fn held_by(inst: &Instance, agent: &str) -> Result<Vec<u64>> {
    if !files::dir(inst).is_dir() {
        return Ok(Vec::new());
    }
    let t = Txn::begin(inst)?;
    let ids = t
        .idx
        .held
        .iter()
        .filter(|(_, h)| h.agent == agent)
        .map(|(id, _)| *id)
        .collect();
    t.commit()?;
    Ok(ids)
}

/// Is a card ready for `agent` (meant for it, alone or in a pool, or for no one)? From the
/// index, claims that lapsed lapsed first.
pub fn ready_for(inst: &Instance, agent: &str) -> Result<bool> {
    if !files::dir(inst).is_dir() {
        return Ok(false);
    }
    let t = Txn::begin(inst)?;
    let ready = !t.idx.candidates(agent).is_empty();
    t.commit()?;
    Ok(ready)
}
