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
            Error::Hinted { error, .. } => error.exit_code(),
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
        while let Error::Hinted { error, hint } = e {
            hints.push(hint.as_str());
            e = error;
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
