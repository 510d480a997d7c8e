//! Messages on stderr, one line each: an error as `tool: message` with its `hint:` lines, a
//! warning, a note. Every layer may print them; only the command-line front ends
//! ([`crate::cli`]) choose exit codes.

use std::io::{self, Write};

use crate::error::Error;

/// Print an error as `tool: message`, then a `hint:` line for each hint it carries.
pub fn report(tool: &str, e: &Error) {
    let (what, hints) = e.split_hints();
    let _ = writeln!(
        io::stderr().lock(),
        "{tool}: {}",
        what.to_string().replace('\n', " ")
    );
    for h in hints {
        hint(h);
    }
}

/// Print a warning on stderr.
pub fn warn(tool: &str, msg: impl std::fmt::Display) {
    let _ = writeln!(io::stderr().lock(), "{tool}: warning: {msg}");
}

/// Print a note on stderr (something a person should know, not a problem).
pub fn warn_note(tool: &str, msg: &str) {
    let _ = writeln!(io::stderr().lock(), "{tool}: {msg}");
}

/// Print a `hint:` line on stderr.
pub fn hint(h: &str) {
    let _ = writeln!(io::stderr().lock(), "hint: {h}");
}

/// Run `make`, which may create the directory `dir` (a root `.workflow/` made on a first
/// write); when it did, say so on stderr, `tool: created DIR`, with `DIR` absolute, so that
/// nothing is made silently.
pub fn noting_created<T, E>(
    tool: &str,
    dir: &std::path::Path,
    make: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let existed = dir.is_dir();
    let made = make()?;
    if !existed && dir.is_dir() {
        let shown = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        warn_note(tool, &format!("created {}", shown.display()));
    }
    Ok(made)
}
