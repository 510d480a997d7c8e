//! The import graph of `src/` runs one way (see the module map in `src/lib.rs`).
//!
//! Every file's references to other modules of the crate — `use crate::…` and `use super::…`
//! trees, `use` of a child module, and paths written inline (`crate::a::b::f()`) — are
//! resolved to the file that defines the module, comments, strings and `#[cfg(test)]`
//! modules aside. A module named again by `pub use` (`pub use channel::inbox;` in `lib.rs`)
//! is that module's file wherever the new name is used, and the `pub use` itself is no
//! reference. The check fails, naming the edges, on a cycle between files or on an arrow
//! against the layer order: base < fs < domain < tools < {run, mcp} < cli < bin, where run
//! and mcp never import each other and nothing but cli imports run. Of cli, `aw-ctl`'s files
//! (`src/cli/ctl/`) never import run either: what they read of a run (its ledger, logs,
//! records) has a home in the domain, below both front ends.
//!
//! The MCP protocol stays in its front end: only `src/mcp/`, `src/cli/mcp.rs` and the thin mains
//! of `src/bin/` name the `rmcp` crate (its tests aside); the tools hand out a neutral
//! definition that the front end converts. The check fails, naming the file, on any other.
//!
//! A type's behaviour lives where the type is: an inherent `impl T` (not `impl Trait for T`)
//! stands in the file that defines `T` (`struct`, `enum`, `union`, `trait` or `type`), and
//! code elsewhere calls it through an import. The check fails, naming the impl and the
//! file of the type, on one that does not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, lowest first, by top-level module; a top-level module not named is domain.
const LAYERS: [(&str, &[&str]); 8] = [
    (
        "base",
        &[
            "", "error", "hash", "host", "keyword", "names", "term", "time", "warn",
        ],
    ),
    ("fs", &["fs"]),
    ("domain", &[]),
    ("tools", &["tools"]),
    ("run", &["run"]),
    ("mcp", &["mcp"]),
    ("cli", &["cli"]),
    ("bin", &["bin"]),
];

/// Files of cli that may not import run: `aw-ctl` reads what a run leaves through the domain.
const CLI_NOT_RUN: &str = "src/cli/ctl/";

/// Edges (from file, to file) allowed against the rules while a move that removes them is
/// under way: none today. An entry that is no longer an edge is reported, so that the list
/// only shrinks.
const PENDING: &[(&str, &str)] = &[];

/// Inherent impls allowed outside the file of their type while a move that brings them home
/// is under way: (file of the impl, type, why), none today. An entry that no longer matches
/// an impl is reported, so that the list only shrinks.
const ELSEWHERE: &[(&str, &str, &str)] = &[];

/// Every file of `src/`, as (path, text).
fn source_files() -> Vec<(String, String)> {
    let mut files = Vec::new();
    read_tree(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        Path::new("src"),
        &mut files,
    );
    assert!(files.len() > 50, "found only {} source files", files.len());
    files
}

