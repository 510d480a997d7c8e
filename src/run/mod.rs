//! The runner behind `aw-run`: read a workflow file, check it, run its setup, post its
//! kickoff, and drive one controller per agent. Dependencies run downwards in this map.
//!
//! | module        | what it holds |
//! |---------------|---------------|
//! | `workflow`    | the workflow file: its types ([`Workflow`], [`AgentDef`], [`Context`], [`SetupTask`]), [`load`]/[`check`] with every problem as `FILE:LINE:COL: what`; the reading itself in `workflow/read.rs` |
//! | `interpolate` | `${{ name }}` templates ([`Template`]), variable values ([`Vars`]), plain-text and shell-safe rendering |
//! | `shell`       | (private) how `sh` reads a place in a command text: quotes, comments, here-documents |
//! | `diagnostic`  | positions ([`Pos`], [`Spanned`]), [`Diagnostic`], did-you-mean suggestions |
//! | `reader`      | (private) typed reading of a positioned YAML tree, reporting into diagnostics; [`parse_duration`] |
//! | `yaml`        | (private) a YAML document as a tree of positioned nodes, from `saphyr-parser` events |
//!
//! To come: `controller` (one agent's loop: wait for a mention, build the prompt, run the
//! backend, acknowledge), `prompt` (the prompt an agent is shown), and `backend/` (claude,
//! codex, anthropic, openai, exec, mock).

pub mod diagnostic;
pub mod interpolate;
mod reader;
mod shell;
pub mod workflow;
mod yaml;

pub use diagnostic::{Diagnostic, Pos, Spanned};
pub use interpolate::{ShellCommand, Template, Vars};
pub use reader::parse_duration;
pub use workflow::{AgentDef, Backend, Context, LoadError, SetupTask, Workflow, check, load};
