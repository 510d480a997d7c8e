//! `aw-ctl`: register agents, list instances, acknowledge inboxes, manage documents, run
//! votes, print MCP configurations, and watch and stop the agents aw-run serves. This module
//! parses the command line and dispatches.

mod agents;
mod approvals;
mod board;
mod budget;
mod docs;
mod hooks;
mod lease;
mod mcp_config;
mod merge;
mod report;
mod runs;
mod session;
mod top;
mod votes;
mod worktree;

mod flags;

pub use self::flags::FLAGS;
use crate::cli::complete::{Operands, Tool};
use crate::cli::flags::{self as table, Arg, Cmd, Complete, Flag};
use crate::cli::{self, Common, Out};
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::names;

/// What `--help` says before the commands.
const ABOUT: &str = "\
aw-ctl - manage aw instances, agents, inboxes and documents

Usage: aw-ctl [--root DIR] [-i NAME] <COMMAND> [ARGS]
";

/// What `--help` says after the commands.
const AFTER_COMMANDS: &str = "  \
(doc, propose, vote, cancel, board, lease, approvals ask, approve, reject and merge
  take --as AGENT: who acts, default $AW_AGENT or 'user'; lease paths are relative to
  the work tree: the git top level, else the directory that holds .workflow/)
";

/// What `--help` says after the options.
const EXIT: &str = "\
Exit status: 0 ok, 1 no document owner set (doc owner), not served (stop), no card
ready (board claim), no lease released (lease release), a path leased by another
(lease check), not approved (approvals ask --wait, approvals wait), a merge request
that conflicts or fails (merge request) or is no longer queued (merge cancel), a
worktree with changes or whose agent is served (worktree rm), 64 usage, 65 bad name
or data (or a path out of the work tree), an approval decided already, or a run the
instance does not have (report), 66 no such instance, agent, document, run, card,
lease, approval, merge request, branch or worktree (or no git work tree: hooks), 69
git not runnable (merge, worktree), 73 cannot create (exists, or a hook in the way:
hooks install), 74 I/O error, 75 lock timeout, still served after the wait (stop),
card held by another (board) or path leased by another (lease take), 77 not the
document owner, not an approver of the request (approve, reject), a root found above
that is not trusted, a server record of another user (stop), a lease of another or
permission denied, 130 interrupted.
";

/// What runs a command: with the command line, and the command's arguments (as many as its
/// entry of [`COMMANDS`] says).
type Run = fn(&mut Out, &Call, &[&str]) -> Result<u8>;

const fn arg(name: &'static str, complete: Complete) -> Arg {
    Arg {
        name,
        optional: false,
        many: false,
        complete,
    }
}

const fn opt(name: &'static str, complete: Complete) -> Arg {
    Arg {
        name,
        optional: true,
        many: false,
        complete,
    }
}

/// Any number of arguments, at least one: `PATH...`.
const fn some(name: &'static str, complete: Complete) -> Arg {
    Arg {
        name,
        optional: false,
        many: true,
        complete,
    }
}

/// Any number of arguments, none included: `[PATH...]`.
const fn any(name: &'static str, complete: Complete) -> Arg {
    Arg {
        name,
        optional: true,
        many: true,
        complete,
    }
}

/// A command with no argument and no program.
const NONE: Cmd<Run> = Cmd {
    name: "",
    args: &[],
    program: false,
    help: &[],
    run: |_, _, _| Ok(0),
};

