//! The workflow file of `aw-run` (YAML): its contents, how it is read, and its check.
//!
//! ```yaml
//! name: code-review                 # default: the file name without its extension
//! agents:                           # at least one; names as for aw agents, not user/system
//!   reviewer:
//!     model: anthropic/claude-sonnet-4-5
//!     system_prompt: prompts/reviewer.md
//! context: {provider: file}         # the default; `false` disables it
//! setup:
//!   - shell: gh pr diff
//!     as: diff
//! kickoff: |
//!   ${{ diff }}
//!   @reviewer please review these changes.
//! ```
//!
//! Every key is checked: an unknown key anywhere is an error (with the nearest valid key
//! when one is close), and so is a value of the wrong type. [`load`] reports every problem it
//! finds as a [`Diagnostic`] (`FILE:LINE:COL: what`), sorted by position; warnings do not stop
//! loading.
//!
//! Agent keys, all optional:
//!
//! - `backend`: one of [`BackendKind::IN_WORKFLOWS`]. When absent: a `mock:` key means `mock`,
//!   a `command:` key means `exec` (both is an error), else the model's provider prefix chooses
//!   (`anthropic/…` → `anthropic`, `openai/…` → `openai`, another prefix is an error), else
//!   `claude`. `anthropic` and `openai` need a `model`.
//! - `model`: as the backend names it; see [`AgentDef::model_name`].
//! - `system_prompt`: inline text, or a file: a value that is one word (no blanks inside)
//!   ending in `.md` or `.txt` always names a file, relative to the workflow file's directory,
//!   and that file must exist (at most [`MAX_FILE`] bytes of UTF-8). Variables are replaced
//!   in either.
//! - `tools`: a list of strings, for three backends only. `claude`: Claude Code's tool names,
//!   as written (`Read`, `Bash(git diff:*)`). `anthropic` and `openai`: the built-in file tools
//!   the agent is given, each named once by a [`FileTool`](crate::tools::files::FileTool)
//!   name (an unknown name is an error that lists the valid ones). Other backends refuse it.
//! - `max_tokens`, `max_steps`, `max_runs` (whole numbers ≥ 1), `timeout` (a duration, see
//!   [`parse_duration`]), `reply_fallback` (true/false, default true).
//! - `idle_timeout` (all but mock): a duration; a run whose program writes nothing on stdout
//!   or stderr for that long is killed (its whole process group) and ends with status
//!   `timeout`. Default: [`CLI_IDLE_TIMEOUT`] for claude and codex, none for exec. For
//!   `anthropic` and `openai` it is the read timeout of every request (default
//!   [`DEFAULT_READ_TIMEOUT`](super::backend::api::DEFAULT_READ_TIMEOUT)).
//! - `permission_mode` (claude only): Claude Code's `--permission-mode`, one of
//!   [`PERMISSION_MODES`]; when absent none is passed (Claude Code then denies in print mode
//!   every tool not allowed by name).
//! - `cwd`: the backend's working directory, relative to the workflow file's directory.
//! - `env`: extra environment for the backend, `NAME: value`; names `[A-Za-z_][A-Za-z0-9_]*`,
//!   not starting with `AW_` (aw sets those); values are scalars, with variables replaced.
//! - `command` (exec only): the argument vector, a list (a string is refused: no shell is
//!   implied); variables are replaced in each argument, which stays one argument.
//! - `mock` (mock only): `{replies: [text, ...], fail: N, delay: DURATION, vote: OPTION,
//!   usage: {input_tokens: N, output_tokens: N, cache_read_tokens: N, cache_write_tokens: N,
//!   cost_usd: X}}`; `usage` is reported by every run that is not killed (without `cost_usd`
//!   the agent's model prices it).
//! - `budget`: `{usd: X, tokens: N}`, what this agent's own runs may spend (USD more than 0;
//!   input plus output tokens, at least 1). Past it, every agent stops.
//! - `approve_tools` (`anthropic`, `openai`): `{write_file: true | write_outside: GLOBS, by,
//!   timeout, then, replies}`, the `write_file` calls (all, or those to a path outside the
//!   globs) that wait for an approval before they run (see `run::backend::approve_tools`);
//!   it needs the `write_file` tool.
//! - `board: next`: each run starts from the next ready card of the board, claimed for the
//!   agent (see [`crate::run::controller`]); the agent is woken when a card becomes ready.
//! - `isolation`: `worktree` or `none`, over the top level's (see below).
//! - `session` (claude and codex only): `fresh` (the default) or `keep`, each run continuing
//!   the agent's CLI session, its id kept in the instance (see [`crate::sessions`]).
//!
//! `context`: absent means the file provider with its defaults; `false` disables it;
//! `{provider: file, documentOwner: NAME, config: {dir, channel, document}}` or
//! `{provider: memory, documentOwner: NAME}` (provider defaults to `file`). `documentOwner`
//! is an agent of the workflow or `election` (that word means an election even if an agent
//! has that name).
//!
//! `isolation` (top level): `worktree` puts every agent (but one that says `isolation: none`)
//! in a git worktree of its own, on `aw/<instance>/<agent>` (see [`crate::worktree`]): its
//! backend runs there, its `cwd` is relative to the worktree's top (neither absolute nor
//! with `..`), the API backends' file tools are confined to it, and the programs get
//! `AW_WORKTREE` and `AW_BRANCH`; a worker it spawns gets one of its own, and `--iter`
//! commits in it. Outside a git work tree, the check fails at the key. Default `none`.
//!
//! `budget` (top level): `{usd: X, tokens: N}` as for an agent, for all the agents' runs
//! together; `aw-run --budget-usd` and `--budget-tokens` override its values.
//!
//! `pricing`: `{MODEL: {input: X, output: X, cache_read: X, cache_write: X}}`, USD per million
//! tokens (numbers at least 0), overriding the prices of [`crate::models`] for this workflow:
//! MODEL is an id or an alias (two names of one model are an error); the prices not given
//! stay the table's. A run whose backend reports tokens but no cost is priced by its agent's
//! `model`; with no price known its cost stays unknown (its tokens still count).
//!
//! `board`: a list of cards, `{name, title, body, after, for, labels}` (only `title` is
//! needed; a card may be its title alone), added to the board of an instance when the
//! workflow runs on it and its board holds no card yet. `after` lists the cards it waits
//! for, each by its position in the list (from 0) or by its `name`; an unknown reference or a
//! cycle is an error; `for` that is not an agent of the workflow gets a warning.
//!
//! `merge`: `{into: BRANCH, how: rebase|merge, verify: COMMAND, timeout: DURATION, needs:
//! approval, wait: BOOL}` (each optional; `timeout` needs `verify`; `needs` as a task's),
//! the instance's merge queue: aw-run writes it to `_state/merge.json` as it starts and
//! serves the queue while it runs (see [`crate::merge`]); a verified result that `needs` an
//! approval waits for it before the target moves; `wait` (default false) is whether the
//! `merge_request` tool waits for the result unless told.
//!
//! `hooks`: `{EVENT: COMMAND}` or `{EVENT: {run: COMMAND, timeout: DURATION}}`, EVENT one of
//! `on_idle`, `on_run_end`, `on_card_done`, `on_merge`, `on_budget`, `on_approval`, `on_quiet`
//! (see [`crate::lifecycle`]); COMMAND runs with `sh -c` from the workflow file's directory,
//! the event as JSON on stdin and as `AW_*` variables; `timeout` defaults to
//! [`DEFAULT_TIMEOUT`](crate::lifecycle::DEFAULT_TIMEOUT). Exit 0 goes on, 2 is "not yet"
//! (its stderr is posted to the agent), others are reported.
//!
//! `setup`: a list of `{shell: COMMAND, as: NAME}`, run in order before the kickoff; `as`
//! stores the command's output in a variable (see [`super::interpolate`]), defined for the
//! tasks after it, the kickoff and the system prompts. `kickoff`: the first message.
//!
//! Variables are checked against what will be defined: the `Vars` given to [`load`] (the
//! environment as `env.*` and `--var` definitions), `workflow.name`, `workflow.instance`,
//! `context.*` with a file context, and the setup outputs defined earlier. A kickoff that
//! mentions an `@name` that is not an agent of the workflow gets a warning.
//!
//! [`CLI_IDLE_TIMEOUT`]: crate::run::backend::exec::CLI_IDLE_TIMEOUT
//! [`PERMISSION_MODES`]: crate::registry::PERMISSION_MODES

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::diagnostic::Diagnostics;
pub use super::diagnostic::{Diagnostic, Pos, Spanned};
use super::expr::Expr;
use super::interpolate::{Template, Vars};
use super::reader::Reader;
pub use super::reader::parse_duration;
use super::yaml::Document;
use crate::error::Error;
use crate::models::{self, Price, Pricing};
use crate::usage::{Budget, Usage};
pub use crate::worktree::Isolation;

