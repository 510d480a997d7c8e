//! `aw-send`: append one message to an instance's channel, or one per line of stdin.

use std::os::fd::{AsFd, BorrowedFd};

use crate::channel::MAX_MESSAGE;
use crate::cli::complete::{Operands, Tool};
use crate::cli::flags::{self, BASE, Complete, Flag};
use crate::cli::{self, Common, Out};
use crate::error::{Error, Result, exit};
use crate::instance::Instance;
use crate::names::{self, Target};
use crate::post::{self, PostOptions, Posted};

/// What `--help` says before the options.
const ABOUT: &str = "\
aw-send - append one message to an aw channel

Usage: aw-send [OPTIONS] [MESSAGE... | -]
       aw-send [OPTIONS] --lines
       aw-send [OPTIONS] --wait [--timeout DUR] -t AGENT[@INSTANCE] [MESSAGE... | -]

With no MESSAGE (or with -), stdin is read as one message (at most 4 MiB).
Prints the new entry's id.
With --lines, each line of stdin is sent as soon as it is read, and one id is
printed per line sent; blank lines are skipped, a bad line is refused alone.
With --wait, the reply of AGENT is printed instead of the id: the entries it
wrote in the run(s) that handled the message, once its aw-run has handled it.
";

/// What `--help` says after the options.
const EXIT: &str = "\
Exit status: 0 sent, 1 (--wait) no reply: the timeout passed or the agent's
runs failed, 64 usage, 65 bad message or name (with --lines: a line was
refused, the others were sent), 66 -t names an agent that is not registered,
or no such instance while one with a near name exists (a likely typo; see
--create),
69 (--wait) no aw-run serves the agent, 73 cannot create, 74 I/O error,
75 lock timeout, 77 permission denied, 130 interrupted.
";

/// The options of aw-send.
pub const FLAGS: &[Flag] = &[
    flags::ROOT,
    flags::INSTANCE,
    Flag {
        long: "from",
        short: Some('f'),
        value: Some("NAME"),
        doc: "sender (default: $AW_AGENT or 'user')",
        brief: "sender",
        complete: Complete::Sender,
        ..BASE
    },
    Flag {
        long: "to",
        short: Some('t'),
        value: Some("TARGET"),
        doc: "agent, agent@instance (mention it) or @instance (broadcast)",
        brief: "agent, agent@instance or @instance",
        complete: Complete::Target,
        ..BASE
    },
    Flag {
        long: "strict",
        doc: "refuse a message that mentions an unregistered @name",
        ..BASE
    },
    Flag {
        long: "create",
        doc: "create the instance even if an existing one has a near name",
        ..BASE
    },
    Flag {
        long: "quiet",
        short: Some('q'),
        doc: "do not say on stderr that a new instance was created",
        ..BASE
    },
    Flag {
        long: "sync",
        doc: "fdatasync the channel before returning (also AW_SYNC=1)",
        brief: "fdatasync the channel before returning",
        ..BASE
    },
    Flag {
        long: "json",
        doc: "print the new entry as JSON instead of its id",
        ..BASE
    },
    Flag {
        long: "lines",
        doc: "send each line of stdin as a message, until end of input",
        ..BASE
    },
    Flag {
        long: "wait",
        doc: "wait for the reply of the agent given with -t, print it",
        ..BASE
    },
    Flag {
        long: "timeout",
        value: Some("DUR"),
        doc: "with --wait, give up after DUR (90, 1.5s, 5m, 1h; default: none)",
        brief: "with --wait, give up after a duration",
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

/// What the completions know of aw-send.
pub fn tool() -> Tool<'static, ()> {
    Tool::plain("aw-send", help, FLAGS, Operands::Message)
}

#[derive(Debug, Default)]
struct Args {
    common: Common,
    from: Option<String>,
    to: Option<String>,
    strict: bool,
    create: bool,
    quiet: bool,
    sync: bool,
    json: bool,
    lines: bool,
    wait: bool,
    timeout: Option<std::time::Duration>,
    words: Vec<String>,
    dash: bool,
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
        let Value(v) = arg else {
            let Some(f) = flags::find(FLAGS, &arg) else {
                return Err(cli::unexpected(arg, FLAGS));
            };
            let name = f.dashed();
            match f.long {
                "from" => a.from = Some(cli::string(&mut p, &name)?),
                "to" => a.to = Some(cli::string(&mut p, &name)?),
                "strict" => a.strict = true,
                "create" => a.create = true,
                "quiet" => a.quiet = true,
                "sync" => a.sync = true,
                "json" => {
                    a.json = true;
                    out.exact();
                }
                "lines" => a.lines = true,
                "wait" => a.wait = true,
                "timeout" => a.timeout = Some(cli::duration(&mut p, &name)?),
                _ => return cli::common_flag(out, f, &mut p, &tool()),
            }
            continue;
        };
        let s = v
            .into_string()
            .map_err(|_| Error::invalid("message argument is not valid UTF-8"))?;
        if s == "-" && a.words.is_empty() {
            a.dash = true;
        } else {
            a.words.push(s);
        }
        // Everything after the first word is message text, even if it looks like an option.
        for rest in p.raw_args().map_err(cli::lex_err)? {
            a.words.push(
                rest.into_string()
                    .map_err(|_| Error::invalid("message argument is not valid UTF-8"))?,
            );
        }
    }
    send(out, a)
}

