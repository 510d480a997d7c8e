//! A YAML document read into a tree of nodes that remember where they were written.
//!
//! serde-based loaders forget positions once a value is built, and a workflow check must point
//! at the offending key or value, so this module walks the events of `saphyr-parser` (which
//! carry positions) into a small tree. It does not parse YAML itself. Rules:
//!
//! - Plain scalars are typed by the YAML 1.2 core schema: `~`/`null`/empty is null,
//!   `true`/`false` (any of the three spellings) a boolean, `[-+]?[0-9]+` (also `0x..`, `0o..`)
//!   a whole number, decimals and exponents a number; anything else, and every quoted or block
//!   scalar, is a string. A `!!str` tag makes a string; any other tag is refused.
//! - Aliases are expanded to a copy of the anchored node. A merge key `<<` is an ordinary key.
//! - One document per file. Nesting is limited to [`MAX_DEPTH`] and the expanded tree to
//!   [`MAX_NODES`] nodes and [`MAX_BYTES`] bytes of scalar text, so that aliases cannot
//!   multiply it without bound: a few aliases of one long scalar weigh as much as many
//!   nodes. Both are checked before an alias is copied.

use std::collections::HashMap;

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, Span, StrInput, Tag};

use super::diagnostic::Pos;

/// Deepest nesting of lists and mappings accepted.
pub const MAX_DEPTH: usize = 64;

/// Most nodes a document may hold once aliases are expanded.
pub const MAX_NODES: usize = 100_000;

/// Most bytes of scalar text a document may hold once aliases are expanded (16 MiB: sixteen
/// times the largest workflow file).
pub const MAX_BYTES: usize = 16 << 20;

/// One node and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub pos: Pos,
    pub kind: Kind,
    /// Character range of the node's source text (for finding positions inside a scalar).
    start: usize,
    end: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A scalar: its text (after YAML's quoting and folding) and its resolved type.
    Scalar(String, Scalar),
    Seq(Vec<Node>),
    /// Entries in file order; duplicate keys are kept (the reader reports them).
    Map(Vec<(Node, Node)>),
}

/// The resolved type of a scalar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str,
}

/// A parsed file: its text and its root node (`None` for an empty file).
#[derive(Debug)]
pub struct Document {
    text: String,
    /// Byte offset of each character of `text`, plus one for the end.
    byte_at: Offsets,
    pub root: Option<Node>,
}

/// The byte offset of each character of a text, and of its end. None is kept for an ASCII
/// text, where they are the same: a workflow of 10,000 agents is 400 KB, and 8 bytes per
/// character would be 3 MB more while it is read.
#[derive(Debug)]
struct Offsets {
    /// `None` for an ASCII text.
    of: Option<Vec<usize>>,
    /// The text's length in bytes.
    len: usize,
}

impl Offsets {
    fn new(text: &str) -> Offsets {
        let of = (!text.is_ascii()).then(|| {
            let mut v: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
            v.push(text.len());
            v
        });
        Offsets {
            of,
            len: text.len(),
        }
    }

    /// The byte offset of character `i` (the text's length for the one past the last).
    fn get(&self, i: usize) -> Option<usize> {
        match &self.of {
            Some(v) => v.get(i).copied(),
            None => (i <= self.len).then_some(i),
        }
    }

    /// [`Offsets::get`], an index past the end taken as the end.
    fn clamped(&self, i: usize) -> usize {
        match &self.of {
            Some(v) => v[i.min(v.len() - 1)],
            None => i.min(self.len),
        }
    }
}

/// A syntax error: where and what.
pub type SyntaxError = (Pos, String);

impl Document {
    /// Parse `text`, which holds at most one YAML document.
    pub fn parse(text: &str) -> Result<Document, SyntaxError> {
        let (root, byte_at) = Builder::new(text).document()?;
        Ok(Document {
            text: text.to_string(),
            byte_at,
            root,
        })
    }

    /// The source text a node was read from (with its quotes or block indentation).
    pub fn raw(&self, node: &Node) -> &str {
        &self.text[self.byte_at.clamped(node.start)..self.byte_at.clamped(node.end)]
    }