/// Largest workflow or prompt file read, in bytes (1 MiB).
pub const MAX_FILE: u64 = 1 << 20;

/// The channel file name and entry document when the context config names none.
pub const DEFAULT_CHANNEL: &str = "channel.md";
pub const DEFAULT_DOCUMENT: &str = crate::document::DEFAULT_DOCUMENT;

/// The `documentOwner` value that asks for an election.
pub const ELECTION: &str = "election";

pub use crate::registry::BackendKind;

/// A parsed workflow file.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    pub name: Spanned<String>,
    /// The file, as it was named to [`load`].
    pub file: PathBuf,
    /// The directory relative paths in the file start from (`.` for a bare file name).
    pub dir: PathBuf,
    /// In file order.
    pub agents: Vec<AgentDef>,
    pub context: Context,
    pub setup: Vec<SetupTask>,
    pub kickoff: Option<Spanned<Template>>,
    /// `tasks:`, run in order after the kickoff.
    pub tasks: Vec<Task>,
    /// `pricing:`: the built-in prices with this workflow's overrides.
    pub pricing: Pricing,
    /// `budget:`: what the whole workflow may spend (the command line's flags win).
    pub budget: Budget,
    /// `board:`: the cards that seed the board of an instance whose board holds none.
    pub board: Vec<CardDef>,
    /// `merge:`: the settings of the instance's merge queue, which aw-run then serves.
    pub merge: Option<Spanned<crate::merge::Config>>,
    /// `hooks:`: the commands run on events of a run, in file order.
    pub hooks: Vec<HookDef>,
    /// `isolation:` at the top level: where every agent works unless it says otherwise.
    pub isolation: Option<Spanned<Isolation>>,
    /// `otel:`: whether aw-run (and the aw-mcp its agents start) write traces (`true` when
    /// left out).
    pub otel: bool,
}