#[test]
fn imports_run_one_way() {
    let files = source_files();
    let problems = check(&files, PENDING);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_reports_cycles_and_arrows_against_the_layers() {
    let tree = [
        (
            "src/lib.rs",
            "pub mod channel; pub mod error; pub mod inbox; pub mod run;",
        ),
        // Base reaching up, in a grouped tree.
        ("src/error.rs", "use crate::{time, channel::{Entry, self}};"),
        (
            "src/time.rs",
            "// use crate::run::x;\nconst S: &str = \"crate::run::y\";",
        ),
        // A cycle, one edge inline.
        (
            "src/channel.rs",
            "use crate::inbox::Cursor;\nfn f() { crate::time::now(); }",
        ),
        (
            "src/inbox.rs",
            "fn g() -> crate::channel::Entry { todo!() }\n#[cfg(test)]\nmod tests { use crate::run::Runner; }",
        ),
        (
            "src/run/mod.rs",
            "pub mod runner; use runner::Runner; use crate::mcp::Server;",
        ),
        ("src/run/runner.rs", "use super::super::channel;"),
        ("src/mcp/mod.rs", "pub fn f() { crate::run::runner::go(); }"),
        ("src/cli/mod.rs", "use crate::run::Runner;"),
        // aw-ctl reaching into the runner, inline.
        ("src/cli/ctl/top.rs", "fn t() { crate::run::runner::go(); }"),
        (
            "src/post.rs",
            "fn p() { let c = '\\''; crate::run::runner::go(c); }",
        ),
    ];
    let files: Vec<(String, String)> = tree
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    let problems = check(&files, &[]);
    let text = problems.join("\n");
    for want in [
        "cycle: src/channel.rs -> src/inbox.rs -> src/channel.rs",
        "upward: src/error.rs (base) -> src/channel.rs (domain)",
        "run and mcp: src/run/mod.rs -> src/mcp/mod.rs",
        "run and mcp: src/mcp/mod.rs -> src/run/runner.rs",
        "into run/: src/post.rs (domain) -> src/run/runner.rs",
        "into run/: src/cli/ctl/top.rs (aw-ctl reads through the domain) -> src/run/runner.rs",
    ] {
        assert!(
            problems.iter().any(|p| p == want),
            "missing {want:?} in:\n{text}"
        );
    }
    assert_eq!(problems.len(), 6, "{text}");
    // Comments, strings and test modules are not references; cli but aw-ctl may use run.
    assert!(!text.contains("time.rs ("), "{text}");
    assert!(!text.contains("src/inbox.rs (domain) -> src/run"), "{text}");
    assert!(!text.contains("src/cli/mod.rs"), "{text}");
    // The pending list lets an edge through.
    let pending = [
        ("src/error.rs", "src/channel.rs"),
        ("src/channel.rs", "src/inbox.rs"),
        ("src/run/mod.rs", "src/mcp/mod.rs"),
        ("src/mcp/mod.rs", "src/run/runner.rs"),
        ("src/post.rs", "src/run/runner.rs"),
        ("src/cli/ctl/top.rs", "src/run/runner.rs"),
    ];
    let left = check(&files, &pending);
    assert!(left.is_empty(), "{}", left.join("\n"));
    let gone = [("src/time.rs", "src/run/mod.rs")];
    assert_eq!(
        check(&files[..1], &gone),
        ["pending, but no longer an edge: src/time.rs -> src/run/mod.rs"]
    );
}

#[test]
fn a_module_named_again_is_its_file() {
    let tree = [
        (
            "src/lib.rs",
            "pub mod channel; pub mod error; pub mod time;\npub use channel::inbox;\n\
             pub(crate) use channel::{post as posting};",
        ),
        ("src/channel/mod.rs", "pub mod inbox; pub mod post;"),
        ("src/channel/inbox.rs", ""),
        ("src/channel/post.rs", ""),
        ("src/error.rs", "use crate::inbox::Cursor;"),
        ("src/time.rs", "fn f() { crate::posting::post(); }"),
    ];
    let files: Vec<(String, String)> = tree
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    // The new names lead to the modules' files; lib.rs naming them depends on nothing.
    assert_eq!(
        check(&files, &[]),
        [
            "upward: src/error.rs (base) -> src/channel/inbox.rs (domain)",
            "upward: src/time.rs (base) -> src/channel/post.rs (domain)",
        ]
    );
}

/// Files that may name the `rmcp` crate: the MCP front end and what starts it.
const RMCP_ALLOWED: &[&str] = &["src/mcp/", "src/cli/mcp.rs", "src/bin/"];

#[test]
fn only_the_mcp_front_end_names_rmcp() {
    let files = source_files();
    let problems = rmcp_outside(&files);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_reports_rmcp_outside_the_mcp_front_end() {
    let tree = [
        (
            "src/tools/catalogue.rs",
            "pub fn all() -> Vec<rmcp::model::Tool> { todo!() }",
        ),
        ("src/run/backend/api.rs", "use rmcp::model::Tool;"),
        (
            "src/tools/mod.rs",
            "// rmcp is not named here\nconst S: &str = \"rmcp\";",
        ),
        (
            "src/tools/args.rs",
            "#[cfg(test)]\nmod tests { use rmcp::model::Tool; }",
        ),
        ("src/mcp/mod.rs", "use rmcp::ServerHandler;"),
        ("src/cli/mcp.rs", "use rmcp::ServiceExt;"),
        ("src/cli/send.rs", "fn f() { let my_rmcp_x = 1; }"),
    ];
    let files: Vec<(String, String)> = tree
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    assert_eq!(
        rmcp_outside(&files),
        [
            "rmcp outside the MCP front end: src/tools/catalogue.rs",
            "rmcp outside the MCP front end: src/run/backend/api.rs",
        ]
    );
}

/// The files outside [`RMCP_ALLOWED`] whose code (comments, strings and test modules aside)
/// names `rmcp`.
fn rmcp_outside(files: &[(String, String)]) -> Vec<String> {
    files
        .iter()
        .filter(|(path, _)| !RMCP_ALLOWED.iter().any(|a| path.starts_with(a)))
        .filter(|(_, text)| find_word(&without_tests(&strip(text)).0, "rmcp").is_some())
        .map(|(path, _)| format!("rmcp outside the MCP front end: {path}"))
        .collect()
}

#[test]
fn behaviour_lives_with_its_type() {
    let files = source_files();
    let problems = misplaced(&files, ELSEWHERE);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_reports_impls_away_from_their_type() {
    let tree = [
        (
            "src/channel/mod.rs",
            "pub struct Channel { log: Log }\n\
             impl Channel { pub fn new() -> Channel { todo!() } }\n\
             #[derive(Debug)]\npub(crate) enum Want<T> { All, One(T) }",
        ),
        // A method of Channel away from it, one generic; trait impls and `impl Trait` in
        // argument or return position are not inherent impls.
        (
            "src/channel/index.rs",
            "use super::Channel;\n\
             impl Channel { pub fn append(&self) {} }\n\
             impl<'a, F: Fn() -> u8> super::Want<F> where F: Clone { fn f(&self) {} }\n\
             impl std::fmt::Display for Channel { fn fmt(&self) {} }\n\
             impl<T> From<T> for Want<T> { fn from(t: T) -> Self { todo!() } }\n\
             fn g(x: impl Fn()) -> impl Iterator<Item = u8> { todo!() }\n\
             // impl Channel { }\nconst S: &str = \"impl Channel {\";",
        ),
        // Its own type, twice over, and a type of the same name as one elsewhere.
        (
            "src/channel/log.rs",
            "pub(super) struct Log;\nimpl Log {}\nunsafe impl Send for Log {}\n\
             impl Log { fn more(&self) {} }\nstruct Want;\nimpl Want {}",
        ),
        // Allowed, and an allowed entry that no longer matches.
        (
            "src/run/controller/look.rs",
            "impl Controller { fn look(&self) {} }",
        ),
        ("src/run/controller/config.rs", "pub struct Controller;"),
    ];
    let files: Vec<(String, String)> = tree
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    let allowed = [
        ("src/run/controller/look.rs", "Controller", "moving"),
        ("src/run/controller/gone.rs", "Controller", "moving"),
    ];
    assert_eq!(
        misplaced(&files, &allowed),
        [
            "allowed, but no longer an impl away from its type: Controller in \
             src/run/controller/gone.rs",
            "impl Channel in src/channel/index.rs: Channel is defined in src/channel/mod.rs",
            "impl Want in src/channel/index.rs: Want is defined in src/channel/log.rs, \
             src/channel/mod.rs",
        ]
    );
    // Each entry says why.
    let unexplained = [("src/run/controller/look.rs", "Controller", " ")];
    assert!(
        misplaced(&files, &unexplained)
            .contains(&"allowed without a reason: Controller in src/run/controller/look.rs".into())
    );
    assert!(misplaced(&files[..1], &[]).is_empty());
}

/// Every `.rs` file under `dir` (relative to `base`), with its text.
fn read_tree(base: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(base.join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let rel = dir.join(p.file_name().unwrap());
        if p.is_dir() {
            read_tree(base, &rel, out);
        } else if rel.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            out.push((rel.to_string_lossy().into_owned(), text));
        }
    }
}

/// The problems of a source tree (paths `src/...`), one line each.
fn check(files: &[(String, String)], pending: &[(&str, &str)]) -> Vec<String> {
    // A file's module path: src/a/b.rs and src/a/b/mod.rs are a::b; src/lib.rs is the root.
    let module_of = |path: &str| -> Vec<String> {
        let p = path
            .strip_prefix("src/")
            .unwrap()
            .strip_suffix(".rs")
            .unwrap();
        let mut m: Vec<String> = p.split('/').map(String::from).collect();
        if matches!(m.last().map(String::as_str), Some("mod" | "lib")) {
            m.pop();
        }
        m
    };
    let mut by_module: BTreeMap<Vec<String>, &str> = files
        .iter()
        .filter(|(p, _)| !p.starts_with("src/bin/"))
        .map(|(p, _)| (module_of(p), p.as_str()))
        .collect();
    let mut test_only = BTreeSet::new();
    let mut code = BTreeMap::new();
    for (path, text) in files {
        let (kept, tests) = without_tests(&strip(text));
        for name in tests {
            // src/a.rs and src/a/mod.rs both declare src/a/NAME.rs.
            let mut child = module_of(path);
            child.push(name);
            if let Some(f) = by_module.get(&child) {
                test_only.insert(f.to_string());
            }
        }
        code.insert(path.as_str(), kept);
    }
    // Modules named again: the new name leads to the module's file.
    let mut renames = BTreeSet::new();
    for (path, text) in &code {
        if path.starts_with("src/bin/") {
            continue;
        }
        let here = module_of(path);
        for (r, name) in reexports(text) {
            let segs: Vec<&str> = r.split("::").collect();
            let Some((mut m, rest)) = anchor(&segs, &here, false, &by_module) else {
                continue;
            };
            m.extend(rest.iter().map(|s| s.to_string()));
            if let Some(&file) = by_module.get(&m) {
                let mut alias = here.clone();
                alias.push(name);
                by_module.insert(alias, file);
                renames.insert((path.to_string(), r));
            }
        }
    }
    let mut edges: BTreeSet<(String, String)> = BTreeSet::new();
    let mut pending_seen = BTreeSet::new();
    for (path, text) in &code {
        if test_only.contains(*path) {
            continue;
        }
        let bin = path.starts_with("src/bin/");
        let here = if bin { Vec::new() } else { module_of(path) };
        for r in references(text) {
            if renames.contains(&(path.to_string(), r.clone())) {
                continue;
            }
            let segs: Vec<&str> = r.split("::").collect();
            let Some(to) = resolve(&segs, &here, bin, &by_module) else {
                continue;
            };
            if pending.contains(&(*path, to)) {
                pending_seen.insert((*path, to));
            } else if to != *path {
                edges.insert((path.to_string(), to.to_string()));
            }
        }
    }
    let mut problems: Vec<String> = pending
        .iter()
        .filter(|e| !pending_seen.contains(*e))
        .map(|(from, to)| format!("pending, but no longer an edge: {from} -> {to}"))
        .collect();
    for (from, to) in &edges {
        let (lf, lt) = (layer(from), layer(to));
        let rank = |l: &str| LAYERS.iter().position(|(n, _)| *n == l).unwrap();
        let pair = [lf, lt];
        if pair == ["run", "mcp"] || pair == ["mcp", "run"] {
            problems.push(format!("run and mcp: {from} -> {to}"));
        } else if lt == "run" && from.starts_with(CLI_NOT_RUN) {
            problems.push(format!(
                "into run/: {from} (aw-ctl reads through the domain) -> {to}"
            ));
        } else if lt == "run" && lf != "run" && lf != "cli" {
            problems.push(format!("into run/: {from} ({lf}) -> {to}"));
        } else if rank(lt) > rank(lf) {
            problems.push(format!("upward: {from} ({lf}) -> {to} ({lt})"));
        }
    }
    for cycle in cycles(&edges) {
        problems.push(format!("cycle: {}", cycle.join(" -> ")));
    }
    problems
}

/// The layer of a file, by its top-level module.
fn layer(path: &str) -> &'static str {
    let rest = path.strip_prefix("src/").unwrap();
    let top = match rest.split_once('/') {
        Some((dir, _)) => dir,
        None => rest.strip_suffix(".rs").unwrap(),
    };
    let top = if top == "lib" { "" } else { top };
    LAYERS
        .iter()
        .find(|(_, mods)| mods.contains(&top))
        .map_or("domain", |(name, _)| name)
}

/// The file a path of the crate names: the deepest module it goes through. `None` for a
/// path outside the crate.
fn resolve<'a>(
    segs: &[&str],
    here: &[String],
    bin: bool,
    by_module: &BTreeMap<Vec<String>, &'a str>,
) -> Option<&'a str> {
    let (mut m, rest) = anchor(segs, here, bin, by_module)?;
    for s in rest {
        m.push(s.to_string());
        if !by_module.contains_key(&m) {
            m.pop();
            break;
        }
    }
    by_module.get(&m).copied()
}