fn send(out: &mut Out, a: Args) -> Result<u8> {
    let from = a.from.unwrap_or_else(names::sender_from_env);
    names::check_agent(&from)
        .map_err(|_| Error::invalid(format!("invalid sender name '{}'", names::sanitize(&from))))?;
    let target = a.to.as_deref().map(Target::parse).transpose()?;
    let mut inst = a.common.instance()?;
    if let Some(i) = target.as_ref().and_then(|t| t.instance()) {
        inst = a.common.root()?.instance(i)?;
    }
    if a.dash && !a.words.is_empty() {
        return Err(Error::Usage("give MESSAGE words or -, not both".into()));
    }
    inst.check_new(a.create)?;
    if let Some(Target::Agent { name, .. }) = &target {
        crate::registry::require_agent(&inst, name)?;
    }
    let opts = PostOptions {
        strict: a.strict,
        sync: a.sync,
    };
    if a.timeout.is_some() && !a.wait {
        return Err(Error::Usage("--timeout goes with --wait".into()));
    }
    let waits_for = match (&target, a.wait) {
        (_, false) => None,
        _ if a.lines => {
            return Err(Error::Usage("--wait and --lines do not go together".into()));
        }
        (Some(Target::Agent { name, .. }), true) => {
            // Waiting forever for nobody is a trap.
            crate::reply::check_served(&inst, name)?;
            Some(name.clone())
        }
        (_, true) => {
            return Err(Error::Usage(
                "--wait needs the agent to wait for: -t AGENT".into(),
            ));
        }
    };
    if a.lines {
        if !a.words.is_empty() {
            return Err(Error::Usage(
                "--lines reads the messages from stdin: give no MESSAGE".into(),
            ));
        }
        return send_lines(out, &inst, &from, target.as_ref(), &opts, a.json, a.quiet);
    }
    let text = if a.words.is_empty() {
        if !a.dash && cli::stdin_is_tty() {
            return Err(Error::Usage("no message".into())
                .hint("give MESSAGE, or pipe it on stdin, or use - to read a terminal"));
        }
        cli::read_stdin(
            "message",
            MAX_MESSAGE,
            Some("use a resource or a document for long content"),
        )?
    } else {
        a.words.join(" ")
    };
    let text = address(text, target.as_ref());
    let posted = post::post(&inst, &from, &text, &opts)?;
    say_created(&inst, posted.created, a.quiet);
    for d in &posted.damage {
        crate::warn::warn("aw-send", d);
    }
    let Some(agent) = waits_for else {
        print(out, &inst, &posted, a.json, "")?;
        return Ok(0);
    };
    for w in posted.unknown_warnings(&inst)? {
        crate::warn::warn("aw-send", w);
    }
    let stop = crate::process::Stop::default();
    let reply = crate::reply::wait_reply(&inst, &agent, posted.entry.id, a.timeout, &stop)?;
    if a.json {
        for e in &reply {
            out.line(&e.to_json())?;
        }
    } else {
        let texts: Vec<&str> = reply.iter().map(|e| e.message.trim_end()).collect();
        out.line(&texts.join("\n\n"))?;
    }
    Ok(0)
}

/// Say on stderr, in one line, that the write created the instance (unless `quiet`).
fn say_created(inst: &Instance, created: bool, quiet: bool) {
    if created && !quiet {
        eprintln!(
            "aw-send: created instance '{}' at {}",
            inst.name(),
            inst.dir().display()
        );
    }
}

/// With `--to agent`, the text addressed to the agent.
fn address(text: String, target: Option<&Target>) -> String {
    match target {
        Some(Target::Agent { name, .. }) => post::addressed(text, name),
        _ => text,
    }
}

/// Warn about the unknown `@names` of a posted entry (each warning after `prefix`), and print
/// its id or, with `json`, the entry.
fn print(out: &mut Out, inst: &Instance, posted: &Posted, json: bool, prefix: &str) -> Result<()> {
    for w in posted.unknown_warnings(inst)? {
        crate::warn::warn("aw-send", format_args!("{prefix}{w}"));
    }
    if json {
        out.line(&posted.entry.to_json())
    } else {
        out.line(&posted.entry.id.to_string())
    }
}

/// Input bytes taken into one batch at most, unless the input pauses first.
const BATCH: usize = 1 << 20;