impl Workflow {
    /// The hooks of `hooks:`, as a run fires them.
    pub fn lifecycle_hooks(&self) -> crate::lifecycle::Hooks {
        let mut hooks = crate::lifecycle::Hooks::default();
        for h in &self.hooks {
            let hook = crate::lifecycle::Hook {
                run: h.run.value.clone(),
                timeout: h.timeout,
            };
            hooks.set(h.event.value, hook);
        }
        hooks
    }

    pub fn agent(&self, name: &str) -> Option<&AgentDef> {
        self.agents.iter().find(|a| a.name.value == name)
    }

    pub fn agent_names(&self) -> impl Iterator<Item = &str> {
        self.agents.iter().map(|a| a.name.value.as_str())
    }

    /// Does `def` work in a worktree of its own (its `isolation:`, else the workflow's)?
    /// With the text that says so.
    pub fn isolated<'a>(&'a self, def: &'a AgentDef) -> Option<&'a Spanned<Isolation>> {
        def.isolation
            .as_ref()
            .or(self.isolation.as_ref())
            .filter(|i| i.value == Isolation::Worktree)
    }

    /// Define the built-in variables for a run on `instance`: `workflow.name`,
    /// `workflow.instance`, and with a file context `context.channel` and `context.document`
    /// from `files` (the channel file and the entry document the run uses).
    pub fn set_builtins(&self, vars: &mut Vars, instance: &str, files: Option<(&Path, &Path)>) {
        vars.set("workflow.name", self.name.value.as_str());
        vars.set("workflow.instance", instance);
        if let (true, Some((channel, document))) = (self.context.has_files(), files) {
            vars.set("context.channel", channel.to_string_lossy());
            vars.set("context.document", document.to_string_lossy());
        }
    }
}