/// The module a path of the crate starts from (`crate`, `self`, `super`, a child module of
/// `here`, or `aw` in a binary), and the segments after it. `None` for a path outside the
/// crate.
fn anchor<'s>(
    segs: &'s [&'s str],
    here: &[String],
    bin: bool,
    by_module: &BTreeMap<Vec<String>, &str>,
) -> Option<(Vec<String>, &'s [&'s str])> {
    let mut rest = segs;
    let m = match segs.first().copied() {
        Some("aw") if bin => {
            rest = &segs[1..];
            Vec::new()
        }
        _ if bin => return None,
        Some("crate") => {
            rest = &segs[1..];
            Vec::new()
        }
        Some("self" | "super") => {
            let mut m = here.to_vec();
            while let Some(s @ ("self" | "super")) = rest.first().copied() {
                if s == "super" {
                    m.pop()?;
                }
                rest = &rest[1..];
            }
            m
        }
        Some(first) => {
            // A child module of this one (`use backend::Stop;` in run/mod.rs).
            let mut m = here.to_vec();
            m.push(first.to_string());
            if !by_module.contains_key(&m) {
                return None;
            }
            rest = &segs[1..];
            m
        }
        None => return None,
    };
    Some((m, rest))
}

/// The text with comments, string and character literals blanked out.
fn strip(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    let prev = |k: usize| if k == 0 { '\0' } else { c[k - 1] };
    while i < c.len() {
        if c[i] == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c[i] == 'r'
            && matches!(at(i + 1), '"' | '#')
            && (!ident(prev(i)) || prev(i) == 'b')
        {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#') {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && (at(i + 1) == '\\' || at(i + 2) == '\'') {
            // A character literal ('x', '\n', '\'', '\u{..}'); a lifetime ('a) stays.
            i += if at(i + 1) == '\\' { 3 } else { 2 };
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The text without its `#[cfg(test)] mod NAME { … }` blocks, and the NAMEs of its
/// `#[cfg(test)] mod NAME;` declarations (whole files of tests).
fn without_tests(text: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        let Some(decl) = after.strip_prefix("mod ") else {
            rest = &rest[at + 1..];
            out.push('#');
            continue;
        };
        let name: String = decl
            .trim_start()
            .chars()
            .take_while(|c| ident(*c))
            .collect();
        let body = decl.trim_start()[name.len()..].trim_start();
        if let Some(after) = body.strip_prefix(';') {
            names.push(name);
            rest = after;
        } else {
            // Skip to the brace that closes the module.
            let mut depth = 0;
            let mut end = body.len();
            for (k, ch) in body.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = k + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &body[end..];
        }
    }
    out.push_str(rest);
    (out, names)
}

/// Every path a text refers to: each path of its `use` trees, then every inline path that
/// starts with `crate`, `super`, `self` or `aw`, as `a::b::c`.
fn references(text: &str) -> Vec<String> {
    let mut refs = Vec::new();
    let mut other = String::new();
    let mut rest = text;
    while let Some(at) = find_word(rest, "use") {
        other.push_str(&rest[..at]);
        let tail = &rest[at + 3..];
        let end = tail.find(';').unwrap_or(tail.len());
        let mut named = Vec::new();
        expand(&tail[..end], "", &mut named);
        refs.extend(named.into_iter().map(|(path, _)| path));
        rest = &tail[(end + 1).min(tail.len())..];
    }
    other.push_str(rest);
    let c: Vec<char> = other.chars().collect();
    let mut i = 0;
    while i < c.len() {
        if ident(c[i]) && (i == 0 || !ident(c[i - 1])) {
            let mut j = i;
            let mut path = String::new();
            loop {
                let start = j;
                while j < c.len() && ident(c[j]) {
                    j += 1;
                }
                path.extend(&c[start..j]);
                if c.get(j) == Some(&':')
                    && c.get(j + 1) == Some(&':')
                    && c.get(j + 2).is_some_and(|&x| ident(x))
                {
                    path.push_str("::");
                    j += 2;
                } else {
                    break;
                }
            }
            let first = path.split("::").next().unwrap_or("");
            if path.contains("::") && ["crate", "super", "self", "aw"].contains(&first) {
                refs.push(path);
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    refs
}

/// Every path a text's `pub use` trees name (`pub(crate) use` too), with the name it is
/// given there: `pub use a::{b, c as d};` gives (a::b, b) and (a::c, d).
fn reexports(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = find_word(rest, "use") {
        let before = rest[..at].trim_end();
        // `pub(…)` as one word: what is before its parenthesis.
        let before = match before.strip_suffix(')') {
            Some(b) => b.rfind('(').map_or(b, |open| b[..open].trim_end()),
            None => before,
        };
        let public =
            before.ends_with("pub") && !before[..before.len() - 3].ends_with(|c: char| ident(c));
        let tail = &rest[at + 3..];
        let end = tail.find(';').unwrap_or(tail.len());
        if public {
            expand(&tail[..end], "", &mut out);
        }
        rest = &tail[(end + 1).min(tail.len())..];
    }
    out
}

/// The position of `word` standing alone in `text`.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut from = 0;
    while let Some(k) = text[from..].find(word) {
        let at = from + k;
        let before = at == 0 || !ident(b[at - 1] as char);
        let after = b.get(at + word.len()).is_none_or(|&x| !ident(x as char));
        if before && after {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The paths of a use tree (`a::{b, c::{d, e as f}, self}`), each after `prefix`, with the
/// name each is given (its last segment, or what follows `as`).
fn expand(tree: &str, prefix: &str, out: &mut Vec<(String, String)>) {
    let tree = tree.trim();
    let join = |p: &str| {
        let p = p
            .split(" as ")
            .next()
            .unwrap()
            .trim()
            .trim_end_matches("::*");
        let p = p.trim_end_matches("::self");
        match (prefix.is_empty(), p.is_empty() || p == "self" || p == "*") {
            (true, _) => p.to_string(),
            (false, true) => prefix.to_string(),
            (false, false) => format!("{prefix}::{p}"),
        }
    };
    let Some(open) = tree.find('{') else {
        let path = join(tree);
        let name = match tree.split_once(" as ") {
            Some((_, name)) => name.trim().to_string(),
            None => path.rsplit("::").next().unwrap_or("").to_string(),
        };
        out.push((path, name));
        return;
    };
    let head = join(tree[..open].trim().trim_end_matches("::"));
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut depth = 0;
    let mut start = 0;
    for (k, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                expand(&inner[start..k], &head, out);
                start = k + 1;
            }
            _ => {}
        }
    }
    if !inner[start..].trim().is_empty() {
        expand(&inner[start..], &head, out);
    }
}

/// One cycle of each strongly connected component of more than one file (Tarjan).
fn cycles(edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        next.entry(a).or_default().push(b);
        next.entry(b).or_default();
    }
    let nodes: Vec<&str> = next.keys().copied().collect();
    struct Tarjan<'a> {
        next: &'a BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        sccs: Vec<Vec<&'a str>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for &w in &self.next[v] {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack.remove(w);
                    scc.push(w);
                    if w == v {
                        break;
                    }
                }
                self.sccs.push(scc);
            }
        }
    }
    let mut t = Tarjan {
        next: &next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        sccs: Vec::new(),
    };
    for v in &nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    let mut found = Vec::new();
    for scc in t.sccs.iter().filter(|s| s.len() > 1) {
        // The shortest way back to the component's first file (breadth first, inside it).
        let inside: BTreeSet<&str> = scc.iter().copied().collect();
        let start = *inside.iter().next().unwrap();
        let mut came: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        'search: while let Some(v) = queue.pop_front() {
            for &w in &next[v] {
                if !inside.contains(w) || came.contains_key(w) {
                    continue;
                }
                came.insert(w, v);
                if w == start {
                    break 'search;
                }
                queue.push_back(w);
            }
        }
        let mut path = vec![start.to_string()];
        let mut v = came[start];
        while v != start {
            path.push(v.to_string());
            v = came[v];
        }
        path.push(start.to_string());
        path.reverse();
        found.push(path);
    }
    found
}