    /// Where the `nth` occurrence (from 0) of `needle` in a scalar's value was written.
    /// Quoting and folding change a value's text but keep `${{` and `@name` whole, so the
    /// `nth` occurrence in the value is the `nth` in the source; when it is not found there
    /// (an escape sequence made it), the scalar's own position stands in.
    pub fn locate(&self, node: &Node, needle: &str, nth: usize) -> Pos {
        locate_in(self.raw(node), node.pos, needle, nth)
    }
}

/// Where the `nth` occurrence of `needle` is in `raw`, a text that starts at `start`.
pub fn locate_in(raw: &str, start: Pos, needle: &str, nth: usize) -> Pos {
    match raw.match_indices(needle).nth(nth) {
        Some((i, _)) => start.advance(&raw[..i]),
        None => start,
    }
}

impl Node {
    /// How the type of this node is named in messages.
    pub fn type_name(&self) -> &'static str {
        match &self.kind {
            Kind::Scalar(_, Scalar::Null) => "nothing (null)",
            Kind::Scalar(_, Scalar::Bool(_)) => "true/false",
            Kind::Scalar(_, Scalar::Int(_)) => "a whole number",
            Kind::Scalar(_, Scalar::Float(_)) => "a number",
            Kind::Scalar(_, Scalar::Str) => "a string",
            Kind::Seq(_) => "a list",
            Kind::Map(_) => "a mapping",
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.kind, Kind::Scalar(_, Scalar::Null))
    }

    /// The text of a scalar of any type (`None` for a list or mapping).
    pub fn scalar_text(&self) -> Option<&str> {
        match &self.kind {
            Kind::Scalar(text, _) => Some(text),
            _ => None,
        }
    }

    fn expected(&self, what: &str) -> String {
        let hint = if matches!(self.kind, Kind::Scalar(..)) && what == "a string" {
            " (quote it to make it one)"
        } else {
            ""
        };
        format!("expected {what}, found {}{hint}", self.type_name())
    }

    pub fn str(&self) -> Result<&str, String> {
        match &self.kind {
            Kind::Scalar(text, Scalar::Str) => Ok(text),
            _ => Err(self.expected("a string")),
        }
    }

    pub fn whole(&self) -> Result<i64, String> {
        match self.kind {
            Kind::Scalar(_, Scalar::Int(n)) => Ok(n),
            _ => Err(self.expected("a whole number")),
        }
    }

    /// A whole number or a decimal one.
    pub fn number(&self) -> Option<f64> {
        match self.kind {
            Kind::Scalar(_, Scalar::Int(n)) => Some(n as f64),
            Kind::Scalar(_, Scalar::Float(x)) => Some(x),
            _ => None,
        }
    }

    pub fn boolean(&self) -> Result<bool, String> {
        match self.kind {
            Kind::Scalar(_, Scalar::Bool(b)) => Ok(b),
            _ => Err(self.expected("true or false")),
        }
    }

    pub fn seq(&self) -> Result<&[Node], String> {
        match &self.kind {
            Kind::Seq(items) => Ok(items),
            _ => Err(self.expected("a list")),
        }
    }

    pub fn map(&self) -> Result<&[(Node, Node)], String> {
        match &self.kind {
            Kind::Map(entries) => Ok(entries),
            _ => Err(self.expected("a mapping")),
        }
    }
}

/// Turns the event stream into a tree.
struct Builder<'a> {
    parser: Parser<'a, StrInput<'a>>,
    text: &'a str,
    /// Byte offset of each character of `text`, plus one for the end.
    byte_at: Offsets,
    /// The flow collections (`[`, `{`) open where the parser is, innermost last.
    open: Vec<(Pos, char)>,
    /// Where the text ends: no position is past it.
    end: Pos,
    /// Each anchored node, with its size.
    anchors: HashMap<usize, (Node, Size)>,
    nodes: usize,
    bytes: usize,
}

/// How much a tree weighs: its nodes and the bytes of its scalars.
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    nodes: usize,
    bytes: usize,
}

