//! Typed errors of the library and the one table that maps them to exit codes.

use std::io;
use std::path::PathBuf;

/// Exit codes shared by every binary (see ARCHITECTURE and every man page).
pub mod exit {
    pub const OK: u8 = 0;
    pub const NO: u8 = 1;
    pub const USAGE: u8 = 64;
    pub const DATAERR: u8 = 65;
    pub const NOINPUT: u8 = 66;
    pub const UNAVAILABLE: u8 = 69;
    pub const SOFTWARE: u8 = 70;
    pub const CANTCREAT: u8 = 73;
    pub const IOERR: u8 = 74;
    pub const TEMPFAIL: u8 = 75;
    pub const NOPERM: u8 = 77;
    pub const INTERRUPTED: u8 = 130;
}

/// Everything the library can refuse or fail at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line was wrong.
    #[error("{0}")]
    Usage(String),
    /// Bad data: a message, a name, a document path, a JSON or YAML file.
    #[error("{0}")]
    Invalid(String),
    /// Something named does not exist (instance, agent, document, resource, proposal).
    #[error("{0}")]
    NotFound(String),
    /// Refused by a rule (document owner, proposal creator, ...).
    #[error("{0}")]
    Denied(String),
    /// A lock could not be taken in time.
    #[error("{0}")]
    Busy(String),
    /// Something to be created exists already.
    #[error("{0}")]
    Exists(String),
    /// A file or directory could not be created.
    #[error("{}: {source}", path.display())]
    Create { path: PathBuf, source: io::Error },
    /// Any other I/O failure, with the file it concerned.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// Stored data that does not parse (a damaged state file).
    #[error("{}: {why}", path.display())]
    Corrupt { path: PathBuf, why: String },
    /// A backend or service that cannot be reached.
    #[error("{0}")]
    Unavailable(String),
    /// A "no" answer: timed out waiting, nothing found.
    #[error("{0}")]
    No(String),
    /// Interrupted by a signal.
    #[error("interrupted")]
    Interrupted,
    /// Another error, with what to do about it. Shown as `error (hint: hint)` in one line;
    /// a command-line tool prints the hint on a line of its own.
    #[error("{error} (hint: {hint})")]
    Hinted { error: Box<Error>, hint: String },
    /// Another error, and what can be done about it, which each front end says in its own
    /// terms ([`Error::word_remedies`]): the command line names its options, a tool what an
    /// agent can do. Shown as the error alone until then.
    #[error("{error}")]
    Remedied { error: Box<Error>, remedy: Remedy },
}

/// What can be done about an error, in no front end's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remedy {
    /// Ask for a new instance though its name is near an existing one's.
    CreateInstance,
    /// Choose the root: the project's, or one named.
    ChooseRoot,
    /// Have an aw-run serve the agent.
    ServeAgent,
    /// Trust the root `root`: choose it on purpose, or add it to the allow list `list`.
    TrustRoot { root: PathBuf, list: String },
}

impl Error {
    /// The exit code this error ends a process with.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => exit::USAGE,
            Error::Invalid(_) => exit::DATAERR,
            Error::NotFound(_) => exit::NOINPUT,
            Error::Denied(_) => exit::NOPERM,
            Error::Busy(_) => exit::TEMPFAIL,
            Error::Create { source, .. } | Error::Io { source, .. }
                if source.kind() == io::ErrorKind::PermissionDenied =>
            {
                exit::NOPERM
            }
            Error::Exists(_) => exit::CANTCREAT,
            Error::Create { .. } => exit::CANTCREAT,
            Error::Io { .. } => exit::IOERR,
            Error::Corrupt { .. } => exit::DATAERR,
            Error::Unavailable(_) => exit::UNAVAILABLE,
            Error::No(_) => exit::NO,
            Error::Interrupted => exit::INTERRUPTED,
            Error::Hinted { error, .. } | Error::Remedied { error, .. } => error.exit_code(),
        }
    }

    /// This error with what can be done about it, for the front end to word.
    pub fn remedy(self, remedy: Remedy) -> Error {
        Error::Remedied {
            error: Box::new(self),
            remedy,
        }
    }

    /// This error with each remedy it carries made a hint by `word` (or dropped, when it
    /// gives none).
    pub fn word_remedies(self, word: &impl Fn(&Remedy) -> Option<String>) -> Error {
        match self {
            Error::Hinted { error, hint } => error.word_remedies(word).hint(hint),
            Error::Remedied { error, remedy } => {
                let error = error.word_remedies(word);
                match word(&remedy) {
                    Some(h) => error.hint(h),
                    None => error,
                }
            }
            e => e,
        }
    }

    /// This error with a hint: what to do about it.
    pub fn hint(self, hint: impl Into<String>) -> Error {
        Error::Hinted {
            error: Box::new(self),
            hint: hint.into(),
        }
    }

    /// The error without its hints, and the hints, outermost last.
    pub fn split_hints(&self) -> (&Error, Vec<&str>) {
        let mut e = self;
        let mut hints = Vec::new();
        loop {
            match e {
                Error::Hinted { error, hint } => {
                    hints.push(hint.as_str());
                    e = error;
                }
                Error::Remedied { error, .. } => e = error,
                _ => break,
            }
        }
        hints.reverse();
        (e, hints)
    }

    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn create(path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Create {
            path: path.into(),
            source,
        }
    }

    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::Invalid(msg.into())
    }

    pub fn not_found(msg: impl Into<String>) -> Error {
        Error::NotFound(msg.into())
    }

    pub fn denied(msg: impl Into<String>) -> Error {
        Error::Denied(msg.into())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attach a path to an `io::Result`.
pub trait IoContext<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remedy_is_worded_by_the_front_end_and_keeps_the_exit_code() {
        let e = Error::not_found("no such instance 'helo'")
            .remedy(Remedy::CreateInstance)
            .hint("outer");
        assert_eq!(e.to_string(), "no such instance 'helo' (hint: outer)");
        assert_eq!(e.split_hints().1, ["outer"]);
        let worded = e.word_remedies(&|r: &Remedy| {
            (r == &Remedy::CreateInstance).then(|| "ask for it".to_string())
        });
        assert_eq!(worded.split_hints().1, ["ask for it", "outer"]);
        assert_eq!(worded.exit_code(), exit::NOINPUT);
        let dropped = Error::denied("no").remedy(Remedy::ChooseRoot);
        let dropped = dropped.word_remedies(&|_: &Remedy| None);
        assert_eq!(dropped.to_string(), "no");
        assert_eq!(dropped.exit_code(), exit::NOPERM);
    }
}