/// The inherent impls of a source tree that stand outside every file defining their type,
/// one line each, those `allowed` (file of the impl, type, why) aside.
fn misplaced(files: &[(String, String)], allowed: &[(&str, &str, &str)]) -> Vec<String> {
    let code: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), strip(t))).collect();
    let mut defined: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (path, text) in &code {
        for name in definitions(text) {
            defined.entry(name).or_default().insert(path);
        }
    }
    let mut problems: Vec<String> = allowed
        .iter()
        .filter(|(_, _, why)| why.trim().is_empty())
        .map(|(file, name, _)| format!("allowed without a reason: {name} in {file}"))
        .collect();
    let mut away = BTreeSet::new();
    for (path, text) in &code {
        for name in inherent_impls(text) {
            // A type of the crate, defined in other files only.
            match defined.get(&name) {
                Some(homes) if !homes.contains(path) => {
                    away.insert((*path, name, homes));
                }
                _ => {}
            }
        }
    }
    for (file, name, _) in allowed {
        if !away.iter().any(|(p, n, _)| p == file && n == name) {
            problems.push(format!(
                "allowed, but no longer an impl away from its type: {name} in {file}"
            ));
        }
    }
    for (path, name, homes) in away {
        if !allowed.iter().any(|(p, n, _)| *p == path && *n == name) {
            let homes: Vec<&str> = homes.iter().copied().collect();
            problems.push(format!(
                "impl {name} in {path}: {name} is defined in {}",
                homes.join(", ")
            ));
        }
    }
    problems
}

