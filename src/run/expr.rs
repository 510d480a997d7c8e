//! The `if:` expressions of workflow tasks: a small, safe language, never a shell.
//!
//! ```text
//! expr    := or
//! or      := and ( "||" and )*
//! and     := cmp ( "&&" cmp )*
//! cmp     := unary ( ( "==" | "!=" | "contains" | "startsWith" ) unary )?
//! unary   := "!" unary | primary
//! primary := STRING | "true" | "false" | NAME | "${{" NAME "}}" | "(" expr ")"
//! ```
//!
//! - A NAME (`review`, `env.HOME`) is a reference to a variable, bare or as `${{ name }}`:
//!   its value is used as a value, never read as part of the expression.
//! - A STRING is in double or single quotes; inside, `\\`, `\"`, `\'`, `\n` and `\t` are the
//!   escapes (any other backslash is an error).
//! - Every value is a string; a comparison, `!`, `&&` and `||` give `true` or `false`.
//!   `==` and `!=` compare exactly; `a contains b` and `a startsWith b` are substring and
//!   prefix tests (case-sensitive).
//! - A value is true when it is not empty and not `false` or `0`.
//! - Comparisons do not chain (`a == b == c` is an error: add parentheses).
//! - An expression nests at most [`MAX_DEPTH`] levels deep (see there).

use std::fmt;

use super::interpolate::{Vars, is_reference};

/// The deepest an expression nests: at most this many parentheses and `!` open at once, and
/// at most this many levels of operators (`!`, `&&`, `||` and comparisons, each a level over
/// what it joins: `a && b && c` is 2 levels). Deeper is an error, so that parsing,
/// evaluating and dropping an expression never exhaust the stack.
pub const MAX_DEPTH: usize = 64;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expr {
    text: String,
    node: Node,
}

/// Why an expression was refused: the byte offset in its text and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    pub offset: usize,
    pub message: String,
}

impl ExprError {
    /// The 1-based column (in characters) of the error in `text`.
    pub fn column(&self, text: &str) -> usize {
        text[..self.offset.min(text.len())].chars().count() + 1
    }
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Contains,
    StartsWith,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Str(String),
    Bool(bool),
    /// A variable and the byte offset of its reference.
    Var(String, usize),
    Not(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cmp(Op, Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Str(String),
    Name(String),
    Op(Op),
    Not,
    And,
    Or,
    Open,
    Close,
    End,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Str(_) => "a string".into(),
            Tok::Name(n) => format!("'{n}'"),
            Tok::Op(Op::Eq) => "'=='".into(),
            Tok::Op(Op::Ne) => "'!='".into(),
            Tok::Op(Op::Contains) => "'contains'".into(),
            Tok::Op(Op::StartsWith) => "'startsWith'".into(),
            Tok::Not => "'!'".into(),
            Tok::And => "'&&'".into(),
            Tok::Or => "'||'".into(),
            Tok::Open => "'('".into(),
            Tok::Close => "')'".into(),
            Tok::End => "the end of the expression".into(),
        }
    }
}

fn err<T>(offset: usize, message: impl Into<String>) -> Result<T, ExprError> {
    Err(ExprError {
        offset,
        message: message.into(),
    })
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'
}

/// Split `text` into tokens, each with its byte offset; the last is [`Tok::End`].
fn tokenize(text: &str) -> Result<Vec<(Tok, usize)>, ExprError> {
    let mut toks = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(at, c)) = chars.peek() {
        let rest = &text[at..];
        let two = |s: &str| rest.starts_with(s);
        let (tok, len) = if c.is_whitespace() {
            chars.next();
            continue;
        } else if two("${{") {
            let Some(close) = rest.find("}}") else {
                return err(at, "'${{' without a closing '}}'");
            };
            let name = rest[3..close].trim();
            if !is_reference(name) {
                return err(
                    at,
                    format!("invalid variable name '{name}' in '${{{{ }}}}'"),
                );
            }
            (Tok::Name(name.to_string()), close + 2)
        } else if two("==") {
            (Tok::Op(Op::Eq), 2)
        } else if two("!=") {
            (Tok::Op(Op::Ne), 2)
        } else if two("&&") {
            (Tok::And, 2)
        } else if two("||") {
            (Tok::Or, 2)
        } else if c == '!' {
            (Tok::Not, 1)
        } else if c == '(' {
            (Tok::Open, 1)
        } else if c == ')' {
            (Tok::Close, 1)
        } else if c == '"' || c == '\'' {
            let (s, len) = string(text, at, c)?;
            (Tok::Str(s), len)
        } else if c.is_ascii_alphabetic() || c == '_' {
            let len = rest.find(|c| !is_name_char(c)).unwrap_or(rest.len());
            let word = &rest[..len];
            let tok = match word {
                "contains" => Tok::Op(Op::Contains),
                "startsWith" => Tok::Op(Op::StartsWith),
                _ if is_reference(word) => Tok::Name(word.to_string()),
                _ => return err(at, format!("invalid variable name '{word}'")),
            };
            (tok, len)
        } else if c == '=' || c == '&' || c == '|' {
            return err(at, format!("unexpected '{c}' (did you mean '{c}{c}'?)"));
        } else {
            return err(at, format!("unexpected character '{}'", c.escape_debug()));
        };
        toks.push((tok, at));
        while chars.peek().is_some_and(|&(i, _)| i < at + len) {
            chars.next();
        }
    }
    toks.push((Tok::End, text.len()));
    Ok(toks)
}

