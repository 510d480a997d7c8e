//! The board of an instance: cards of work that agents, people and scripts add, claim and
//! finish. Not to be confused with a workflow's `tasks:` pipelines.
//!
//! Each card is one JSON file, `board/<id>.json` under the instance, readable without aw
//! (see aw-workflow(5)). Every change is made under the board lock (`_state/board.lock`):
//! read the cards it needs, write the ones it changes atomically. Ids come from a counter
//! in `_state/board.json` that only grows, so an id is never given twice, even when a card
//! file is removed by hand. An index derived from the cards ([`index`]) keeps the ready
//! and the held cards, so that a claim reads as many files on a board of 100,000 cards as
//! on one of 10.
//!
//! A claim is a lease ([`claim`]): it names its holder and lapses when its time runs out
//! without renewal or its holder's server is gone; a lapsed card is ready again, and this is
//! said in the channel, as is a card that the card it waited for being done made ready.

mod card;
mod claim;
mod edit;
mod files;
mod index;
mod store;

pub use crate::holder::Holder;
pub use card::{Card, Event, State};
pub use claim::{claim, claim_next, done, drop_card, release, renew, reopen};
pub use edit::{Edit, edit};
pub use files::{DIR, dir, parse_id};
pub use index::{Counts, counts, held_by, is_news, ready_for, sweep};
pub use store::{MAX_BODY, MAX_TITLE, NewCard, add, list, show};
