//! `aw-ctl board` from the command line: what each command prints, its exit codes and
//! messages, and that a refused command stores nothing.

use crate::common;

use std::process::Output;

use common::{Root, assert_error, assert_same_tree, json_lines, snapshot};

fn run(root: &Root, args: &[&str], input: Option<&[u8]>) -> Output {
    let mut all = vec!["-i", "b", "board"];
    all.extend_from_slice(args);
    root.run("aw-ctl", &all, input)
}

fn ok(root: &Root, args: &[&str]) -> String {
    let mut all = vec!["-i", "b", "board"];
    all.extend_from_slice(args);
    root.ok("aw-ctl", &all, None)
}

#[test]
fn cards_are_added_claimed_in_order_of_their_dependencies_and_finished() {
    let root = Root::new();
    assert_eq!(
        ok(&root, &["add", "design", "--as", "lead", "--label", "plan"]),
        "1\n"
    );
    let out = run(
        &root,
        &[
            "add", "build", "--body", "-", "--after", "1", "--for", "w1", "--as", "lead",
        ],
        Some(b"the body\nof two lines\n"),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\n", "{out:?}");
    assert_eq!(
        ok(
            &root,
            &[
                "add", "ship", "--after", "1,2", "--label", "a", "--label", "b"
            ]
        ),
        "3\n"
    );

    // Only card 1 is ready.
    let ready = json_lines(ok(&root, &["ls", "--ready", "--json"]).as_bytes());
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0]["id"], 1);
    assert_eq!(ready[0]["labels"], serde_json::json!(["plan"]));
    assert_eq!(ok(&root, &["claim", "--next", "--as", "w1"]), "1\n");
    let e = assert_error(
        &run(&root, &["claim", "--next", "--as", "w2"], None),
        "aw-ctl",
        1,
        "none ready",
    );
    assert!(e.contains("no card is ready"), "{e}");
    let e = assert_error(
        &run(&root, &["claim", "2", "--as", "w1"], None),
        "aw-ctl",
        1,
        "waits",
    );
    assert!(e.contains("waits for card 1"), "{e}");
    let e = assert_error(
        &run(&root, &["claim", "1", "--as", "w2"], None),
        "aw-ctl",
        75,
        "held",
    );
    assert!(e.contains("card 1 is held by w1 until "), "{e}");
    assert_error(
        &run(&root, &["done", "1", "--as", "w2"], None),
        "aw-ctl",
        75,
        "done by another",
    );
    assert_eq!(ok(&root, &["renew", "1", "--as", "w1"]), "1\n");
    assert_eq!(
        ok(&root, &["done", "1", "--as", "w1", "--note", "drawn"]),
        "1\n"
    );

    // Card 2 is ready now and meant for w1 (card 1, done, is no one's): only w1 takes it.
    let mine = json_lines(ok(&root, &["ls", "--mine", "w1", "--json"]).as_bytes());
    assert_eq!(
        mine.iter()
            .map(|c| c["id"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [2]
    );
    assert_error(
        &run(&root, &["claim", "--next", "--as", "w2"], None),
        "aw-ctl",
        1,
        "for w1",
    );
    assert_eq!(ok(&root, &["claim", "--next", "--as", "w1"]), "2\n");
    assert_eq!(ok(&root, &["release", "2", "--as", "w1"]), "2\n");
    assert_eq!(ok(&root, &["drop", "2", "--note", "not needed"]), "2\n");
    let e = assert_error(
        &run(&root, &["claim", "2", "--as", "w1"], None),
        "aw-ctl",
        65,
        "dropped",
    );
    assert!(e.contains("card 2 is dropped"), "{e}");

    let show = ok(&root, &["show", "1"]);
    for want in [
        "card 1: design",
        "state: done",
        "by: lead",
        "note: drawn",
        " w1 claimed",
        " w1 renewed",
        " w1 done: drawn",
    ] {
        assert!(show.contains(want), "{want:?} not in {show}");
    }
    let card: serde_json::Value =
        serde_json::from_str(&ok(&root, &["show", "2", "--json"])).unwrap();
    assert_eq!(card["body"], "the body\nof two lines\n");
    assert_eq!(
        (&card["state"], &card["for"], &card["note"]),
        (&"dropped".into(), &"w1".into(), &"not needed".into())
    );
    let ls = ok(&root, &["ls"]);
    assert_eq!(ls.lines().count(), 3, "{ls}");
    assert!(
        ls.lines()
            .nth(2)
            .unwrap()
            .contains("open     ship  [after 1,2]  [a,b]"),
        "{ls}"
    );
}

#[test]
fn bad_board_commands_fail_with_their_exit_code_and_store_nothing() {
    let root = Root::new();
    ok(&root, &["add", "one"]);
    let before = snapshot(root.path());
    let cases: &[(&[&str], i32, &str)] = &[
        (&[], 64, "board: missing subcommand"),
        (&["claim", "--as", "w"], 64, "takes ID or --next"),
        (
            &["claim", "1", "--next", "--as", "w"],
            64,
            "takes ID or --next",
        ),
        (&["claim", "1", "--ttl", "soon"], 64, "--ttl 'soon'"),
        (&["ls", "--next"], 64, "board ls takes no --next"),
        (&["add", "x", "--after", "9"], 66, "no card 9"),
        (&["show", "9"], 66, "no card 9"),
        (&["done", "x1"], 65, "card id 'x1'"),
        (&["add", ""], 65, "card title"),
        (&["add", "a\nb"], 65, "card title"),
        (&["add", "x", "--label", "a b"], 65, "label 'a b'"),
        (&["add", "x", "--for", "no such/agent"], 65, ""),
        (
            &["renew", "1", "--as", "w"],
            65,
            "card 1 is open, not claimed by w",
        ),
        (
            &["release", "1", "--as", "w"],
            65,
            "card 1 is open, not claimed by w",
        ),
    ];
    for (args, code, what) in cases {
        let e = assert_error(
            &run(&root, args, None),
            "aw-ctl",
            *code,
            &format!("{args:?}"),
        );
        assert!(e.contains(what), "{args:?}: {e}");
        assert_same_tree(&before, &snapshot(root.path()), &format!("{args:?}"));
    }
    // A card that is done is not claimed, finished or dropped again.
    ok(&root, &["done", "1"]);
    let before = snapshot(root.path());
    for args in [&["claim", "1"][..], &["done", "1"], &["drop", "1"]] {
        assert_error(&run(&root, args, None), "aw-ctl", 65, &format!("{args:?}"));
        assert_same_tree(&before, &snapshot(root.path()), &format!("{args:?}"));
    }
    // The board of an instance that does not exist: 66, and the instance is not made.
    for args in [
        &["ls"][..],
        &["show", "1"],
        &["claim", "1"],
        &["claim", "--next"],
        &["done", "1"],
        &["renew", "1"],
    ] {
        let mut all = vec!["-i", "none", "board"];
        all.extend_from_slice(args);
        let out = root.run("aw-ctl", &all, None);
        assert_error(&out, "aw-ctl", 66, &format!("{args:?} on no instance"));
        assert!(
            !root.inst_dir("none").exists(),
            "{args:?} made the instance"
        );
    }
}

#[test]
fn a_claim_held_by_an_agents_server_lapses_when_the_server_is_killed() {
    use common::runner::{INST, Server, Setup, wait_for};
    let s = Setup::new();
    let ctl = |args: &[&str]| {
        let mut c = s.tool_cmd("aw-ctl");
        c.args(["-i", INST]).args(args);
        common::run_with(c, None)
    };
    assert_eq!(
        ctl(&["new", "alice", "--backend", "mock"]).status.code(),
        Some(0)
    );
    assert_eq!(ctl(&["board", "add", "work"]).stdout, b"1\n");
    let mut c = s.tool_cmd("aw-run");
    c.args(["-i", INST, "--serve", "--keep", "-q", "alice"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut server = Server::new(c.spawn().expect("spawn aw-run"));
    let pid = server.pid();
    wait_for("alice to be served", || {
        String::from_utf8_lossy(&ctl(&["ps"]).stdout).contains("alice")
    });
    assert_eq!(
        ctl(&["board", "claim", "1", "--as", "alice"]).stdout,
        b"1\n"
    );
    let card: serde_json::Value =
        serde_json::from_slice(&ctl(&["board", "show", "1", "--json"]).stdout).unwrap();
    assert_eq!(
        (&card["holder"]["pid"], &card["holder"]["served"]),
        (&pid.into(), &true.into())
    );
    let out = ctl(&["board", "claim", "--next", "--as", "bob"]);
    assert_error(&out, "aw-ctl", 1, "held while its server runs");
    // SIGKILL: the server leaves its records behind, and the claim lapses all the same.
    server.child().kill().unwrap();
    server.wait();
    assert_eq!(
        ctl(&["board", "claim", "--next", "--as", "bob"]).stdout,
        b"1\n"
    );
    let card: serde_json::Value =
        serde_json::from_slice(&ctl(&["board", "show", "1", "--json"]).stdout).unwrap();
    let lapsed = &card["history"][2];
    assert_eq!(lapsed["event"], "lapsed", "{card}");
    let note = lapsed["note"].as_str().unwrap();
    assert!(
        note.contains(&format!("the server of alice (pid {pid} on ")),
        "{note}"
    );
    assert_eq!(card["holder"]["agent"], "bob");
}
