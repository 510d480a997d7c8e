//! How a POSIX shell reads a place in a command text: outside quotes, inside single or double
//! quotes, in a comment, or in the body of a here-document. This is just enough of `sh` to
//! choose how a reference to a variable must be written at that place
//! ([`super::interpolate::Template::render_shell`]). It knows quotes, backslash escapes, `#`
//! comments and here-documents (`<<WORD`, `<<-WORD`, several on one line, quoted delimiters);
//! `$(...)`, backquotes and `${...}` are text to it, so the quoting around them applies.

use std::collections::VecDeque;

/// What surrounds a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quote {
    None,
    Single,
    Double,
    Comment,
    /// A here-document body whose delimiter is unquoted: expansions happen, quotes are text.
    HereDoc,
    /// A here-document body whose delimiter is quoted: nothing is expanded.
    QuotedHereDoc,
}

/// The state of the shell's reading at one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub quote: Quote,
    /// Right after a backslash that escapes the next character.
    pub escaped: bool,
}

/// The place of each hole in a command text given as characters, with `None` for a hole
/// (where an expansion will stand; to the shell it is part of a word).
pub fn places(text: &[Option<char>]) -> Vec<Place> {
    let mut s = Scanner {
        text,
        i: 0,
        quote: Quote::None,
        escaped: false,
        word_start: true,
        line_start: true,
        pending: VecDeque::new(),
        body: None,
        holes: Vec::new(),
    };
    s.run();
    s.holes
}

/// A here-document announced by `<<`: its delimiter, and how its body is read.
#[derive(Debug, Clone)]
struct HereDoc {
    delimiter: String,
    /// `<<-`: leading tabs are stripped from each line.
    strip_tabs: bool,
    /// The delimiter had quotes or a backslash: the body is not expanded.
    quoted: bool,
}

struct Scanner<'t> {
    text: &'t [Option<char>],
    i: usize,
    quote: Quote,
    escaped: bool,
    /// The next character starts a word (so `#` starts a comment).
    word_start: bool,
    line_start: bool,
    /// Here-documents announced on the current line; their bodies follow it, in order.
    pending: VecDeque<HereDoc>,
    /// The here-document whose body is being read.
    body: Option<HereDoc>,
    holes: Vec<Place>,
}

