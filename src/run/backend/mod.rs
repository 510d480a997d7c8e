//! Backends: what runs an agent once. A controller gives the prompt (built when the backend
//! reads it), calls [`Backend::run`], and reads the [`RunOutcome`]. Each backend is in its
//! own module.
//!
//! | module | backend |
//! |--------|---------|
//! | `exec` | any executable: prompt on stdin, final text on stdout |
//! | `claude` | Claude Code in print mode, through `exec`, its JSON result read |
//! | `codex` | `codex exec --json`, through `exec`, its event stream read |
//! | `mock` | in-process scripted replies, for tests and dry runs |
//! | `anthropic` | the Messages API, the tool loop in process (`api`, `http`) |
//! | `openai` | any OpenAI-compatible Chat Completions endpoint, the same loop |
//!
//! `approve_tools` holds the approval that a class of an API agent's tool calls waits for.

use std::ops::Deref;
use std::time::Duration;

use crate::instance::Instance;
use crate::process::Stop;
use crate::run::capture::Capture;
use crate::usage::Usage;

pub mod anthropic;
pub mod api;
pub mod approve_tools;
pub mod claude;
pub mod codex;
pub mod exec;
pub mod http;
pub mod mock;
pub mod openai;

/// A value made when it is first read, once: a run's prompt and the log of its output,
/// which an exec program needs only once it has started (its prompt goes to its stdin), are
/// made after its start, off the path from the mention to it.
pub type Later<'a, T> = std::cell::LazyCell<T, Box<dyn FnOnce() -> T + 'a>>;

/// Everything a backend needs for one run.
pub struct RunContext<'a> {
    pub inst: &'a Instance,
    pub agent: &'a str,
    /// 1-based number of this run of the agent (attempts of one run share it).
    pub run: u64,
    /// 1-based attempt of this run.
    pub attempt: u32,
    /// Made when the backend first reads it (a [`Later`]).
    pub prompt: &'a dyn Deref<Target = String>,
    /// How many inbox messages the prompt shows.
    pub prompt_messages: usize,
    /// The id of the card the run starts from (`board: next`).
    pub card: Option<u64>,
    /// The aw root, absolute.
    pub root: &'a std::path::Path,
    /// The MCP configuration file written for this agent.
    pub mcp_config: &'a std::path::Path,
    pub timeout: Option<Duration>,
    pub stop: &'a Stop,
    /// What this run has spent so far (tokens; a cost when the backend knows one) checked
    /// against every budget that applies: the reason when one is exceeded. A backend that
    /// calls a model several times asks after every call and stops at its next step.
    pub over_budget: &'a dyn Fn(&Usage) -> Option<String>,
    /// What the budgets leave for this run in USD, when a USD budget applies (for a CLI's
    /// own spending cap).
    pub remaining_usd: Option<f64>,
    /// Where a program's output goes as it comes, for `aw-ctl runs -f` (see
    /// [`crate::run::attempt_log`]); `None` for none. Made when the backend first reads it
    /// (a [`Later`]), once its program has started.
    pub log: &'a dyn Deref<Target = Option<std::sync::Arc<crate::run::attempt_log::AttemptLog>>>,
    /// Called by the backend once its run is under way (an exec program started, an API
    /// run begun): the bookkeeping that waits until then, such as the record that says the
    /// agent runs.
    pub started: &'a dyn Fn(),
    /// The CLI session to continue (`session: keep`, see [`crate::sessions`]); `None` for
    /// a fresh one. `prompt` is then only what is new since.
    pub resume: Option<&'a crate::sessions::Kept>,
}

crate::keyword_enum! {
    /// How a run ended.
    pub enum Status {
        Ok = "ok",
        Failed = "failed",
        Timeout = "timeout",
        Killed = "killed",
    }
}

/// What a run gave.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub status: Status,
    /// The agent's final reply (exec: stdout), trimmed.
    pub final_text: String,
    pub exit_code: Option<i32>,
    /// Why it failed, in a few words.
    pub reason: Option<String>,
    pub stdout: Capture,
    pub stderr: Capture,
    /// The argument vector run, if any.
    pub command: Vec<String>,
    /// Tokens and cost, when the backend reports them.
    pub usage: Option<Usage>,
    /// A failure another attempt cannot mend (the program cannot start: no such file, not
    /// executable): the run is not retried.
    pub permanent: bool,
    /// The id of the CLI session the run was in, as the program reported it (`claude`,
    /// `codex`).
    pub session: Option<String>,
    /// The session's whole usage as the program reported it, when it reports that rather
    /// than the run's own (`codex`); [`RunOutcome::usage`] is then the run's share.
    pub session_total: Option<Usage>,
}

impl RunOutcome {
    pub fn new(status: Status) -> RunOutcome {
        RunOutcome {
            status,
            final_text: String::new(),
            exit_code: None,
            reason: None,
            stdout: Capture::default(),
            stderr: Capture::default(),
            command: Vec::new(),
            usage: None,
            permanent: false,
            session: None,
            session_total: None,
        }
    }

    pub fn failed(reason: impl Into<String>) -> RunOutcome {
        RunOutcome {
            reason: Some(reason.into()),
            ..RunOutcome::new(Status::Failed)
        }
    }
}

/// One way of running an agent.
pub trait Backend: Send {
    fn run(&mut self, ctx: &RunContext) -> RunOutcome;

    /// Does the backend give the system prompt to the model itself (so the prompt leaves
    /// it out)?
    fn takes_system_prompt(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_that_are_not_whole_numbers_are_implausible() {
        assert_eq!(super::api::count(&serde_json::json!(-1)), u64::MAX);
        assert_eq!(super::api::count(&serde_json::json!(2.5)), u64::MAX);
        assert_eq!(super::api::count(&serde_json::json!("12")), 0);
        assert_eq!(super::api::count(&serde_json::json!(12)), 12);
    }
}