/// The commands of aw-ctl, in the order of `--help`: each with its arguments, its lines
/// of help and what runs it. The options each takes are in [`FLAGS`].
const COMMANDS: &[Cmd<Run>] = &[
    Cmd {
        name: "new",
        args: &[arg("NAME", Complete::Text)],
        program: true,
        help: &[(
            "new NAME [-m MODEL] [--backend B] [--prompt TEXT | --prompt-file F] [--replace]\n    \
             [-- PROGRAM [ARG...]]",
            "register an agent (NAME or NAME@INSTANCE); starts nothing;\n\
             an exec agent needs its command after --",
        )],
        run: agents::new,
    },
    Cmd {
        name: "rm",
        args: &[arg("NAME", Complete::Agent)],
        help: &[("rm NAME", "unregister an agent")],
        run: agents::rm,
        ..NONE
    },
    Cmd {
        name: "ls",
        help: &[(
            "ls [--json]",
            "instances, their agents, entry counts and unread counts",
        )],
        run: agents::ls,
        ..NONE
    },
    Cmd {
        name: "ack",
        args: &[arg("AGENT", Complete::Agent)],
        help: &[(
            "ack AGENT [--until ID]",
            "acknowledge AGENT's inbox up to ID (default: the newest entry)",
        )],
        run: agents::ack,
        ..NONE
    },
    Cmd {
        name: "doc read",
        args: &[opt("FILE", Complete::Document)],
        help: &[("doc read [FILE]", "print a document (default notes.md)")],
        run: docs::read,
        ..NONE
    },
    Cmd {
        name: "doc write",
        args: &[opt("FILE", Complete::Document)],
        help: &[("doc write [FILE]", "replace a document with stdin")],
        run: docs::write,
        ..NONE
    },
    Cmd {
        name: "doc append",
        args: &[opt("FILE", Complete::Document)],
        help: &[("doc append [FILE]", "append stdin to a document")],
        run: docs::append,
        ..NONE
    },
    Cmd {
        name: "doc create",
        args: &[arg("FILE", Complete::Text)],
        help: &[(
            "doc create FILE",
            "create a new document from stdin (fails if it exists)",
        )],
        run: docs::create,
        ..NONE
    },
    Cmd {
        name: "doc list",
        args: &[opt("PATTERN", Complete::Text)],
        help: &[(
            "doc list [PATTERN]",
            "list documents (those matching PATTERN, e.g. 'findings/*.md')",
        )],
        run: docs::list,
        ..NONE
    },
    Cmd {
        name: "doc rm",
        args: &[arg("FILE", Complete::Document)],
        help: &[("doc rm FILE", "delete a document")],
        run: docs::rm,
        ..NONE
    },
    Cmd {
        name: "doc owner",
        args: &[opt("NAME", Complete::Agent)],
        help: &[(
            "doc owner [NAME | --clear]",
            "show, set or clear the document owner",
        )],
        run: docs::owner,
        ..NONE
    },
    Cmd {
        name: "status",
        args: &[opt("NAME", Complete::Agent)],
        help: &[(
            "status [NAME | PATTERN] [--json]",
            "agents' state, task and unread counts; active proposals,\n\
             merge requests not served yet, pending approvals\n\
             (PATTERN: agent names with * ? [..], e.g. 'worker-*')",
        )],
        run: agents::status,
        ..NONE
    },
    Cmd {
        name: "proposals",
        help: &[(
            "proposals [--all] [--json]",
            "active proposals (--all: every proposal)",
        )],
        run: votes::proposals,
        ..NONE
    },
    Cmd {
        name: "propose",
        args: &[
            arg(
                "TYPE",
                Complete::Choices(&["election", "decision", "approval", "assignment"]),
            ),
            arg("TITLE", Complete::Text),
        ],
        help: &[(
            "propose TYPE TITLE [--option ID[=LABEL]]... [--rule R] [--quorum N]\n        \
             [--tie-breaker T] [--binding] [--timeout SECS] [--description TEXT] [--id ID]",
            "create a proposal (election, decision, approval, assignment)",
        )],
        run: votes::propose,
        ..NONE
    },
    Cmd {
        name: "vote",
        args: &[
            arg("PROPOSAL", Complete::Text),
            arg("CHOICE", Complete::Text),
        ],
        help: &[(
            "vote PROPOSAL CHOICE [--reason R]",
            "vote (votes are final)",
        )],
        run: votes::vote,
        ..NONE
    },
    Cmd {
        name: "cancel",
        args: &[arg("PROPOSAL", Complete::Text)],
        help: &[("cancel PROPOSAL", "cancel a proposal you created")],
        run: votes::cancel,
        ..NONE
    },
    Cmd {
        name: "mcp-config",
        args: &[arg("NAME@INSTANCE", Complete::AgentAddress)],
        help: &[(
            "mcp-config NAME@INSTANCE [--codex | --codex-toml] [--collab | --delegate]",
            "print the MCP configuration for Claude Code (JSON) or\n\
             Codex (command-line overrides, or config.toml)",
        )],
        run: mcp_config::mcp_config,
        ..NONE
    },
    Cmd {
        name: "ps",
        args: &[opt("PATTERN", Complete::Text)],
        help: &[(
            "ps [PATTERN | --all-roots] [--json]",
            "agents served by aw-run: instance, agent, host, pid, state, runs\n\
             (PATTERN: AGENT[@INSTANCE] with * ? [..], e.g. 'worker-*@team';\n\
             --all-roots: the user's servers of every root)",
        )],
        run: runs::ps,
        ..NONE
    },
    Cmd {
        name: "top",
        help: &[(
            "top",
            "a full-screen live view of the instance's agents and channel\n(q quits)",
        )],
        run: top::top,
        ..NONE
    },
    Cmd {
        name: "stop",
        args: &[opt("TARGET", Complete::Target)],
        help: &[(
            "stop AGENT[@INSTANCE] | PATTERN | @INSTANCE | --all | --all-roots",
            "ask the aw-run serving them, on any host, to finish; wait up\n\
             to 10 s (--timeout)",
        )],
        run: runs::stop,
        ..NONE
    },
    Cmd {
        name: "runs",
        args: &[opt("AGENT", Complete::Agent), opt("N", Complete::Text)],
        help: &[
            (
                "runs [AGENT] [--json]",
                "the transcripts of the agents' runs",
            ),
            ("runs AGENT N [--json]", "show transcript N of AGENT"),
            (
                "runs -f AGENT",
                "follow AGENT's output as it runs, attempt after attempt,\n\
                 until no aw-run serves it",
            ),
        ],
        run: runs::runs,
        ..NONE
    },
    Cmd {
        name: "budget",
        help: &[(
            "budget [--json]",
            "what the instance spent across runs of aw-run, and its budget",
        )],
        run: budget::show,
        ..NONE
    },
    Cmd {
        name: "budget reset",
        help: &[(
            "budget reset [--json]",
            "start counting the instance's spending again from nothing",
        )],
        run: budget::reset,
        ..NONE
    },
    Cmd {
        name: "board add",
        args: &[arg("TITLE", Complete::Text)],
        help: &[(
            "board add TITLE [--body TEXT | --body -] [--after ID[,ID...]]\n        \
             [--for AGENT[,AGENT...]] [--label L]...",
            "add a card to the board (--body -: read it from stdin);\n\
             prints its id",
        )],
        run: board::add,
        ..NONE
    },
    Cmd {
        name: "board edit",
        args: &[arg("ID", Complete::Text)],
        help: &[(
            "board edit ID [--title T] [--body TEXT | --body -]\n        \
             [--after ID[,ID...]] [--for AGENT[,AGENT...]] [--label L]... [--no-label]",
            "change a card that is not done or dropped (--after, --for,\n\
             --label: all of them); prints its id",
        )],
        run: board::edit,
        ..NONE
    },
    Cmd {
        name: "board claim",
        args: &[opt("ID", Complete::Text)],
        help: &[(
            "board claim (ID | --next) [--ttl DURATION]",
            "claim a card, or the next ready one; prints its id (exit 1:\n\
             none is ready, 75: it is held)",
        )],
        run: board::claim,
        ..NONE
    },
    Cmd {
        name: "board renew",
        args: &[arg("ID", Complete::Text)],
        help: &[("board renew ID", "extend your claim by its time to live")],
        run: board::renew,
        ..NONE
    },
    Cmd {
        name: "board release",
        args: &[arg("ID", Complete::Text)],
        help: &[(
            "board release ID",
            "give up your claim: the card is open again",
        )],
        run: board::release,
        ..NONE
    },
    Cmd {
        name: "board done",
        args: &[arg("ID", Complete::Text)],
        help: &[(
            "board done ID [--note TEXT]",
            "finish a card, with a closing note",
        )],
        run: board::done,
        ..NONE
    },
    Cmd {
        name: "board drop",
        args: &[arg("ID", Complete::Text)],
        help: &[(
            "board drop ID [--note TEXT]",
            "drop a card: it will not be done",
        )],
        run: board::drop,
        ..NONE
    },
    Cmd {
        name: "board show",
        args: &[arg("ID", Complete::Text)],
        help: &[("board show ID [--json]", "a card, its body and its history")],
        run: board::show,
        ..NONE
    },
    Cmd {
        name: "board ls",
        help: &[(
            "board ls [--ready] [--mine AGENT] [--json]",
            "the cards (--ready: those one can claim; --mine: those AGENT\n\
             holds or that are for AGENT)",
        )],
        run: board::ls,
        ..NONE
    },
    Cmd {
        name: "lease take",
        args: &[some("PATH", Complete::File)],
        help: &[(
            "lease take PATH|GLOB... [--shared] [--ttl DURATION] [--reason TEXT]\n        \
             [--wait DURATION] [--card ID]",
            "lease paths of the work tree; prints its id (exit 75: one is\n\
             leased by another, named with until when and why)",
        )],
        run: lease::take,
        ..NONE
    },
    Cmd {
        name: "lease release",
        args: &[any("ID|PATH", Complete::File)],
        help: &[(
            "lease release (ID | [PATH...])",
            "release a lease, or your leases (those naming PATH);\n\
             prints the ids released (exit 1: none)",
        )],
        run: lease::release,
        ..NONE
    },
    Cmd {
        name: "lease renew",
        args: &[arg("ID", Complete::Text)],
        help: &[("lease renew ID", "extend your lease by its time to live")],
        run: lease::renew,
        ..NONE
    },
    Cmd {
        name: "lease ls",
        help: &[("lease ls [--json]", "the leases held, one a line")],
        run: lease::ls,
        ..NONE
    },
    Cmd {
        name: "lease check",
        args: &[some("PATH", Complete::File)],
        help: &[(
            "lease check PATH...",
            "exit 1 when a path is leased by someone other than you,\n\
             printing who holds what",
        )],
        run: lease::check,
        ..NONE
    },
    Cmd {
        name: "hooks install",
        help: &[(
            "hooks install [--force]",
            "install the git pre-commit guard: a commit touching a path\n\
             leased by someone else is refused (a hook there runs first)",
        )],
        run: hooks::install,
        ..NONE
    },
    Cmd {
        name: "hooks uninstall",
        help: &[(
            "hooks uninstall",
            "remove the guard, putting back the hook that was there",
        )],
        run: hooks::uninstall,
        ..NONE
    },
    Cmd {
        name: "approvals",
        help: &[(
            "approvals [--all] [--json]",
            "the pending approval requests (--all: every one)",
        )],
        run: approvals::ls,
        ..NONE
    },
    Cmd {
        name: "approvals show",
        args: &[arg("ID", Complete::Text)],
        help: &[(
            "approvals show ID [--json]",
            "an approval request, its details and its decision",
        )],
        run: approvals::show,
        ..NONE
    },
    Cmd {
        name: "approvals ask",
        args: &[arg("WHAT", Complete::Text)],
        help: &[(
            "approvals ask WHAT --by AGENT[,AGENT...] [--kind K] [--details TEXT | -]\n        \
             [--timeout DURATION] [--then fail|skip|AGENT] [--key KEY] [--replies]\n        \
             [--wait]",
            "ask for an approval (posted in the channel); prints its id;\n\
             --wait: wait, exit 0 approved, 1 rejected, expired or skipped",
        )],
        run: approvals::ask,
        ..NONE
    },
    Cmd {
        name: "approvals wait",
        args: &[arg("ID", Complete::Text)],
        help: &[(
            "approvals wait ID [--timeout DURATION]",
            "wait for a decision: exit 0 approved, 1 rejected, expired,\n\
             skipped or still pending after --timeout",
        )],
        run: approvals::wait,
        ..NONE
    },
    Cmd {
        name: "approve",
        args: &[arg("ID", Complete::Text)],
        help: &[(
            "approve ID [--reason TEXT]",
            "approve a request you are an approver of (exit 77: you are\n\
             not, 65: it is decided already)",
        )],
        run: approvals::approve,
        ..NONE
    },
    Cmd {
        name: "reject",
        args: &[arg("ID", Complete::Text)],
        help: &[(
            "reject ID [--reason TEXT]",
            "reject a request, with a reason",
        )],
        run: approvals::reject,
        ..NONE
    },
    Cmd {
        name: "merge request",
        args: &[opt("AGENT", Complete::Agent)],
        help: &[(
            "merge request [AGENT] [--branch B] [--into T] [--how rebase|merge]\n        \
             [--verify CMD] [--no-wait]",
            "ask to merge AGENT's branch (aw/INSTANCE/AGENT, or B) into T;\n\
             prints its id and serves the queue until it is served (exit 1:\n\
             conflict or failed)",
        )],
        run: merge::request,
        ..NONE
    },
    Cmd {
        name: "merge ls",
        help: &[(
            "merge ls [--json]",
            "the merge requests: id, agent, branch, into, state, asked, result",
        )],
        run: merge::ls,
        ..NONE
    },
    Cmd {
        name: "merge show",
        args: &[arg("ID", Complete::Text)],
        help: &[(
            "merge show ID [--json]",
            "a merge request and the output of its last attempt",
        )],
        run: merge::show,
        ..NONE
    },
    Cmd {
        name: "merge cancel",
        args: &[arg("ID", Complete::Text)],
        help: &[("merge cancel ID", "cancel a merge request still queued")],
        run: merge::cancel,
        ..NONE
    },
    Cmd {
        name: "merge serve",
        help: &[(
            "merge serve",
            "serve the merge queue until it is empty (unless another\n\
             process serves it)",
        )],
        run: merge::serve,
        ..NONE
    },
    Cmd {
        name: "worktree ls",
        help: &[(
            "worktree ls [--json]",
            "the agents' worktrees: agent, path, branch, commit, clean,\n\
             dirty or missing, commits ahead of and behind the target",
        )],
        run: worktree::ls,
        ..NONE
    },
    Cmd {
        name: "worktree rm",
        args: &[arg("AGENT", Complete::Agent)],
        help: &[(
            "worktree rm AGENT [--force]",
            "remove AGENT's worktree (not one with changes, unless --force);\n\
             its branch too when it is merged into its target",
        )],
        run: worktree::rm,
        ..NONE
    },
    Cmd {
        name: "session ls",
        help: &[("session ls [--json]", "the agents' kept CLI sessions")],
        run: session::ls,
        ..NONE
    },
    Cmd {
        name: "session reset",
        args: &[arg("AGENT", Complete::Agent)],
        help: &[("session reset AGENT", "forget AGENT's kept CLI session")],
        run: session::reset,
        ..NONE
    },
    Cmd {
        name: "report",
        help: &[(
            "report [--run N] [-o FILE] [--json]",
            "what happened in the instance, or in its run N (one aw-run),\n\
             as one self-contained HTML page: a timeline per agent, who\n\
             woke whom, tokens and cost, failures, messages, cards,\n\
             approvals and merges",
        )],
        run: report::report,
        ..NONE
    },
];

