//! Path globs, and whether two of them can name the same path.
//!
//! A glob is a `/`-separated path of segments. In a segment, `*` matches any run of
//! characters, `?` one character, `[abc]`, `[a-z]` one of a set (`[!...]` or `[^...]` one
//! outside it), and `\` makes the next character literal; none of them matches `/`. A whole
//! segment `**` matches any number of segments, none included (`src/**` names `src` too). A
//! trailing `/` stands for the folder and everything in it (`src/` is `src/**`). Leading `./`
//! and repeated `/` are ignored.
//!
//! Two globs overlap iff some path matches both. [`overlap`] decides it exactly by walking
//! the product of the two patterns: segments against segments, then, inside one pair of
//! segments, characters against characters, a pair of character sets meeting iff they share
//! a character.

use std::collections::HashSet;

use crate::{Error, Result};

/// A parsed glob: its segments, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Glob {
    text: String,
    segments: Vec<Segment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    /// `**`: any number of segments.
    Any,
    /// One segment, a sequence of tokens.
    One(Vec<Token>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    /// `*`: any run of characters.
    Star,
    /// One character out of a set.
    Char(Set),
}

/// A set of characters: inclusive ranges, or all but them. `/` is never in a set.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Set {
    ranges: Vec<(char, char)>,
    negated: bool,
}

impl Set {
    fn one(c: char) -> Set {
        Set {
            ranges: vec![(c, c)],
            negated: false,
        }
    }

    fn any() -> Set {
        Set {
            ranges: Vec::new(),
            negated: true,
        }
    }

    /// The ranges this set holds, sorted and disjoint, `/` left out.
    fn normalized(&self) -> Vec<(u32, u32)> {
        let mut r: Vec<(u32, u32)> = self
            .ranges
            .iter()
            .map(|&(a, b)| (a as u32, b as u32))
            .collect();
        r.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::new();
        for (a, b) in r {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let held = if self.negated {
            complement(&merged)
        } else {
            merged
        };
        let slash = '/' as u32;
        let mut out = Vec::new();
        for (a, b) in held {
            if a <= slash && slash <= b {
                if a < slash {
                    out.push((a, slash - 1));
                }
                if slash < b {
                    out.push((slash + 1, b));
                }
            } else {
                out.push((a, b));
            }
        }
        out
    }

    /// Whether some character is in both sets.
    fn meets(&self, other: &Set) -> bool {
        let (a, b) = (self.normalized(), other.normalized());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if a[i].0.max(b[j].0) <= a[i].1.min(b[j].1) {
                return true;
            }
            if a[i].1 < b[j].1 { i += 1 } else { j += 1 }
        }
        false
    }
}

/// The complement of sorted, disjoint ranges within all of Unicode's scalar values.
fn complement(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut next = 0u32;
    for &(a, b) in ranges {
        if a > next {
            out.push((next, a - 1));
        }
        next = b.saturating_add(1);
    }
    if next <= char::MAX as u32 {
        out.push((next, char::MAX as u32));
    }
    out
}

impl Glob {
    /// Parse `text`; an empty glob, an unclosed `[` or a trailing `\` is refused.
    pub fn parse(text: &str) -> Result<Glob> {
        let bad = |why: &str| Error::Usage(format!("glob {text:?}: {why}"));
        let mut trimmed = text;
        while let Some(rest) = trimmed.strip_prefix("./") {
            trimmed = rest;
        }
        let dir = trimmed.ends_with('/');
        let mut segments = Vec::new();
        for part in trimmed.split('/').filter(|p| !p.is_empty() && *p != ".") {
            if part == "**" {
                if segments.last() != Some(&Segment::Any) {
                    segments.push(Segment::Any);
                }
                continue;
            }
            segments.push(Segment::One(tokens(part).map_err(&bad)?));
        }
        if segments.is_empty() {
            return Err(bad("names no path"));
        }
        if dir && segments.last() != Some(&Segment::Any) {
            segments.push(Segment::Any);
        }
        Ok(Glob {
            text: text.to_string(),
            segments,
        })
    }

    /// The glob as it was written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `path` (a relative path, no glob) matches this glob.
    pub fn matches(&self, path: &str) -> bool {
        match Glob::parse(&escape(path)) {
            Ok(literal) => overlap(self, &literal),
            Err(_) => false,
        }
    }
}