impl Scanner<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.text.get(self.i + ahead).copied().flatten()
    }

    fn run(&mut self) {
        while self.i < self.text.len() {
            if self.line_start && self.body.is_some() && self.skip_delimiter_line() {
                continue;
            }
            let Some(c) = self.text[self.i] else {
                self.hole();
                continue;
            };
            self.i += 1;
            self.line_start = c == '\n';
            if self.body.is_some() {
                self.body_char(c);
            } else {
                self.step(c);
            }
        }
    }

    fn hole(&mut self) {
        let quote = match &self.body {
            Some(doc) if doc.quoted => Quote::QuotedHereDoc,
            Some(_) => Quote::HereDoc,
            None => self.quote,
        };
        self.holes.push(Place {
            quote,
            escaped: self.escaped,
        });
        self.escaped = false;
        self.word_start = false;
        self.line_start = false;
        self.i += 1;
    }

    /// At the start of a body line: if the line is the delimiter, skip it and go on with the
    /// next pending body, or back to commands.
    fn skip_delimiter_line(&mut self) -> bool {
        let doc = self.body.as_ref().expect("in a body");
        let end = (self.i..self.text.len())
            .find(|&j| self.text[j] == Some('\n'))
            .unwrap_or(self.text.len());
        let line: Option<String> = self.text[self.i..end].iter().copied().collect();
        let Some(line) = line else {
            return false;
        };
        let line = if doc.strip_tabs {
            line.trim_start_matches('\t')
        } else {
            &line
        };
        if line != doc.delimiter {
            return false;
        }
        self.i = (end + 1).min(self.text.len());
        self.body = self.pending.pop_front();
        self.escaped = false;
        self.word_start = true;
        true
    }

    fn body_char(&mut self, c: char) {
        let expanding = self.body.as_ref().is_some_and(|d| !d.quoted);
        if self.escaped {
            self.escaped = false;
        } else if c == '\\' && expanding {
            self.escaped = true;
        }
    }

    fn step(&mut self, c: char) {
        let word_start = std::mem::replace(&mut self.word_start, false);
        if self.escaped {
            self.escaped = false;
            return;
        }
        self.quote = match (self.quote, c) {
            (Quote::Comment | Quote::None, '\n') => {
                self.word_start = true;
                self.body = self.pending.pop_front();
                Quote::None
            }
            (Quote::Single, '\'') | (Quote::Double, '"') => Quote::None,
            (Quote::Double | Quote::None, '\\') => {
                self.escaped = true;
                self.quote
            }
            (Quote::None, '\'') => Quote::Single,
            (Quote::None, '"') => Quote::Double,
            (Quote::None, '#') if word_start => Quote::Comment,
            (Quote::None, '<') if self.peek(0) == Some('<') => {
                if self.peek(1) == Some('<') {
                    // `<<<` (a here-string in some shells) announces no body.
                    self.i += 2;
                    self.word_start = true;
                } else {
                    self.here_doc_operator();
                }
                Quote::None
            }
            (Quote::None, c) => {
                self.word_start = c.is_whitespace() || ";&|()<>".contains(c);
                Quote::None
            }
            (q, _) => q,
        };
    }

    /// After the first `<` of `<<`: read `<[-] WORD` and announce the here-document.
    fn here_doc_operator(&mut self) {
        self.i += 1;
        let strip_tabs = self.peek(0) == Some('-');
        if strip_tabs {
            self.i += 1;
        }
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.i += 1;
        }
        let (delimiter, quoted) = self.delimiter_word();
        if !delimiter.is_empty() {
            self.pending.push_back(HereDoc {
                delimiter,
                strip_tabs,
                quoted,
            });
        }
        self.word_start = true;
    }

    /// A here-document's delimiter word with its quoting removed, and whether it had any.
    fn delimiter_word(&mut self) -> (String, bool) {
        let mut word = String::new();
        let mut quoted = false;
        let mut quote: Option<char> = None;
        while let Some(c) = self.peek(0) {
            match (quote, c) {
                (None, ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')') => break,
                (None, '\'' | '"') => {
                    quote = Some(c);
                    quoted = true;
                }
                (Some(q), c) if c == q => quote = None,
                (None, '\\') => {
                    quoted = true;
                    self.i += 1;
                    word.extend(self.peek(0));
                }
                _ => word.push(c),
            }
            self.i += 1;
        }
        (word, quoted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quoting at each `@` of `text` (each `@` is a hole).
    fn at_holes(text: &str) -> Vec<Quote> {
        let chars: Vec<Option<char>> = text.chars().map(|c| (c != '@').then_some(c)).collect();
        places(&chars).iter().map(|p| p.quote).collect()
    }

    #[test]
    fn quotes_and_comments() {
        use Quote::*;
        assert_eq!(
            at_holes("a @ '@' \"@\" '\"@' \"'@\""),
            [None, Single, Double, Single, Double]
        );
        assert_eq!(at_holes("\\' @ \"\\\"@\""), [None, Double]);
        assert_eq!(at_holes("# it's @\n@"), [Comment, None]);
        assert_eq!(at_holes("a#'@'"), [Single]);
        assert_eq!(at_holes("x <<< '@' @"), [Single, None]);
    }

    #[test]
    fn here_documents() {
        use Quote::*;
        assert_eq!(
            at_holes("cat <<EOF @\n'@'\nEOF\n'@'"),
            [None, HereDoc, Single]
        );
        assert_eq!(at_holes("cat <<'EOF'\n@\nEOF\n@"), [QuotedHereDoc, None]);
        assert_eq!(at_holes("cat <<\\EOF\n@\nEOF"), [QuotedHereDoc]);
        assert_eq!(at_holes("cat <<-E\n\t@\n\tE\n@"), [HereDoc, None]);
        // Two bodies follow their line in order; the second ends at its own delimiter.
        assert_eq!(
            at_holes("cat <<A; cat <<\"B\"\n@\nA\n@\nB\n@"),
            [HereDoc, QuotedHereDoc, None]
        );
        // A line with a hole is never the delimiter; quotes in a body are text.
        assert_eq!(
            at_holes("cat <<E\nE@\n\"@\nE\n\"@\""),
            [HereDoc, HereDoc, Double]
        );
        // `<<` in quotes is text.
        assert_eq!(at_holes("echo '<<E'\n@"), [None]);
    }

    #[test]
    fn escapes_before_holes() {
        let chars: Vec<Option<char>> = "\\@ \"\\@\" '\\@'"
            .chars()
            .map(|c| (c != '@').then_some(c))
            .collect();
        let escaped: Vec<bool> = places(&chars).iter().map(|p| p.escaped).collect();
        assert_eq!(escaped, [true, true, false]);
    }
}
