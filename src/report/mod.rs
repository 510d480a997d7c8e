//! A report of what happened in an instance, or in one run of it: gathered from what aw
//! records ([`gather`]), and rendered as one self-contained HTML file ([`render`]).
//!
//! | file | what it holds |
//! |------|---------------|
//! | `data.rs` | [`Report`] and what it is made of |
//! | `gather.rs` | [`gather`]: reading the instance |
//! | `format.rs` | text for people and for HTML: escaping, durations, counts |
//! | `runs.rs` | the attempts of the transcripts, and the runs they make up |
//! | `html.rs` | the page: totals, who woke whom, failures, messages, cards, approvals, merges |
//! | `svg.rs` | the timeline: one lane per agent, a bar per attempt, ticks for messages |
//!
//! A *run* is one `aw-run` process serving the instance: its attempts are the transcripts
//! (`_state/runs/<agent>/<n>.json`) that name the same server (host and pid). Runs are
//! numbered from 1 in the order of their first attempt. The messages of a run are the
//! entries written from the first entry that woke one of its attempts to the end of its
//! last attempt (or the last reply posted for one of them). Nothing is written: the board, approvals and merges are read as stored,
//! without lapsing a claim or expiring a request.

mod data;
mod format;
mod gather;
mod html;
mod runs;
mod svg;

pub use data::{
    AgentSummary, ApprovalRow, Attempt, CardRow, LAST_LINES, MAX_TEXT, MergeRow, Message, Report,
    Run, Totals, Wake,
};
pub use gather::gather;
pub use html::render;
