//! Command-line front ends: shared options, output, and the mapping of errors to exit codes.

pub mod complete;
pub mod ctl;
pub mod flags;
pub mod mcp;
pub mod peek;
pub mod run;
mod run_detach;
mod run_flags;
pub mod send;

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::{Error, Remedy, Result};
use crate::instance::{self, Instance, Root};

pub use crate::VERSION;

/// Run a tool's body and turn its outcome into an exit code, printing errors as one line
/// `tool: message` on stderr. A closed stdout (EPIPE) ends quietly with 0.
pub fn main(tool: &str, body: impl FnOnce(&mut Out) -> Result<u8>) -> ExitCode {
    let mut out = Out::new();
    let r = body(&mut out).and_then(|code| out.finish().map(|()| code));
    match r {
        Ok(code) => ExitCode::from(code),
        Err(Error::Io { ref source, .. }) if source.kind() == io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            let e = e.word_remedies(&command_line_hint);
            crate::warn::report(tool, &e);
            ExitCode::from(e.exit_code())
        }
    }
}

/// What can be done about an error, in the terms of the command line: its options.
pub fn command_line_hint(r: &Remedy) -> Option<String> {
    Some(match r {
        Remedy::CreateInstance => "pass --create to create a new instance with that name".into(),
        Remedy::ChooseRoot => {
            "run from the project, or choose the root with --root DIR or AW_ROOT".into()
        }
        Remedy::ServeAgent => "start one: aw-run --keep FILE, or aw-run --serve".into(),
        Remedy::TrustRoot { root, list } => format!(
            "if you trust it, choose it with --root {} or AW_ROOT, or add that path to {list}",
            root.display()
        ),
    })
}

/// Buffered stdout whose errors carry the path `<stdout>` (so EPIPE is recognised). On a
/// terminal, what is written is shown with its control characters and bidirectional
/// overrides as escapes ([`crate::term`]), unless the output is JSON ([`Out::exact`]); a
/// pipe or a file gets the exact bytes.
pub struct Out {
    w: io::BufWriter<io::Stdout>,
    /// Show controls as escapes: stdout is a terminal and the output is not JSON.
    visible: bool,
    /// The end of what [`Out::raw`] was given that may be a character cut in two.
    carry: Vec<u8>,
}

impl Out {
    fn new() -> Out {
        Out {
            w: io::BufWriter::with_capacity(64 * 1024, io::stdout()),
            visible: crate::term::is_terminal(),
            carry: Vec::new(),
        }
    }

    /// The output is data (JSON): its bytes are written exactly, on a terminal too.
    pub fn exact(&mut self) {
        self.visible = false;
    }

    fn write(&mut self, s: &[u8]) -> Result<()> {
        self.w.write_all(s).map_err(|e| Error::io("<stdout>", e))
    }

    /// Write what is left of a cut character (it was not completed).
    fn write_carry(&mut self) -> Result<()> {
        if self.carry.is_empty() {
            return Ok(());
        }
        let carry = std::mem::take(&mut self.carry);
        self.write(&crate::term::visible_bytes(&carry))
    }

    /// Write `s` followed by a newline.
    pub fn line(&mut self, s: &str) -> Result<()> {
        if self.visible {
            self.write_carry()?;
            self.write(crate::term::visible(s).as_bytes())?;
        } else {
            self.write(s.as_bytes())?;
        }
        self.write(b"\n")
    }

    /// Write `s` as is (on a terminal, as shown there; a character cut at the end of `s`
    /// is kept for what comes next).
    pub fn raw(&mut self, s: &[u8]) -> Result<()> {
        if !self.visible {
            return self.write(s);
        }
        let mut all = std::mem::take(&mut self.carry);
        all.extend_from_slice(s);
        let keep = crate::term::cut_tail(&all);
        self.carry = all.split_off(all.len() - keep);
        self.write(&crate::term::visible_bytes(&all))
    }

    /// Send what was written (but a character cut in two, kept for what comes next).
    pub fn flush(&mut self) -> Result<()> {
        self.w.flush().map_err(|e| Error::io("<stdout>", e))
    }

    /// Send everything written: the end of the output.
    fn finish(&mut self) -> Result<()> {
        self.write_carry()?;
        self.flush()
    }
}

