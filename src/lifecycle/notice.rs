//! The channel entries that tell of an event another process made: an approval asked
//! (`[APPROVAL #N]`) and a merge request that reached its end (`merge #N`), both posted as
//! `system`. The record they name is read for the event's fields.

use crate::channel::Entry;

/// What an entry tells of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Notice {
    /// Approval request N was asked (or asked again of someone else).
    Approval(u64),
    /// Merge request N ended.
    Merge(u64),
}

/// What `e` tells of, if anything.
pub fn notice(e: &Entry) -> Option<Notice> {
    if e.from != "system" {
        return None;
    }
    let first = e.message.lines().next().unwrap_or("");
    if let Some(at) = first.find("[APPROVAL #") {
        return number(&first[at + "[APPROVAL #".len()..]).map(Notice::Approval);
    }
    // `merge #N of AGENT: ...` (merged) or `@AGENT merge #N: ...` (conflict, failure).
    let rest = match first.strip_prefix('@') {
        Some(r) => r.split_once(' ').map_or("", |(_, r)| r),
        None => first,
    };
    rest.strip_prefix("merge #")
        .and_then(number)
        .map(Notice::Merge)
}

/// The number at the start of `s`.
fn number(s: &str) -> Option<u64> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}