/// `path` with every glob character made literal.
pub fn escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn tokens(part: &str) -> std::result::Result<Vec<Token>, &'static str> {
    let mut out = Vec::new();
    let mut chars = part.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => {
                if out.last() != Some(&Token::Star) {
                    out.push(Token::Star);
                }
            }
            '?' => out.push(Token::Char(Set::any())),
            '\\' => out.push(Token::Char(Set::one(
                chars.next().ok_or("ends with a lone \\")?,
            ))),
            '[' => {
                let negated = matches!(chars.peek(), Some('!' | '^'));
                if negated {
                    chars.next();
                }
                let mut ranges = Vec::new();
                let mut first = true;
                loop {
                    let c = match chars.next() {
                        None => return Err("has a [ that is never closed"),
                        Some(']') if !first => break,
                        Some('\\') => chars.next().ok_or("ends with a lone \\")?,
                        Some(c) => c,
                    };
                    first = false;
                    let mut ahead = chars.clone();
                    if ahead.next() == Some('-') && ahead.peek().is_some_and(|&n| n != ']') {
                        chars.next();
                        let mut hi = chars.next().ok_or("has a [ that is never closed")?;
                        if hi == '\\' {
                            hi = chars.next().ok_or("ends with a lone \\")?;
                        }
                        if hi < c {
                            return Err("has a range that runs backwards");
                        }
                        ranges.push((c, hi));
                    } else {
                        ranges.push((c, c));
                    }
                }
                out.push(Token::Char(Set { ranges, negated }));
            }
            c => out.push(Token::Char(Set::one(c))),
        }
    }
    Ok(out)
}

/// Whether some path matches both `a` and `b`.
pub fn overlap(a: &Glob, b: &Glob) -> bool {
    let (a, b) = (&a.segments, &b.segments);
    let mut seen = HashSet::new();
    let mut todo = vec![(0usize, 0usize)];
    while let Some((i, j)) = todo.pop() {
        if !seen.insert((i, j)) {
            continue;
        }
        if i == a.len() && j == b.len() {
            return true;
        }
        // `**` may match no segment.
        if a.get(i) == Some(&Segment::Any) {
            todo.push((i + 1, j));
        }
        if b.get(j) == Some(&Segment::Any) {
            todo.push((i, j + 1));
        }
        // Both consume one segment, which must satisfy both sides.
        let (Some(sa), Some(sb)) = (a.get(i), b.get(j)) else {
            continue;
        };
        let next_i = if *sa == Segment::Any { i } else { i + 1 };
        let next_j = if *sb == Segment::Any { j } else { j + 1 };
        if segments_meet(sa, sb) {
            todo.push((next_i, next_j));
        }
    }
    false
}

/// Whether some one segment (a non-empty name) matches both.
fn segments_meet(a: &Segment, b: &Segment) -> bool {
    let star = [Token::Star];
    let tokens = |s: &'_ Segment| -> Vec<Token> {
        match s {
            Segment::Any => star.to_vec(),
            Segment::One(t) => t.clone(),
        }
    };
    words_meet(&tokens(a), &tokens(b))
}

