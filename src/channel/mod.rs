//! The channel: an append-only Markdown log of entries (`channel.md`), with a rebuildable
//! offset index (`_state/channel.idx`) and a rebuildable mention index
//! (`_state/mentions/`).
//!
//! | file | what it holds |
//! |------|---------------|
//! | `mod.rs` | [`Channel`]: the reads, and the append, which writes the log and keeps both indexes |
//! | `format.rs` | an entry as stored: rendering, parsing, torn entries, index records |
//! | `log.rs` | the log and its offset index: the append under the lock, the reads |
//! | `index.rs` | the mention index: who is mentioned where |
//! | `mention.rs` | `@name` mentions in a text, and message priority |
//! | `post.rs` | posting: the sender checked, mentions resolved against the registry |
//! | `inbox.rs` | an agent's unread messages, and the ack |
//! | `cursors.rs` | the ack cursors, parsed again only when they changed |

pub mod cursors;
mod format;
pub mod inbox;
mod index;
mod log;
pub mod mention;
pub mod post;

use std::path::Path;

use crate::error::Result;
use crate::instance::Instance;

pub use format::{
    Batch, Damage, Entry, MAX_MESSAGE, escape, human_entry, render, unescape, validate_message,
};
use index::MentionIndex;
use log::Log;
pub use log::SCAN_CHUNK;

/// Access to one instance's channel.
pub struct Channel {
    log: Log,
}

impl Channel {
    pub fn new(inst: &Instance) -> Channel {
        Channel {
            log: Log::new(inst),
        }
    }

    pub fn log_path(&self) -> &Path {
        self.log.path()
    }

    /// Append a message; the caller has validated `from` and resolved `mentions`.
    /// Takes the channel lock, assigns the next id, and writes the whole entry with one
    /// `write` on an `O_APPEND` descriptor. With `sync`, the data is fdatasync'd before
    /// returning. Once the entry is written the append has succeeded: a failure to index it
    /// is returned with the damage found at the tail of the log (and worked around).
    pub fn append(
        &self,
        from: &str,
        message: &str,
        mentions: Vec<String>,
        sync: bool,
    ) -> Result<(Entry, Vec<Damage>)> {
        let (mut entries, damage) =
            self.append_many(from, vec![(message.to_string(), mentions)], sync)?;
        let entry = entries.pop().expect("one message gives one entry");
        Ok((entry, damage))
    }

    /// Append several messages from `from`, each with its resolved mentions, as [`append`]
    /// does one: under one lock, with dense ids, the entries written together with one
    /// `write`, each exactly as a single append would write it, and one index record each.
    /// Every message must be valid, or nothing is written. No messages: nothing is done.
    /// The mentions of the entries are recorded in the mention index under the same lock.
    ///
    /// [`append`]: Channel::append
    pub fn append_many(
        &self,
        from: &str,
        messages: Vec<(String, Vec<String>)>,
        sync: bool,
    ) -> Result<(Vec<Entry>, Vec<Damage>)> {
        let ix = self.mentions();
        self.log.append_many_with(
            from,
            messages,
            sync,
            |entries| ix.prepare(entries),
            |prepared, log, size, before, new| {
                ix.appended(prepared, (log, size), before, new, sync)
            },
        )
    }

    /// The entries with these ids (ascending), in order; an id the log does not hold is left
    /// out. The cost is that of the entries returned, where the offset index leads to them.
    pub fn get_many(&self, ids: &[u64]) -> Result<Vec<Entry>> {
        self.log.get_many(ids)
    }

    /// Entries with an id greater than `after`, in order. Costs what is new, not the log.
    pub fn read_since(&self, after: u64) -> Result<Batch> {
        self.log.read_since(after)
    }

    /// Entries with an id greater than `after`, in order, given to `f` until it returns
    /// `false`, the log read `chunk` bytes at a time (more when one entry is longer). The
    /// damage met is returned.
    pub fn scan_since(
        &self,
        after: u64,
        chunk: u64,
        f: impl FnMut(Entry) -> bool,
    ) -> Result<Vec<Damage>> {
        self.log.scan_since(after, chunk, f)
    }

    /// The last `n` entries.
    pub fn tail(&self, n: usize) -> Result<Batch> {
        self.log.tail(n)
    }

    /// Every entry.
    pub fn read_all(&self) -> Result<Batch> {
        self.log.read_since(0)
    }

    /// Id of the newest entry (0 when the channel is empty).
    pub fn last_id(&self) -> Result<u64> {
        self.log.last_id()
    }

    /// The mention index of this channel.
    fn mentions(&self) -> MentionIndex<'_> {
        MentionIndex::for_log(&self.log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_in_small_chunks_sees_what_a_read_sees() {
        let (_dir, inst) = crate::instance::scratch();
        let ch = Channel::new(&inst);
        for i in 0..30 {
            let text = format!("{i} {}", "y".repeat(i * 37 % 500));
            ch.append("amy", &text, vec!["bob".into()], false).unwrap();
        }
        for after in [0, 1, 17, 30] {
            let whole = ch.read_since(after).unwrap().entries;
            for chunk in [1, 64, 700, 1 << 20] {
                let mut seen = Vec::new();
                let damage = ch
                    .scan_since(after, chunk, |e| {
                        seen.push(e);
                        true
                    })
                    .unwrap();
                assert_eq!(seen, whole, "after {after}, chunks of {chunk}");
                assert!(damage.is_empty(), "{damage:?}");
            }
        }
        let mut n = 0;
        ch.scan_since(0, 64, |_| {
            n += 1;
            n < 5
        })
        .unwrap();
        assert_eq!(n, 5);
    }
}
