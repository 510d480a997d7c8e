//! `aw-ctl`: register agents, list instances, acknowledge inboxes, manage documents, run
//! votes, print MCP configurations, and watch and stop the agents aw-run serves. This module
//! parses the command line and dispatches.

mod agents;
mod budget;
mod docs;
mod mcp_config;
mod runs;
mod top;
mod votes;

use crate::cli::{self, Common, Out};
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::names;

pub const HELP: &str = "\
aw-ctl - manage aw instances, agents, inboxes and documents

Usage: aw-ctl [--root DIR] [-i NAME] <COMMAND> [ARGS]

Commands:
  new NAME [-m MODEL] [--backend B] [--prompt TEXT | --prompt-file F] [--replace]
      [-- PROGRAM [ARG...]]
                         register an agent (NAME or NAME@INSTANCE); starts nothing;
                         an exec agent needs its command after --
  rm NAME                unregister an agent
  ls [--json]            instances, their agents, entry counts and unread counts
  ack AGENT [--until ID] acknowledge AGENT's inbox up to ID (default: the newest entry)
  doc read [FILE]        print a document (default notes.md)
  doc write [FILE]       replace a document with stdin
  doc append [FILE]      append stdin to a document
  doc create FILE        create a new document from stdin (fails if it exists)
  doc list [PATTERN]     list documents (those matching PATTERN, e.g. 'findings/*.md')
  doc rm FILE            delete a document
  doc owner [NAME | --clear]
                         show, set or clear the document owner
  status [NAME | PATTERN] [--json]
                         agents' state, task and unread counts; active proposals
                         (PATTERN: agent names with * ? [..], e.g. 'worker-*')
  proposals [--all] [--json]
                         active proposals (--all: every proposal)
  propose TYPE TITLE [--option ID[=LABEL]]... [--rule R] [--quorum N]
          [--tie-breaker T] [--binding] [--timeout SECS] [--description TEXT] [--id ID]
                         create a proposal (election, decision, approval, assignment)
  vote PROPOSAL CHOICE [--reason R]
                         vote (votes are final)
  cancel PROPOSAL        cancel a proposal you created
  mcp-config NAME@INSTANCE [--codex | --codex-toml] [--collab | --delegate]
                         print the MCP configuration for Claude Code (JSON) or
                         Codex (command-line overrides, or config.toml)
  ps [PATTERN | --all-roots] [--json]
                         agents served by aw-run: instance, agent, host, pid, state, runs
                         (PATTERN: AGENT[@INSTANCE] with * ? [..], e.g. 'worker-*@team';
                         --all-roots: the user's servers of every root)
  top                    a full-screen live view of the instance's agents and channel
                         (q quits)
  stop AGENT[@INSTANCE] | PATTERN | @INSTANCE | --all | --all-roots
                         ask the aw-run serving them, on any host, to finish; wait up
                         to 10 s (--timeout)
  runs [AGENT] [--json]  the transcripts of the agents' runs
  runs AGENT N [--json]  show transcript N of AGENT
  runs -f AGENT          follow AGENT's output as it runs, attempt after attempt,
                         until no aw-run serves it
  budget [--json]        what the instance spent across runs of aw-run, and its budget
  budget reset [--json]  start counting the instance's spending again from nothing
  (doc, propose, vote and cancel take --as AGENT: who acts, default $AW_AGENT or 'user')

Options:
      --root DIR       root directory (default: $AW_ROOT, else the nearest
                       .workflow/ here or above, else ./.workflow)
  -i, --instance NAME  instance (default: $AW_INSTANCE or 'default')
  -m, --model MODEL    (new) the agent's model, e.g. anthropic/claude-sonnet-4-5
      --backend B      (new) claude, codex, anthropic, openai, exec, mock or external
      --prompt TEXT    (new) the agent's system prompt
      --prompt-file F  (new) read the system prompt from file F
      --replace        (new) replace an agent that is already registered
      --until ID       (ack) acknowledge up to entry ID
      --as AGENT       (doc, propose, vote, cancel) act as AGENT
      --clear          (doc owner) remove the document owner
      --all            (proposals) list closed proposals too; (stop) every served
                       agent of the root (only the instance's with -i)
      --all-roots      (ps, stop) the served agents of every root, from the user's
                       registry of servers (stop names the root on each line)
      --create         (new, doc write/append/create) create the instance even if an
                       existing one has a near name
  -f, --follow         (runs) follow the agent's attempts as they run
      --option ID[=LABEL]
                       (propose) an option; repeat for each
      --rule R         (propose) plurality (default), majority or unanimous
      --quorum N       (propose) votes needed (default: number of agents)
      --tie-breaker T  (propose) first (default), random or creator-decides
      --binding        (propose) enforce the result (doc-owner elections set the owner)
      --timeout SECS   (propose) resolve or expire after SECS seconds; (stop) wait
                       at most SECS seconds (default 10)
      --description TEXT
                       (propose) longer text for the announcement
      --id ID          (propose) proposal id (default prop-N)
      --reason R       (vote) why
      --codex          (mcp-config) print Codex command-line overrides
      --codex-toml     (mcp-config) print a Codex config.toml fragment
      --collab         (mcp-config) the server gives the collab tools too
      --delegate       (mcp-config) the server gives only the coordinating tools
      --json           JSON Lines output
  -h, --help           print this help
  -V, --version        print the version

Exit status: 0 ok, 1 no document owner set (doc owner) or not served (stop), 64 usage,
65 bad name or data, 66 no such instance, agent, document or run, 73 cannot create
(exists), 74 I/O error, 75 lock timeout or still served after the wait (stop), 77 not
the document owner, a root found above that is not trusted, a server record of another
user (stop) or permission denied, 130 interrupted.
";

#[derive(Debug, Default)]
pub(super) struct Args {
    pub(super) common: Common,
    words: Vec<String>,
    model: Option<String>,
    backend: Option<String>,
    prompt: Option<String>,
    prompt_file: Option<std::path::PathBuf>,
    replace: bool,
    until: Option<u64>,
    as_agent: Option<String>,
    clear: bool,
    pub(super) json: bool,
    pub(super) all: bool,
    pub(super) create: bool,
    pub(super) all_roots: bool,
    /// (runs) follow the agent's attempts as they run.
    pub(super) follow: bool,
    pub(super) options: Vec<String>,
    pub(super) rule: Option<String>,
    pub(super) quorum: Option<u32>,
    pub(super) tie_breaker: Option<String>,
    pub(super) binding: bool,
    pub(super) timeout: Option<u64>,
    pub(super) description: Option<String>,
    pub(super) id: Option<String>,
    pub(super) reason: Option<String>,
    pub(super) codex: bool,
    pub(super) codex_toml: bool,
    pub(super) collab: bool,
    pub(super) delegate: bool,
    /// The words after `new NAME ... --`: an exec agent's command.
    command: Option<Vec<String>>,
    /// The command's options given, as written and by their long names, in order.
    given: Vec<(String, &'static str)>,
}

/// Each command and the options it takes besides `--root`, `-i`, `-h` and `-V`: any other
/// is refused (64), with the near one of its own.
const COMMANDS: &[(&str, &[&str])] = &[
    (
        "new",
        &[
            "--model",
            "--backend",
            "--prompt",
            "--prompt-file",
            "--replace",
            "--create",
        ],
    ),
    ("rm", &[]),
    ("ls", &["--json"]),
    ("ack", &["--until"]),
    ("doc", &["--as", "--clear", "--create", "--json"]),
    ("status", &["--json"]),
    ("proposals", &["--all", "--json"]),
    (
        "propose",
        &[
            "--option",
            "--rule",
            "--quorum",
            "--tie-breaker",
            "--binding",
            "--timeout",
            "--description",
            "--id",
            "--as",
            "--json",
        ],
    ),
    ("vote", &["--reason", "--as", "--json"]),
    ("cancel", &["--as", "--json"]),
    (
        "mcp-config",
        &["--codex", "--codex-toml", "--collab", "--delegate"],
    ),
    ("ps", &["--all-roots", "--json"]),
    ("top", &[]),
    ("stop", &["--all", "--all-roots", "--timeout"]),
    ("runs", &["--json", "--follow"]),
    ("budget", &["--json"]),
];

/// The long name of an option of aw-ctl as the parser knows it.
fn long_name(arg: &lexopt::Arg) -> Option<&'static str> {
    use lexopt::Arg::{Long, Short};
    let name = match arg {
        Short('m') => "model",
        Short('f') => "follow",
        Long(l) => l,
        _ => return None,
    };
    COMMANDS
        .iter()
        .flat_map(|(_, opts)| opts.iter())
        .find(|o| o[2..] == *name)
        .copied()
}

/// Refuse (64) an option that `cmd` does not take.
fn check_options(cmd: &str, given: &[(String, &'static str)]) -> Result<()> {
    let Some((_, takes)) = COMMANDS.iter().find(|(c, _)| *c == cmd) else {
        return Ok(());
    };
    for (shown, long) in given {
        if !takes.contains(long) {
            let near = crate::suggest::suggestion(long, takes.iter().copied());
            let msg = match takes.is_empty() {
                true => format!("{cmd} takes no option, not {shown}"),
                false => format!(
                    "{cmd} takes no {shown}{near} (it takes {})",
                    takes.join(", ")
                ),
            };
            return Err(Error::Usage(msg).hint("see aw-ctl --help"));
        }
    }
    Ok(())
}

pub fn run(out: &mut Out) -> Result<u8> {
    use lexopt::prelude::*;
    let mut a = Args::default();
    let mut p = lexopt::Parser::from_env();
    loop {
        // `new NAME ... -- PROGRAM [ARG...]`: everything after `--` is the command, taken
        // as it is (options included).
        if a.words.len() == 2
            && a.words[0] == "new"
            && let Some(mut raw) = p.try_raw_args()
            && raw.peek() == Some(std::ffi::OsStr::new("--"))
        {
            raw.next();
            let argv = raw
                .map(|v| {
                    v.into_string()
                        .map_err(|_| Error::invalid("command argument is not valid UTF-8"))
                })
                .collect::<Result<Vec<_>>>()?;
            a.command = Some(argv);
            break;
        }
        let Some(arg) = p.next().map_err(cli::lex_err)? else {
            break;
        };
        if let Some(k) = Common::key(&arg) {
            a.common.set(k, &mut p)?;
            continue;
        }
        if let Some(long) = long_name(&arg) {
            let shown = match &arg {
                Short(c) => format!("-{c}"),
                _ => long.to_string(),
            };
            a.given.push((shown, long));
        }
        match arg {
            Short('m') | Long("model") => a.model = Some(cli::string(&mut p, "--model")?),
            Long("backend") => a.backend = Some(cli::string(&mut p, "--backend")?),
            Long("prompt") => a.prompt = Some(cli::string(&mut p, "--prompt")?),
            Long("prompt-file") => {
                a.prompt_file = Some(cli::value(&mut p, "--prompt-file")?.into())
            }
            Long("replace") => a.replace = true,
            Long("until") => a.until = Some(cli::number(&mut p, "--until")?),
            Long("as") => a.as_agent = Some(cli::string(&mut p, "--as")?),
            Long("clear") => a.clear = true,
            Long("json") => {
                a.json = true;
                out.exact();
            }
            Long("all") => a.all = true,
            Long("create") => a.create = true,
            Long("all-roots") => a.all_roots = true,
            Short('f') | Long("follow") => a.follow = true,
            Long("option") => a.options.push(cli::string(&mut p, "--option")?),
            Long("rule") => a.rule = Some(cli::string(&mut p, "--rule")?),
            Long("quorum") => a.quorum = Some(cli::number(&mut p, "--quorum")?),
            Long("tie-breaker") => a.tie_breaker = Some(cli::string(&mut p, "--tie-breaker")?),
            Long("binding") => a.binding = true,
            Long("timeout") => a.timeout = Some(cli::number(&mut p, "--timeout")?),
            Long("description") => a.description = Some(cli::string(&mut p, "--description")?),
            Long("id") => a.id = Some(cli::string(&mut p, "--id")?),
            Long("reason") => a.reason = Some(cli::string(&mut p, "--reason")?),
            Long("codex") => a.codex = true,
            Long("codex-toml") => a.codex_toml = true,
            Long("collab") => a.collab = true,
            Long("delegate") => a.delegate = true,
            Short('h') | Long("help") => return cli::print_help(out, HELP),
            Short('V') | Long("version") => return cli::print_version(out, "aw-ctl"),
            Value(v) => a.words.push(
                v.into_string()
                    .map_err(|_| Error::invalid("argument is not valid UTF-8"))?,
            ),
            _ => return Err(cli::unexpected(arg, HELP)),
        }
    }
    let words: Vec<&str> = a.words.iter().map(String::as_str).collect();
    if let Some(cmd) = words.first() {
        check_options(cmd, &a.given)?;
    }
    if a.follow {
        return match words.as_slice() {
            ["runs", agent] if !a.json => runs::follow(out, &a, agent),
            _ => Err(Error::Usage(
                "-f/--follow goes with runs AGENT alone (no N, no --json)".into(),
            )),
        };
    }
    match words.as_slice() {
        ["new", name] => agents::new(out, &a, name),
        ["rm", name] => agents::rm(out, &a, name),
        ["ls"] => agents::ls(out, &a),
        ["ack", agent] => agents::ack(out, &a, agent),
        ["doc", rest @ ..] => docs::doc(out, &a, rest),
        ["status"] => agents::status(out, &a, None),
        ["status", name] => agents::status(out, &a, Some(name)),
        ["proposals"] => votes::proposals(out, &a),
        ["propose", kind, title] => votes::propose(out, &a, kind, title),
        ["vote", id, choice] => votes::vote(out, &a, id, choice),
        ["cancel", id] => votes::cancel(out, &a, id),
        ["mcp-config", addr] => {
            // Configuration to copy: exact on a terminal too.
            out.exact();
            mcp_config::mcp_config(out, &a, addr)
        }
        ["ps"] => runs::ps(out, &a, None),
        ["ps", pattern] => runs::ps(out, &a, Some(pattern)),
        ["top"] => top::top(out, &a),
        ["stop"] => runs::stop(out, &a, None),
        ["stop", target] => runs::stop(out, &a, Some(target)),
        ["runs"] => runs::runs(out, &a, None, None),
        ["runs", agent] => runs::runs(out, &a, Some(agent), None),
        ["runs", agent, n] => runs::runs(out, &a, Some(agent), Some(n)),
        ["budget"] => budget::show(out, &a),
        ["budget", "reset"] => budget::reset(out, &a),
        ["budget", other] => Err(Error::Usage(format!(
            "budget: unknown subcommand '{}'{}",
            names::sanitize(other),
            crate::suggest::suggestion(other, ["reset"])
        ))
        .hint("aw-ctl budget [reset]")),
        [] => Err(Error::Usage("no command".into()).hint("see aw-ctl --help")),
        [cmd, ..] if COMMANDS.iter().any(|(c, _)| c == cmd) => Err(Error::Usage(format!(
            "wrong number of arguments for '{cmd}'"
        ))
        .hint("see aw-ctl --help")),
        [cmd, ..] => Err(Error::Usage(format!(
            "unknown command '{}'{}",
            names::sanitize(cmd),
            crate::suggest::suggestion(cmd, COMMANDS.iter().map(|(c, _)| *c))
        ))
        .hint("see aw-ctl --help")),
    }
}

/// Say on stderr where a listing that found nothing looked.
pub(super) fn say_empty(a: &Args, what: &str) {
    let Ok(root) = a.common.root() else {
        return;
    };
    let msg = match root.missing() {
        Some(why) => format!("{what}: {why}"),
        None => format!("{what} under {}", root.path().display()),
    };
    crate::warn::warn_note("aw-ctl", &msg);
}

/// The instance for an `agent[@instance]` argument: its own instance, or the common one.
pub(super) fn agent_instance(a: &Args, addr: &str) -> Result<(String, Instance)> {
    let (name, inst) = names::parse_agent_address(addr)?;
    let instance = match inst {
        Some(i) => a.common.root()?.instance(&i)?,
        None => a.common.instance()?,
    };
    Ok((name, instance))
}

pub(super) fn who(a: &Args) -> Result<String> {
    let w = a.as_agent.clone().unwrap_or_else(names::sender_from_env);
    names::check_agent(&w)?;
    Ok(w)
}
