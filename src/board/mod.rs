//! The board of an instance: cards of work that agents, people and scripts add, claim and
//! finish. Not to be confused with a workflow's `tasks:` pipelines.
//!
//! Each card is one JSON file, `board/<id>.json` under the instance, readable without aw
//! (see aw-workflow(5)). Every change is made under the board lock (`_state/board.lock`):
//! read the cards it needs, write the one it changes atomically. Ids come from a counter
//! in `_state/board.json` that only grows, so an id is never given twice, even when a card
//! file is removed by hand.
//!
//! A claim is a lease ([`claim`]): it names its holder and lapses when its time runs out
//! without renewal; a lapsed card is ready again.

mod card;
mod claim;
mod store;

pub use crate::holder::Holder;
pub use card::{Card, Event, State};
pub use claim::{claim, claim_next, done, drop_card, release, renew};
pub use store::{DIR, MAX_BODY, MAX_TITLE, NewCard, add, dir, list, parse_id, show};