/// The names of the types a text defines: `struct`, `enum`, `union`, `trait`, `type`.
fn definitions(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for kw in ["struct", "enum", "union", "trait", "type"] {
        let mut rest = text;
        while let Some(at) = find_word(rest, kw) {
            let after = &rest[at + kw.len()..];
            let name = word(after.trim_start());
            if after.starts_with(char::is_whitespace) && !name.is_empty() {
                names.push(name.to_string());
            }
            rest = after;
        }
    }
    names
}

/// The names of the types a text's inherent impls are for (`impl T`, `impl<…> a::T<…>`),
/// not of `impl Trait for T` nor of `impl Trait` in a signature.
fn inherent_impls(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = find_word(rest, "impl") {
        let before = rest[..at].trim_end();
        let after = &rest[at + 4..];
        rest = after;
        // An item: at the start of the text or of a statement, after an attribute, or
        // `unsafe impl`.
        let item = before.is_empty()
            || before.ends_with(['{', '}', ';', ']'])
            || (before.ends_with("unsafe")
                && !before[..before.len() - 6].ends_with(|c: char| ident(c)));
        if !item {
            continue;
        }
        // Skip the generics, minding `->` in them.
        let mut header = after.trim_start();
        if header.starts_with('<') {
            let mut depth = 0;
            let mut prev = ' ';
            for (k, c) in header.char_indices() {
                match c {
                    '<' => depth += 1,
                    '>' if prev != '-' => depth -= 1,
                    _ => {}
                }
                prev = c;
                if depth == 0 {
                    header = &header[k + 1..];
                    break;
                }
            }
        }
        let header = &header[..header.find(['{', ';']).unwrap_or(header.len())];
        let header = match find_word(header, "where") {
            Some(w) => &header[..w],
            None => header,
        };
        if find_word(header, "for").is_some() {
            continue;
        }
        // The last segment of the type's path.
        let mut path = header.trim_start();
        if let Some(p) = path.strip_prefix("dyn ") {
            path = p.trim_start();
        }
        let path = &path[..path
            .find(|c: char| c == '<' || c.is_whitespace())
            .unwrap_or(path.len())];
        let name = word(path.rsplit("::").next().unwrap_or(""));
        if !name.is_empty() {
            names.push(name.to_string());
        }
    }
    names
}

/// The identifier at the start of `text` (empty when there is none).
fn word(text: &str) -> &str {
    &text[..text.find(|c: char| !ident(c)).unwrap_or(text.len())]
}
