//! The runner behind `aw-run`: read a workflow file, check it, run its setup, post its
//! kickoff, and drive one controller per agent. Each module here uses only those below it
//! in this map.
//!
//! | module        | what it holds |
//! |---------------|---------------|
//! | `runner`      | a workflow run: serving locks, registration, setup, kickoff, the channel watcher, the decision that the work is done (its parts in `runner/`) |
//! | `iter`        | `--iter`: one agent on the kickoff over many iterations, each with the earlier ones' summaries in its prompt, committed to git (`iter/git.rs`), recorded under `_state/iterations/` (see [`crate::iterations`]) |
//! | `live`        | what aw-run shows on a terminal while a run happens: the status line, the summary table |
//! | `pipeline`    | running `tasks:`: shell, send, if, parallel; the last output and the `as:` results |
//! | `command`     | (private) the shell commands of setup and `shell:` tasks: `sh -c` in its own process group, output capped |
//! | `controller`  | one agent's loop: wait for new activity, read the inbox, run the backend with retries, acknowledge, write transcripts |
//! | `prompt`      | the prompt an agent is shown for one run |
//! | `backend`     | what runs an agent once, the [`Backend`](backend::Backend) trait: `claude`, `codex` and `exec` (programs), `anthropic` and `openai` (APIs, the tool loop in process), `mock` (scripted replies) |
//! | `workflow`    | the workflow file: its types ([`Workflow`], [`AgentDef`], [`Context`], [`SetupTask`]), [`load`]/[`check`] with every problem as `FILE:LINE:COL: what`; the reading itself in `workflow/read/` |
//! | `expr`        | the `if:` expressions of tasks: parsing with error columns, the variables referenced, evaluation |
//! | `reader`      | (private) typed reading of a positioned YAML tree, reporting into diagnostics; [`parse_duration`] |
//! | `yaml`        | (private) a YAML document as a tree of positioned nodes, from `saphyr-parser` events |
//! | `diagnostic`  | positions ([`Pos`], [`Spanned`]), [`Diagnostic`] |
//! | `interpolate` | `${{ name }}` templates ([`Template`]), variable values ([`Vars`]), plain-text and shell-safe rendering |
//! | `shell`       | (private) how `sh` reads a place in a command text: quotes, comments, here-documents |
//! | `attempt_log` | writing an attempt's output as it comes to `_state/runs/<agent>/<n>.log` (found again through [`crate::transcript`]) |
//! | `redact`      | the secrets aw never stores or echoes, and their redaction (also at a cut) |
//! | `capture`     | the first bytes of a program's stream kept for its transcript |
//! | `guard`       | the process that kills the backends' process groups when aw-run dies, even by SIGKILL |
//!
//! What `aw-ctl` reads of a run has its home below both front ends: the ledger
//! ([`crate::ledger`]), transcripts and logs ([`crate::transcript`]), iteration records
//! ([`crate::iterations`]).

pub mod attempt_log;
pub mod backend;
pub mod capture;
mod command;
pub mod controller;
pub mod diagnostic;
pub mod expr;
pub mod guard;
pub mod interpolate;
pub mod iter;
pub mod live;
pub mod pipeline;
pub mod prompt;
mod reader;
pub mod redact;
pub mod runner;
mod shell;
pub mod workflow;
mod yaml;

pub use diagnostic::{Diagnostic, Pos, Spanned};
pub use interpolate::{ShellCommand, Template, Vars};
pub use reader::parse_duration;
pub use workflow::{AgentDef, BackendKind, Context, LoadError, SetupTask, Workflow, check, load};