/// Which common option an argument is.
#[derive(Debug, Clone, Copy)]
pub enum CommonKey {
    Root,
    Instance,
}

/// Options every tool takes.
#[derive(Debug, Default)]
pub struct Common {
    pub root: Option<PathBuf>,
    pub instance: Option<String>,
    /// Every instance named with `-i`, once each, in order (only `aw-run` serves several).
    pub instances_given: Vec<String>,
}

impl Common {
    /// Is `arg` one of the common options? Then call [`Common::set`] with the answer.
    pub fn key(arg: &lexopt::Arg) -> Option<CommonKey> {
        use lexopt::Arg::*;
        match arg {
            Long("root") => Some(CommonKey::Root),
            Short('i') | Long("instance") => Some(CommonKey::Instance),
            _ => None,
        }
    }

    /// Take the value of a common option.
    pub fn set(&mut self, key: CommonKey, p: &mut lexopt::Parser) -> Result<()> {
        match key {
            CommonKey::Root => self.root = Some(PathBuf::from(value(p, "--root")?)),
            CommonKey::Instance => {
                let name = string(p, "--instance")?;
                if !self.instances_given.contains(&name) {
                    self.instances_given.push(name.clone());
                }
                self.instance = Some(name);
            }
        }
        Ok(())
    }

    /// The root of `--root`, `AW_ROOT` or the search ([`Root::resolve`]).
    pub fn root(&self) -> Result<Root> {
        Root::resolve(self.root.as_deref())
    }

    /// The instance named by `-i`, `AW_INSTANCE`, or `default`; `-i` given twice with two
    /// names is a usage error (the last one is not silently taken).
    pub fn instance(&self) -> Result<Instance> {
        self.root()?
            .instance(&instance::instance_name(self.named_instance()?))
    }

    /// The instance named with `-i`, if one was; several is a usage error.
    pub fn named_instance(&self) -> Result<Option<&str>> {
        if self.instances_given.len() > 1 {
            let names: Vec<String> = self
                .instances_given
                .iter()
                .map(|n| format!("'{}'", crate::names::sanitize(n)))
                .collect();
            return Err(Error::Usage(format!(
                "-i names several instances ({}): this command works in one",
                names.join(", ")
            )));
        }
        Ok(self.instance.as_deref())
    }
}

/// How patterns match: as in the shell, `*` and `?` do not match a `/`.
pub const MATCH: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

/// A shell-style pattern (`*`, `?`, `[...]`) given on the command line.
pub fn pattern(text: &str) -> Result<glob::Pattern> {
    glob::Pattern::new(text).map_err(|e| {
        Error::Usage(format!(
            "bad pattern '{}': {} (at character {})",
            crate::names::sanitize(text),
            e.msg,
            e.pos + 1
        ))
    })
}

/// The value of an option, as an OsString.
pub fn value(p: &mut lexopt::Parser, name: &str) -> Result<OsString> {
    p.value()
        .map_err(|_| Error::Usage(format!("{name} needs a value")))
}

/// The value of an option, as UTF-8.
pub fn string(p: &mut lexopt::Parser, name: &str) -> Result<String> {
    value(p, name)?
        .into_string()
        .map_err(|_| Error::Usage(format!("{name}: value is not valid UTF-8")))
}

/// The value of an option, as a number.
pub fn number<T: std::str::FromStr>(p: &mut lexopt::Parser, name: &str) -> Result<T> {
    parse_number(&string(p, name)?, name)
}

/// A number given as the value of option `name`.
pub fn parse_number<T: std::str::FromStr>(s: &str, name: &str) -> Result<T> {
    s.parse().map_err(|_| {
        Error::Usage(format!(
            "{name}: '{}' is not a valid number",
            crate::names::sanitize(s)
        ))
    })
}

/// An argument the tool does not take (exit 64), with the near option of its table of
/// flags when there is one (`--form`: did you mean '--from'?).
pub fn unexpected(arg: lexopt::Arg, table: &[flags::Flag]) -> Error {
    let near = match &arg {
        lexopt::Arg::Long(l) => {
            let longs: Vec<String> = table.iter().map(flags::Flag::dashed).collect();
            crate::suggest::suggestion(&format!("--{l}"), longs.iter().map(String::as_str))
        }
        _ => String::new(),
    };
    let e = arg.unexpected();
    Error::Usage(format!("{e}{near}")).hint("see --help")
}