/// `--lines`: read stdin in blocks; after each read, take what more is already waiting (up to
/// [`BATCH`] bytes), then post the complete lines together and print their ids. Returns 0, or
/// 65 when a line was refused.
fn send_lines(
    out: &mut Out,
    inst: &Instance,
    from: &str,
    target: Option<&Target>,
    opts: &PostOptions,
    json: bool,
    quiet: bool,
) -> Result<u8> {
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    let mut lines = Lines::default();
    let mut block = vec![0u8; 256 * 1024];
    let mut refused = false;
    loop {
        let mut eof = false;
        loop {
            let n = read_block(fd, &mut block)?;
            if n == 0 {
                eof = true;
                lines.finish();
                break;
            }
            lines.push(&block[..n]);
            if lines.taken >= BATCH || !waiting(fd) {
                break;
            }
        }
        let batch = lines.take();
        if !batch.is_empty() {
            let existed = inst.exists();
            refused |= post_lines(out, inst, from, target, opts, json, batch)?;
            say_created(inst, !existed && inst.exists(), quiet);
            out.flush()?;
        }
        if eof {
            return Ok(if refused { exit::DATAERR } else { 0 });
        }
    }
}

/// Post a batch of numbered lines with one append; report each refused line as
/// `aw-send: line N: why`. Returns whether a line was refused.
fn post_lines(
    out: &mut Out,
    inst: &Instance,
    from: &str,
    target: Option<&Target>,
    opts: &PostOptions,
    json: bool,
    mut batch: Vec<(u64, Result<String>)>,
) -> Result<bool> {
    let texts: Vec<String> = batch
        .iter_mut()
        .filter_map(|(_, t)| t.as_mut().ok().map(|t| address(std::mem::take(t), target)))
        .collect();
    let mut posted = if texts.is_empty() {
        Vec::new()
    } else {
        let many = post::post_many(inst, from, texts, opts)?;
        for d in &many.damage {
            crate::warn::warn("aw-send", d);
        }
        many.posted
    }
    .into_iter();
    let mut refused = false;
    for (n, line) in batch {
        let outcome = line.and_then(|_| posted.next().expect("one outcome per line"));
        match outcome {
            Ok(p) => print(out, inst, &p, json, &format!("line {n}: "))?,
            Err(e) => {
                refused = true;
                let (what, _) = e.split_hints();
                crate::warn::report("aw-send", &Error::invalid(format!("line {n}: {what}")));
            }
        }
    }
    Ok(refused)
}

/// Read what is there, at most `buf.len()` bytes, waiting for some; 0 at end of input.
fn read_block(fd: BorrowedFd, buf: &mut [u8]) -> Result<usize> {
    loop {
        match nix::unistd::read(fd, buf) {
            Ok(n) => return Ok(n),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(Error::io("<stdin>", e.into())),
        }
    }
}

/// Can `fd` be read without waiting (data, or end of input)?
fn waiting(fd: BorrowedFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
}

/// Stdin cut into numbered lines: each complete line is a text, or why it is refused. Blank
/// lines (empty or white space) are counted and skipped. A line over [`MAX_MESSAGE`] is not
/// kept: its bytes are dropped as they come, and it is refused when it ends.
#[derive(Default)]
struct Lines {
    /// The bytes of the line being read.
    partial: Vec<u8>,
    /// The line being read is over the limit.
    overlong: bool,
    /// Lines ended so far.
    number: u64,
    /// Lines ended and not taken yet.
    done: Vec<(u64, Result<String>)>,
    /// Bytes pushed since the last take.
    taken: usize,
}

impl Lines {
    fn push(&mut self, mut data: &[u8]) {
        self.taken += data.len();
        while let Some(nl) = data.iter().position(|&b| b == b'\n') {
            self.add(&data[..nl]);
            self.end_line();
            data = &data[nl + 1..];
        }
        self.add(data);
    }

    /// End of input: a last line without a newline is a line.
    fn finish(&mut self) {
        if self.overlong || !self.partial.is_empty() {
            self.end_line();
        }
    }

    fn take(&mut self) -> Vec<(u64, Result<String>)> {
        self.taken = 0;
        std::mem::take(&mut self.done)
    }

    fn add(&mut self, bytes: &[u8]) {
        if self.overlong {
            return;
        }
        if self.partial.len() + bytes.len() > MAX_MESSAGE {
            self.overlong = true;
            self.partial = Vec::new();
            return;
        }
        self.partial.extend_from_slice(bytes);
    }

    fn end_line(&mut self) {
        self.number += 1;
        let text = if std::mem::take(&mut self.overlong) {
            Err(Error::invalid(format!(
                "line is over the limit of {MAX_MESSAGE} bytes"
            )))
        } else {
            match std::str::from_utf8(&self.partial) {
                Ok(t) if t.trim().is_empty() => {
                    self.partial.clear();
                    return;
                }
                Ok(t) => Ok(t.to_string()),
                Err(e) => Err(Error::invalid(format!(
                    "not valid UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ))),
            }
        };
        self.partial.clear();
        self.done.push((self.number, text));
    }
}
