//! The options of `aw-run`, and the text of its `--help` around them.

use crate::cli::complete::{Operands, Tool};
use crate::cli::flags::{self, BASE, Complete, Flag};

/// What `--help` says before the options.
const ABOUT: &str = "\
aw-run - run a workflow file: its agents, setup and kickoff

Usage: aw-run [OPTIONS] FILE
       aw-run --iter N|DURATION [--agent NAME] [--resume] [OPTIONS] FILE
       aw-run --serve [OPTIONS] [AGENT[@INSTANCE]...]
       aw-run --check FILE

Registers the workflow's agents, runs its setup, posts its kickoff, then runs each agent
when it is mentioned, until every agent is idle with nothing unread (with --keep: until
stopped). Prints the channel's new entries on stdout and one line per run on stderr.
";

/// What `--help` says after the options.
const EXIT: &str = "\
Exit status: 0 done or stopped by SIGTERM (aw-ctl stop), 1 an agent failed for good,
the loop guard, a budget or the timeout stopped the run, or a setup task failed,
64 usage,
65 bad workflow file, 66 no such file, instance or agent, 69 backend unavailable,
73 cannot create, 74 I/O error, 75 agent already served, 77 permission denied,
130 interrupted (SIGINT). Serving several instances: the highest of theirs.
";

/// The options of aw-run.
pub const FLAGS: &[Flag] = &[
    flags::ROOT,
    Flag {
        doc: "instance (default: $AW_INSTANCE or the workflow's name); with\n\
              --serve and no AGENT, repeatable: every runnable agent of\n\
              each instance",
        many: true,
        ..flags::INSTANCE
    },
    Flag {
        long: "check",
        doc: "check the file and what its agents need (CLIs, keys, programs)\n\
              in one pass; every problem as FILE:LINE:COL: what (with\n\
              --json: one JSON line each on stdout)",
        ..BASE
    },
    Flag {
        long: "var",
        value: Some("NAME=VALUE"),
        doc: "define a variable (repeatable)",
        many: true,
        ..BASE
    },
    Flag {
        long: "keep",
        doc: "stay until stopped (aw-ctl stop, SIGTERM, SIGINT)",
        ..BASE
    },
    Flag {
        long: "create",
        doc: "create the instance named by -i or AW_INSTANCE even if an\n\
              existing one has a near name (else refused as a likely typo)",
        ..BASE
    },
    Flag {
        long: "detach",
        doc: "run in the background; print its pid (and on stderr the log\n\
              and how to stop it); log to _state/aw-run.log",
        ..BASE
    },
    Flag {
        long: "serve",
        doc: "serve agents registered with aw-ctl new (all runnable ones, or\n\
              the AGENTs named), without a workflow file; AGENT@INSTANCE\n\
              names an agent of another instance: one process serves the\n\
              agents of several instances, each line saying which",
        ..BASE
    },
    Flag {
        long: "iter",
        value: Some("N|DUR"),
        doc: "run one agent on the kickoff, its task, N times or until DUR\n\
              (30s, 5m, 2h) has passed, or until it says it is done; in a\n\
              git work tree each iteration that changed files is committed",
        ..BASE
    },
    Flag {
        long: "agent",
        value: Some("NAME"),
        complete: Complete::Agent,
        doc: "the agent that iterates (needed when the file has several)",
        ..BASE
    },
    Flag {
        long: "resume",
        doc: "continue the last --iter series after its last iteration",
        ..BASE
    },
    Flag {
        long: "debounce",
        value: Some("DUR"),
        doc: "accepted and ignored (the end of the work is known exactly)",
        ..BASE
    },
    Flag {
        long: "poll",
        value: Some("SECS"),
        doc: "poll the channel every SECS seconds instead of watching it",
        ..BASE
    },
    Flag {
        long: "max-runs",
        value: Some("N"),
        doc: "most runs per agent (default 50; an agent's max_runs wins);\n\
              with --keep, counted since the workflow was last quiet or\n\
              the agent's last message from outside, and it pauses the\n\
              agent instead of ending the server",
        ..BASE
    },
    Flag {
        long: "max-rate",
        value: Some("N/DUR"),
        doc: "with --keep, pause an agent that ran N times within DUR on\n\
              other agents' messages alone, until someone else writes to\n\
              it (default 20/60s; off to turn it off)",
        ..BASE
    },
    Flag {
        long: "max-pair",
        value: Some("N/DUR"),
        doc: "with --keep, pause an agent that ran on one other agent's\n\
              messages alone once the two mentioned each other N times\n\
              within DUR (default 10/60s; off to turn it off)",
        ..BASE
    },
    Flag {
        long: "timeout",
        value: Some("DUR"),
        doc: "bound on the whole workflow",
        ..BASE
    },
    Flag {
        long: "retries",
        value: Some("N"),
        doc: "attempts per run (default 3)",
        ..BASE
    },
    Flag {
        long: "backoff",
        value: Some("DUR"),
        doc: "wait before the second attempt, doubled after (default 1s)",
        ..BASE
    },
    Flag {
        long: "cooldown",
        value: Some("DUR"),
        doc: "after a run failed for good, wait before trying its messages\n\
              again unless something new arrives (default 60s)",
        ..BASE
    },
    Flag {
        long: "budget-usd",
        value: Some("USD"),
        doc: "stop every agent once the instance's runs cost more than USD\n\
              dollars (instead of the file's budget.usd; counted across\n\
              runs until aw-ctl budget reset)",
        ..BASE
    },
    Flag {
        long: "budget-tokens",
        value: Some("N"),
        doc: "stop every agent once the instance's runs used more than N\n\
              input and output tokens (instead of the file's\n\
              budget.tokens; counted the same way)",
        ..BASE
    },
    Flag {
        long: "quiet",
        short: Some('q'),
        doc: "print no entries, and no run events or summary on stderr",
        ..BASE
    },
    Flag {
        long: "json",
        doc: "print entries, run events and the summary as JSON Lines\n\
              (with -q: the run events and the summary)",
        ..BASE
    },
    flags::GENERATE,
    flags::HELP,
    flags::VERSION,
];

/// The help text: about, options, exit status.
pub fn help() -> String {
    flags::help(ABOUT, FLAGS, 23, EXIT)
}

/// What the completions know of aw-run.
pub fn tool() -> Tool<'static, ()> {
    Tool::plain("aw-run", help, FLAGS, Operands::Workflow { serve: "serve" })
}