/// The flags every tool's table has besides `--root` and `-i`: print the help, the version
/// or a completion script. Any other flag is one the tool's parser forgot.
pub fn common_flag<R>(
    out: &mut Out,
    flag: &flags::Flag,
    p: &mut lexopt::Parser,
    tool: &complete::Tool<R>,
) -> Result<u8> {
    match flag.long {
        "help" => print_help(out, &(tool.help)()),
        "version" => print_version(out, tool.name),
        "generate" => {
            let kind = string(p, "--generate")?;
            out.exact();
            out.raw(complete::generate(tool, &kind)?.as_bytes())?;
            Ok(0)
        }
        other => panic!(
            "{}: --{other} is in the table of flags but not parsed",
            tool.name
        ),
    }
}

pub fn lex_err(e: lexopt::Error) -> Error {
    Error::Usage(e.to_string()).hint("see --help")
}

/// Print help or version and signal the caller to stop.
pub fn print_help(out: &mut Out, text: &str) -> Result<u8> {
    out.raw(text.as_bytes())?;
    Ok(0)
}

pub fn print_version(out: &mut Out, tool: &str) -> Result<u8> {
    out.line(&format!("{tool} {VERSION}"))?;
    Ok(0)
}

/// Read stdin as UTF-8 text of at most `max` bytes. `what` names the text in errors;
/// `hint`, when given, follows the error for text over the limit.
///
/// Reads at most `max + 1` bytes, so an endless input costs no more than the limit: more
/// than `max` bytes is refused once the extra byte arrives, and a NUL byte as soon as the
/// block that holds it is read. Both refusals are bad data (exit 65).
pub fn read_stdin(what: &str, max: usize, hint: Option<&str>) -> Result<String> {
    use std::io::Read;
    let mut input = io::stdin().lock().take(max as u64 + 1);
    let mut buf = Vec::new();
    let mut block = vec![0u8; 64 * 1024];
    loop {
        let n = match input.read(&mut block) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io("<stdin>", e)),
        };
        if block[..n].contains(&0) {
            return Err(Error::invalid(format!("{what} contains a NUL byte")));
        }
        buf.extend_from_slice(&block[..n]);
    }
    if buf.len() > max {
        let e = Error::invalid(format!("{what} on stdin is over the limit of {max} bytes"));
        return Err(match hint {
            Some(h) => e.hint(h),
            None => e,
        });
    }
    String::from_utf8(buf).map_err(|e| {
        Error::invalid(format!(
            "{what} on stdin is not valid UTF-8 (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Call `on_close` once nobody reads stdout any more: the read end of a pipe closed (as
/// `| head -1` does), or a terminal hung up. A thread waits in poll(2) on descriptor 1
/// with no events asked, which reports only those conditions; stdout that cannot tell
/// (a file, /dev/null) never calls it.
pub fn on_stdout_closed(on_close: impl FnOnce() + Send + 'static) {
    use nix::errno::Errno;
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    std::thread::spawn(move || {
        let stdout = io::stdout();
        loop {
            let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
            match poll(&mut fds, PollTimeout::NONE) {
                Err(Errno::EINTR) => continue,
                Err(_) => return,
                Ok(_) => {
                    let got = fds[0].revents().unwrap_or(PollFlags::empty());
                    if got.intersects(PollFlags::POLLERR | PollFlags::POLLHUP) {
                        on_close();
                    }
                    // Anything else (POLLNVAL: no stdout at all) is not worth a spin.
                    return;
                }
            }
        }
    });
}

/// Is stdin a terminal?
pub fn stdin_is_tty() -> bool {
    use std::io::IsTerminal;
    io::stdin().is_terminal()
}

/// A duration option: seconds, or a number with `s`, `m` or `h` (`90`, `1.5s`, `5m`).
pub fn duration(p: &mut lexopt::Parser, name: &str) -> Result<std::time::Duration> {
    parse_duration(&string(p, name)?, name)
}

/// The value `v` of the duration option `name`, read as [`duration`] reads one.
pub fn parse_duration(v: &str, name: &str) -> Result<std::time::Duration> {
    crate::run::parse_duration(v).map_err(|why| Error::Usage(format!("{name} '{v}': {why}")))
}
