//! Bad input: every refusal exits with the documented status, says so in one line on stderr
//! that begins with the tool's name, and leaves the root directory exactly as it was.

use crate::common;

use std::os::unix::fs::symlink;
use std::path::Path;

use aw::error::Error;
use aw::instance::Root as AwRoot;
use common::{Root, assert_error, assert_same_tree, snapshot};

/// The largest message aw-send accepts (`MAX_MESSAGE`, documented in aw-send(1)).
const MAX_MESSAGE: usize = 4 << 20;

const USAGE: i32 = 64;
const DATAERR: i32 = 65;
const NOINPUT: i32 = 66;
const NOPERM: i32 = 77;

/// A case: tool, arguments, stdin, expected exit status.
struct Case<'a> {
    tool: &'a str,
    args: Vec<&'a str>,
    stdin: Option<Vec<u8>>,
    code: i32,
}

fn case<'a>(tool: &'a str, args: &[&'a str], code: i32) -> Case<'a> {
    Case {
        tool,
        args: args.to_vec(),
        stdin: None,
        code,
    }
}

fn with_stdin<'a>(tool: &'a str, args: &[&'a str], stdin: &[u8], code: i32) -> Case<'a> {
    Case {
        tool,
        args: args.to_vec(),
        stdin: Some(stdin.to_vec()),
        code,
    }
}

/// Run every case against `root`, and check that nothing under `watch` changed.
fn run_cases(root: &Root, cases: &[Case], watch: &[&Path]) {
    for c in cases {
        let what = format!("{} {:?}", c.tool, c.args);
        let before: Vec<_> = watch.iter().map(|p| snapshot(p)).collect();
        let out = root.run(c.tool, &c.args, c.stdin.as_deref());
        assert_error(&out, c.tool, c.code, &what);
        for (p, b) in watch.iter().zip(&before) {
            assert_same_tree(b, &snapshot(p), &format!("{what} in {}", p.display()));
        }
    }
}

/// A root with instance `inst` holding one message, agent `coder` and a document.
fn populated() -> Root {
    let root = Root::new();
    root.send("inst", &[], "hello");
    root.ok("aw-ctl", &["-i", "inst", "new", "coder"], None);
    root.ok(
        "aw-ctl",
        &["-i", "inst", "doc", "write", "notes.md"],
        Some(b"the notes\n"),
    );
    root
}

#[test]
fn bad_names_and_messages_are_refused() {
    let root = populated();
    let over = vec![b'x'; MAX_MESSAGE + 1];
    let cases = [
        // Instance names.
        case("aw-send", &["-i", "../x", "hi"], DATAERR),
        case("aw-send", &["-i", "a b", "hi"], DATAERR),
        case("aw-send", &["-i", "a/b", "hi"], DATAERR),
        case("aw-send", &["-i", "", "hi"], DATAERR),
        case("aw-send", &["-i", "a\nb", "hi"], DATAERR),
        case("aw-send", &["-t", "@../x", "hi"], DATAERR),
        case("aw-send", &["-t", "coder@../x", "hi"], DATAERR),
        case("aw-peek", &["-i", "../x"], DATAERR),
        case("aw-peek", &["@a b"], DATAERR),
        case("aw-ctl", &["-i", "../x", "ls"], DATAERR),
        case("aw-ctl", &["-i", "../x", "new", "bob"], DATAERR),
        case("aw-ctl", &["new", "bob@../x"], DATAERR),
        // Agent names.
        case("aw-send", &["-i", "inst", "--from", "x y", "hi"], DATAERR),
        case("aw-send", &["-i", "inst", "--from", "../x", "hi"], DATAERR),
        case("aw-send", &["-i", "inst", "--from", "", "hi"], DATAERR),
        case("aw-send", &["-i", "inst", "-t", "x y", "hi"], DATAERR),
        case("aw-ctl", &["-i", "inst", "new", "../x"], DATAERR),
        case("aw-ctl", &["-i", "inst", "new", "x y"], DATAERR),
        case("aw-ctl", &["-i", "inst", "new", "9lives"], DATAERR),
        case("aw-ctl", &["-i", "inst", "new", "user"], DATAERR),
        case("aw-ctl", &["-i", "inst", "new", "system"], DATAERR),
        case("aw-ctl", &["-i", "inst", "ack", "../x"], DATAERR),
        case("aw-peek", &["-i", "inst", "--inbox", "x y"], DATAERR),
        case("aw-peek", &["-i", "inst", "--inbox", "@inst"], DATAERR),
        case(
            "aw-ctl",
            &["-i", "inst", "doc", "write", "--as", "x y"],
            DATAERR,
        ),
        // Messages.
        with_stdin("aw-send", &["-i", "inst"], b"caf\xe9 latin-1", DATAERR),
        with_stdin("aw-send", &["-i", "inst", "-"], b"\xff\xfe", DATAERR),
        with_stdin("aw-send", &["-i", "inst"], b"a NUL \0 inside", DATAERR),
        with_stdin("aw-send", &["-i", "inst"], b"", DATAERR),
        with_stdin("aw-send", &["-i", "inst"], b"  \n\t\r\n", DATAERR),
        case("aw-send", &["-i", "inst", ""], DATAERR),
        case("aw-send", &["-i", "inst", " ", " "], DATAERR),
        with_stdin("aw-send", &["-i", "inst"], &over, DATAERR),
        with_stdin("aw-send", &["-i", "new-instance"], &over, DATAERR),
        case(
            "aw-send",
            &["-i", "inst", "--strict", "@nobody hi"],
            DATAERR,
        ),
        // Usage.
        case("aw-send", &["-i", "inst", "--bogus", "hi"], USAGE),
        case("aw-send", &["-i", "inst", "-", "word"], USAGE),
        case("aw-send", &["-i"], USAGE),
        case("aw-peek", &["--since", "x"], USAGE),
        case("aw-peek", &["-i", "inst", "--doc", "--docs"], USAGE),
        case("aw-ctl", &[], USAGE),
        case("aw-ctl", &["frobnicate"], USAGE),
        case(
            "aw-ctl",
            &["-i", "inst", "ack", "coder", "--until", "-1"],
            USAGE,
        ),
        // Missing things.
        case("aw-peek", &["-i", "nope"], NOINPUT),
        case("aw-peek", &["@nope", "--json"], NOINPUT),
        case("aw-peek", &["-i", "nope", "--inbox", "coder"], NOINPUT),
        case("aw-peek", &["coder@nope"], NOINPUT),
        case("aw-peek", &["-i", "inst", "--inbox", "nobody"], NOINPUT),
        case("aw-peek", &["-i", "nope", "--docs"], NOINPUT),
        case("aw-peek", &["-i", "inst", "--doc", "missing.md"], NOINPUT),
        case("aw-ctl", &["-i", "nope", "ack", "coder"], NOINPUT),
        case("aw-ctl", &["-i", "inst", "ack", "nobody"], NOINPUT),
        case("aw-ctl", &["-i", "inst", "rm", "nobody"], NOINPUT),
        case("aw-ctl", &["-i", "nope", "doc", "read"], NOINPUT),
        case(
            "aw-ctl",
            &["-i", "inst", "doc", "read", "missing.md"],
            NOINPUT,
        ),
        case(
            "aw-ctl",
            &["-i", "inst", "doc", "rm", "missing.md"],
            NOINPUT,
        ),
    ];
    run_cases(&root, &cases, &[root.path()]);

    // A root that does not exist is not created by a read.
    let gone = root.path().join("no-such-root");
    let out = common::tool("aw-peek")
        .arg("--root")
        .arg(&gone)
        .output()
        .unwrap();
    assert_error(&out, "aw-peek", NOINPUT, "aw-peek in a missing root");
    assert!(!gone.exists(), "aw-peek created the root");

    // The limit itself is accepted: the refusal above is about the size alone.
    let max = vec![b'x'; MAX_MESSAGE];
    assert_eq!(root.send_stdin("inst", &[], &max), 2);
}

#[test]
fn bad_document_names_are_refused() {
    let root = populated();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "outside the root\n").unwrap();
    let docs = root.inst_dir("inst").join("documents");
    // Symlinks that lead out of the instance: a folder, a file, a dangling link, and a
    // link to the root above the instance.
    symlink(outside.path(), docs.join("out")).unwrap();
    symlink(outside.path().join("secret.md"), docs.join("link.md")).unwrap();
    symlink("/nonexistent/aw-test", docs.join("dangling.md")).unwrap();
    symlink("../..", docs.join("up")).unwrap();
    std::fs::write(
        root.path().join("beside.md"),
        "in the root, beside the instance\n",
    )
    .unwrap();
    // A link that stays inside is refused too: documents are never reached through one.
    std::fs::create_dir(docs.join("sub")).unwrap();
    std::fs::write(docs.join("sub/inner.md"), "inner\n").unwrap();
    symlink("sub", docs.join("alias")).unwrap();

    let body: &[u8] = b"new content\n";
    let mut cases = Vec::new();
    let bad_names = [
        "../x.md",
        "../../x.md",
        "a/../../x.md",
        "a/../b.md",
        "./notes.md",
        "a/./b.md",
        "/etc/passwd",
        "/tmp/x.md",
        ".hidden.md",
        "dir/.hidden",
        "dir/",
        "",
        "a\u{1}b.md",
        "a\nb.md",
    ];
    for n in &bad_names {
        cases.push(case("aw-ctl", &["-i", "inst", "doc", "read", n], DATAERR));
        cases.push(with_stdin(
            "aw-ctl",
            &["-i", "inst", "doc", "write", n],
            body,
            DATAERR,
        ));
        cases.push(with_stdin(
            "aw-ctl",
            &["-i", "inst", "doc", "append", n],
            body,
            DATAERR,
        ));
        cases.push(with_stdin(
            "aw-ctl",
            &["-i", "inst", "doc", "create", n],
            body,
            DATAERR,
        ));
        cases.push(case("aw-ctl", &["-i", "inst", "doc", "rm", n], DATAERR));
        cases.push(case("aw-peek", &["-i", "inst", "--doc", n], DATAERR));
    }
    let escapes = [
        "out/secret.md",
        "out/new.md",
        "out/deeper/new.md",
        "link.md",
        "dangling.md",
        "up/beside.md",
        "up/other/new.md",
        "alias/inner.md",
    ];
    for n in &escapes {
        cases.push(case("aw-ctl", &["-i", "inst", "doc", "read", n], NOPERM));
        cases.push(with_stdin(
            "aw-ctl",
            &["-i", "inst", "doc", "write", n],
            body,
            NOPERM,
        ));
        cases.push(with_stdin(
            "aw-ctl",
            &["-i", "inst", "doc", "append", n],
            body,
            NOPERM,
        ));
        cases.push(with_stdin(
            "aw-ctl",
            &["-i", "inst", "doc", "create", n],
            body,
            NOPERM,
        ));
        cases.push(case("aw-ctl", &["-i", "inst", "doc", "rm", n], NOPERM));
        cases.push(case("aw-peek", &["-i", "inst", "--doc", n], NOPERM));
    }
    // Content that is not a document.
    cases.push(with_stdin(
        "aw-ctl",
        &["-i", "inst", "doc", "write"],
        b"NUL \0 here",
        DATAERR,
    ));
    cases.push(with_stdin(
        "aw-ctl",
        &["-i", "inst", "doc", "append"],
        b"\xc3\x28",
        DATAERR,
    ));
    run_cases(&root, &cases, &[root.path(), outside.path()]);

    // NUL in a name cannot reach a command line: check the library, which every front end
    // (aw-ctl, aw-peek, aw-mcp) goes through.
    let inst = AwRoot::new(root.path()).instance("inst").unwrap();
    let before = snapshot(root.path());
    for n in ["a\0b.md", "\0", "notes.md\0../../x", "sub/\0"] {
        let code = |r: Result<(), Error>| r.map_err(|e| e.exit_code());
        assert_eq!(
            code(aw::document::resolve(&inst, n).map(drop)),
            Err(65),
            "{n:?}"
        );
        assert_eq!(
            code(aw::document::read(&inst, n).map(drop)),
            Err(65),
            "{n:?}"
        );
        assert_eq!(
            code(aw::document::write(&inst, n, "x", "user")),
            Err(65),
            "{n:?}"
        );
        assert_eq!(
            code(aw::document::append(&inst, n, "x", "user")),
            Err(65),
            "{n:?}"
        );
        assert_eq!(
            code(aw::document::create(&inst, n, "x", "user")),
            Err(65),
            "{n:?}"
        );
    }
    assert_same_tree(&before, &snapshot(root.path()), "NUL in document names");
}

#[test]
fn bad_resource_ids_are_refused() {
    // No command-line tool reads resources (aw-mcp's resource_read does, through the
    // library): check the library directly.
    let root = Root::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "outside\n").unwrap();
    let inst = AwRoot::new(root.path()).instance("res").unwrap();
    let id = aw::resource::create(&inst, "# a resource\n", None).unwrap();
    assert_eq!(
        aw::resource::read(&inst, &id).unwrap(),
        ("# a resource\n".to_string(), "markdown")
    );
    let dir = root.inst_dir("res").join("resources");
    let escape = "res-0123456789abcdef";
    symlink(
        outside.path().join("secret.md"),
        dir.join(format!("{escape}.md")),
    )
    .unwrap();
    let dangling = "res-fedcba9876543210";
    symlink("/nonexistent/aw-test", dir.join(format!("{dangling}.txt"))).unwrap();

    let before = (snapshot(root.path()), snapshot(outside.path()));
    let code = |id: &str| aw::resource::read(&inst, id).map_err(|e| e.exit_code());
    for bad in [
        "../../secret.md",
        "res-../../../etc/passwd",
        "/etc/passwd",
        "res-0123456789abcdeg",
        "res-0123456789ABCDEF",
        "res-0123456789abcde",
        "res-0123456789abcdef0",
        "res-0123456789abcde\0",
        "res-0123456789abcdef\0",
        "res-0123456789abcdef.md",
        "",
    ] {
        assert_eq!(code(bad), Err(65), "resource id {bad:?}");
    }
    assert_eq!(code(escape), Err(77), "a resource that is a symlink out");
    assert_eq!(
        code(dangling),
        Err(77),
        "a resource that is a dangling symlink"
    );
    assert_eq!(code("res-00000000000000aa"), Err(66), "a missing resource");
    assert_eq!(
        (snapshot(root.path()), snapshot(outside.path())),
        before,
        "reads changed something"
    );
}