/// One agent of a workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDef {
    pub name: Spanned<String>,
    /// The backend, at the text that chose it (`backend`, `model`, `mock`, `command`, or the
    /// agent's name for the default).
    pub backend: Spanned<BackendKind>,
    /// Whether `backend` was read; when it was not (an error says why), it is a stand-in
    /// that nothing else is checked against.
    pub backend_read: bool,
    /// As written.
    pub model: Option<Spanned<String>>,
    pub system_prompt: Option<SystemPrompt>,
    pub tools: Vec<Spanned<String>>,
    pub max_tokens: Option<Spanned<u64>>,
    pub max_steps: Option<Spanned<u64>>,
    /// Longest one backend run may take.
    pub timeout: Option<Spanned<Duration>>,
    /// Longest a backend's program may write nothing (stdout or stderr) before it is killed.
    pub idle_timeout: Option<Spanned<Duration>>,
    /// `claude` only: Claude Code's permission mode, as written (a valid one).
    pub permission_mode: Option<Spanned<String>>,
    /// Most backend runs for this agent in one workflow run.
    pub max_runs: Option<Spanned<u64>>,
    /// Resolved against the workflow's directory.
    pub cwd: Option<Spanned<PathBuf>>,
    /// `cwd` as written: in a worktree, relative to its top.
    pub cwd_written: Option<PathBuf>,
    /// In file order.
    pub env: Vec<(Spanned<String>, Spanned<Template>)>,
    /// Names of variables whose values are secret although their names do not say so.
    pub secrets: Vec<String>,
    /// `exec` only, never empty.
    pub command: Option<Vec<Spanned<Template>>>,
    /// `mock` only.
    pub mock: Option<MockDef>,
    /// When a run ends without the agent having written to the channel, post its final reply
    /// for it.
    pub reply_fallback: bool,
    /// What this agent's own runs may spend.
    pub budget: Budget,
    /// The collab tools (`collab: true`, or `delegate: true`), with their limits.
    pub collab: Option<crate::registry::Collab>,
    /// Only coordinating (`delegate: true`): no document-writing tools, no file tools.
    pub delegate: bool,
    /// `board: next`: before each run, the agent is given the next ready card of the board
    /// (claimed for it), and it is woken when a card becomes ready.
    pub board_next: bool,
    /// `needs: approval`: each run of the agent waits for an approval.
    pub needs: Option<Spanned<Gate>>,
    /// `approve_tools:` (`anthropic`, `openai`): the tool calls that wait for an approval.
    pub approve_tools: Option<Spanned<ToolGate>>,
    /// `isolation:`: where the agent works, over the workflow's.
    pub isolation: Option<Spanned<Isolation>>,
    /// `session:` (`claude`, `codex`): `keep` continues one CLI session across runs.
    pub session: Option<Spanned<crate::sessions::Mode>>,
}

