//! `aw-peek`: read a channel, an agent's inbox, or a document; `--follow` streams.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::channel::{Channel, Damage, Entry, SCAN_CHUNK};
use crate::cli::complete::{Operands, Tool};
use crate::cli::flags::{self, BASE, Complete, Flag};
use crate::cli::{self, Common, Out};
use crate::document::{self, DEFAULT_DOCUMENT};
use crate::error::{Error, Result};
use crate::fs::watch::{FALLBACK_HINT, FileWaiter};
use crate::inbox::{self, InboxMessage};
use crate::instance::Instance;
use crate::mention::{self, Priority};
use crate::names::Target;

/// What `--help` says before the options.
const ABOUT: &str = "\
aw-peek - read an aw channel, an agent's inbox, or a document

Usage: aw-peek [OPTIONS] [TARGET]

TARGET is @instance (that instance's channel) or agent[@instance] (that agent's inbox).
";

/// What `--help` says after the options.
const EXIT: &str = "\
Exit status: 0 ok, 64 usage, 65 bad name or damaged state file, 66 no such instance,
agent or document, 69 followed channel removed or replaced, 74 I/O error,
77 permission denied, 130 interrupted.
";

/// The options of aw-peek.
pub const FLAGS: &[Flag] = &[
    flags::ROOT,
    flags::INSTANCE,
    Flag {
        long: "inbox",
        value: Some("AGENT"),
        doc: "show AGENT's (or AGENT@INSTANCE's) unread mentions; does not\n\
              acknowledge them",
        brief: "show the unread mentions of an agent",
        complete: Complete::Agent,
        ..BASE
    },
    Flag {
        long: "since",
        value: Some("ID"),
        doc: "only entries with an id greater than ID",
        ..BASE
    },
    Flag {
        long: "limit",
        short: Some('n'),
        value: Some("N"),
        doc: "at most N entries: the last N, or the first N after --since\n\
              (channel default 20, no limit with --since or for an inbox;\n\
              0 = no limit)",
        brief: "at most N entries (0: no limit)",
        ..BASE
    },
    Flag {
        long: "json",
        doc: "one JSON record per line",
        ..BASE
    },
    Flag {
        long: "follow",
        short: Some('F'),
        doc: "keep printing new entries as they arrive, until interrupted or\n\
              nobody reads the output",
        brief: "keep printing new entries as they arrive",
        ..BASE
    },
    Flag {
        long: "poll",
        value: Some("SECS"),
        doc: "with --follow: poll every SECS seconds instead of using inotify",
        brief: "with --follow: poll every SECS seconds",
        ..BASE
    },
    Flag {
        long: "doc",
        value: Some("[FILE]"),
        doc: "print a document (default notes.md)",
        complete: Complete::Document,
        ..BASE
    },
    Flag {
        long: "docs",
        operand: Some("[PATTERN]"),
        doc: "list the documents (those matching PATTERN, e.g. 'findings/*.md')",
        brief: "list the documents",
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

/// What the completions know of aw-peek.
pub fn tool() -> Tool<'static, ()> {
    Tool::plain("aw-peek", help, FLAGS, Operands::Target)
}

#[derive(Debug, Default)]
struct Args {
    common: Common,
    target: Option<String>,
    inbox: Option<String>,
    since: Option<u64>,
    limit: Option<usize>,
    json: bool,
    follow: bool,
    poll: Option<f64>,
    doc: Option<String>,
    docs: bool,
}

pub fn run(out: &mut Out) -> Result<u8> {
    use lexopt::prelude::*;
    let mut a = Args::default();
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next().map_err(cli::lex_err)? {
        if let Some(k) = Common::key(&arg) {
            a.common.set(k, &mut p)?;
            continue;
        }
        if let Value(v) = arg {
            if a.target.is_some() {
                return Err(cli::unexpected(Value(v), FLAGS));
            }
            a.target = Some(
                v.into_string()
                    .map_err(|_| Error::invalid("TARGET is not valid UTF-8"))?,
            );
            continue;
        }
        let Some(f) = flags::find(FLAGS, &arg) else {
            return Err(cli::unexpected(arg, FLAGS));
        };
        match f.long {
            "inbox" => {
                if a.target.is_some() || a.inbox.is_some() {
                    return Err(Error::Usage("give TARGET or --inbox, not both".into()));
                }
                a.target = Some(cli::string(&mut p, "--inbox")?);
                a.inbox = Some(String::new()); // marks the target as an agent
            }
            "since" => a.since = Some(cli::number(&mut p, "--since")?),
            "limit" => a.limit = Some(cli::number(&mut p, "--limit")?),
            "json" => {
                a.json = true;
                out.exact();
            }
            "follow" => a.follow = true,
            "poll" => {
                let s: f64 = cli::number(&mut p, "--poll")?;
                if !(s > 0.0 && s <= 3600.0) {
                    return Err(Error::Usage("--poll: SECS must be in (0, 3600]".into()));
                }
                a.poll = Some(s);
            }
            "doc" => {
                let file = match p.optional_value() {
                    Some(v) => Some(v),
                    None => {
                        // `--doc FILE`: take the next word unless it is an option.

                        p.try_raw_args().and_then(|mut r| {
                            let peek = r.peek().map(|s| s.to_os_string());
                            match peek {
                                Some(s) if !s.to_string_lossy().starts_with('-') => {
                                    r.next();
                                    Some(s)
                                }
                                _ => None,
                            }
                        })
                    }
                };
                a.doc = Some(match file {
                    Some(f) => f
                        .into_string()
                        .map_err(|_| Error::invalid("--doc: name is not valid UTF-8"))?,
                    None => DEFAULT_DOCUMENT.to_string(),
                });
            }
            "docs" => a.docs = true,
            _ => return cli::common_flag(out, f, &mut p, &tool()),
        }
    }
    peek(out, a)
}

fn peek(out: &mut Out, mut a: Args) -> Result<u8> {
    let mut inst = a.common.instance()?;
    // With --docs, a word without `@` is a pattern of document paths.
    let docs_pattern = match &a.target {
        Some(t) if a.docs && !t.contains('@') => Some(cli::pattern(t)?),
        _ => None,
    };
    if docs_pattern.is_some() {
        a.target = None;
    }
    let forced_agent = a.inbox.take().is_some();
    if let Some(t) = a.target.take() {
        match Target::parse(&t)? {
            Target::Instance(_) if forced_agent => {
                return Err(Error::invalid(format!(
                    "--inbox takes an agent (NAME or NAME@INSTANCE), not '{}'",
                    crate::names::sanitize(&t)
                )));
            }
            Target::Instance(i) => inst = a.common.root()?.instance(&i)?,
            Target::Agent { name, instance } => {
                if let Some(i) = instance {
                    inst = a.common.root()?.instance(&i)?;
                }
                a.inbox = Some(name);
            }
        }
    }
    if a.docs as u8 + a.doc.is_some() as u8 + a.inbox.is_some() as u8 > 1 {
        return Err(Error::Usage(
            "choose one of --doc, --docs and --inbox/TARGET".into(),
        ));
    }
    if (a.docs || a.doc.is_some()) && (a.follow || a.since.is_some()) {
        return Err(Error::Usage(
            "--follow and --since apply to the channel and inboxes, not documents".into(),
        ));
    }
    if a.follow {
        wait_for_instance(&inst, a.poll.map(Duration::from_secs_f64));
    }
    inst.require()?;
    if a.docs {
        for d in document::list(&inst)? {
            if docs_pattern
                .as_ref()
                .is_some_and(|p| !p.matches_with(&d, cli::MATCH))
            {
                continue;
            }
            if a.json {
                out.line(&serde_json::json!({ "file": d }).to_string())?;
            } else {
                out.line(&d)?;
            }
        }
        return Ok(0);
    }
    if let Some(file) = &a.doc {
        let text = document::read(&inst, file)?;
        if a.json {
            out.line(&serde_json::json!({ "file": file, "content": text }).to_string())?;
        } else {
            out.raw(text.as_bytes())?;
        }
        return Ok(0);
    }
    let poll = a.poll.map(Duration::from_secs_f64);
    match a.inbox.clone() {
        Some(agent) => show_inbox(out, &inst, &agent, &a, poll),
        None => show_channel(out, &inst, &a, poll),
    }
}

fn print_damage(damage: &[Damage]) {
    for d in damage {
        crate::warn::warn("aw-peek", d);
    }
}

fn print_entry(out: &mut Out, e: &Entry, json: bool) -> Result<()> {
    if json {
        out.line(&e.to_json())
    } else {
        out.line(&crate::channel::human_entry(e, None))
    }
}

fn show_channel(out: &mut Out, inst: &Instance, a: &Args, poll: Option<Duration>) -> Result<u8> {
    let ch = Channel::new(inst);
    // Arm the watch before the first read, so that nothing appended or replaced in between
    // goes unseen.
    let waiter = a.follow.then(|| watch(inst, poll)).transpose()?;
    let mut last = a.since.unwrap_or(0);
    let whole = a.since.is_some() || a.limit == Some(0);
    if whole {
        // Everything after --since (up to --limit), or the whole channel: printed as it is
        // read, a chunk of the log at a time, so that memory does not grow with the channel.
        let mut left = a.limit.filter(|&n| n > 0).unwrap_or(usize::MAX);
        let mut failed = None;
        let damage = ch.scan_since(last, SCAN_CHUNK, |e| {
            if left == 0 {
                return false;
            }
            if let Err(err) = print_entry(out, &e, a.json) {
                failed = Some(err);
                return false;
            }
            left -= 1;
            last = last.max(e.id);
            left > 0
        })?;
        if let Some(err) = failed {
            return Err(err);
        }
        print_damage(&damage);
    } else {
        let batch = ch.tail(a.limit.unwrap_or(20))?;
        print_damage(&batch.damage);
        for e in &batch.entries {
            print_entry(out, e, a.json)?;
            last = last.max(e.id);
        }
    }
    let Some(waiter) = waiter else {
        return Ok(0);
    };
    // An empty first read means nothing was there (or nothing after --since): follow from
    // `last` as it is, so that an entry appended meanwhile is not skipped.
    out.flush()?;
    follow(inst, waiter, last, |entries| {
        for e in entries {
            print_entry(out, e, a.json)?;
        }
        out.flush()
    })
}

fn print_inbox(out: &mut Out, m: &InboxMessage, json: bool) -> Result<()> {
    if json {
        out.line(&serde_json::to_string(m).expect("serializes"))
    } else {
        let tag = (m.priority == Priority::High).then_some("HIGH");
        out.line(&crate::channel::human_entry(&m.entry, tag))
    }
}

fn show_inbox(
    out: &mut Out,
    inst: &Instance,
    agent: &str,
    a: &Args,
    poll: Option<Duration>,
) -> Result<u8> {
    inst.require()?;
    if !crate::registry::is_agent(inst, agent)? {
        return Err(crate::registry::Registry::load(inst)?.no_agent(inst, agent));
    }
    let waiter = a.follow.then(|| watch(inst, poll)).transpose()?;
    // One read gives both the inbox and the id to follow from, so nothing slips between.
    let (mut msgs, damage, last) = inbox::unread_with_last(inst, agent)?;
    print_damage(&damage);
    if let Some(since) = a.since {
        msgs.retain(|m| m.entry.id > since);
    }
    if let Some(n) = a.limit.filter(|&n| n > 0) {
        msgs.truncate(n);
    }
    for m in &msgs {
        print_inbox(out, m, a.json)?;
    }
    let Some(waiter) = waiter else {
        return Ok(0);
    };
    out.flush()?;
    follow(inst, waiter, last, |entries| {
        for e in entries.iter().filter(|e| inbox::is_for(e, agent)) {
            let m = InboxMessage {
                priority: mention::priority(&e.message, e.mentions.len()),
                entry: e.clone(),
                unread: true,
            };
            print_inbox(out, &m, a.json)?;
        }
        out.flush()
    })
}

/// A watch on the channel of `inst`, for [`follow`].
/// With `--follow`, an instance that does not exist yet is waited for, as `tail -F` waits
/// for a file: said once on stderr (with the near name, when one is near), then looked for
/// every `poll` (default [`APPEAR_POLL`]) until it is created.
fn wait_for_instance(inst: &Instance, poll: Option<Duration>) {
    let Err(e) = inst.require() else {
        return;
    };
    crate::warn::warn_note("aw-peek", &format!("{e}; waiting for it to be created"));
    while !inst.exists() {
        std::thread::sleep(poll.unwrap_or(APPEAR_POLL));
    }
}

/// How often `--follow` looks for an instance that does not exist yet.
const APPEAR_POLL: Duration = Duration::from_millis(100);

fn watch(inst: &Instance, poll: Option<Duration>) -> Result<FileWaiter> {
    let waiter = FileWaiter::new(&inst.channel_path(), poll)?;
    if let Some(why) = waiter.fallback() {
        crate::warn::warn("aw-peek", why);
        crate::warn::hint(&format!("{FALLBACK_HINT}, or pass --poll SECS"));
    }
    Ok(waiter)
}

/// Call `emit` with every batch of entries newer than `last`, until a signal ends the
/// process or nobody reads stdout any more (then 0). The channel or the instance directory
/// removed or replaced ends it with 69: what comes next would belong to another log.
fn follow(
    inst: &Instance,
    mut waiter: FileWaiter,
    mut last: u64,
    mut emit: impl FnMut(&[Entry]) -> Result<()>,
) -> Result<u8> {
    let ch = Channel::new(inst);
    let no_reader = Arc::new(AtomicBool::new(false));
    let waker = waiter.waker();
    let flag = Arc::clone(&no_reader);
    cli::on_stdout_closed(move || {
        flag.store(true, Ordering::SeqCst);
        waker.wake();
    });
    loop {
        let batch = ch.read_since(last)?;
        // Checked after the read: a batch read before a replacement is still the old log's.
        if let Some(g) = waiter.gone() {
            return Err(Error::Unavailable(format!("{g}; stopped following")));
        }
        print_damage(&batch.damage);
        if let Some(e) = batch.entries.last() {
            last = e.id;
            emit(&batch.entries)?;
        }
        if !no_reader.load(Ordering::SeqCst) {
            waiter.wait(None);
        }
        if no_reader.load(Ordering::SeqCst) {
            return Ok(0);
        }
    }
}
