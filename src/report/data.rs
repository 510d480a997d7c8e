//! What a report holds: the data [`super::gather`] reads, which `aw-ctl report --json`
//! prints as it is, and the times it is placed by.

use serde::Serialize;

use crate::usage::Usage;

/// Most characters of a message a report keeps; the rest is counted in `len`.
pub const MAX_TEXT: usize = 400;

/// Most lines of a failed attempt's output a report keeps.
pub const LAST_LINES: usize = 12;

/// What a report holds: the gathered data, which `aw-ctl report --json` prints as it is.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub instance: String,
    /// When it was made.
    pub generated: String,
    /// The run it is about; `None`: the whole instance.
    pub run: Option<u64>,
    /// From when to when (RFC 3339); `None` when nothing happened.
    pub start: Option<String>,
    pub end: Option<String>,
    /// Every run of the instance.
    pub runs: Vec<Run>,
    /// Per agent, registered agents first.
    pub agents: Vec<AgentSummary>,
    pub totals: Totals,
    /// The attempts of the report, in the order they started.
    pub attempts: Vec<Attempt>,
    /// Who woke whom: each entry that an attempt ran on.
    pub wakes: Vec<Wake>,
    /// The messages of the report, in order, their text cut to [`MAX_TEXT`] characters.
    pub messages: Vec<Message>,
    pub cards: Vec<CardRow>,
    pub approvals: Vec<ApprovalRow>,
    pub merges: Vec<MergeRow>,
    /// What `_state/budget.json` records the instance spent (whole-instance reports).
    pub ledger: Option<crate::ledger::Ledger>,
    /// What could not be read, one line each (a damaged record, a torn entry).
    pub problems: Vec<String>,
}

/// One agent, or another sender of messages (`user`, `system`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct AgentSummary {
    pub name: String,
    /// Its backend, when registered; `None` for a sender that is no agent.
    pub backend: Option<String>,
    pub attempts: u64,
    pub ok: u64,
    pub failed: u64,
    /// The time its attempts took, summed.
    pub busy_ms: u64,
    /// The messages it wrote.
    pub sent: u64,
    /// The messages that mention it.
    pub mentioned: u64,
    /// What its attempts spent; `None` when none reported usage.
    pub usage: Option<Usage>,
}

/// The sums over every agent.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub attempts: u64,
    pub ok: u64,
    pub failed: u64,
    pub busy_ms: u64,
    pub messages: u64,
    pub wakes: u64,
    pub usage: Option<Usage>,
}

/// An entry that an attempt ran on.
#[derive(Debug, Clone, Serialize)]
pub struct Wake {
    pub entry: u64,
    pub from: String,
    pub to: String,
    /// The number of the attempt's transcript.
    pub attempt: u64,
}

/// A channel entry, its text cut.
#[derive(Debug, Clone, Serialize)]
pub struct Message {
    pub id: u64,
    pub at: String,
    pub from: String,
    pub mentions: Vec<String>,
    pub text: String,
    /// The length of the whole text, in bytes.
    pub len: usize,
    /// The text was cut to [`MAX_TEXT`] characters.
    pub cut: bool,
}

/// A card of the board.
#[derive(Debug, Clone, Serialize)]
pub struct CardRow {
    pub id: u64,
    pub title: String,
    pub state: String,
    pub holder: Option<String>,
    #[serde(rename = "for")]
    pub assignee: Vec<String>,
    pub created: String,
    pub updated: String,
    pub note: Option<String>,
}

/// An approval request.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRow {
    pub id: u64,
    pub kind: String,
    pub what: String,
    pub asked_by: String,
    pub by: Vec<String>,
    pub state: String,
    pub asked: String,
    pub decided_by: Option<String>,
    pub decided: Option<String>,
    pub reason: Option<String>,
}

/// A merge request.
#[derive(Debug, Clone, Serialize)]
pub struct MergeRow {
    pub id: u64,
    pub agent: String,
    pub branch: String,
    pub into: String,
    pub state: String,
    pub asked: String,
    pub finished: Option<String>,
    pub outcome: String,
}

/// Milliseconds since the epoch of an RFC 3339 time; `None` when it is none.
pub fn millis(ts: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// An RFC 3339 time (UTC, milliseconds) of milliseconds since the epoch.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// One attempt of an agent, as its transcript tells it.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    pub agent: String,
    /// The number of its transcript (`_state/runs/<agent>/<n>.json`).
    pub n: u64,
    /// The agent's run it was an attempt of, and which attempt.
    pub agent_run: u64,
    pub attempt: u64,
    /// The run of the instance (the `aw-run` process) it was part of.
    pub server_run: u64,
    /// `ok`, `failed`, `timeout` or `killed`.
    pub status: String,
    pub reason: Option<String>,
    pub exit_code: Option<i64>,
    pub started: String,
    pub ended: String,
    pub duration_ms: u64,
    /// The entries it ran on, and those it wrote.
    pub inbox: Vec<u64>,
    pub reply: Vec<u64>,
    pub usage: Option<Usage>,
    /// The last lines of its output, when it did not succeed.
    pub last_lines: Option<String>,
    #[serde(skip)]
    pub(super) start_ms: i64,
    /// Which `aw-run` wrote it: host id (else host name) and pid.
    #[serde(skip)]
    pub(super) server: Option<(String, u32)>,
    #[serde(skip)]
    pub(super) host: Option<String>,
}

/// One run of the instance: one `aw-run` process and the attempts it ran.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub n: u64,
    pub host: Option<String>,
    pub pid: Option<u32>,
    /// When its first attempt started, and its last one ended.
    pub start: String,
    pub end: String,
    pub attempts: u64,
    pub failed: u64,
    /// The agents it ran, by name.
    pub agents: Vec<String>,
}