/// Whether some non-empty word matches both token sequences.
fn words_meet(a: &[Token], b: &[Token]) -> bool {
    let mut seen = HashSet::new();
    // (position in a, position in b, at least one character read)
    let mut todo = vec![(0usize, 0usize, false)];
    while let Some((i, j, read)) = todo.pop() {
        if !seen.insert((i, j, read)) {
            continue;
        }
        if i == a.len() && j == b.len() && read {
            return true;
        }
        if a.get(i) == Some(&Token::Star) {
            todo.push((i + 1, j, read));
        }
        if b.get(j) == Some(&Token::Star) {
            todo.push((i, j + 1, read));
        }
        let (Some(ta), Some(tb)) = (a.get(i), b.get(j)) else {
            continue;
        };
        let any = Set::any();
        let (set_a, next_i) = match ta {
            Token::Star => (&any, i),
            Token::Char(s) => (s, i + 1),
        };
        let (set_b, next_j) = match tb {
            Token::Star => (&any, j),
            Token::Char(s) => (s, j + 1),
        };
        if set_a.meets(set_b) {
            todo.push((next_i, next_j, true));
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov(a: &str, b: &str) -> bool {
        let (ga, gb) = (Glob::parse(a).unwrap(), Glob::parse(b).unwrap());
        let there = overlap(&ga, &gb);
        assert_eq!(
            there,
            overlap(&gb, &ga),
            "overlap must be symmetric: {a} {b}"
        );
        there
    }

    #[test]
    fn literal_paths_overlap_only_when_equal() {
        assert!(ov("src/a.rs", "src/a.rs"));
        assert!(ov("./src//a.rs", "src/a.rs"));
        assert!(!ov("src/a.rs", "src/b.rs"));
        assert!(!ov("src/a.rs", "src/a.rs/x"));
        assert!(!ov("src", "src/a.rs"));
    }

    #[test]
    fn double_star_spans_any_number_of_segments() {
        assert!(ov("src/**", "src/a.rs"));
        assert!(ov("src/**", "src/x/y/z.rs"));
        assert!(ov("src/**", "src"));
        assert!(!ov("src/**", "tests/a.rs"));
        assert!(ov("**/a.rs", "src/x/a.rs"));
        assert!(ov("**/a.rs", "a.rs"));
        assert!(!ov("**/a.rs", "src/b.rs"));
        assert!(ov("src/**/mod.rs", "**/lease/*"));
        assert!(!ov("src/**/mod.rs", "**/lease/*.md"));
        assert!(ov("**", "anything/at/all"));
        assert!(ov("a/**/b/**/c", "a/b/c"));
        assert!(!ov("a/**/b/**/c", "a/c"));
    }

    #[test]
    fn star_stays_inside_one_segment() {
        assert!(!ov("*.rs", "src/a.rs"));
        assert!(ov("*.rs", "a.rs"));
        assert!(ov("src/*.rs", "src/a.rs"));
        assert!(!ov("src/*", "src/a/b.rs"));
        assert!(ov("a/*/c", "a/b/*"));
        assert!(!ov("a/*/c", "a/b/d"));
        assert!(ov("*a*", "*b*"));
        assert!(ov("a*", "*b"));
        assert!(!ov("a*", "b*"));
        assert!(!ov("*.rs", "*.md"));
        assert!(ov("*.tar.*", "*.gz"));
    }

    #[test]
    fn a_segment_is_never_empty() {
        // `*` alone needs one character; `a/*` never names `a` itself.
        assert!(!ov("a/*", "a"));
        assert!(ov("a/*", "a/**"));
        assert!(!ov("a/*/b", "a/b"));
    }

    #[test]
    fn question_mark_is_exactly_one_character() {
        assert!(ov("a?c", "abc"));
        assert!(!ov("a?c", "ac"));
        assert!(!ov("a?c", "abbc"));
        assert!(ov("???", "*"));
        assert!(!ov("???", "????"));
        assert!(!ov("??*", "a"));
    }

    #[test]
    fn character_classes_meet_when_they_share_a_character() {
        assert!(ov("[abc].rs", "b.rs"));
        assert!(!ov("[abc].rs", "d.rs"));
        assert!(ov("[a-f]", "[e-z]"));
        assert!(!ov("[a-d]", "[e-z]"));
        assert!(ov("[!a]", "[ab]"));
        assert!(!ov("[!a]", "a"));
        assert!(!ov("[^ab]", "[ab]"));
        assert!(ov("[]]", "]"));
        assert!(ov("[a-]", "-"));
        assert!(ov("[!a-y]", "z"));
        // `/` is in no class: a negated class never spans two segments.
        assert!(!ov("a[!x]b", "a/b"));
    }

    #[test]
    fn escapes_are_literal() {
        assert!(ov(r"a\*", "a*"));
        assert!(!ov(r"a\*", "ab"));
        assert!(ov(r"a\*", "a?"));
        assert!(Glob::parse("a*b").unwrap().matches("a*b"));
        assert!(!Glob::parse(r"a\*b").unwrap().matches("axb"));
    }

    #[test]
    fn trailing_slash_is_the_folder_and_all_in_it() {
        assert!(ov("src/", "src/a/b.rs"));
        assert!(ov("src/", "src"));
        assert!(!ov("src/", "srcx"));
    }

    #[test]
    fn matches_a_plain_path() {
        let g = Glob::parse("src/**/*.rs").unwrap();
        assert!(g.matches("src/a.rs"));
        assert!(g.matches("src/x/y.rs"));
        assert!(!g.matches("src/x/y.md"));
        assert!(!g.matches("tests/a.rs"));
    }

    #[test]
    fn bad_globs_are_refused() {
        for bad in ["", "/", "./", "a[bc", r"a\", "[z-a]"] {
            assert!(Glob::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
