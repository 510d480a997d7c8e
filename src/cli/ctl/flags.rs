//! The options of `aw-ctl`, each with the commands that take it.

use crate::cli::flags::{self, BASE, Complete, Flag};

/// The commands that print JSON with `--json`.
const JSON: &[&str] = &[
    "ls",
    "doc list",
    "status",
    "proposals",
    "propose",
    "vote",
    "cancel",
    "ps",
    "runs",
    "budget",
    "budget reset",
    "board show",
    "board ls",
    "lease ls",
    "approvals",
    "approvals show",
    "approvals ask",
    "approvals wait",
    "merge ls",
    "merge show",
    "worktree ls",
    "session ls",
    "report",
    "traces",
];

/// The commands that write as someone (`--as`).
const AS: &[&str] = &[
    "doc write",
    "doc append",
    "doc create",
    "doc rm",
    "propose",
    "vote",
    "cancel",
    "board add",
    "board edit",
    "board claim",
    "board done",
    "board drop",
    "board release",
    "board renew",
    "lease take",
    "lease release",
    "lease renew",
    "lease check",
    "approvals ask",
    "approve",
    "reject",
    "merge request",
    "merge cancel",
];

/// The options of aw-ctl, in the order of `--help`.
pub const FLAGS: &[Flag] = &[
    flags::ROOT,
    flags::INSTANCE,
    Flag {
        long: "model",
        short: Some('m'),
        value: Some("MODEL"),
        doc: "(new) the agent's model, e.g. anthropic/claude-sonnet-4-5",
        brief: "the model of the agent",
        cmds: &["new"],
        ..BASE
    },
    Flag {
        long: "backend",
        value: Some("B"),
        doc: "(new) claude, codex, anthropic, openai, exec, mock or external",
        brief: "how the agent is run",
        complete: Complete::Choices(&[
            "claude",
            "codex",
            "anthropic",
            "openai",
            "exec",
            "mock",
            "external",
        ]),
        cmds: &["new"],
        ..BASE
    },
    Flag {
        long: "prompt",
        value: Some("TEXT"),
        doc: "(new) the agent's system prompt",
        cmds: &["new"],
        ..BASE
    },
    Flag {
        long: "prompt-file",
        value: Some("F"),
        doc: "(new) read the system prompt from file F",
        brief: "read the system prompt from a file",
        complete: Complete::File,
        cmds: &["new"],
        ..BASE
    },
    Flag {
        long: "replace",
        doc: "(new) replace an agent that is already registered",
        cmds: &["new"],
        ..BASE
    },
    Flag {
        long: "until",
        value: Some("ID"),
        doc: "(ack) acknowledge up to entry ID",
        cmds: &["ack"],
        ..BASE
    },
    Flag {
        long: "as",
        value: Some("AGENT"),
        doc: "(doc, propose, vote, cancel, board, lease, approvals ask,\n\
              approve, reject, merge) act as AGENT",
        brief: "act as AGENT",
        complete: Complete::AgentOrUser,
        cmds: AS,
        ..BASE
    },
    Flag {
        long: "clear",
        doc: "(doc owner) remove the document owner",
        cmds: &["doc owner"],
        ..BASE
    },
    Flag {
        long: "all",
        doc: "(proposals) list closed proposals too; (stop) every served\n\
              agent of the root (only the instance's with -i); (approvals)\n\
              decided requests too",
        brief: "every proposal or approval, or every served agent of the root",
        cmds: &["proposals", "stop", "approvals"],
        ..BASE
    },
    Flag {
        long: "all-roots",
        doc: "(ps, stop) the served agents of every root, from the user's\n\
              registry of servers (stop names the root on each line)",
        brief: "the served agents of every root",
        cmds: &["ps", "stop"],
        ..BASE
    },
    Flag {
        long: "create",
        doc: "(new, doc write/append/create) create the instance even if an\n\
              existing one has a near name",
        brief: "create the instance even if an existing one has a near name",
        cmds: &["new", "doc write", "doc append", "doc create"],
        ..BASE
    },
    Flag {
        long: "follow",
        short: Some('f'),
        doc: "(runs) follow the agent's attempts as they run",
        cmds: &["runs"],
        ..BASE
    },
    Flag {
        long: "option",
        value: Some("ID[=LABEL]"),
        doc: "(propose) an option; repeat for each",
        brief: "an option: ID or ID=LABEL",
        many: true,
        cmds: &["propose"],
        ..BASE
    },
    Flag {
        long: "rule",
        value: Some("R"),
        doc: "(propose) plurality (default), majority or unanimous",
        brief: "the rule that resolves it",
        complete: Complete::Choices(&["plurality", "majority", "unanimous"]),
        cmds: &["propose"],
        ..BASE
    },
    Flag {
        long: "quorum",
        value: Some("N"),
        doc: "(propose) votes needed (default: number of agents)",
        brief: "votes needed",
        cmds: &["propose"],
        ..BASE
    },
    Flag {
        long: "tie-breaker",
        value: Some("T"),
        doc: "(propose) first (default), random or creator-decides",
        brief: "how a tie is broken",
        complete: Complete::Choices(&["first", "random", "creator-decides"]),
        cmds: &["propose"],
        ..BASE
    },
    Flag {
        long: "binding",
        doc: "(propose) enforce the result (doc-owner elections set the owner)",
        brief: "enforce the result",
        cmds: &["propose"],
        ..BASE
    },
    Flag {
        long: "timeout",
        value: Some("SECS"),
        doc: "(propose) resolve or expire after SECS seconds; (stop) wait\n\
              at most SECS seconds (default 10); (approvals ask) how long the\n\
              approvers have (90s, 5m, 1h; default no limit); (approvals\n\
              wait) how long to wait",
        brief: "seconds to resolve (propose), to answer (approvals ask) or to wait",
        cmds: &["propose", "stop", "approvals ask", "approvals wait"],
        ..BASE
    },
    Flag {
        long: "description",
        value: Some("TEXT"),
        doc: "(propose) longer text for the announcement",
        cmds: &["propose"],
        ..BASE
    },
    Flag {
        long: "id",
        value: Some("ID"),
        doc: "(propose) proposal id (default prop-N)",
        brief: "proposal id",
        cmds: &["propose"],
        ..BASE
    },
    Flag {
        long: "reason",
        value: Some("R"),
        doc: "(vote, lease take, approve, reject) why",
        cmds: &["vote", "lease take", "approve", "reject"],
        ..BASE
    },
    Flag {
        long: "codex",
        doc: "(mcp-config) print Codex command-line overrides",
        cmds: &["mcp-config"],
        ..BASE
    },
    Flag {
        long: "codex-toml",
        doc: "(mcp-config) print a Codex config.toml fragment",
        cmds: &["mcp-config"],
        ..BASE
    },
    Flag {
        long: "collab",
        doc: "(mcp-config) the server gives the collab tools too",
        cmds: &["mcp-config"],
        ..BASE
    },
    Flag {
        long: "delegate",
        doc: "(mcp-config) the server gives only the coordinating tools",
        cmds: &["mcp-config"],
        ..BASE
    },
    Flag {
        long: "channel",
        doc: "(mcp-config) the server pushes new mentions into the session",
        cmds: &["mcp-config"],
        ..BASE
    },
    Flag {
        long: "body",
        value: Some("TEXT"),
        doc: "(board add, edit) the card's body; - reads it from stdin",
        brief: "the card's body (- reads stdin)",
        cmds: &["board add", "board edit"],
        ..BASE
    },
    Flag {
        long: "after",
        value: Some("ID[,ID...]"),
        doc: "(board add, edit) the cards it waits for; repeat or separate with\n\
              commas",
        brief: "the cards it waits for",
        many: true,
        cmds: &["board add", "board edit"],
        ..BASE
    },
    Flag {
        long: "for",
        value: Some("AGENT"),
        doc: "(board add, edit) the agent the card is meant for; several (repeat\n\
              or separate with commas) make a pool",
        brief: "the agent (or pool) the card is meant for",
        complete: Complete::Agent,
        many: true,
        cmds: &["board add", "board edit"],
        ..BASE
    },
    Flag {
        long: "label",
        value: Some("L"),
        doc: "(board add, edit) a label; repeat for each",
        brief: "a label",
        many: true,
        cmds: &["board add", "board edit"],
        ..BASE
    },
    Flag {
        long: "no-label",
        doc: "(board edit) take every label off the card",
        brief: "take the labels off",
        cmds: &["board edit"],
        ..BASE
    },
    Flag {
        long: "title",
        value: Some("T"),
        doc: "(board edit) the card's new title",
        brief: "the card's title",
        cmds: &["board edit"],
        ..BASE
    },
    Flag {
        long: "next",
        doc: "(board claim) the next ready card: the lowest id of those for\n\
              AGENT (alone or in a pool), else of those for no one",
        brief: "claim the next ready card",
        cmds: &["board claim"],
        ..BASE
    },
    Flag {
        long: "ttl",
        value: Some("DURATION"),
        doc: "(board claim, lease take) how long the claim or lease lasts\n\
              unless renewed (90s, 5m, 1h; default 30m)",
        brief: "how long it lasts unless renewed",
        cmds: &["board claim", "lease take"],
        ..BASE
    },
    Flag {
        long: "note",
        value: Some("TEXT"),
        doc: "(board done, drop) the closing note",
        brief: "the closing note",
        cmds: &["board done", "board drop"],
        ..BASE
    },
    Flag {
        long: "ready",
        doc: "(board ls) only the cards one can claim",
        cmds: &["board ls"],
        ..BASE
    },
    Flag {
        long: "mine",
        value: Some("AGENT"),
        doc: "(board ls) only the cards AGENT holds or that are for AGENT",
        brief: "the cards AGENT holds or that are for it",
        complete: Complete::Agent,
        cmds: &["board ls"],
        ..BASE
    },
    Flag {
        long: "shared",
        doc: "(lease take) shared: others may lease the paths shared too",
        brief: "a shared lease",
        cmds: &["lease take"],
        ..BASE
    },
    Flag {
        long: "wait",
        value: Some("DURATION"),
        doc: "(lease take) wait up to DURATION for the leases in the way",
        brief: "wait for the leases in the way",
        cmds: &["lease take"],
        ..BASE
    },
    Flag {
        long: "card",
        value: Some("ID"),
        doc: "(lease take) the card the lease goes with (default: the one card\n\
              AGENT holds); released when the card is done or dropped",
        brief: "the card the lease goes with",
        cmds: &["lease take"],
        ..BASE
    },
    Flag {
        long: "force",
        doc: "(hooks install) replace aw's guard even if it was edited;\n\
              (worktree rm) remove it with its changes, even while served",
        brief: "replace an edited guard, remove a changed worktree",
        cmds: &["hooks install", "worktree rm"],
        ..BASE
    },
    Flag {
        long: "by",
        value: Some("AGENT[,AGENT...]"),
        doc: "(approvals ask) who may approve: agents, or a person such as\n\
              user; repeat or separate with commas",
        brief: "who may approve",
        many: true,
        complete: Complete::AgentOrUser,
        cmds: &["approvals ask"],
        ..BASE
    },
    Flag {
        long: "kind",
        value: Some("K"),
        doc: "(approvals ask) what is asked: task (default), run, merge or tool",
        brief: "what is asked",
        complete: Complete::Choices(&["task", "run", "merge", "tool"]),
        cmds: &["approvals ask"],
        ..BASE
    },
    Flag {
        long: "details",
        value: Some("TEXT"),
        doc: "(approvals ask) more about what is asked; - reads it from stdin",
        brief: "more about what is asked (- reads stdin)",
        cmds: &["approvals ask"],
        ..BASE
    },
    Flag {
        long: "then",
        value: Some("fail|skip|AGENT"),
        doc: "(approvals ask) when --timeout runs out: fail (default), skip,\n\
              or ask AGENT instead",
        brief: "what happens when the time runs out",
        cmds: &["approvals ask"],
        ..BASE
    },
    Flag {
        long: "key",
        value: Some("KEY"),
        doc: "(approvals ask) asking again with the same key gives the request\n\
              asked first (a script started again asks once)",
        brief: "asking again with it gives the first request",
        cmds: &["approvals ask"],
        ..BASE
    },
    Flag {
        long: "replies",
        doc: "(approvals ask) an approver may also answer in the channel:\n\
              approve #ID, or reject #ID: REASON",
        brief: "approvers may answer in the channel",
        cmds: &["approvals ask"],
        ..BASE
    },
    Flag {
        long: "wait",
        doc: "(approvals ask) wait for the decision: exit 0 approved, 1 not",
        brief: "wait for the decision",
        cmds: &["approvals ask"],
        ..BASE
    },
    Flag {
        long: "branch",
        value: Some("B"),
        doc: "(merge request) the branch to merge (default: the agent's,\n\
              aw/INSTANCE/AGENT)",
        brief: "the branch to merge",
        cmds: &["merge request"],
        ..BASE
    },
    Flag {
        long: "into",
        value: Some("T"),
        doc: "(merge request) the target branch (default: _state/merge.json's,\n\
              else main)",
        brief: "the target branch",
        cmds: &["merge request"],
        ..BASE
    },
    Flag {
        long: "how",
        value: Some("HOW"),
        doc: "(merge request) rebase (the default) or merge (a merge commit)",
        brief: "rebase or merge",
        complete: Complete::Choices(&["rebase", "merge"]),
        cmds: &["merge request"],
        ..BASE
    },
    Flag {
        long: "verify",
        value: Some("CMD"),
        doc: "(merge request) the shell command that must pass on the result\n\
              before the target moves (default: _state/merge.json's)",
        brief: "the command that must pass before the target moves",
        cmds: &["merge request"],
        ..BASE
    },
    Flag {
        long: "no-wait",
        doc: "(merge request) only queue the request: print its id and exit",
        brief: "only queue the request",
        cmds: &["merge request"],
        ..BASE
    },
    Flag {
        long: "run",
        value: Some("N"),
        doc: "(report) only run N: the attempts of one aw-run process, and\n\
              the messages written while it ran; (traces) the trace of run N\n\
              (default: the last)",
        brief: "only run N (one aw-run)",
        cmds: &["report", "traces"],
        ..BASE
    },
    Flag {
        long: "output",
        short: Some('o'),
        value: Some("FILE"),
        doc: "(report) write to FILE (atomically, private) instead of stdout",
        brief: "write to FILE",
        complete: Complete::File,
        cmds: &["report"],
        ..BASE
    },
    Flag {
        long: "json",
        doc: "JSON Lines output",
        cmds: JSON,
        ..BASE
    },
    flags::GENERATE,
    flags::HELP,
    flags::VERSION,
];
