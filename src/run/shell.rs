//! How a POSIX shell reads a place in a command text, to choose how a reference to a
//! variable must be written there ([`super::interpolate::Template::render_shell`]).
//!
//! The scanner keeps a stack of the contexts the shell opens, as `sh` reads them: commands
//! (with `#` comments, `case` patterns and parentheses, so that the `)` closing a `$(`
//! is found), single and double quotes, backslash escapes, `$(...)`, backquotes (read as the
//! shell does: the text up to the closing backquote, its backslashes removed, read again as
//! commands), `${...}` parameter expansions, `$((...))` and `((...))` arithmetic, and
//! here-documents (`<<WORD`, `<<-WORD`, several on one line, quoted delimiters, bodies
//! inside `$(...)` too).
//!
//! Each hole gets a [`Place`]: where a quoted word may stand, inside single quotes, inside
//! double quotes (or a here-document body, where the shell does not split either), or
//! refused with the reason. Refused: a hole the shell would not expand as a whole value
//! (after a backslash or a `$`, in a quoted here-document), a hole where the value would be
//! read as something other than data (arithmetic, a `${x#pattern}`, a here-document
//! delimiter, a `${...}` form other than the POSIX ones, `$'...'`), and every hole after
//! something the shells read differently or that this scanner does not know (`$((` that is
//! not arithmetic, a `'` in `"${x:-...}"`, `\'` in `$'...'`, `\"` in backquotes within
//! a here-document or `${...}`, a here-document whose body would start inside a nested
//! text, or that has no delimiter line, or a line in `$(...)` starting with its
//! delimiter): from there on it cannot prove the context.

/// How a hole must be written, or why it may not stand where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Where words are split: outside quotes (in commands, unquoted `${x:-...}` words and
    /// comments).
    Unquoted,
    /// Inside single quotes read as such (not in double quotes).
    Single,
    /// Inside double quotes, or in the body of a here-document with an unquoted delimiter:
    /// expansions happen, nothing is split.
    Double,
    /// Refused: why, as a phrase following the reference (`follows a backslash ...`).
    Refused(String),
}

/// How deep contexts may nest (`"$(echo "$(...)")"` is four deep); a reference past that
/// depth, and every one after it, is refused.
pub const MAX_NESTING: usize = 64;

/// Why a hole after a backslash is refused.
pub const ESCAPED: &str =
    "follows a backslash that would escape its expansion; remove the backslash";
const AFTER_DOLLAR: &str =
    "follows a '$', which would make the shell read its expansion as another one; remove the '$'";
const QUOTED_HERE_DOC: &str = "is in a here-document with a quoted delimiter, where nothing is expanded; unquote the delimiter";
const ARITHMETIC: &str = "is in an arithmetic expression ($((...)), ((...)) or $[...]), where the shell would evaluate the value instead of using it as data";
const PATTERN: &str = "is in the pattern of a ${...} expansion (#, ##, %, %%), where the shell would read the value as a pattern";
const PARAM_FORM: &str = "is in a ${...} expansion other than ${NAME}, ${NAME:-WORD}, ${NAME:=WORD}, ${NAME:?WORD} or ${NAME:+WORD} (with or without the colon)";
const PARAM_NAME: &str = "is in the name of a ${...} expansion";
const DELIMITER: &str = "is in a here-document delimiter, which is never expanded";
const ANSI_C: &str =
    "is in a $'...' string, where backslash escapes apply; use '...' or \"...\" instead";

/// The place of each hole in a command text given as characters, with `None` for a hole
/// (where an expansion will stand; to the shell it is part of a word).
pub fn places(text: &[Option<char>]) -> Vec<Place> {
    let total = text.iter().filter(|c| c.is_none()).count();
    let mut s = Scanner::new(text, None, false);
    let lost = s.command(End::Text).err();
    let mut holes = s.holes;
    let what = lost.map_or("the end of what it could read", |Lost(what)| what);
    let why = format!(
        "comes after {what}, where aw-run cannot tell how the shell reads the rest of the command"
    );
    holes.resize(total, Place::Refused(why));
    holes
}

/// The scanner met something it cannot read for certain (what, as a noun phrase): every
/// later hole is refused.
#[derive(Debug)]
struct Lost(&'static str);

type Scan = Result<(), Lost>;

/// What ends a command context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The end of the text (the whole command, a backquoted command).
    Text,
    /// An unmatched `)`: the end of a `$(`.
    Paren,
}

