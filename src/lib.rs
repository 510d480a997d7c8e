//! aw: small Unix tools that let several LLM agents work together through a shared
//! directory, `.workflow/<instance>/`. See `aw(7)` and `aw-workflow(5)`.
//!
//! # Module map
//!
//! Imports run one way, from the top of this table down (`tests/layers.rs` checks it: no
//! cycle between files, no arrow back up, `run` and `mcp` never import each other, and
//! nothing but `cli` imports `run`).
//!
//! | layer | modules | what they hold |
//! |-------|---------|----------------|
//! | bin | `src/bin/aw-*.rs` | thin mains: each calls its `cli` module |
//! | cli | `cli` | the command lines: options, output, `--json`, errors to exit codes |
//! | front ends | `run`, `mcp` | `aw-run`'s runner (workflows, controllers, backends); `aw-mcp`'s server |
//! | tools | `tools` | the tools an agent has: names, schemas, arguments, dispatch |
//! | domain | every other module | the instance and what is in it: `channel` (the log and its indexes; `mention`, `post` and `inbox` are files of it, named at the root too), `document`, `proposal`, `registry`, `collab`, `serve` (who serves which agent), `git` (every git command aw runs), `reply` (waiting for a reply), `models`, `usage` (spending and budgets), `ledger` (what an instance spent across runs), `transcript` (the transcripts and logs of an agent's attempts), `iterations` (the records of `aw-run --iter`), `process` (the stop token, sibling binaries), `suggest` (did-you-mean), `trust` (whose roots and files are trusted) ... |
//! | fs | `fs` | the only code that calls rename, flock and inotify: atomic writes, locks, watches |
//! | base | `error`, `hash`, `host`, `keyword`, `names`, `term`, `time`, `warn` | errors, a checksum, this host, keyword enums, names, text shown on a terminal, clocks, messages on stderr |

pub mod channel;
pub mod cli;
pub mod collab;
pub mod document;
pub mod error;
pub mod fs;
pub mod git;
pub mod hash;
pub mod host;
pub mod instance;
pub mod iterations;
pub mod keyword;
pub mod ledger;
pub mod mcp;
pub mod models;
pub mod names;
pub mod process;
pub mod proposal;
pub mod registry;
pub mod reply;
pub mod resource;
pub mod run;
pub mod serve;
pub mod spawn;
pub mod state;
pub mod status;
pub mod suggest;
pub mod term;
pub mod time;
pub mod tools;
pub mod transcript;
pub mod trust;
pub mod usage;
pub mod warn;

pub use error::{Error, Result};

// Files of `channel/` that every tool uses: posting, inboxes, mentions.
pub use channel::{inbox, mention, post};

/// The version every tool prints with `--version`, and `aw-mcp` reports to its client.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
