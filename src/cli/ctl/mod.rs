//! `aw-ctl`: register agents, list instances, acknowledge inboxes, manage documents, run
//! votes, print MCP configurations, and watch and stop the agents aw-run serves. This module
//! parses the command line and dispatches.

mod agents;
mod approvals;
mod board;
mod budget;
mod commands;
mod docs;
mod hooks;
mod inbox_hook;
mod lease;
mod mcp_config;
mod merge;
mod report;
mod runs;
mod session;
mod top;
mod traces;
mod votes;
mod worktree;

mod flags;

pub use self::flags::FLAGS;
use crate::cli::complete::{Operands, Tool};
use crate::cli::flags::{self as table, Cmd, Flag};
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
/// entry of [`COMMANDS`](commands::COMMANDS) says).
type Run = fn(&mut Out, &Call, &[&str]) -> Result<u8>;

/// The help text: about, commands, options, exit status.
pub fn help() -> String {
    format!(
        "{ABOUT}\nCommands:\n{}{AFTER_COMMANDS}\nOptions:\n{}\n{EXIT}",
        table::commands(commands::COMMANDS, 25),
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
        commands: commands::COMMANDS,
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
            && commands::COMMANDS
                .iter()
                .any(|c| c.program && c.name == a.words[0])
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
    let family: Vec<&Cmd<Run>> = commands::COMMANDS
        .iter()
        .filter(|c| c.words().0 == *first)
        .collect();
    if family.is_empty() {
        return Err(Error::Usage(format!(
            "unknown command '{}'{}",
            names::sanitize(first),
            crate::suggest::suggestion(first, table::command_names(commands::COMMANDS))
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
