//! What one controller is: everything it needs to run its agent (backend, prompt parts,
//! limits, retry policy, budget) and what it keeps between runs (the next transcript
//! number, the state last published for `aw-ctl ps`, its serving lock).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::instance::Instance;
use crate::models::Price;
use crate::process::Stop;
use crate::run::backend::Backend;
use crate::serve::{ControllerState, Served};
use crate::usage::Budget;

/// Retry policy of failed runs.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Attempts per run, at least 1.
    pub attempts: u32,
    /// Wait before the second attempt; doubled for each further one.
    pub backoff: Duration,
}

/// Everything one controller needs.
pub struct Controller {
    pub inst: Instance,
    pub agent: String,
    pub backend: Box<dyn Backend>,
    pub system: Option<String>,
    /// The entry document; `None` when the workflow has no shared context (`context:
    /// false`): the prompt then shows neither the recent channel nor a document.
    pub document: Option<String>,
    pub root: PathBuf,
    pub mcp_config: PathBuf,
    /// What [`Controller::mcp_config`] holds, written afresh before every attempt: the
    /// agent's own tools may reach the file, and a rewritten one must never take effect.
    pub mcp_text: String,
    pub timeout: Option<Duration>,
    pub max_runs: u64,
    pub reply_fallback: bool,
    pub retry: Retry,
    /// First transcript number to use.
    pub next_transcript: u64,
    /// After a run failed for good, how long before its messages are tried again (unless
    /// something new arrives first).
    pub cooldown: Duration,
    /// What `aw-ctl ps` shows of this controller.
    pub served: Served,
    /// The state and run count last recorded.
    pub published: Option<(ControllerState, u64)>,
    /// Values that transcripts and replies never show (see [`secrets`](crate::run::redact::secrets)).
    pub secrets: Vec<String>,
    /// What this agent's own runs may spend.
    pub budget: Budget,
    /// The prices of the agent's model: they price a run whose backend reports no cost.
    pub price: Option<Price>,
    /// Text added at the end of every prompt, read as each prompt is built: an iterative
    /// run's task and progress (see [`crate::run::iter`]).
    pub task_context: Option<Arc<Mutex<String>>>,
    /// Stops this controller alone (a closed worker); a child of
    /// [`Shared::stop`](crate::run::controller::Shared::stop), so
    /// stopping them all stops it too.
    pub stop: Stop,
    /// The agent's claim (see
    /// [`serve::take`](crate::serve::take)), let go when the controller ends.
    pub serving_lock: Option<crate::serve::Claim>,
}