/// The help text: about, commands, options, exit status.
pub fn help() -> String {
    format!(
        "{ABOUT}\nCommands:\n{}{AFTER_COMMANDS}\nOptions:\n{}\n{EXIT}",
        table::commands(COMMANDS, 25),
        table::options(FLAGS, 23)
    )
}

/// What the completions know of aw-ctl.
fn tool() -> Tool<'static, Run> {
    Tool {
        name: "aw-ctl",
        help,
        flags: FLAGS,
        args: Operands::Commands,
        commands: COMMANDS,
    }
}

/// An option given, as its table names it, written and with its value.
#[derive(Debug)]
struct Given {
    flag: &'static Flag,
    shown: String,
    value: Option<String>,
}

/// The command line: the common options, the words, the other options given.
#[derive(Debug, Default)]
pub(super) struct Call {
    pub(super) common: Common,
    words: Vec<String>,
    given: Vec<Given>,
    /// The words after `new NAME ... --`: an exec agent's command.
    pub(super) command: Option<Vec<String>>,
}

impl Call {
    /// Is the option `long` one of the table's (a slip in a command's parser)?
    fn known(long: &str) {
        debug_assert!(
            FLAGS.iter().any(|f| f.long == long),
            "--{long} is not in the table of flags"
        );
    }