/// The string literal opened by `quote` at byte `at`: its value and its length in bytes.
fn string(text: &str, at: usize, quote: char) -> Result<(String, usize), ExprError> {
    let mut out = String::new();
    let mut chars = text[at + 1..].char_indices();
    while let Some((i, c)) = chars.next() {
        if c == quote {
            return Ok((out, i + 2));
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some((_, '\\')) => out.push('\\'),
            Some((_, '"')) => out.push('"'),
            Some((_, '\'')) => out.push('\''),
            Some((_, 'n')) => out.push('\n'),
            Some((_, 't')) => out.push('\t'),
            Some((_, other)) => {
                let msg = format!(
                    "unknown escape '\\{}' (known: \\\\ \\\" \\' \\n \\t)",
                    other.escape_debug()
                );
                return err(at + 1 + i, msg);
            }
            None => break,
        }
    }
    err(at, "string without its closing quote")
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    at: usize,
    /// Parentheses and `!` open around the token being read.
    open: usize,
}

/// A parsed node and how deep it nests.
type Parsed = Result<(Node, usize), ExprError>;

/// `depth`, unless it is over [`MAX_DEPTH`]: then an error at `at`.
fn within(depth: usize, at: usize) -> Result<usize, ExprError> {
    if depth > MAX_DEPTH {
        return err(at, format!("nested more than {MAX_DEPTH} levels deep"));
    }
    Ok(depth)
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.at].0
    }

    fn offset(&self) -> usize {
        self.toks[self.at].1
    }

    fn next(&mut self) -> (Tok, usize) {
        let t = self.toks[self.at].clone();
        if self.at + 1 < self.toks.len() {
            self.at += 1;
        }
        t
    }

    fn or(&mut self) -> Parsed {
        let (mut left, mut depth) = self.and()?;
        while *self.peek() == Tok::Or {
            let (_, at) = self.next();
            let (right, d) = self.and()?;
            depth = within(depth.max(d) + 1, at)?;
            left = Node::Or(Box::new(left), Box::new(right));
        }
        Ok((left, depth))
    }

    fn and(&mut self) -> Parsed {
        let (mut left, mut depth) = self.cmp()?;
        while *self.peek() == Tok::And {
            let (_, at) = self.next();
            let (right, d) = self.cmp()?;
            depth = within(depth.max(d) + 1, at)?;
            left = Node::And(Box::new(left), Box::new(right));
        }
        Ok((left, depth))
    }

    fn cmp(&mut self) -> Parsed {
        let (left, l) = self.unary()?;
        let Tok::Op(op) = *self.peek() else {
            return Ok((left, l));
        };
        let (_, at) = self.next();
        let (right, r) = self.unary()?;
        if let Tok::Op(_) = self.peek() {
            return err(self.offset(), "comparisons do not chain: add parentheses");
        }
        let depth = within(l.max(r) + 1, at)?;
        Ok((Node::Cmp(op, Box::new(left), Box::new(right)), depth))
    }

    /// Enter a parenthesis or a `!` at `at`, refusing one too many before going deeper.
    fn enter(&mut self, at: usize) -> Result<(), ExprError> {
        self.open = within(self.open + 1, at)?;
        Ok(())
    }

    fn unary(&mut self) -> Parsed {
        if *self.peek() == Tok::Not {
            let (_, at) = self.next();
            self.enter(at)?;
            let (inner, d) = self.unary()?;
            self.open -= 1;
            return Ok((Node::Not(Box::new(inner)), within(d + 1, at)?));
        }
        self.primary()
    }

    fn primary(&mut self) -> Parsed {
        let (tok, at) = self.next();
        match tok {
            Tok::Str(s) => Ok((Node::Str(s), 0)),
            Tok::Name(n) if n == "true" => Ok((Node::Bool(true), 0)),
            Tok::Name(n) if n == "false" => Ok((Node::Bool(false), 0)),
            Tok::Name(n) => Ok((Node::Var(n, at), 0)),
            Tok::Open => {
                self.enter(at)?;
                let (inner, d) = self.or()?;
                self.open -= 1;
                match self.next() {
                    (Tok::Close, _) => Ok((inner, d)),
                    (other, at) => err(at, format!("expected ')', found {}", other.describe())),
                }
            }
            other => err(at, format!("expected a value, found {}", other.describe())),
        }
    }
}

