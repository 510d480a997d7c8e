//! Positions in a file, values that remember where they were written, and the problems
//! (errors and warnings) reported against them as `FILE:LINE:COL: what` (did-you-mean
//! suggestions are [`crate::suggest`]).

use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A place in a file: line and column, both counted from 1; columns count characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

impl Pos {
    /// The first character of a file.
    pub const START: Pos = Pos { line: 1, col: 1 };

    pub fn new(line: usize, col: usize) -> Pos {
        Pos { line, col }
    }

    /// The position reached after reading `text` from here.
    pub fn advance(self, text: &str) -> Pos {
        text.chars().fold(self, |p, c| {
            if c == '\n' {
                Pos::new(p.line + 1, 1)
            } else {
                Pos::new(p.line, p.col + 1)
            }
        })
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// A value and the position of the text it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub pos: Pos,
}

impl<T> Spanned<T> {
    pub fn new(value: T, pos: Pos) -> Spanned<T> {
        Spanned { value, pos }
    }
}

impl<T> Deref for Spanned<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

/// One problem found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file, as it was named to the loader.
    pub file: PathBuf,
    pub pos: Pos,
    /// What is wrong, starting with where in the document's structure when that helps
    /// (`agents.alice.max_runs: expected a whole number, found a string`).
    pub message: String,
    /// A warning does not stop the workflow from loading.
    pub warning: bool,
}

impl Diagnostic {
    /// `FILE:LINE:COL: what`, or `FILE:LINE:COL: warning: what`.
    pub fn render(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.warning { "warning: " } else { "" };
        write!(
            f,
            "{}:{}: {kind}{}",
            self.file.display(),
            self.pos,
            self.message
        )
    }
}

/// Collects the problems of one file (and of the files it refers to).
#[derive(Debug)]
pub(crate) struct Diagnostics {
    file: PathBuf,
    list: Vec<Diagnostic>,
}

impl Diagnostics {
    pub fn new(file: &Path) -> Diagnostics {
        Diagnostics {
            file: file.to_path_buf(),
            list: Vec::new(),
        }
    }

    pub fn error(&mut self, pos: Pos, message: impl Into<String>) {
        self.push_in(self.file.clone(), pos, message.into(), false);
    }

    pub fn warn(&mut self, pos: Pos, message: impl Into<String>) {
        self.push_in(self.file.clone(), pos, message.into(), true);
    }

    /// An error in another file than the one being loaded (a prompt file).
    pub fn error_in(&mut self, file: &Path, pos: Pos, message: impl Into<String>) {
        self.push_in(file.to_path_buf(), pos, message.into(), false);
    }

    fn push_in(&mut self, file: PathBuf, pos: Pos, message: String, warning: bool) {
        self.list.push(Diagnostic {
            file,
            pos,
            message,
            warning,
        });
    }

    pub fn has_errors(&self) -> bool {
        self.list.iter().any(|d| !d.warning)
    }

    /// Everything collected: the loaded file's problems first, by position, then those of
    /// the other files, by file and position.
    pub fn into_sorted(mut self) -> Vec<Diagnostic> {
        sort(&mut self.list, &self.file);
        self.list
    }
}

/// Sort problems as a check prints them: those of `main` first, by position, then those of
/// the other files, by file and position.
pub fn sort(list: &mut [Diagnostic], main: &Path) {
    list.sort_by(|a, b| (a.file != main, &a.file, a.pos).cmp(&(b.file != main, &b.file, b.pos)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_advance_over_text() {
        assert_eq!(Pos::START.advance("ab"), Pos::new(1, 3));
        assert_eq!(Pos::new(2, 5).advance("x\nyz"), Pos::new(3, 3));
        assert_eq!(Pos::START.advance("é"), Pos::new(1, 2));
    }

    #[test]
    fn rendering_and_order() {
        let mut d = Diagnostics::new(Path::new("w.yaml"));
        d.warn(Pos::new(3, 1), "late");
        d.error_in(Path::new("p.md"), Pos::new(1, 1), "in prompt");
        d.error(Pos::new(1, 7), "early");
        assert!(d.has_errors());
        let lines: Vec<String> = d.into_sorted().iter().map(Diagnostic::render).collect();
        assert_eq!(
            lines,
            [
                "w.yaml:1:7: early",
                "w.yaml:3:1: warning: late",
                "p.md:1:1: in prompt"
            ]
        );
    }
}
