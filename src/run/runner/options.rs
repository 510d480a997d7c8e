//! The options of a run, as `aw-run`'s command line gives them.

use std::sync::Arc;
use std::time::Duration;

use crate::run::controller::Retry;

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Poll the channel at this interval instead of watching it.
    pub poll: Option<Duration>,
    /// Default cap on runs per agent (in keep mode: since the workflow was last quiet).
    pub max_runs: u64,
    /// Bound on the whole workflow.
    pub timeout: Option<Duration>,
    pub retry: Retry,
    /// After a run failed for good, how long before its messages are tried again.
    pub cooldown: Duration,
    /// Stay until stopped instead of ending when the work is done.
    pub keep: bool,
    pub quiet: bool,
    pub json: bool,
    /// What the whole workflow may spend (else the instance's recorded budget, see
    /// [`crate::ledger`]).
    pub budget: crate::usage::Budget,
    /// The loop guard's rate limit in keep mode (`None`: off).
    pub rate: Option<crate::run::controller::Rate>,
    /// The loop guard's limit on the mentions between two agents in keep mode (`None`: off).
    pub pair: Option<crate::run::controller::Rate>,
    /// Told (one byte) once the agents are served and the kickoff posted.
    pub ready: Option<Arc<std::fs::File>>,
    /// Run the workflow's one agent on its kickoff over many iterations (`--iter`).
    pub iter: Option<crate::run::iter::Plan>,
    /// The instance, when the process serves several (`aw-run --serve a@one b@two`): every
    /// line and JSON object printed says which instance it is for.
    pub label: Option<String>,
}