/// A context where expansions happen but nothing is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expanding {
    /// `"..."`, ended by `"`.
    Double,
    /// A here-document body: the whole text; `"` and `'` are plain characters.
    HereDoc,
    /// The word of a `${...}` within double quotes or a here-document, ended by `}`.
    ParamWord,
}

/// What a `$` or backquote is found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// Commands, or a `${...}` word outside quotes.
    Unquoted,
    /// Double quotes, arithmetic.
    Double,
    /// The word of a `${...}` within double quotes or a here-document.
    DoubleParam,
    /// A here-document body.
    HereDoc,
}

/// How the arithmetic text ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArithEnd {
    /// `))`, for `$((` and `((`.
    Parens,
    /// `]`, for `$[`.
    Bracket,
}

/// Where a `case` command is in its reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// After `case`: the word matched.
    Subject,
    /// Expecting `in`.
    In,
    /// Before a pattern list (or `esac`): an optional `(`, then patterns.
    PatternStart,
    /// In a pattern list, ended by `)`.
    Pattern,
    /// In the commands of a clause, ended by `;;` or `esac`.
    Body,
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

/// The reading state of one command context (the whole text, a `$(...)`, a backquote).
struct Commands {
    /// Open `(` (subshells, `()` of functions).
    depth: usize,
    /// The next word is a command name (so a reserved word is recognised).
    command_position: bool,
    /// The current word: its plain characters, whether it has any other part, whether it is
    /// empty (so `#` starts a comment).
    word: String,
    plain: bool,
    empty: bool,
    /// Here-documents announced on the current line; their bodies follow it, in order.
    pending: Vec<HereDoc>,
    cases: Vec<Case>,
}

impl Commands {
    fn new() -> Commands {
        Commands {
            depth: 0,
            command_position: true,
            word: String::new(),
            plain: true,
            empty: true,
            pending: Vec::new(),
            cases: Vec::new(),
        }
    }

    /// A part of the word other than plain characters.
    fn part(&mut self) {
        self.plain = false;
        self.empty = false;
    }

    /// The word (if any) ends: follow `case` and reserved words.
    fn end_word(&mut self) -> Scan {
        if self.empty {
            return Ok(());
        }
        let word = std::mem::take(&mut self.word);
        let plain = std::mem::replace(&mut self.plain, true);
        self.empty = true;
        let reserved = |w: &str| plain && word == w;
        match self.cases.last().copied() {
            Some(Case::Subject) => *self.cases.last_mut().unwrap() = Case::In,
            Some(Case::In) if reserved("in") => {
                *self.cases.last_mut().unwrap() = Case::PatternStart
            }
            Some(Case::In) => return Err(Lost("a 'case' without 'in'")),
            Some(Case::PatternStart) if reserved("esac") => {
                self.cases.pop();
                self.command_position = false;
            }
            Some(Case::PatternStart) => *self.cases.last_mut().unwrap() = Case::Pattern,
            Some(Case::Pattern) => {}
            Some(Case::Body) | None if self.command_position => {
                if reserved("case") {
                    self.cases.push(Case::Subject);
                    self.command_position = false;
                } else if reserved("esac") && self.cases.last() == Some(&Case::Body) {
                    self.cases.pop();
                    self.command_position = false;
                } else {
                    let keeps = [
                        "if", "then", "else", "elif", "do", "while", "until", "!", "{", "}",
                    ];
                    self.command_position = plain && keeps.contains(&word.as_str());
                }
            }
            Some(Case::Body) | None => {}
        }
        Ok(())
    }
}

struct Scanner<'t> {
    text: &'t [Option<char>],
    i: usize,
    /// Why every hole here is refused (inside arithmetic, a pattern), if it is.
    taint: Option<&'static str>,
    /// Inside a command substitution (`$(...)` or backquotes), where bash ends a
    /// here-document at a line that only starts with its delimiter.
    substitution: bool,
    /// How many contexts deep the scan is.
    depth: usize,
    holes: Vec<Place>,
}