impl<'a> Builder<'a> {
    fn new(text: &'a str) -> Builder<'a> {
        let byte_at = Offsets::new(text);
        Builder {
            parser: Parser::new_from_str(text),
            text,
            byte_at,
            open: Vec::new(),
            end: Pos::START.advance(text),
            anchors: HashMap::new(),
            nodes: 0,
            bytes: 0,
        }
    }

    /// The position of a marker. The parser places what it finds at the end of the input
    /// (an error, an empty node) on the line after the last, as if the text ended with a
    /// newline: never past where the text ends.
    fn pos(&self, m: &Marker) -> Pos {
        Pos::new(m.line(), m.col() + 1).min(self.end)
    }

    fn next(&mut self) -> Result<(Event<'a>, Span), SyntaxError> {
        match self.parser.next_event() {
            Some(Ok(ev)) => Ok(ev),
            Some(Err(e)) => Err(self.explain(e.marker(), e.info())),
            None => Err((Pos::START, "invalid YAML: unexpected end".into())),
        }
    }

    /// The character at character index `i`, if any.
    fn char_at(&self, i: usize) -> Option<char> {
        let at = self.byte_at.get(i)?;
        self.text[at..].chars().next()
    }

    /// A syntax error the parser found at `m`, blamed on its likely cause: a quote at `m`
    /// that is not closed on its line is never closed; an error on a later line than the
    /// innermost open `[` or `{` points at that bracket, which was never closed.
    fn explain(&self, m: &Marker, info: &str) -> SyntaxError {
        let pos = self.pos(m);
        if let Some(q @ ('"' | '\'')) = self.char_at(m.index())
            && !self.closed_on_its_line(m.index(), q)
        {
            return (
                pos,
                format!("invalid YAML: this quote is never closed ({info})"),
            );
        }
        if let Some(&(open, c)) = self.open.last()
            && open.line < pos.line
        {
            return (
                open,
                format!("invalid YAML: this '{c}' is never closed (at {pos}: {info})"),
            );
        }
        (pos, format!("invalid YAML: {info}"))
    }

    /// Is the quote `q` at character index `i` closed before its line ends? (`\"` and `''`
    /// are escapes, not ends.)
    fn closed_on_its_line(&self, i: usize, q: char) -> bool {
        let rest = &self.text[self.byte_at.clamped(i) + q.len_utf8()..];
        let line = rest.split('\n').next().unwrap_or("");
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if q == '"' => {
                    chars.next();
                }
                '\'' if q == '\'' && chars.peek() == Some(&'\'') => {
                    chars.next();
                }
                c if c == q => return true,
                _ => {}
            }
        }
        false
    }

    /// The root node, and the byte offset of each character of the text.
    fn document(mut self) -> Result<(Option<Node>, Offsets), SyntaxError> {
        let mut root = None;
        loop {
            let (ev, span) = self.next()?;
            match ev {
                Event::StreamStart | Event::DocumentEnd => {}
                Event::StreamEnd => return Ok((root, self.byte_at)),
                Event::DocumentStart(_) if root.is_some() => {
                    return Err((self.pos(&span.start), "more than one YAML document".into()));
                }
                Event::DocumentStart(_) => {
                    let (ev, span) = self.next()?;
                    root = Some(self.node(ev, span, 0)?);
                }
                _ => {
                    return Err((
                        self.pos(&span.start),
                        "invalid YAML: unexpected event".into(),
                    ));
                }
            }
        }
    }

    fn node(&mut self, ev: Event<'a>, span: Span, depth: usize) -> Result<Node, SyntaxError> {
        let pos = self.pos(&span.start);
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err((
                pos,
                format!("more than {MAX_NODES} nodes (aliases expand too much)"),
            ));
        }
        if depth > MAX_DEPTH {
            return Err((pos, format!("nested more than {MAX_DEPTH} levels deep")));
        }
        let (kind, anchor, end) = match ev {
            Event::Scalar(text, style, anchor, tag) => {
                let ty = scalar_type(&text, style, tag.as_deref()).map_err(|m| (pos, m))?;
                self.add_bytes(text.len(), pos)?;
                (
                    Kind::Scalar(text.into_owned(), ty),
                    anchor,
                    span.end.index(),
                )
            }
            Event::SequenceStart(anchor, _) => {
                let flow = self.enter(span.start.index(), pos);
                let (items, end) = self.items(depth)?;
                self.open.truncate(flow);
                (Kind::Seq(items), anchor, end)
            }
            Event::MappingStart(anchor, _) => {
                let flow = self.enter(span.start.index(), pos);
                let (entries, end) = self.entries(depth)?;
                self.open.truncate(flow);
                (Kind::Map(entries), anchor, end)
            }
            Event::Alias(id) => return self.alias(id, pos),
            _ => return Err((pos, "invalid YAML: unexpected event".into())),
        };
        let node = Node {
            pos,
            kind,
            start: span.start.index(),
            end,
        };
        if anchor != 0 {
            let size = size(&node);
            self.anchors.insert(anchor, (node.clone(), size));
        }
        Ok(node)
    }

    /// A collection starts at character index `i`: remember it when it is a flow one. The
    /// number of open flow collections before it.
    fn enter(&mut self, i: usize, pos: Pos) -> usize {
        let before = self.open.len();
        if let Some(c @ ('[' | '{')) = self.char_at(i) {
            self.open.push((pos, c));
        }
        before
    }

    /// Count `n` more bytes of scalar text; an error past [`MAX_BYTES`].
    fn add_bytes(&mut self, n: usize, pos: Pos) -> Result<(), SyntaxError> {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > MAX_BYTES {
            return Err((
                pos,
                format!("more than {MAX_BYTES} bytes of text (aliases expand too much)"),
            ));
        }
        Ok(())
    }

    /// A copy of the anchored node, once its size is known to fit.
    fn alias(&mut self, id: usize, pos: Pos) -> Result<Node, SyntaxError> {
        let Some((_, size)) = self.anchors.get(&id) else {
            return Err((pos, "invalid YAML: unknown alias".to_string()));
        };
        let size = *size;
        self.nodes = self.nodes.saturating_add(size.nodes);
        if self.nodes > MAX_NODES {
            return Err((
                pos,
                format!("more than {MAX_NODES} nodes (aliases expand too much)"),
            ));
        }
        self.add_bytes(size.bytes, pos)?;
        Ok(self.anchors[&id].0.clone())
    }

    fn items(&mut self, depth: usize) -> Result<(Vec<Node>, usize), SyntaxError> {
        let mut items = Vec::new();
        loop {
            let (ev, span) = self.next()?;
            if let Event::SequenceEnd = ev {
                // No spare room kept: a workflow of many agents holds many small lists.
                items.shrink_to_fit();
                return Ok((items, span.end.index()));
            }
            items.push(self.node(ev, span, depth + 1)?);
        }
    }

    fn entries(&mut self, depth: usize) -> Result<(Vec<(Node, Node)>, usize), SyntaxError> {
        let mut entries = Vec::new();
        loop {
            let (ev, span) = self.next()?;
            if let Event::MappingEnd = ev {
                entries.shrink_to_fit();
                return Ok((entries, span.end.index()));
            }
            let key = self.node(ev, span, depth + 1)?;
            let (ev, span) = self.next()?;
            let value = self.node(ev, span, depth + 1)?;
            entries.push((key, value));
        }
    }
}