#[test]
fn only_the_document_owner_writes() {
    let root = populated();
    let i = ["-i", "inst"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v = vec!["-i", "inst"];
        v.extend_from_slice(extra);
        v
    };
    let out = root.run("aw-ctl", &with(&["doc", "owner"]), None);
    assert_eq!(out.status.code(), Some(1), "no owner yet");
    root.ok("aw-ctl", &with(&["doc", "owner", "coder"]), None);
    assert_eq!(root.ok("aw-ctl", &with(&["doc", "owner"]), None), "coder\n");
    root.ok(
        "aw-ctl",
        &with(&["doc", "write", "plan.md", "--as", "coder"]),
        Some(b"the plan\n"),
    );

    let body: &[u8] = b"not the owner's words\n";
    let mut cases = Vec::new();
    for who in [&["--as", "reviewer"][..], &["--as", "user"][..], &[][..]] {
        for (sub, file) in [
            ("write", "notes.md"),
            ("write", "plan.md"),
            ("write", "fresh.md"),
            ("append", "notes.md"),
            ("create", "fresh.md"),
        ] {
            let mut args = with(&["doc", sub, file]);
            args.extend_from_slice(who);
            cases.push(with_stdin("aw-ctl", &args, body, NOPERM));
        }
        let mut args = with(&["doc", "rm", "plan.md"]);
        args.extend_from_slice(who);
        cases.push(case("aw-ctl", &args, NOPERM));
    }
    run_cases(&root, &cases, &[root.path()]);

    // AW_AGENT names the writer too.
    let before = snapshot(root.path());
    let mut cmd = root.cmd("aw-ctl");
    cmd.args(i)
        .args(["doc", "write"])
        .env("AW_AGENT", "reviewer@inst");
    let out = common::run_with(cmd, Some(body));
    assert_error(&out, "aw-ctl", NOPERM, "AW_AGENT=reviewer doc write");
    assert_same_tree(
        &before,
        &snapshot(root.path()),
        "AW_AGENT=reviewer doc write",
    );
    assert_eq!(
        root.ok("aw-ctl", &with(&["doc", "read"]), None),
        "the notes\n"
    );

    // The owner writes; clearing the owner lets everyone write again.
    root.ok(
        "aw-ctl",
        &with(&["doc", "append", "--as", "coder"]),
        Some(b"more\n"),
    );
    assert_eq!(
        root.ok("aw-ctl", &with(&["doc", "read"]), None),
        "the notes\nmore\n"
    );
    root.ok("aw-ctl", &with(&["doc", "owner", "--clear"]), None);
    root.ok("aw-ctl", &with(&["doc", "write"]), Some(b"anyone\n"));
    assert_eq!(root.ok("aw-ctl", &with(&["doc", "read"]), None), "anyone\n");
}

#[test]
fn the_document_list_shows_no_symlink() {
    let root = Root::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "outside").unwrap();
    root.ok(
        "aw-ctl",
        &["-i", "d", "doc", "write", "real.md"],
        Some(b"inside"),
    );
    let docs = root.inst_dir("d").join("documents");
    std::os::unix::fs::symlink(outside.path().join("secret.md"), docs.join("out.md")).unwrap();
    std::os::unix::fs::symlink("real.md", docs.join("alias.md")).unwrap();
    std::os::unix::fs::symlink("missing.md", docs.join("dangling.md")).unwrap();
    let list = root.ok("aw-peek", &["-i", "d", "--docs"], None);
    assert_eq!(list, "real.md\n");
}