impl<'t> Scanner<'t> {
    fn new(
        text: &'t [Option<char>],
        taint: Option<&'static str>,
        substitution: bool,
    ) -> Scanner<'t> {
        Scanner {
            text,
            i: 0,
            taint,
            substitution,
            depth: 0,
            holes: Vec::new(),
        }
    }

    /// The item `ahead` of the current one: `None` past the end, `Some(None)` for a hole.
    fn get(&self, ahead: usize) -> Option<Option<char>> {
        self.text.get(self.i + ahead).copied()
    }

    fn ch(&self, ahead: usize) -> Option<char> {
        self.get(ahead).flatten()
    }

    /// The hole at the current item stands at `place` (unless something refuses it).
    fn hole(&mut self, place: Place) {
        let place = match self.taint {
            Some(why) => Place::Refused(why.to_string()),
            None => place,
        };
        self.holes.push(place);
        self.i += 1;
    }

    fn refuse(&mut self, why: &str) {
        self.holes.push(Place::Refused(why.to_string()));
        self.i += 1;
    }

    /// Run `scan` one context deeper: refused past [`MAX_NESTING`].
    fn deeper(&mut self, scan: impl FnOnce(&mut Scanner) -> Scan) -> Scan {
        if self.depth >= MAX_NESTING {
            return Err(Lost("contexts nested deeper than the limit (64)"));
        }
        self.depth += 1;
        let result = scan(self);
        self.depth -= 1;
        result
    }

    /// Scan `text` (a backquoted command, a here-document body) with a scanner of its own.
    fn nested(
        &mut self,
        text: &[Option<char>],
        substitution: bool,
        scan: impl FnOnce(&mut Scanner) -> Scan,
    ) -> Scan {
        let mut inner = Scanner::new(text, self.taint, substitution);
        inner.depth = self.depth;
        let result = scan(&mut inner);
        self.holes.append(&mut inner.holes);
        result
    }

    /// A backslash at the current item, outside single quotes: skip it and what it escapes
    /// (refusing a hole). A backslash-newline is removed by the shell: `true` then.
    fn backslash(&mut self) -> bool {
        self.i += 1;
        match self.get(0) {
            Some(None) => self.refuse(ESCAPED),
            Some(Some(c)) => {
                self.i += 1;
                return c == '\n';
            }
            None => {}
        }
        false
    }

    /// Commands, up to `end`.
    fn command(&mut self, end: End) -> Scan {
        let mut st = Commands::new();
        loop {
            let Some(item) = self.get(0) else {
                if end == End::Paren {
                    return Err(Lost("an unclosed '$('"));
                }
                return st.end_word();
            };
            let Some(c) = item else {
                self.hole(Place::Unquoted);
                st.part();
                continue;
            };
            match c {
                '\\' => {
                    if !self.backslash() {
                        st.part();
                    }
                }
                '\'' | '"' | '`' | '$' => {
                    let start = self.i;
                    match c {
                        '\'' => {
                            self.i += 1;
                            self.single()?;
                        }
                        '"' => {
                            self.i += 1;
                            self.expanding(Expanding::Double)?;
                        }
                        '`' => self.backquote(Ctx::Unquoted)?,
                        _ => self.dollar(Ctx::Unquoted)?,
                    }
                    st.part();
                    let newline = self.text[start..self.i].contains(&Some('\n'));
                    if newline && !st.pending.is_empty() {
                        return Err(Lost(
                            "a here-document whose body would start inside a quoted or nested text",
                        ));
                    }
                }
                '#' if st.empty => self.comment(),
                '\n' => {
                    st.end_word()?;
                    self.i += 1;
                    st.command_position = true;
                    for doc in std::mem::take(&mut st.pending) {
                        self.here_body(&doc)?;
                    }
                }
                ' ' | '\t' => {
                    st.end_word()?;
                    self.i += 1;
                }
                ';' => {
                    st.end_word()?;
                    self.i += 1;
                    if matches!(self.ch(0), Some(';' | '&')) {
                        // `;;`, `;&` (and `;;&`) end a case clause.
                        self.i += 1;
                        if self.ch(0) == Some('&') {
                            self.i += 1;
                        }
                        if st.cases.last() == Some(&Case::Body) {
                            *st.cases.last_mut().unwrap() = Case::PatternStart;
                        }
                    }
                    st.command_position = true;
                }
                '&' | '|' => {
                    st.end_word()?;
                    self.i += 1;
                    if self.ch(0) == Some(c) {
                        self.i += 1;
                    }
                    st.command_position = true;
                }
                '<' if self.ch(1) == Some('<') => {
                    st.end_word()?;
                    if self.ch(2) == Some('<') {
                        // `<<<` (a here-string in some shells) announces no body.
                        self.i += 3;
                    } else {
                        let doc = self.here_doc_operator()?;
                        st.pending.push(doc);
                    }
                }
                '<' | '>' => {
                    st.end_word()?;
                    self.i += 1;
                }
                '(' => {
                    st.end_word()?;
                    self.i += 1;
                    if st.cases.last() == Some(&Case::PatternStart) {
                        // The optional `(` before a pattern list.
                        *st.cases.last_mut().unwrap() = Case::Pattern;
                    } else if st.command_position && self.ch(0) == Some('(') {
                        self.i += 1;
                        self.arithmetic(ArithEnd::Parens)?;
                        st.command_position = false;
                    } else {
                        st.depth += 1;
                        st.command_position = true;
                    }
                }
                ')' => {
                    st.end_word()?;
                    self.i += 1;
                    if matches!(st.cases.last(), Some(Case::Pattern | Case::PatternStart)) {
                        *st.cases.last_mut().unwrap() = Case::Body;
                        st.command_position = true;
                    } else if st.depth > 0 {
                        st.depth -= 1;
                        st.command_position = true;
                    } else if end == End::Paren {
                        if !st.cases.is_empty() || !st.pending.is_empty() {
                            return Err(Lost(
                                "a '$(' closed inside a 'case' or before a here-document body",
                            ));
                        }
                        return Ok(());
                    }
                }
                _ => {
                    st.word.push(c);
                    st.empty = false;
                    self.i += 1;
                }
            }
        }
    }

    /// A `#` comment, up to (not including) the newline.
    fn comment(&mut self) {
        while let Some(item) = self.get(0) {
            match item {
                Some('\n') => break,
                Some(_) => self.i += 1,
                None => self.hole(Place::Unquoted),
            }
        }
    }

    /// After a `'`: up to the closing `'`.
    fn single(&mut self) -> Scan {
        loop {
            match self.get(0) {
                None => return Err(Lost("an unclosed single quote")),
                Some(None) => self.hole(Place::Single),
                Some(Some('\'')) => {
                    self.i += 1;
                    return Ok(());
                }
                Some(Some(_)) => self.i += 1,
            }
        }
    }

    /// Text where expansions happen but nothing is split, after its opening character.
    fn expanding(&mut self, how: Expanding) -> Scan {
        self.deeper(|s| s.expanding_text(how))
    }

    fn expanding_text(&mut self, how: Expanding) -> Scan {
        let ctx = match how {
            Expanding::Double => Ctx::Double,
            Expanding::HereDoc => Ctx::HereDoc,
            Expanding::ParamWord => Ctx::DoubleParam,
        };
        loop {
            let Some(item) = self.get(0) else {
                return match how {
                    Expanding::HereDoc => Ok(()),
                    Expanding::Double => Err(Lost("an unclosed double quote")),
                    Expanding::ParamWord => Err(Lost("an unclosed '${'")),
                };
            };
            let Some(c) = item else {
                self.hole(Place::Double);
                continue;
            };
            match (c, how) {
                ('\\', _) => {
                    self.backslash();
                }
                ('$', _) => self.dollar(ctx)?,
                ('`', _) => self.backquote(ctx)?,
                ('"', Expanding::Double) | ('}', Expanding::ParamWord) => {
                    self.i += 1;
                    return Ok(());
                }
                ('"', Expanding::ParamWord) => {
                    self.i += 1;
                    self.expanding(Expanding::Double)?;
                }
                ('\'', Expanding::ParamWord) => {
                    return Err(Lost(
                        "a ' in a ${...} within double quotes or a here-document (shells differ on it)",
                    ));
                }
                _ => self.i += 1,
            }
        }
    }

    /// The word of a `${...}` outside quotes, up to the closing `}`.
    fn unquoted_word(&mut self) -> Scan {
        loop {
            let Some(item) = self.get(0) else {
                return Err(Lost("an unclosed '${'"));
            };
            let Some(c) = item else {
                self.hole(Place::Unquoted);
                continue;
            };
            match c {
                '\\' => {
                    self.backslash();
                }
                '\'' => {
                    self.i += 1;
                    self.single()?;
                }
                '"' => {
                    self.i += 1;
                    self.expanding(Expanding::Double)?;
                }
                '$' => self.dollar(Ctx::Unquoted)?,
                '`' => self.backquote(Ctx::Unquoted)?,
                '}' => {
                    self.i += 1;
                    return Ok(());
                }
                _ => self.i += 1,
            }
        }
    }

    /// A `$` at the current item, in `ctx`.
    fn dollar(&mut self, ctx: Ctx) -> Scan {
        self.deeper(|s| s.dollar_expansion(ctx))
    }

    fn dollar_expansion(&mut self, ctx: Ctx) -> Scan {
        match self.get(1) {
            Some(None) => {
                self.i += 1;
                self.refuse(AFTER_DOLLAR);
            }
            Some(Some('(')) if self.ch(2) == Some('(') => {
                self.i += 3;
                self.arithmetic(ArithEnd::Parens)?;
            }
            Some(Some('(')) => {
                self.i += 2;
                let outer = std::mem::replace(&mut self.substitution, true);
                self.command(End::Paren)?;
                self.substitution = outer;
            }
            Some(Some('[')) => {
                self.i += 2;
                self.arithmetic(ArithEnd::Bracket)?;
            }
            Some(Some('{')) => {
                self.i += 2;
                self.parameter(ctx)?;
            }
            Some(Some('\'')) if ctx == Ctx::Unquoted => {
                self.i += 2;
                self.ansi_c()?;
            }
            Some(Some('"')) if ctx == Ctx::Unquoted => {
                // `$"..."`: double quotes (translated by some shells).
                self.i += 2;
                self.expanding(Expanding::Double)?;
            }
            Some(Some('$' | '?' | '#' | '!' | '@' | '*' | '-' | '0'..='9')) => self.i += 2,
            _ => self.i += 1,
        }
        Ok(())
    }

    /// After `$'`: up to the closing `'`.
    fn ansi_c(&mut self) -> Scan {
        loop {
            match self.get(0) {
                None => return Err(Lost("an unclosed $'...'")),
                Some(None) => self.refuse(ANSI_C),
                Some(Some('\'')) => {
                    self.i += 1;
                    return Ok(());
                }
                Some(Some('\\')) => {
                    if self.ch(1) == Some('\'') {
                        return Err(Lost("\\' in $'...' (shells differ on where it ends)"));
                    }
                    if self.get(1) == Some(None) {
                        self.i += 1;
                        self.refuse(ANSI_C);
                    } else {
                        self.i += 2;
                    }
                }
                Some(Some(_)) => self.i += 1,
            }
        }
    }

    /// After `${`: up to the closing `}`.
    fn parameter(&mut self, ctx: Ctx) -> Scan {
        let saved = self.taint;
        let known = self.parameter_head();
        let word = match known {
            Head::Done => return Ok(()),
            Head::Word => saved,
            Head::Pattern => Some(saved.unwrap_or(PATTERN)),
            Head::Unknown => Some(saved.unwrap_or(PARAM_FORM)),
        };
        self.taint = word;
        let result = match ctx {
            Ctx::Unquoted => self.unquoted_word(),
            Ctx::Double | Ctx::DoubleParam | Ctx::HereDoc => self.expanding(Expanding::ParamWord),
        };
        self.taint = saved;
        result
    }

    /// The name and operator of a `${...}`, consumed when known.
    fn parameter_head(&mut self) -> Head {
        if self.get(0) == Some(None) {
            self.refuse(PARAM_NAME);
            return Head::Unknown;
        }
        let length = self.ch(0) == Some('#') && self.ch(1) != Some('}');
        if length {
            self.i += 1;
        }
        let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
        match self.ch(0) {
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                while self.ch(0).is_some_and(name_char) {
                    self.i += 1;
                }
            }
            Some(c) if c.is_ascii_digit() => {
                while self.ch(0).is_some_and(|c| c.is_ascii_digit()) {
                    self.i += 1;
                }
            }
            Some('@' | '*' | '#' | '?' | '-' | '$' | '0') => self.i += 1,
            Some('!') if self.ch(1) == Some('}') => self.i += 1,
            _ => return Head::Unknown,
        }
        match (self.ch(0), self.ch(1)) {
            (Some('}'), _) => {
                self.i += 1;
                Head::Done
            }
            _ if length => Head::Unknown,
            (Some(':'), Some('-' | '=' | '?' | '+')) => {
                self.i += 2;
                Head::Word
            }
            (Some('-' | '=' | '?' | '+'), _) => {
                self.i += 1;
                Head::Word
            }
            (Some('#'), Some('#')) | (Some('%'), Some('%')) => {
                self.i += 2;
                Head::Pattern
            }
            (Some('#' | '%'), _) => {
                self.i += 1;
                Head::Pattern
            }
            _ => Head::Unknown,
        }
    }

    /// After `$((`, `((` or `$[`: up to the end of the expression. Every hole is refused.
    fn arithmetic(&mut self, end: ArithEnd) -> Scan {
        let saved = self.taint;
        self.taint = Some(saved.unwrap_or(ARITHMETIC));
        let result = self.arithmetic_text(end);
        self.taint = saved;
        result
    }

    fn arithmetic_text(&mut self, end: ArithEnd) -> Scan {
        let mut depth = 0usize;
        loop {
            let Some(item) = self.get(0) else {
                return Err(Lost("an unclosed arithmetic expression"));
            };
            let Some(c) = item else {
                self.hole(Place::Double);
                continue;
            };
            match (c, end) {
                ('\\', _) => {
                    self.backslash();
                }
                ('$', _) => self.dollar(Ctx::Double)?,
                ('`', _) => self.backquote(Ctx::Double)?,
                ('"', _) => {
                    self.i += 1;
                    self.expanding(Expanding::Double)?;
                }
                ('\'', _) => return Err(Lost("a ' in an arithmetic expression")),
                ('(', ArithEnd::Parens) | ('[', ArithEnd::Bracket) => {
                    depth += 1;
                    self.i += 1;
                }
                (')', ArithEnd::Parens) | (']', ArithEnd::Bracket) if depth > 0 => {
                    depth -= 1;
                    self.i += 1;
                }
                (']', ArithEnd::Bracket) => {
                    self.i += 1;
                    return Ok(());
                }
                (')', ArithEnd::Parens) if self.ch(1) == Some(')') => {
                    self.i += 2;
                    return Ok(());
                }
                (')', ArithEnd::Parens) => {
                    return Err(Lost(
                        "a '((' or '$((' that is not arithmetic (write '( (' or '$( (')",
                    ));
                }
                _ => self.i += 1,
            }
        }
    }

    /// A backquote at the current item, in `ctx`: the text up to the closing backquote,
    /// with the backslashes the shell removes there removed, is read as commands.
    fn backquote(&mut self, ctx: Ctx) -> Scan {
        self.deeper(|s| s.backquoted(ctx))
    }

    fn backquoted(&mut self, ctx: Ctx) -> Scan {
        self.i += 1;
        let mut inner = Vec::new();
        loop {
            match self.get(0) {
                None => return Err(Lost("an unclosed backquote")),
                Some(Some('`')) => {
                    self.i += 1;
                    break;
                }
                Some(Some('\\')) => {
                    let next = self.get(1);
                    if next == Some(Some('"')) && matches!(ctx, Ctx::HereDoc | Ctx::DoubleParam) {
                        return Err(Lost(
                            "\\\" in backquotes within a here-document or a ${...} (shells differ on it)",
                        ));
                    }
                    let removed = matches!(next, Some(Some('$' | '`' | '\\')))
                        || (next == Some(Some('"')) && ctx == Ctx::Double);
                    if !removed {
                        inner.push(Some('\\'));
                    }
                    if let Some(next) = next {
                        inner.push(next);
                    }
                    self.i += 2;
                }
                Some(item) => {
                    inner.push(item);
                    self.i += 1;
                }
            }
        }
        self.nested(&inner, true, |s| s.command(End::Text))
    }

    /// After the first `<` of `<<`: read `<<[-] WORD`.
    fn here_doc_operator(&mut self) -> Result<HereDoc, Lost> {
        self.i += 2;
        let strip_tabs = self.ch(0) == Some('-');
        if strip_tabs {
            self.i += 1;
        }
        while matches!(self.ch(0), Some(' ' | '\t')) {
            self.i += 1;
        }
        let mut delimiter = String::new();
        let mut quoted = false;
        let mut quote: Option<char> = None;
        let unreadable = Lost("a here-document delimiter that is empty or has '$' or '`'");
        while let Some(item) = self.get(0) {
            let Some(c) = item else {
                self.refuse(DELIMITER);
                return Err(Lost("a here-document delimiter with a reference in it"));
            };
            match (quote, c) {
                (None, ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')') => break,
                (_, '$' | '`') => return Err(unreadable),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    quoted = true;
                }
                (Some(q), c) if c == q => quote = None,
                (None, '\\') | (Some('"'), '\\') => {
                    quoted = true;
                    self.i += 1;
                    match self.get(0) {
                        Some(None) => {
                            self.refuse(DELIMITER);
                            return Err(Lost("a here-document delimiter with a reference in it"));
                        }
                        Some(Some(c)) => {
                            if quote.is_some() && !matches!(c, '"' | '\\') {
                                delimiter.push('\\');
                            }
                            delimiter.push(c);
                        }
                        None => break,
                    }
                }
                _ => delimiter.push(c),
            }
            self.i += 1;
        }
        if quote.is_some() {
            return Err(Lost("an unclosed quote in a here-document delimiter"));
        }
        if delimiter.is_empty() {
            return Err(unreadable);
        }
        Ok(HereDoc {
            delimiter,
            strip_tabs,
            quoted,
        })
    }

    /// At the start of the line after a `<<` operator: the body of `doc` and its
    /// delimiter line.
    fn here_body(&mut self, doc: &HereDoc) -> Scan {
        let start = self.i;
        let mut line_start = start;
        // The previous line ended with a backslash-newline: this one continues it.
        let mut continued = false;
        let (body_end, next) = loop {
            if line_start >= self.text.len() {
                return Err(Lost("a here-document without its delimiter line"));
            }
            let end = (line_start..self.text.len())
                .find(|&j| self.text[j] == Some('\n'))
                .unwrap_or(self.text.len());
            let line = &self.text[line_start..end];
            let text: Option<String> = line.iter().copied().collect();
            if let (Some(text), false) = (text, continued) {
                let text = if doc.strip_tabs {
                    text.trim_start_matches('\t')
                } else {
                    &text
                };
                if text == doc.delimiter {
                    break (line_start, (end + 1).min(self.text.len()));
                }
                if self.substitution && text.starts_with(&doc.delimiter) {
                    return Err(Lost(
                        "a here-document line in a command substitution that starts with its delimiter (bash ends the body there)",
                    ));
                }
            }
            let backslashes = line.iter().rev().take_while(|c| **c == Some('\\')).count();
            continued = !doc.quoted && backslashes % 2 == 1;
            line_start = end + 1;
        };
        let body = &self.text[start..body_end];
        if doc.quoted {
            for _ in body.iter().filter(|c| c.is_none()) {
                self.holes.push(Place::Refused(QUOTED_HERE_DOC.to_string()));
            }
        } else {
            self.nested(body, self.substitution, |s| s.expanding(Expanding::HereDoc))?;
        }
        self.i = next;
        Ok(())
    }
}