impl AgentDef {
    /// Does each run continue the agent's CLI session (`session: keep`)?
    pub fn keeps_session(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|m| m.value == crate::sessions::Mode::Keep)
    }

    /// The model as the backend names it. `anthropic` and `openai` (APIs, which need a full
    /// id): without the backend's own `PROVIDER/` prefix, an alias resolved
    /// (`anthropic/sonnet` → `claude-sonnet-4-5`, see [`crate::models`]); text with another
    /// prefix as written (`meta-llama/Llama-3` for `openai`). `claude` and `codex`: without
    /// the backend's own prefix, else as written (Claude Code knows `sonnet` itself). Others:
    /// as written.
    pub fn model_name(&self) -> Option<&str> {
        let model = self.model.as_ref()?.value.as_str();
        let provider = self.backend.provider();
        let own = provider.and_then(|p| model.strip_prefix(p)?.strip_prefix('/'));
        let name = own.unwrap_or(model);
        if !self.backend.needs_model() {
            return Some(name);
        }
        Some(models::find_for(name, provider).map_or(name, |m| m.id))
    }

    /// The price of this agent's model under `pricing`, if known.
    pub fn price(&self, pricing: &Pricing) -> Option<Price> {
        pricing.price(&self.model.as_ref()?.value)
    }
}

/// A system prompt: inline, or read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemPrompt {
    /// The text; its position is that of the `system_prompt` value.
    pub template: Spanned<Template>,
    /// The file it was read from.
    pub file: Option<PathBuf>,
}

/// Scripted behaviour of a `mock` agent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MockDef {
    /// Replies, one per run, the last one repeated.
    pub replies: Vec<Spanned<String>>,
    /// How many runs fail first.
    pub fail: u64,
    /// How long each run takes.
    pub delay: Option<Duration>,
    /// Vote in every active proposal not voted in yet: for this option, or the first one
    /// when it is not an option.
    pub vote: Option<Spanned<String>>,
    /// The tokens and cost each run reports.
    pub usage: Option<Usage>,
}

/// Shared context of a workflow.
#[derive(Debug, Clone, PartialEq)]
pub enum Context {
    /// `context: false`.
    Disabled,
    /// The file provider (the default): the instance directory.
    File {
        document_owner: Option<Spanned<DocumentOwner>>,
        config: FileConfig,
    },
    /// The memory provider (for tests).
    Memory {
        document_owner: Option<Spanned<DocumentOwner>>,
    },
}

impl Default for Context {
    fn default() -> Context {
        Context::File {
            document_owner: None,
            config: FileConfig::default(),
        }
    }
}

impl Context {
    pub fn document_owner(&self) -> Option<&Spanned<DocumentOwner>> {
        match self {
            Context::File { document_owner, .. } | Context::Memory { document_owner } => {
                document_owner.as_ref()
            }
            Context::Disabled => None,
        }
    }

    /// Does the context live in files (so `context.channel` and `context.document` exist)?
    pub fn has_files(&self) -> bool {
        matches!(self, Context::File { .. })
    }
}

/// `context.config` of the file provider; `None` means the default.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FileConfig {
    /// The instance directory (default: the instance's directory under the aw root).
    pub dir: Option<Spanned<Template>>,
    /// The channel file name (default [`DEFAULT_CHANNEL`]).
    pub channel: Option<Spanned<String>>,
    /// The entry document (default [`DEFAULT_DOCUMENT`]), relative to the documents.
    pub document: Option<Spanned<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentOwner {
    Agent(String),
    /// `election`: the agents choose one.
    Election,
}

/// One task of `tasks:`.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The position of the task's first key.
    pub pos: Pos,
    pub kind: TaskKind,
    /// `if:`: run only when it is true.
    pub when: Option<Spanned<Expr>>,
    /// `as:`: the variable that stores the task's output.
    pub output: Option<Spanned<String>>,
    /// `needs: approval`: the task waits for an approval before it runs.
    pub needs: Option<Spanned<Gate>>,
}

/// `approve_tools:` of an API agent: the tool calls that wait for an approval, and who
/// approves.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolGate {
    pub writes: Writes,
    pub gate: Gate,
}

/// Which `write_file` calls wait.
#[derive(Debug, Clone, PartialEq)]
pub enum Writes {
    /// Every one (`write_file: true`).
    All,
    /// Those to a path (relative to the work tree, as leases name them) that none of these
    /// globs matches (`write_outside:`).
    Outside(Vec<String>),
}