/// The nodes and scalar bytes of a tree.
fn size(node: &Node) -> Size {
    let add = |a: Size, b: Size| Size {
        nodes: a.nodes + b.nodes,
        bytes: a.bytes + b.bytes,
    };
    let one = Size { nodes: 1, bytes: 0 };
    match &node.kind {
        Kind::Scalar(text, _) => Size {
            nodes: 1,
            bytes: text.len(),
        },
        Kind::Seq(items) => items.iter().map(size).fold(one, add),
        Kind::Map(entries) => entries
            .iter()
            .map(|(k, v)| add(size(k), size(v)))
            .fold(one, add),
    }
}

fn scalar_type(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Scalar, String> {
    if let Some(tag) = tag {
        return if tag.is_yaml_core_schema() && tag.suffix == "str" {
            Ok(Scalar::Str)
        } else {
            Err(format!("unsupported tag '{}{}'", tag.handle, tag.suffix))
        };
    }
    Ok(if style == ScalarStyle::Plain {
        plain_type(text)
    } else {
        Scalar::Str
    })
}

/// The YAML 1.2 core schema's type of a plain scalar.
fn plain_type(text: &str) -> Scalar {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        "true" | "True" | "TRUE" => return Scalar::Bool(true),
        "false" | "False" | "FALSE" => return Scalar::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Scalar::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Scalar::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Scalar::Float(f64::NAN),
        _ => {}
    }
    if let Some(n) = whole_number(text) {
        return Scalar::Int(n);
    }
    let numeric = text
        .chars()
        .all(|c| c.is_ascii_digit() || "+-.eE".contains(c));
    match text.parse::<f64>() {
        Ok(x) if numeric && text.chars().any(|c| c.is_ascii_digit()) => Scalar::Float(x),
        _ => Scalar::Str,
    }
}

