//! aw: small Unix tools that let several LLM agents work together through a shared
//! directory, `.workflow/<instance>/`. See `aw(7)` and `aw-workflow(5)`.
//!
//! # Module map
//!
//! Imports run one way, from the top of this table down (`tests/meta/layers.rs` checks it: no
//! cycle between files, no arrow back up, `run` and `mcp` never import each other, and
//! only `cli` imports `run`, though not `aw-ctl`'s `cli/ctl`: what it reads of a run has its
//! home in the domain). The `pub mod` list below follows the same groups.
//!
//! | layer | modules | what they hold |
//! |-------|---------|----------------|
//! | bin | `src/bin/aw-*.rs` | thin mains: each calls its `cli` module |
//! | cli | `cli` | the command lines: options, output, `--json`, errors to exit codes |
//! | front ends | `run`, `mcp` | `aw-run`'s runner (workflows, controllers, backends); `aw-mcp`'s server |
//! | tools | `tools` | the tools an agent has: names, schemas, arguments, dispatch |
//! | domain | every other module | the instance and what is in it: `instance` (the root and its instances), `approval` (requests that hold a step until an approver answers, and the wait for them), `board` (the cards of work agents claim and finish), `channel` (the log and its indexes; `mention`, `post` and `inbox` are files of it, named at the root too), `document`, `resource` (long content stored once), `proposal`, `registry` (the agents registered, and the name index that finds one without reading them all), `report` (what happened in an instance or one run of it, as data and as one HTML page), `status`, `collab`, `serve` (who serves which agent), `spawn` (starting an agent's server), `git` (every git command aw runs), `holder` (who holds a claim or a lease, and whether it lapsed), `reply` (waiting for a reply), `models`, `otel` (OpenTelemetry traces as files: spans, the trace context passed to child programs, the files read back), `usage` (spending and budgets), `ledger` (what an instance spent across runs), `transcript` (the transcripts and logs of an agent's attempts), `iterations` (the records of `aw-run --iter`), `lease` (leases on paths of the work tree, and whether two globs overlap), `merge` (the merge queue: requests to bring a branch onto a target, verified before it moves), `lifecycle` (the hooks a workflow names for events of a run: the events as JSON and environment, one hook's process, the hook log), `worktree` (a git worktree per agent, on a branch of its own), `state` (the JSON files under `_state/`), `process` (the stop token, sibling binaries), `suggest` (did-you-mean), `trust` (whose roots and files are trusted) |
//! | fs | `fs` | the only code that calls rename, flock and inotify: atomic writes, locks, watches; `records` (folders of numbered JSON records: cards, approval and merge requests); `identity` (which version of a file a path names) |
//! | base | `error`, `hash`, `host`, `keyword`, `names`, `term`, `time`, `warn` | errors, a checksum, this host, keyword enums, names, text shown on a terminal, clocks, messages on stderr |

// cli: the command lines of the binaries.
pub mod cli;

// front ends: aw-run's runner and aw-mcp's server, which never import each other.
pub mod mcp;
pub mod run;

// tools: what an agent can do, shared by both front ends.
pub mod tools;

// domain: the instance and what is in it.
pub mod approval;
pub mod board;
pub mod channel;
pub mod collab;
pub mod document;
pub mod git;
pub mod holder;
pub mod instance;
pub mod iterations;
pub mod lease;
pub mod ledger;
pub mod lifecycle;
pub mod merge;
pub mod models;
pub mod otel;
pub mod process;
pub mod proposal;
pub mod registry;
pub mod reply;
pub mod report;
pub mod resource;
pub mod serve;
pub mod sessions;
pub mod spawn;
pub mod state;
pub mod status;
pub mod suggest;
pub mod transcript;
pub mod trust;
pub mod usage;
pub mod worktree;

// fs: the only callers of rename, flock and inotify.
pub mod fs;

// base: imports no other layer.
pub mod error;
pub mod hash;
pub mod host;
pub mod keyword;
pub mod names;
pub mod term;
pub mod time;
pub mod warn;

pub use error::{Error, Result};

// Files of `channel/` that every tool uses: posting, inboxes, mentions.
pub use channel::{inbox, mention, post};

/// The version every tool prints with `--version`, and `aw-mcp` reports to its client.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
