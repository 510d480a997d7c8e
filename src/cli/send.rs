//! `aw-send`: append one message to an instance's channel.

use crate::channel::MAX_MESSAGE;
use crate::cli::{self, Common, Out};
use crate::error::{Error, Result};
use crate::names::{self, Target};
use crate::post::{self, PostOptions};

pub const HELP: &str = "\
aw-send - append one message to an aw channel

Usage: aw-send [OPTIONS] [MESSAGE... | -]

With no MESSAGE (or with -), stdin is read as one message (at most 4 MiB).
Prints the new entry's id.

Options:
      --root DIR       root directory (default: $AW_ROOT or ./.workflow)
  -i, --instance NAME  instance (default: $AW_INSTANCE or 'default')
  -f, --from NAME      sender (default: $AW_AGENT or 'user')
  -t, --to TARGET      agent, agent@instance (mention it) or @instance (broadcast)
      --strict         refuse a message that mentions an unregistered @name
      --sync           fdatasync the channel before returning (also AW_SYNC=1)
      --json           print the new entry as JSON instead of its id
  -h, --help           print this help
  -V, --version        print the version

Exit status: 0 sent, 64 usage, 65 bad message or name, 73 cannot create,
74 I/O error, 75 lock timeout, 77 permission denied, 130 interrupted.
";

#[derive(Debug, Default)]
struct Args {
    common: Common,
    from: Option<String>,
    to: Option<String>,
    strict: bool,
    sync: bool,
    json: bool,
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
        match arg {
            Short('f') | Long("from") => a.from = Some(cli::string(&mut p, "--from")?),
            Short('t') | Long("to") => a.to = Some(cli::string(&mut p, "--to")?),
            Long("strict") => a.strict = true,
            Long("sync") => a.sync = true,
            Long("json") => a.json = true,
            Short('h') | Long("help") => return cli::print_help(out, HELP),
            Short('V') | Long("version") => return cli::print_version(out, "aw-send"),
            Value(v) => {
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
            _ => return Err(cli::unexpected(arg)),
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
        inst = a.common.root().instance(i)?;
    }
    if a.dash && !a.words.is_empty() {
        return Err(Error::Usage("give MESSAGE words or -, not both".into()));
    }
    let mut text = if a.words.is_empty() {
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
    if let Some(Target::Agent { name, .. }) = &target {
        let already = crate::mention::tokens(&text).contains(&name.as_str());
        if !already {
            text = format!("@{name} {text}");
        }
    }
    let opts = PostOptions {
        strict: a.strict,
        sync: a.sync,
    };
    let posted = post::post(&inst, &from, &text, &opts)?;
    for d in &posted.damage {
        cli::warn("aw-send", d);
    }
    for w in posted.unknown_warnings(&inst)? {
        cli::warn("aw-send", w);
    }
    if a.json {
        out.line(&posted.entry.to_json())?;
    } else {
        out.line(&posted.entry.id.to_string())?;
    }
    Ok(0)
}