/// What the head of a `${...}` is.
enum Head {
    /// `${NAME}`: read whole.
    Done,
    /// `${NAME:-WORD}` and the like: the word follows.
    Word,
    /// `${NAME#PATTERN}` and the like: the pattern follows.
    Pattern,
    /// Something else: its text follows, up to `}`.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The place of each `@` of `text` (each `@` is a hole), refusals as `R`.
    fn at_holes(text: &str) -> Vec<Place> {
        let chars: Vec<Option<char>> = text.chars().map(|c| (c != '@').then_some(c)).collect();
        places(&chars)
    }

    fn short(text: &str) -> String {
        at_holes(text)
            .iter()
            .map(|p| match p {
                Place::Unquoted => 'U',
                Place::Single => 'S',
                Place::Double => 'D',
                Place::Refused(_) => 'R',
            })
            .collect()
    }

    #[test]
    fn quotes_and_comments() {
        use Place::*;
        assert_eq!(
            at_holes("a @ '@' \"@\" '\"@' \"'@\""),
            [Unquoted, Single, Double, Single, Double]
        );
        assert_eq!(at_holes("\\' @ \"\\\"@\""), [Unquoted, Double]);
        assert_eq!(at_holes("# it's @\n@"), [Unquoted, Unquoted]);
        assert_eq!(at_holes("a#'@'"), [Single]);
        assert_eq!(at_holes("x <<< '@' @"), [Single, Unquoted]);
    }

