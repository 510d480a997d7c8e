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

/// Each of `cases` (arguments, exit code, words of the error) is refused as it says, and
/// leaves the tree of `root` as `before`.
fn refused(
    root: &Root,
    before: &std::collections::BTreeMap<std::path::PathBuf, common::Node>,
    cases: &[(&[&str], i32, &str)],
) {
    for (args, code, what) in cases {
        let e = assert_error(
            &run(root, args, None),
            "aw-ctl",
            *code,
            &format!("{args:?}"),
        );
        assert!(e.contains(what), "{args:?}: {e}");
        assert_same_tree(before, &snapshot(root.path()), &format!("{args:?}"));
    }
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
        (
            &"dropped".into(),
            &serde_json::json!(["w1"]),
            &"not needed".into()
        )
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
    refused(&root, &before, cases);
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

/// The system entries of instance `b`'s channel, as (message, mentions).
fn news(root: &Root) -> Vec<(String, Vec<String>)> {
    root.entries("b")
        .into_iter()
        .filter(|e| e.from == "system")
        .map(|e| (e.message, e.mentions))
        .collect()
}

#[test]
fn a_card_for_a_pool_goes_to_its_agents_first_and_its_news_mention_them_once() {
    let root = Root::new();
    for a in ["alice", "bob", "carol"] {
        root.ok("aw-ctl", &["-i", "b", "new", a, "--backend", "mock"], None);
    }
    ok(&root, &["add", "design", "--as", "lead"]);
    ok(
        &root,
        &["add", "parse", "--after", "1", "--for", "alice,bob"],
    );
    ok(&root, &["add", "lint", "--after", "1"]);
    ok(
        &root,
        &[
            "add", "docs", "--after", "1", "--for", "carol", "--for", "alice",
        ],
    );
    let cards = json_lines(ok(&root, &["ls", "--json"]).as_bytes());
    assert_eq!(cards[1]["for"], serde_json::json!(["alice", "bob"]));
    assert_eq!(cards[0]["for"], serde_json::json!([]));
    assert_eq!(cards[3]["for"], serde_json::json!(["carol", "alice"]));
    assert_eq!(news(&root), []);

    ok(&root, &["claim", "1", "--as", "lead"]);
    ok(&root, &["done", "1", "--as", "lead"]);
    let said = news(&root);
    let want = [
        (
            "card 2 \"parse\" is ready @alice @bob",
            vec!["alice", "bob"],
        ),
        ("card 3 \"lint\" is ready", vec![]),
        (
            "card 4 \"docs\" is ready @carol @alice",
            vec!["carol", "alice"],
        ),
    ];
    assert_eq!(said.len(), want.len(), "{said:?}");
    for ((m, who), (wm, wwho)) in said.iter().zip(want) {
        assert_eq!(
            (m.as_str(), who),
            (wm, &wwho.iter().map(|s| s.to_string()).collect())
        );
    }
    // Bob's inbox has the card meant for his pool, and only it.
    let inbox = root.ok("aw-peek", &["-i", "b", "--inbox", "bob", "--json"], None);
    let got: Vec<String> = json_lines(inbox.as_bytes())
        .iter()
        .map(|e| e["entry"]["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, ["card 2 \"parse\" is ready @alice @bob"]);

    // Each agent takes the cards meant for it (alone or in a pool) first, then those for
    // no one; a card for a pool is not taken by another.
    assert_eq!(ok(&root, &["claim", "--next", "--as", "bob"]), "2\n");
    assert_eq!(ok(&root, &["claim", "--next", "--as", "alice"]), "4\n");
    assert_eq!(ok(&root, &["claim", "--next", "--as", "carol"]), "3\n");
    assert_error(
        &run(&root, &["claim", "--next", "--as", "dave"], None),
        "aw-ctl",
        1,
        "nothing left",
    );
    let mine = json_lines(ok(&root, &["ls", "--mine", "alice", "--json"]).as_bytes());
    let ids: Vec<u64> = mine.iter().map(|c| c["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [2, 4], "held by alice or meant for her");

    // A claim whose time runs out lapses once, whoever sees it first, and is said once.
    assert_eq!(ok(&root, &["release", "2", "--as", "bob"]), "2\n");
    ok(&root, &["claim", "2", "--as", "bob", "--ttl", "0s"]);
    let status = root.ok("aw-ctl", &["-i", "b", "status"], None);
    assert!(
        status.contains("  board: 1 open (1 ready), 2 claimed, 1 done\n"),
        "{status}"
    );
    ok(&root, &["ls"]);
    root.ok("aw-ctl", &["-i", "b", "status", "--json"], None);
    let lapses: Vec<_> = news(&root)
        .into_iter()
        .filter(|(m, _)| m.contains("lapsed"))
        .collect();
    assert_eq!(lapses.len(), 1, "{lapses:?}");
    let (m, who) = &lapses[0];
    assert!(
        m.starts_with("card 2 \"parse\" lapsed: the hold of bob ran out at "),
        "{m}"
    );
    assert!(m.ends_with("; it is ready again @alice @bob"), "{m}");
    assert_eq!(who, &["alice", "bob"]);
    let inbox = root.ok("aw-peek", &["-i", "b", "--inbox", "alice", "--json"], None);
    assert!(inbox.contains("card 2 \\\"parse\\\" lapsed: "), "{inbox}");
    let status: serde_json::Value =
        serde_json::from_str(&root.ok("aw-ctl", &["-i", "b", "status", "--json"], None)).unwrap();
    assert_eq!(
        status["board"],
        serde_json::json!({"ready": 1, "waiting": 0, "claimed": 2, "done": 1, "dropped": 0})
    );
}

#[test]
fn a_card_is_edited_until_it_is_closed_and_a_cycle_is_refused_with_its_path() {
    let root = Root::new();
    ok(&root, &["add", "one", "--label", "a"]);
    ok(&root, &["add", "two", "--after", "1"]);
    ok(&root, &["add", "three", "--after", "2"]);
    let before = snapshot(root.path());
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["edit", "1", "--after", "3"],
            65,
            "card 1 would wait for itself: 1 -> 3 -> 2 -> 1",
        ),
        (
            &["edit", "2", "--after", "2"],
            65,
            "card 2 would wait for itself: 2 -> 2",
        ),
        (&["edit", "1", "--after", "9"], 66, "no card 9"),
        (&["edit", "9", "--title", "x"], 66, "no card 9"),
        (&["edit", "1"], 64, "nothing to change"),
        (&["edit", "1", "--title", ""], 65, "card title"),
        (&["edit", "1", "--for", "a b"], 65, "invalid agent name"),
        (&["edit", "1", "--label", "a b"], 65, "label 'a b'"),
    ];
    refused(&root, &before, cases);
    let out = run(
        &root,
        &[
            "edit",
            "2",
            "--title",
            "two, again",
            "--body",
            "-",
            "--for",
            "w1,w2",
            "--label",
            "x",
            "--as",
            "lead",
        ],
        Some(b"new body\n"),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\n", "{out:?}");
    let two: serde_json::Value =
        serde_json::from_str(&ok(&root, &["show", "2", "--json"])).unwrap();
    assert_eq!(
        (&two["title"], &two["body"], &two["for"], &two["labels"]),
        (
            &"two, again".into(),
            &"new body\n".into(),
            &serde_json::json!(["w1", "w2"]),
            &serde_json::json!(["x"])
        )
    );
    let last = two["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&last["by"], &last["event"], &last["note"]),
        (
            &"lead".into(),
            &"edited".into(),
            &"title, body, for, labels".into()
        )
    );
    // Card 3 waits for card 1 now, not 2: each knows who needs it.
    ok(&root, &["edit", "3", "--after", "1"]);
    let blocks = |id: &str| {
        let c: serde_json::Value =
            serde_json::from_str(&ok(&root, &["show", id, "--json"])).unwrap();
        c["blocks"].clone()
    };
    assert_eq!(blocks("1"), serde_json::json!([2, 3]));
    assert_eq!(blocks("2"), serde_json::Value::Null);
    assert!(ok(&root, &["show", "1"]).contains("needed by: 2, 3\n"));
    // The edit that would have made a cycle is allowed now.
    ok(&root, &["edit", "2", "--after", "3"]);
    ok(&root, &["edit", "1", "--no-label"]);
    let one: serde_json::Value =
        serde_json::from_str(&ok(&root, &["show", "1", "--json"])).unwrap();
    assert_eq!(one["labels"], serde_json::json!([]));
    // Done: it is edited no more.
    ok(&root, &["done", "1"]);
    let before = snapshot(root.path());
    let e = assert_error(
        &run(&root, &["edit", "1", "--title", "late"], None),
        "aw-ctl",
        65,
        "edit a card done",
    );
    assert!(e.contains("card 1 is done: it cannot be edited"), "{e}");
    assert_same_tree(&before, &snapshot(root.path()), "edit a card done");
}