/// A value: `true`/`false` from an operator, or a string.
enum Value<'a> {
    Bool(bool),
    Str(std::borrow::Cow<'a, str>),
}

impl Value<'_> {
    fn truthy(&self) -> bool {
        match self {
            Value::Bool(b) => *b,
            Value::Str(s) => truthy(s),
        }
    }

    fn text(&self) -> &str {
        match self {
            Value::Bool(true) => "true",
            Value::Bool(false) => "false",
            Value::Str(s) => s,
        }
    }
}

/// Is a value true: not empty, and not `false` or `0`?
pub fn truthy(value: &str) -> bool {
    !value.is_empty() && value != "false" && value != "0"
}

impl Expr {
    pub fn parse(text: &str) -> Result<Expr, ExprError> {
        let mut p = Parser {
            toks: tokenize(text)?,
            at: 0,
            open: 0,
        };
        if *p.peek() == Tok::End {
            return err(0, "empty expression");
        }
        let (node, _) = p.or()?;
        match p.next() {
            (Tok::End, _) => Ok(Expr {
                text: text.to_string(),
                node,
            }),
            (tok, at) => err(
                at,
                format!("expected an operator or the end, found {}", tok.describe()),
            ),
        }
    }

    /// The text as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Each variable referenced, with the byte offset of its reference, in order.
    pub fn vars(&self) -> Vec<(&str, usize)> {
        fn walk<'a>(node: &'a Node, out: &mut Vec<(&'a str, usize)>) {
            match node {
                Node::Var(name, at) => out.push((name, *at)),
                Node::Not(a) => walk(a, out),
                Node::And(a, b) | Node::Or(a, b) | Node::Cmp(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Node::Str(_) | Node::Bool(_) => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.node, &mut out);
        out
    }

    /// Is the expression true with these values? An undefined variable is an error naming it.
    pub fn eval(&self, vars: &Vars) -> Result<bool, String> {
        Ok(eval(&self.node, vars)?.truthy())
    }
}

fn eval<'a>(node: &'a Node, vars: &'a Vars) -> Result<Value<'a>, String> {
    Ok(match node {
        Node::Str(s) => Value::Str(s.as_str().into()),
        Node::Bool(b) => Value::Bool(*b),
        Node::Var(name, _) => Value::Str(vars.lookup(name)?.into()),
        Node::Not(a) => Value::Bool(!eval(a, vars)?.truthy()),
        Node::And(a, b) => Value::Bool(eval(a, vars)?.truthy() && eval(b, vars)?.truthy()),
        Node::Or(a, b) => Value::Bool(eval(a, vars)?.truthy() || eval(b, vars)?.truthy()),
        Node::Cmp(op, a, b) => {
            let (a, b) = (eval(a, vars)?, eval(b, vars)?);
            let (a, b) = (a.text(), b.text());
            Value::Bool(match op {
                Op::Eq => a == b,
                Op::Ne => a != b,
                Op::Contains => a.contains(b),
                Op::StartsWith => a.starts_with(b),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        let mut v = Vars::new();
        v.set("review", "Looks good. LGTM");
        v.set("empty", "");
        v.set("zero", "0");
        v.set("no", "false");
        v.set("code", "$(touch x) `y` \"q\" 'z'");
        v.set("name", "Zoë ☃");
        v.set("env.CI", "1");
        v
    }

    fn yes(text: &str) -> bool {
        Expr::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .eval(&vars())
            .unwrap()
    }

    fn bad(text: &str) -> (usize, String) {
        let e = Expr::parse(text).expect_err(text);
        (e.column(text), e.message)
    }

    #[test]
    fn truthiness() {
        assert!(yes("review"));
        assert!(!yes("empty"));
        assert!(!yes("zero"));
        assert!(!yes("no"));
        assert!(yes("env.CI"));
        assert!(yes("'x'"));
        assert!(!yes("''"));
        assert!(!yes("\"0\""));
        assert!(yes("true"));
        assert!(!yes("false"));
        assert!(yes("!empty"));
        assert!(yes("!!review"));
    }

    #[test]
    fn operators() {
        assert!(yes("review contains \"LGTM\""));
        assert!(!yes("review contains 'lgtm'"));
        assert!(yes("review startsWith 'Looks'"));
        assert!(!yes("review startsWith 'good'"));
        assert!(yes("${{ review }} == 'Looks good. LGTM'"));
        assert!(yes("${{review}} != 'x'"));
        assert!(yes("zero == '0'"));
        assert!(yes("empty == ''"));
        assert!(yes("(review contains 'LGTM') == true"));
        assert!(yes("!(empty) == 'true'"));
    }

    #[test]
    fn precedence() {
        // && binds tighter than ||.
        assert!(yes("review || empty && empty"));
        assert!(!yes("(review || empty) && empty"));
        // ! binds tighter than comparisons and &&.
        assert!(yes("!empty && review"));
        assert!(!yes("!review == 'true'"));
        assert!(yes("!(review == 'x')"));
    }

    #[test]
    fn values_are_data() {
        assert!(yes("code contains '$(touch x)'"));
        assert!(yes("code contains \"`y`\""));
        assert!(yes("code contains \"\\\"q\\\"\""));
        assert!(yes("code contains '\\'z\\''"));
        assert!(yes("code == ${{ code }}"));
        assert!(yes("\"a\\\\b\" == 'a\\\\b'"));
        assert!(yes("'a\\nb' contains '\\n'"));
    }

    #[test]
    fn unicode() {
        assert!(yes("name contains '☃'"));
        assert!(yes("name startsWith \"Zoë\""));
        assert!(yes("'☃☃' == \"☃☃\""));
        // Columns count characters, not bytes.
        assert_eq!(bad("'☃☃' == ?").0, 9);
        assert_eq!(bad("name == 'é").0, 9);
    }

    #[test]
    fn references() {
        let e = Expr::parse("review contains 'x' && ${{ env.CI }} || !other").unwrap();
        assert_eq!(e.vars(), vec![("review", 0), ("env.CI", 23), ("other", 41)]);
        assert!(Expr::parse("'review'").unwrap().vars().is_empty());
        let err = e.eval(&Vars::new()).unwrap_err();
        assert!(err.contains("undefined variable 'review'"), "{err}");
    }

    #[test]
    fn errors_at_the_right_column() {
        assert_eq!(bad(""), (1, "empty expression".to_string()));
        assert_eq!(bad("  "), (1, "empty expression".to_string()));
        let (col, msg) = bad("review contains");
        assert_eq!(col, 16);
        assert!(msg.contains("expected a value"), "{msg}");
        assert_eq!(bad("a = b").0, 3);
        assert!(bad("a = b").1.contains("'=='"));
        assert_eq!(bad("a & b").0, 3);
        assert_eq!(bad("(a || b").0, 8);
        assert!(bad("(a || b").1.contains("expected ')'"));
        assert_eq!(bad("a b").0, 3);
        assert_eq!(bad("a == b == c").0, 8);
        assert!(bad("a == b == c").1.contains("chain"));
        assert_eq!(bad("x == 'abc").0, 6);
        assert!(bad("x == 'abc").1.contains("closing quote"));
        assert_eq!(bad("x == 'a\\qb'").0, 8);
        assert_eq!(bad("${{ x ").0, 1);
        assert_eq!(bad("x == ${{ 1x }}").0, 6);
        assert_eq!(bad("x; rm -rf /").0, 2);
        assert_eq!(bad("$(touch f)").0, 1);
        assert_eq!(bad("`id`").0, 1);
        assert_eq!(bad(")").0, 1);
        assert_eq!(bad("!").0, 2);
    }

    /// Found by fuzzing (the `expr` target): deep nesting overflowed the stack.
    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = [
            format!("{}a{}", "(".repeat(100_000), ")".repeat(100_000)),
            format!("{}a", "!".repeat(500_000)),
            format!("a{}", " && a".repeat(100_000)),
            format!("a{}", " || !(a == b)".repeat(100_000)),
        ];
        for text in &deep {
            let e = Expr::parse(text).unwrap_err();
            assert!(
                e.message.contains("nested more than 64 levels deep"),
                "{}",
                e.message
            );
        }
        assert_eq!(
            bad(&format!("{}a", "!".repeat(65))),
            (65, "nested more than 64 levels deep".to_string())
        );
        // The 65th `&&`, after "a" and 64 " && a".
        assert_eq!(bad(&format!("a{}", " && a".repeat(65))).0, 1 + 64 * 5 + 2);
        // As deep as allowed: parsed and evaluated.
        for text in [
            format!("{}review{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH)),
            format!("{}review", "!".repeat(MAX_DEPTH)),
            format!("review{}", " && review".repeat(MAX_DEPTH)),
        ] {
            assert!(yes(&text), "{text}");
        }
    }
}