    #[test]
    fn here_documents() {
        assert_eq!(short("cat <<EOF @\n'@'\nEOF\n'@'"), "UDS");
        assert_eq!(short("cat <<'EOF'\n@\nEOF\n@"), "RU");
        assert_eq!(short("cat <<\\EOF\n@\nEOF"), "R");
        assert_eq!(short("cat <<-E\n\t@\n\tE\n@"), "DU");
        // Two bodies follow their line in order; the second ends at its own delimiter.
        assert_eq!(short("cat <<A; cat <<\"B\"\n@\nA\n@\nB\n@"), "DRU");
        // A line with a hole is never the delimiter; quotes in a body are text.
        assert_eq!(short("cat <<E\nE@\n\"@\nE\n\"@\""), "DDD");
        // `<<` in quotes is text.
        assert_eq!(short("echo '<<E'\n@"), "U");
        // A backslash-newline joins the next line to the body line.
        assert_eq!(short("cat <<E\na\\\nE\n@\nE\n@"), "DU");
        // Inside `$(...)`, with the `)` after the body; `$(...)` in a body opens commands.
        assert_eq!(short("x=\"$(cat <<E\n@ '@'\nE\n)\" @"), "DDU");
        assert_eq!(short("cat <<E\n$(echo @ '@' \"@\")\nE\n"), "USD");
        // A reference in the delimiter, or a body that would start inside quotes.
        assert_eq!(short("cat <<@\nx\n@\n"), "RR");
        assert_eq!(short("cat <<E; echo \"a\nb\"\nE\n@"), "R");
        // No delimiter line; in `$(...)`, a line that starts with the delimiter, which ends
        // the body for bash but not for dash.
        assert_eq!(short("cat <<E\n@\n"), "R");
        assert_eq!(short("x=\"$(cat <<E\n@\nE)\"\n@\nE\n)\""), "RR");
        assert_eq!(short("x=`cat <<E\nE )\nE\n`; @"), "R");
        assert_eq!(short("cat <<E\nE)\nE\n@"), "U");
        // `\"` in backquotes in a body or a `${...}` word: dash removes the backslash,
        // bash does not.
        assert_eq!(short("cat <<E\n`echo \\\"@\\\"`\nE\n@"), "RR");
        assert_eq!(short("echo \"${u:-`echo \\\"@\\\"`}\" @"), "RR");
        assert_eq!(short("cat <<E\n`echo \"@\"`\nE\n"), "D");
    }