    /// Was the option `--long` given?
    pub(super) fn has(&self, long: &str) -> bool {
        Call::known(long);
        self.given.iter().any(|g| g.flag.long == long)
    }

    /// Every value given to `--long`, in order.
    pub(super) fn strings(&self, long: &str) -> Vec<String> {
        Call::known(long);
        self.given
            .iter()
            .filter(|g| g.flag.long == long)
            .filter_map(|g| g.value.clone())
            .collect()
    }

    /// The value of `--long`: the last one given.
    pub(super) fn string(&self, long: &str) -> Option<String> {
        self.strings(long).pop()
    }

    /// The value of `--long`, a number.
    pub(super) fn number<T: std::str::FromStr>(&self, long: &str) -> Result<Option<T>> {
        self.string(long)
            .map(|v| cli::parse_number(&v, &format!("--{long}")))
            .transpose()
    }
}

/// Read the command line; `Err(code)`: the help, version or completions were printed.
fn parse(out: &mut Out) -> Result<std::result::Result<Call, u8>> {
    use lexopt::prelude::*;
    let mut a = Call::default();
    let mut p = lexopt::Parser::from_env();
    // Options of two flags of one name given before the command (see `twin`), and the word
    // right after each, which may be its value.
    let mut undecided: Vec<(usize, Option<usize>)> = Vec::new();
    let mut after_undecided = false;
    loop {
        // `new NAME ... -- PROGRAM [ARG...]`: everything after `--` is the command, taken
        // as it is (options included).
        if a.words.len() == 2
            && COMMANDS.iter().any(|c| c.program && c.name == a.words[0])
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
        let follows = std::mem::take(&mut after_undecided);
        if let Some(k) = Common::key(&arg) {
            a.common.set(k, &mut p)?;
            continue;
        }
        if let Value(v) = arg {
            if follows && let Some((_, word)) = undecided.last_mut() {
                *word = Some(a.words.len());
            }
            a.words.push(
                v.into_string()
                    .map_err(|_| Error::invalid("argument is not valid UTF-8"))?,
            );
            continue;
        }
        let Some(first) = table::find(FLAGS, &arg) else {
            return Err(cli::unexpected(arg, FLAGS));
        };
        if first.cmds.is_empty() {
            return cli::common_flag(out, first, &mut p, &tool()).map(Err);
        }
        let shown = match arg {
            Short(c) => format!("-{c}"),
            _ => first.dashed(),
        };
        let Some(flag) = twin(first, &a.words) else {
            // Which of the two it is, and so whether it takes the next word, is known once
            // the command is: `--wait=5s` says it here.
            let value = p.optional_value().map(|v| {
                v.into_string()
                    .map_err(|_| Error::Usage(format!("{shown}: value is not valid UTF-8")))
            });
            let value = value.transpose()?;
            after_undecided = value.is_none();
            undecided.push((a.given.len(), None));
            a.given.push(Given {
                flag: first,
                shown,
                value,
            });
            continue;
        };
        let value = match flag.value {
            Some(_) => Some(cli::string(&mut p, &flag.dashed())?),
            None => None,
        };
        a.given.push(Given { flag, shown, value });
    }
    decide(&mut a, undecided)?;
    Ok(Ok(a))
}

