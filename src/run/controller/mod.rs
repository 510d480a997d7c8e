//! One agent's controller: wait for new channel activity, read the inbox, build the prompt,
//! run the backend (with retries), acknowledge what the prompt showed, and record a
//! transcript of each attempt. Before each attempt and after each run (and, through
//! [`RunContext::over_budget`](super::backend::RunContext::over_budget), after each model
//! call) the agent's own budget and the workflow's are checked: past one, every controller
//! stops.
//!
//! Controllers are not threads: one dispatcher (`dispatch`) looks at the inboxes of the
//! agents that new entries mention and runs each agent due on a thread of its own. They
//! share one [`Shared`] with the runner: a generation counter that the channel watcher bumps
//! on every change, the agents concerned, and each controller's state, under one mutex and
//! condition variable. An idle agent costs nothing.
//!
//! This file is the map; the parts are split by concept, each using only those below it:
//!
//! | module        | what it holds |
//! |---------------|---------------|
//! | `dispatch`    | the dispatcher: which agents to look at, their runs' threads, cooldowns, its [`Mailbox`] |
//! | `look`        | a look at an agent's inbox: is a run due, and what a run's end changes |
//! | `loop_guard`  | the run cap, the rate limit and the pair limit, and the pauses they cause |
//! | `attempt`     | [`Controller`]: what one controller is, and one run with its retries: prompt, backend call, reply, acknowledgement, record |
//! | `cards`       | the card a run of an agent that works the board starts from: taken, shown, given back, renewed |
//! | `event`       | [`Event`]: what a controller reports |
//! | `hooks`       | the workflow's lifecycle hooks: fired after a run, when an agent is idle, on what the channel tells of; their answers acted on |
//! | `prompting`   | `Due`, the run a look decided on, and what its prompt is made of: built once its program runs |
//! | `transcripts` | an attempt's log and transcript |
//! | `budget`      | what the runs spend, the ledger, and the checks against the budgets |
//! | `spare`       | threads a run left waiting for the next, so that a run starts without creating one |
//! | `shared`      | [`Shared`], [`State`], [`AgentState`]: what the runner and the controllers share |
//! | `rate`        | [`Rate`]: the loop guard's limits and their defaults |

mod attempt;
mod budget;
pub mod cards;
mod dispatch;
mod event;
pub mod hooks;
mod look;
mod loop_guard;
mod prompting;
mod rate;
mod shared;
mod spare;
mod transcripts;

pub use attempt::{Controller, Mcp, Retry, STDERR_TAIL_CHARS};
pub use dispatch::{Mail, Mailbox, dispatch};
pub use event::{Event, Report};
pub use rate::{DEFAULT_PAIR, DEFAULT_RATE, Rate};
pub use shared::{AgentState, Shared, State};

pub use super::redact::secrets;
