//! What a controller reports: an attempt starts or ends.

use std::time::Duration;

use crate::run::backend::Status;

/// One controller event, as reported by the runner: an attempt starts, or an attempt
/// ended.
pub struct Event {
    pub agent: String,
    pub instance: String,
    pub run: u64,
    pub attempt: u32,
    /// The attempt starts: only `agent`, `run`, `attempt`, `woken_by` and `transcript` are
    /// meaningful.
    pub start: bool,
    pub status: Status,
    pub duration: Duration,
    pub reason: Option<String>,
    /// The last attempt failed: the messages stay unread.
    pub gave_up: bool,
    /// What woke the agent: the inbox entries its prompt shows, with their senders.
    pub woken_by: Vec<(u64, String)>,
    /// The card the run starts from (`board: next`).
    pub card: Option<u64>,
    /// The number of the attempt's transcript (`aw-ctl runs AGENT N`); 0 when none.
    pub transcript: u64,
    /// The last line of the program's stderr that is not blank, when the attempt failed.
    pub stderr_tail: Option<String>,
}

/// How events are shown.
pub type Report = dyn Fn(&Event) + Send + Sync;
