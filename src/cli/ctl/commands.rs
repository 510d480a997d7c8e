//! The table of aw-ctl's commands: name, arguments, help and what runs each. It drives
//! dispatch, arity errors, did-you-mean and the Commands part of `--help`.

use super::{
    Run, agents, approvals, board, budget, docs, hooks, inbox_hook, lease, mcp_config, merge,
    report, runs, session, top, traces, votes, worktree,
};
use crate::cli::flags::{Arg, Cmd, Complete};

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
pub(super) const COMMANDS: &[Cmd<Run>] = &[
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
            "mcp-config NAME@INSTANCE [--codex | --codex-toml] [--collab | --delegate] [--channel]",
            "print the MCP configuration for Claude Code (JSON) or\n\
             Codex (command-line overrides, or config.toml); with --channel,\n\
             new mentions are pushed into the Claude Code session (which\n\
             must load the channel: the launch line is printed on stderr)",
        )],
        run: mcp_config::mcp_config,
        ..NONE
    },
    Cmd {
        name: "inbox-hook",
        args: &[opt("AGENT", Complete::AgentAddress)],
        help: &[(
            "inbox-hook [AGENT[@INSTANCE]]",
            "a Claude Code Stop, SubagentStop or PostToolUse hook: reads the\n\
             hook's JSON on stdin and, while AGENT (default $AW_AGENT) has\n\
             unread messages, answers {\"decision\": \"block\", ...} so the\n\
             session goes on to read them",
        )],
        run: inbox_hook::inbox_hook,
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
    Cmd {
        name: "traces",
        help: &[(
            "traces [--run N] [--json]",
            "the OpenTelemetry spans of run N (one aw-run; the last one\n\
             by default) as a tree: each span's name, duration, outcome,\n\
             tokens and cost",
        )],
        run: traces::traces,
        ..NONE
    },
];