fn whole_number(text: &str) -> Option<i64> {
    let digits = |s: &str, radix: u32| !s.is_empty() && s.chars().all(|c| c.is_digit(radix));
    if let Some(hex) = text.strip_prefix("0x") {
        return digits(hex, 16).then(|| i64::from_str_radix(hex, 16).ok())?;
    }
    if let Some(oct) = text.strip_prefix("0o") {
        return digits(oct, 8).then(|| i64::from_str_radix(oct, 8).ok())?;
    }
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    digits(unsigned, 10).then(|| text.parse().ok())?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(text: &str) -> Node {
        Document::parse(text).unwrap().root.unwrap()
    }

    fn scalar(text: &str) -> Scalar {
        match root(text).kind {
            Kind::Scalar(_, ty) => ty,
            k => panic!("not a scalar: {k:?}"),
        }
    }

    #[test]
    fn plain_scalars_follow_the_core_schema() {
        assert_eq!(scalar("~"), Scalar::Null);
        assert_eq!(scalar("true"), Scalar::Bool(true));
        assert_eq!(scalar("FALSE"), Scalar::Bool(false));
        assert_eq!(scalar("yes"), Scalar::Str);
        assert_eq!(scalar("42"), Scalar::Int(42));
        assert_eq!(scalar("-7"), Scalar::Int(-7));
        assert_eq!(scalar("0x1f"), Scalar::Int(31));
        assert_eq!(scalar("0o17"), Scalar::Int(15));
        assert_eq!(scalar("1.5"), Scalar::Float(1.5));
        assert_eq!(scalar("1e3"), Scalar::Float(1000.0));
        assert_eq!(scalar("90s"), Scalar::Str);
        assert_eq!(scalar("'42'"), Scalar::Str);
        assert_eq!(scalar("!!str 42"), Scalar::Str);
        assert_eq!(scalar("inf"), Scalar::Str);
        assert_eq!(scalar("e5"), Scalar::Str);
    }

    #[test]
    fn nodes_know_their_positions() {
        let node = root("a: 1\nb:\n  - x\n  - 'y'\n");
        let Kind::Map(entries) = &node.kind else {
            panic!()
        };
        assert_eq!(entries[0].0.pos, Pos::new(1, 1));
        assert_eq!(entries[0].1.pos, Pos::new(1, 4));
        let Kind::Seq(items) = &entries[1].1.kind else {
            panic!()
        };
        assert_eq!(items[1].pos, Pos::new(4, 5));
        assert_eq!(items[1].str(), Ok("y"));
    }

    #[test]
    fn positions_inside_scalars() {
        let text = "k: |\n  one\n  two ${{ x }} ${{ y }}\nq: \"a ${{ z }}\"\n";
        let doc = Document::parse(text).unwrap();
        let Kind::Map(entries) = &doc.root.as_ref().unwrap().kind else {
            panic!()
        };
        assert_eq!(doc.locate(&entries[0].1, "${{", 0), Pos::new(3, 7));
        assert_eq!(doc.locate(&entries[0].1, "${{", 1), Pos::new(3, 16));
        assert_eq!(doc.locate(&entries[1].1, "${{", 0), Pos::new(4, 7));
        // Not in the source: the scalar's own position.
        assert_eq!(doc.locate(&entries[1].1, "${{", 5), Pos::new(4, 4));
    }

    #[test]
    fn aliases_expand() {
        let node = root("a: &x [1, 2]\nb: *x\n");
        let Kind::Map(entries) = &node.kind else {
            panic!()
        };
        assert_eq!(entries[1].1.seq().unwrap().len(), 2);
    }

    #[test]
    fn refusals_carry_positions() {
        let err = |t: &str| Document::parse(t).unwrap_err();
        let (pos, msg) = err("a: [1, 2\nb: c\n");
        assert_eq!(pos, Pos::new(1, 4));
        assert!(
            msg.starts_with("invalid YAML: this '[' is never closed (at 2:2: "),
            "{msg}"
        );
        assert_eq!(err("a: 1\n---\nb: 2\n").1, "more than one YAML document");
        assert_eq!(err("a: !custom 1\n").1, "unsupported tag '!custom'");
        let deep = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH + 2),
            "]".repeat(MAX_DEPTH + 2)
        );
        assert!(err(&deep).1.contains("levels deep"));
        // Each level doubles the tree: nine levels of ten aliases would be 10^9 nodes.
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let p = format!("*a{}", i - 1);
            let list = [p.as_str(); 10].join(", ");
            bomb.push_str(&format!("a{i}: &a{i} [{list}]\n"));
        }
        assert!(err(&bomb).1.contains("aliases expand too much"));
        // Few nodes, many bytes: one long scalar and its aliases.
        // 16 copies of it fit with the keys (the anchor and 15 aliases), 17 do not.
        let long = "x".repeat((1 << 20) - 1);
        let mut bomb = format!("a: &a {long}\nb: [");
        bomb.push_str(&["*a"; 16].join(", "));
        bomb.push_str("]\n");
        let (pos, msg) = err(&bomb);
        assert_eq!(pos, Pos::new(2, 5 + 4 * 15));
        assert!(
            msg.contains("bytes of text (aliases expand too much)"),
            "{msg}"
        );
        bomb.truncate(bomb.len() - "*a]\n".len() - 2);
        bomb.push_str("]\n");
        assert!(Document::parse(&bomb).is_ok());
    }

    #[test]
    fn empty_files_have_no_root() {
        assert!(Document::parse("").unwrap().root.is_none());
        assert!(
            Document::parse("# only a comment\n")
                .unwrap()
                .root
                .is_none()
        );
    }

    #[test]
    fn what_was_never_closed_is_blamed_where_it_opens() {
        let err = |text: &str| Document::parse(text).map(|_| ()).unwrap_err();
        let (pos, msg) = err("a: {b: [1, 2\nc: d\n");
        assert_eq!(pos, Pos::new(1, 8));
        assert!(
            msg.starts_with("invalid YAML: this '[' is never closed (at 2:"),
            "{msg}"
        );
        let (pos, msg) = err("a: 1\nb: \"x\\\" y\nc: d\n");
        assert_eq!(pos, Pos::new(2, 4));
        assert!(
            msg.starts_with("invalid YAML: this quote is never closed"),
            "{msg}"
        );
        // Closed on a later line: not blamed.
        assert!(Document::parse("a: [1,\n  2]\nb: 'x\n  y'\n").is_ok());
    }

    /// Found by fuzzing (the `workflow` target): an error at the end of a text without a
    /// final newline was placed on a line after the last.
    #[test]
    fn an_error_at_the_end_is_inside_the_text() {
        let err = |text: &str| match Document::parse(text) {
            Err((pos, _)) => pos,
            Ok(_) => panic!("{text:?} parsed"),
        };
        assert_eq!(err(":\n~"), Pos::new(2, 2));
        assert_eq!(err(":\n~\n"), Pos::new(3, 1));
    }
}