/// Of two flags of one name (`--wait` of `lease take` takes a time, that of `approvals
/// ask` none), the one the command named by `words` takes (the one without a value when it
/// takes neither); `None` when no command is named yet. Any other flag is itself.
fn twin(first: &'static Flag, words: &[String]) -> Option<&'static Flag> {
    let mut same = FLAGS.iter().filter(|f| f.long == first.long);
    if same.clone().count() == 1 {
        return Some(first);
    }
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let (cmd, _) = command(&words).ok()?;
    // A command that takes neither refuses it: the word after it is no value of it.
    let none = same.clone().find(|f| f.value.is_none()).unwrap_or(first);
    Some(same.find(|f| f.takes(cmd.name)).unwrap_or(none))
}

/// Decide the options of two flags given before the command: the flag the command takes,
/// with the word that followed as its value when that flag takes one (`aw-ctl --wait 5s
/// lease take ...`), else the word left a word (`aw-ctl --wait approvals ask ...`).
fn decide(a: &mut Call, undecided: Vec<(usize, Option<usize>)>) -> Result<()> {
    for (g, word) in undecided.into_iter().rev() {
        let long = a.given[g].flag.long;
        let taken = |words: &[String]| {
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let (cmd, _) = command(&words).ok()?;
            FLAGS.iter().find(|f| f.long == long && f.takes(cmd.name))
        };
        if let Some(i) = word {
            let mut rest = a.words.clone();
            let value = rest.remove(i);
            if let Some(flag) = taken(&rest).filter(|f| f.value.is_some()) {
                a.words = rest;
                a.given[g].flag = flag;
                a.given[g].value = Some(value);
                continue;
            }
        }
        let Some(flag) = taken(&a.words) else {
            continue;
        };
        let given = &mut a.given[g];
        match (flag.value, &given.value) {
            (Some(_), None) => {
                return Err(Error::Usage(format!("{} needs a value", given.shown)));
            }
            (None, Some(_)) => {
                let e = lexopt::Error::UnexpectedValue {
                    option: given.shown.clone(),
                    value: given.value.clone().unwrap_or_default().into(),
                };
                return Err(cli::lex_err(e));
            }
            _ => given.flag = flag,
        }
    }
    Ok(())
}

/// The command that the words name, and how many of the words name it.
fn command(words: &[&str]) -> Result<(&'static Cmd<Run>, usize)> {
    let hint = "see aw-ctl --help";
    let Some(first) = words.first() else {
        return Err(Error::Usage("no command".into()).hint(hint));
    };
    let family: Vec<&Cmd<Run>> = COMMANDS.iter().filter(|c| c.words().0 == *first).collect();
    if family.is_empty() {
        return Err(Error::Usage(format!(
            "unknown command '{}'{}",
            names::sanitize(first),
            crate::suggest::suggestion(first, table::command_names(COMMANDS))
        ))
        .hint(hint));
    }
    let subs: Vec<&str> = family.iter().filter_map(|c| c.words().1).collect();
    if let Some(c) = family
        .iter()
        .find(|c| c.words().1.is_some() && c.words().1 == words.get(1).copied())
    {
        return Ok((c, 2));
    }
    let near = |w: &str| crate::suggest::suggestion(w, subs.iter().copied());
    match (family.iter().find(|c| c.words().1.is_none()), words.get(1)) {
        // A command of its own with subcommands: a word after it is a subcommand.
        (Some(c), Some(w)) if c.args.is_empty() && !subs.is_empty() => Err(Error::Usage(format!(
            "{first}: unknown subcommand '{}'{}",
            names::sanitize(w),
            near(w)
        ))
        .hint(format!("aw-ctl {first} [{}]", subs.join(" | ")))),
        (Some(c), _) => Ok((c, 1)),
        (None, None) => Err(Error::Usage(format!("{first}: missing subcommand")).hint(hint)),
        (None, Some(w)) => Err(Error::Usage(format!(
            "{first} {}: unknown subcommand or wrong arguments{}",
            names::sanitize(w),
            near(w)
        ))
        .hint(hint)),
    }
}

/// Refuse (64) an option that `cmd` does not take.
fn check_options(cmd: &Cmd<Run>, given: &[Given]) -> Result<()> {
    let takes: Vec<String> = FLAGS
        .iter()
        .filter(|f| f.cmds.contains(&cmd.name))
        .map(Flag::dashed)
        .collect();
    for g in given {
        if !g.flag.takes(cmd.name) {
            let near =
                crate::suggest::suggestion(&g.flag.dashed(), takes.iter().map(String::as_str));
            let msg = match takes.is_empty() {
                true => format!("{} takes no option, not {}", cmd.name, g.shown),
                false => format!(
                    "{} takes no {}{near} (it takes {})",
                    cmd.name,
                    g.shown,
                    takes.join(", ")
                ),
            };
            return Err(Error::Usage(msg).hint("see aw-ctl --help"));
        }
    }
    Ok(())
}

pub fn run(out: &mut Out) -> Result<u8> {
    let a = match parse(out)? {
        Ok(a) => a,
        Err(code) => return Ok(code),
    };
    let words: Vec<&str> = a.words.iter().map(String::as_str).collect();
    let (cmd, n) = command(&words)?;
    check_options(cmd, &a.given)?;
    let args = &words[n..];
    let (min, max) = cmd.arity();
    if args.len() < min || args.len() > max {
        return Err(
            Error::Usage(format!("wrong number of arguments for '{}'", cmd.name))
                .hint("see aw-ctl --help"),
        );
    }
    if a.has("json") {
        out.exact();
    }
    (cmd.run)(out, &a, args)
}

/// Say on stderr where a listing that found nothing looked.
pub(super) fn say_empty(common: &Common, what: &str) {
    let Ok(root) = common.root() else {
        return;
    };
    let msg = match root.missing() {
        Some(why) => format!("{what}: {why}"),
        None => format!("{what} under {}", root.path().display()),
    };
    crate::warn::warn_note("aw-ctl", &msg);
}

/// The instance for an `agent[@instance]` argument: its own instance, or the common one.
pub(super) fn agent_instance(common: &Common, addr: &str) -> Result<(String, Instance)> {
    let (name, inst) = names::parse_agent_address(addr)?;
    let instance = match inst {
        Some(i) => common.root()?.instance(&i)?,
        None => common.instance()?,
    };
    Ok((name, instance))
}

/// Who acts: `--as`, else `$AW_AGENT`, else `user`.
pub(super) fn who(a: &Call) -> Result<String> {
    let w = a.string("as").unwrap_or_else(names::sender_from_env);
    names::check_agent(&w)?;
    Ok(w)
}
