//! Reading `board:`: the cards that seed the board of a new instance, their `after:`
//! references (by position or by `name:`) resolved, and a cycle among them refused.

use crate::board::{MAX_BODY, MAX_TITLE};
use crate::names::sanitize;
use crate::run::diagnostic::{Pos, Spanned};
use crate::run::reader::{Reader, join};
use crate::run::workflow::CardDef;
use crate::run::yaml::{Kind, Node, Scalar};
use crate::suggest::suggestion;

const CARD_KEYS: [&str; 6] = ["name", "title", "body", "after", "for", "labels"];

/// A reference of `after:` as written: a position in the list, or a card's `name:`.
enum Ref {
    Position(i64),
    Name(String),
}

pub(super) fn read_board(r: &mut Reader, node: &Node, agents: &[&str]) -> Vec<CardDef> {
    let Some(items) = node.seq().map_err(|m| r.error(node.pos, "board", &m)).ok() else {
        return Vec::new();
    };
    let mut cards = Vec::new();
    let mut refs = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let (card, after) = read_card(r, i, item, agents);
        cards.push(card);
        refs.push(after);
    }
    for (i, after) in refs.into_iter().enumerate() {
        for (pos, what) in after {
            let path = format!("board[{i}].after");
            let found = match &what {
                Ref::Position(n) => usize::try_from(*n).ok().filter(|n| *n < cards.len()),
                Ref::Name(n) => cards
                    .iter()
                    .position(|c| c.name.as_ref().is_some_and(|m| &m.value == n)),
            };
            let Some(j) = found else {
                let msg = match &what {
                    Ref::Position(n) => format!(
                        "no card at position {n}: positions go from 0 to {}",
                        cards.len() - 1
                    ),
                    Ref::Name(n) => format!(
                        "no card named '{}'{}",
                        sanitize(n),
                        suggestion(
                            n,
                            cards
                                .iter()
                                .filter_map(|c| c.name.as_ref())
                                .map(|m| m.value.as_str())
                        )
                    ),
                };
                r.error(pos, &path, &msg);
                continue;
            };
            if !cards[i].after.contains(&j) {
                cards[i].after.push(j);
            }
        }
    }
    if let Some(cycle) = find_cycle(&cards) {
        let names: Vec<String> = cycle.iter().map(|&i| label(&cards[i], i)).collect();
        let at = cards[cycle[0]].pos;
        r.error(
            at,
            &format!("board[{}].after", cycle[0]),
            &format!("the cards wait for each other: {}", names.join(" -> ")),
        );
    }
    cards
}

/// How a card is named in a message: its `name:`, else its position.
fn label(c: &CardDef, i: usize) -> String {
    c.name
        .as_ref()
        .map_or_else(|| i.to_string(), |n| n.value.clone())
}