    #[test]
    fn command_substitutions_open_commands() {
        assert_eq!(short("echo \"$(find -name @)\" @"), "UU");
        assert_eq!(short("echo \"$(echo '@' \"@\" $(echo @))\""), "SDU");
        assert_eq!(
            short("echo \"$(case a in a) echo @;; (b|c) x;; esac) @\""),
            "UD"
        );
        assert_eq!(
            short("echo \"$(case a in\n a) (echo @) ;;\n esac)@\""),
            "UD"
        );
        assert_eq!(short("echo \"$(echo a # )\n@)\" @"), "UU");
        assert_eq!(short("echo $(f() { echo @; }; f) \"@\""), "UD");
        // Backquotes: their text, backslashes removed, is read as commands.
        assert_eq!(
            short("echo `echo @ '@' \"@\"` \"`echo @ \\\"@\\\"`\""),
            "USDUD"
        );
        assert_eq!(short("echo \"`echo \\`echo @\\``\""), "U");
        assert_eq!(short("echo `echo \\@`"), "R");
        assert_eq!(short("echo `unclosed @"), "R");
    }

    #[test]
    fn arithmetic_and_parameters() {
        assert_eq!(short("n=$((1<<2)); echo @"), "U");
        assert_eq!(short("echo $((1 + @)) @"), "RU");
        assert_eq!(short("echo $(( $(echo @) )) @"), "RU");
        assert_eq!(short("((n = @)); echo @"), "RU");
        assert_eq!(short("echo $[@] @"), "RU");
        assert_eq!(short("echo $((echo a) ) @"), "R");
        assert_eq!(short("echo $( (echo @) ) @"), "UU");
        assert_eq!(
            short("echo ${x:-@} \"${x:-@}\" ${x-'@'} \"${x:+\"@\"}\""),
            "UDSD"
        );
        assert_eq!(
            short("echo ${x#@} \"${x%%@}\" ${x/@/} ${@} ${#x} @"),
            "RRRRU"
        );
        assert_eq!(short("echo \"${x:-'a'}\" @"), "R");
        assert_eq!(short("cat <<E\n${x:-\"@\"}\nE\n"), "D");
        assert_eq!(short("echo $@ \"$@\" $$@ @"), "RRUU");
        assert_eq!(short("echo $'a @' $'b\\'c' @"), "RR");
        assert_eq!(short("echo $\"@\" @"), "DU");
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = |n: usize| format!("{}@{}", "\"$(echo ".repeat(n), ")\"".repeat(n));
        assert_eq!(short(&deep(MAX_NESTING / 2)), "U");
        assert_eq!(short(&deep(MAX_NESTING / 2 + 1)), "R");
        // Far deeper than any stack would allow unbounded.
        assert_eq!(short(&format!("{}@", "$(".repeat(1_000_000))), "R");
        assert_eq!(short(&format!("{}@", "`\\".repeat(100_000))), "R");
    }

    #[test]
    fn escapes_before_holes() {
        let refused = |text: &str| at_holes(text) == [Place::Refused(ESCAPED.to_string())];
        assert!(refused("\\@"));
        assert!(refused("\"\\@\""));
        assert!(refused("cat <<E\n\\@\nE\n"));
        assert_eq!(at_holes("'\\@'"), [Place::Single]);
        assert_eq!(at_holes("\\\\@"), [Place::Unquoted]);
    }
}