/// `needs: approval` (or `needs: {approval: {by, timeout, then}}`): who may approve, how
/// long they have, and what then.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// Who may approve (default `user`).
    pub by: Vec<String>,
    pub timeout: Option<Duration>,
    pub then: crate::approval::Then,
    /// An approver may also answer by a reply in the channel.
    pub replies: bool,
}

impl Default for Gate {
    fn default() -> Gate {
        Gate {
            by: vec!["user".to_string()],
            timeout: None,
            then: crate::approval::Then::Fail,
            replies: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum TaskKind {
    /// Run with `sh -c`, values passed as in [`Template::render_shell`].
    Shell(Spanned<Template>),
    /// Post the text as `system` to `to` and wait for its reply.
    Send {
        text: Spanned<Template>,
        to: Spanned<String>,
        timeout: Option<Duration>,
    },
    /// Run these at the same time (none of them is a group).
    Parallel(Vec<Task>),
}

impl Task {
    /// How the task is named in messages: `shell: FIRST LINE`, `send to AGENT: FIRST LINE`,
    /// or `parallel`.
    pub fn describe(&self) -> String {
        let first = |t: &Template| t.text().lines().next().unwrap_or("").trim().to_string();
        match &self.kind {
            TaskKind::Shell(t) => format!("shell: {}", first(t)),
            TaskKind::Send { text, to, .. } => format!("send to {}: {}", to.value, first(text)),
            TaskKind::Parallel(_) => "parallel".to_string(),
        }
    }

    /// The variables the task sets (for a group, its sub-tasks').
    pub fn outputs(&self) -> Vec<&Spanned<String>> {
        match &self.kind {
            TaskKind::Parallel(tasks) => tasks.iter().flat_map(Task::outputs).collect(),
            _ => self.output.iter().collect(),
        }
    }
}

/// One hook of `hooks:`.
#[derive(Debug, Clone, PartialEq)]
pub struct HookDef {
    /// The event, at its key.
    pub event: Spanned<crate::lifecycle::Kind>,
    /// The command given to `sh -c`, from the workflow file's directory.
    pub run: Spanned<String>,
    /// How long it may run before its process group is killed.
    pub timeout: Duration,
}

/// One card of `board:`.
#[derive(Debug, Clone, PartialEq)]
pub struct CardDef {
    /// The position of the card in the file.
    pub pos: Pos,
    /// `name:`, how `after:` of other cards may name it.
    pub name: Option<Spanned<String>>,
    pub title: Spanned<String>,
    pub body: String,
    /// The positions in `board:` of the cards it waits for (resolved, never a cycle).
    pub after: Vec<usize>,
    /// `for:`: the agent it is meant for, or the agents of a pool.
    pub assignee: Vec<Spanned<String>>,
    pub labels: Vec<Spanned<String>>,
}

/// The positions of `cards` in the order they are added to a board: each after every card
/// it waits for, else in file order.
pub fn seeding_order(cards: &[CardDef]) -> Vec<usize> {
    let mut order = Vec::with_capacity(cards.len());
    let mut added = vec![false; cards.len()];
    while order.len() < cards.len() {
        let next = (0..cards.len())
            .find(|&i| !added[i] && cards[i].after.iter().all(|&j| added[j]))
            .expect("the cards of a workflow have no cycle");
        added[next] = true;
        order.push(next);
    }
    order
}

/// One setup command.
#[derive(Debug, Clone, PartialEq)]
pub struct SetupTask {
    /// Run with `sh -c`, values passed as in [`Template::render_shell`].
    pub shell: Spanned<Template>,
    /// The `as` name that stores the command's output.
    pub output: Option<Spanned<String>>,
    /// `needs: approval`: the command waits for an approval before it runs.
    pub needs: Option<Spanned<Gate>>,
}

/// Why [`load`] gave no workflow.
#[derive(Debug)]
pub enum LoadError {
    /// The file could not be read (no such file: exit 66; others 74 or 77).
    Read(Error),
    /// Every problem found (errors, and warnings among them), sorted (exit 65).
    Invalid(Vec<Diagnostic>),
}

impl LoadError {
    pub fn exit_code(&self) -> u8 {
        match self {
            LoadError::Read(e) => e.exit_code(),
            LoadError::Invalid(_) => crate::error::exit::DATAERR,
        }
    }
}

impl std::fmt::Display for LoadError {
    /// The read error, or one rendered diagnostic per line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Read(e) => write!(f, "{e}"),
            LoadError::Invalid(list) => {
                let lines: Vec<String> = list.iter().map(Diagnostic::render).collect();
                write!(f, "{}", lines.join("\n"))
            }
        }
    }
}

/// Read and check the workflow file at `path`. `vars` holds what will be defined besides the
/// workflow's own variables: `env.*` and `--var` definitions. On success, the warnings.
pub fn load(path: &Path, vars: &Vars) -> Result<(Workflow, Vec<Diagnostic>), LoadError> {
    let text = read_text(path)?;
    parse(&text, path, vars).map_err(LoadError::Invalid)
}

/// [`load`] for `aw-run --check`: every problem of the file (errors and warnings, sorted),
/// and the workflow as far as it could be read, so that what it needs from the machine can
/// be checked too. `None` when the YAML itself does not parse.
pub fn load_for_check(
    path: &Path,
    vars: &Vars,
) -> Result<(Option<Workflow>, Vec<Diagnostic>), LoadError> {
    let text = read_text(path)?;
    let (workflow, diags) = read_all(&text, path, vars);
    Ok((workflow, diags.into_sorted()))
}

/// The text of the workflow file at `path`: at most [`MAX_FILE`] bytes of UTF-8.
fn read_text(path: &Path) -> Result<String, LoadError> {
    let bytes = read_capped(path).map_err(LoadError::Read)?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let pos = Pos::START.advance(&String::from_utf8_lossy(valid));
        let mut diags = Diagnostics::new(path);
        diags.error(pos, "not valid UTF-8");
        LoadError::Invalid(diags.into_sorted())
    })
}