/// Card `i`, and its `after:` references as written.
fn read_card(r: &mut Reader, i: usize, item: &Node, agents: &[&str]) -> (CardDef, Vec<(Pos, Ref)>) {
    let path = format!("board[{i}]");
    let mut card = CardDef {
        pos: item.pos,
        name: None,
        title: Spanned::new(String::new(), item.pos),
        body: String::new(),
        after: Vec::new(),
        assignee: Vec::new(),
        labels: Vec::new(),
    };
    let mut refs = Vec::new();
    if let Ok(t) = item.str() {
        // A card that is only a title.
        card.title = Spanned::new(t.to_string(), item.pos);
        check_title(r, &card.title, &path);
        return (card, refs);
    }
    let Some(f) = r.fields(item, &path, &CARD_KEYS) else {
        return (card, refs);
    };
    let p = |key: &str| join(&path, key);
    card.name = f.get("name").and_then(|n| r.name(n, &p("name")));
    match f.get("title").and_then(|n| r.name(n, &p("title"))) {
        Some(t) => {
            check_title(r, &t, &p("title"));
            card.title = t;
        }
        None if f.get("title").is_none() => r.error(item.pos, &path, "missing 'title:'"),
        None => {}
    }
    if let Some(b) = f.get("body").and_then(|n| r.string(n, &p("body"))) {
        if b.value.len() > MAX_BODY {
            r.error(
                b.pos,
                &p("body"),
                &format!("over the limit of {MAX_BODY} bytes"),
            );
        }
        card.body = b.value;
    }
    if let Some(n) = f.get("after") {
        let items = match &n.kind {
            Kind::Seq(items) => items.iter().collect(),
            _ => vec![n],
        };
        for (k, it) in items.into_iter().enumerate() {
            match &it.kind {
                Kind::Scalar(_, Scalar::Int(n)) => refs.push((it.pos, Ref::Position(*n))),
                Kind::Scalar(s, Scalar::Str) => refs.push((it.pos, Ref::Name(s.clone()))),
                _ => r.error(
                    it.pos,
                    &format!("{}[{k}]", p("after")),
                    &format!(
                        "expected a card's position (0, 1, ...) or its name, found {}",
                        it.type_name()
                    ),
                ),
            }
        }
    }
    let pool = f.get("for").and_then(|n| match n.seq() {
        Ok(_) => r.strings(n, &p("for")),
        Err(_) => r.name(n, &p("for")).map(|a| vec![a]),
    });
    for a in pool.unwrap_or_default() {
        match crate::names::check_agent(&a.value) {
            Err(e) => r.error(a.pos, &p("for"), &e.to_string()),
            Ok(()) if !agents.contains(&a.value.as_str()) => r.diags.warn(
                a.pos,
                format!(
                    "{}: {} is not an agent of this workflow{}",
                    p("for"),
                    sanitize(&a.value),
                    suggestion(&a.value, agents.iter().copied())
                ),
            ),
            Ok(()) => {}
        }
        card.assignee.push(a);
    }
    if let Some(labels) = f.get("labels").and_then(|n| r.strings(n, &p("labels"))) {
        for (k, l) in labels.iter().enumerate() {
            if !is_label(&l.value) {
                let msg = "expected a word of letters, digits, - _ . / or : (at most 64 bytes)";
                r.error(l.pos, &format!("{}[{k}]", p("labels")), msg);
            }
        }
        card.labels = labels;
    }
    if let Some(n) = &card.name
        && n.value.parse::<i64>().is_ok()
    {
        let msg = "a name that is a number would read as a position";
        r.error(n.pos, &p("name"), msg);
    }
    (card, refs)
}

fn check_title(r: &mut Reader, t: &Spanned<String>, path: &str) {
    if t.value.trim().is_empty() || t.value.contains(['\n', '\r']) || t.value.len() > MAX_TITLE {
        r.error(
            t.pos,
            path,
            &format!("expected one line of 1 to {MAX_TITLE} bytes"),
        );
    }
}

/// A label as the board takes it: a word of letters, digits, `-`, `_`, `.`, `/` or `:`.
fn is_label(l: &str) -> bool {
    !l.is_empty()
        && l.len() <= 64
        && l.chars()
            .all(|c| c.is_alphanumeric() || "-_./:".contains(c))
}

/// A cycle among the cards' `after`, as the positions along it (the first again at the end).
fn find_cycle(cards: &[CardDef]) -> Option<Vec<usize>> {
    // 0: not seen, 1: on the path, 2: done.
    let mut mark = vec![0u8; cards.len()];
    let mut path = Vec::new();
    fn visit(i: usize, cards: &[CardDef], mark: &mut [u8], path: &mut Vec<usize>) -> bool {
        mark[i] = 1;
        path.push(i);
        for &j in &cards[i].after {
            if mark[j] == 1 {
                let from = path.iter().position(|&k| k == j).expect("on the path");
                path.drain(..from);
                path.push(j);
                return true;
            }
            if mark[j] == 0 && visit(j, cards, mark, path) {
                return true;
            }
        }
        mark[i] = 2;
        path.pop();
        false
    }
    (0..cards.len())
        .find_map(|i| (mark[i] == 0 && visit(i, cards, &mut mark, &mut path)).then(|| path.clone()))
}