/// [`load`], keeping only the warnings.
pub fn check(path: &Path, vars: &Vars) -> Result<Vec<Diagnostic>, LoadError> {
    load(path, vars).map(|(_, warnings)| warnings)
}

/// Read a file of at most [`MAX_FILE`] bytes.
fn read_capped(path: &Path) -> Result<Vec<u8>, Error> {
    let file = fs::File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::not_found(format!("{}: no such file", path.display())),
        _ => Error::io(path, e),
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(Error::invalid(format!(
            "{}: larger than {MAX_FILE} bytes",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Check the workflow `text` that was read from `path` (which gives the default name and the
/// directory that relative paths start from).
pub fn parse(
    text: &str,
    path: &Path,
    vars: &Vars,
) -> Result<(Workflow, Vec<Diagnostic>), Vec<Diagnostic>> {
    match read_all(text, path, vars) {
        (Some(workflow), diags) if !diags.has_errors() => Ok((workflow, diags.into_sorted())),
        (_, diags) => Err(diags.into_sorted()),
    }
}

/// Every phase of the check on `text`: the YAML, then (when it parses) the keys, values,
/// references and expressions, each reporting every problem it finds.
fn read_all(text: &str, path: &Path, vars: &Vars) -> (Option<Workflow>, Diagnostics) {
    let doc = match Document::parse(text) {
        Ok(doc) => doc,
        Err((pos, message)) => {
            let mut diags = Diagnostics::new(path);
            diags.error(pos, message);
            return (None, diags);
        }
    };
    let mut r = Reader::new(&doc, path);
    let workflow = read::read_workflow(&mut r, path);
    read::check_references(&mut r, &workflow, vars);
    (Some(workflow), r.diags)
}

/// Does a `system_prompt` value name a file: one word (no blanks inside once trimmed)
/// ending in `.md` or `.txt`?
pub fn names_prompt_file(value: &str) -> bool {
    let v = value.trim();
    !v.contains(char::is_whitespace) && (v.ends_with(".md") || v.ends_with(".txt"))
}

mod read;
#[cfg(test)]
mod tests;
