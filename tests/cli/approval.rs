//! `aw-ctl approvals`, `approve` and `reject` from the command line: what each prints, its
//! exit codes and messages, and that a refused command stores nothing.

use crate::common;

use std::process::{Output, Stdio};

use common::{Root, assert_error, assert_same_tree, json_lines, snapshot};

fn run(root: &Root, args: &[&str]) -> Output {
    let mut all = vec!["-i", "a"];
    all.extend_from_slice(args);
    root.run("aw-ctl", &all, None)
}

fn ok(root: &Root, args: &[&str]) -> String {
    let mut all = vec!["-i", "a"];
    all.extend_from_slice(args);
    root.ok("aw-ctl", &all, None)
}

#[test]
fn requests_are_listed_shown_and_decided() {
    let root = Root::new();
    assert_eq!(
        ok(
            &root,
            &[
                "approvals",
                "ask",
                "deploy to prod",
                "--by",
                "user",
                "--by",
                "lead",
                "--kind",
                "run",
                "--details",
                "tag v2",
                "--timeout",
                "1h",
                "--then",
                "lead",
                "--as",
                "ci",
            ]
        ),
        "1\n"
    );
    let line = ok(
        &root,
        &[
            "approvals",
            "ask",
            "second",
            "--by",
            "user",
            "--json",
            "--as",
            "ci",
        ],
    );
    let v = &json_lines(line.as_bytes())[0];
    assert_eq!(v["id"], 2);
    assert_eq!(v["state"], "pending");

    let listed = json_lines(ok(&root, &["approvals", "--json"]).as_bytes());
    assert_eq!(listed.len(), 2);
    let first = &listed[0];
    for key in ["id", "what", "asked_by", "by", "state", "asked", "expires"] {
        assert!(first.get(key).is_some(), "{key} missing from {first}");
    }
    assert_eq!(first["what"], "deploy to prod");
    assert_eq!(first["kind"], "run");
    assert_eq!(first["asked_by"], "ci");
    assert_eq!(first["by"], serde_json::json!(["user", "lead"]));
    assert_eq!(first["then"], "lead");
    assert!(common::is_timestamp(first["asked"].as_str().unwrap()));
    assert!(common::is_timestamp(first["expires"].as_str().unwrap()));
    assert_eq!(listed[1]["expires"], serde_json::Value::Null);

    let text = ok(&root, &["approvals"]);
    assert!(
        text.starts_with("   1  pending    run    deploy to prod  [asked by ci; by user,lead]"),
        "{text}"
    );

    assert_eq!(
        ok(
            &root,
            &["approve", "#1", "--reason", "green", "--as", "lead"]
        ),
        "approval 1 approved\n"
    );
    assert_eq!(
        ok(&root, &["reject", "2", "--as", "user"]),
        "approval 2 rejected\n"
    );
    // Pending only by default; --all shows the decided ones.
    assert_eq!(ok(&root, &["approvals"]), "");
    let all = json_lines(ok(&root, &["approvals", "--all", "--json"]).as_bytes());
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["decision"]["reason"], "green");

    let shown = ok(&root, &["approvals", "show", "1"]);
    for want in [
        "approval 1: deploy to prod\n",
        "kind: run\n",
        "state: approved\n",
        "by: user, lead\n",
        "then lead)\n",
        "decided: by lead at ",
        ": green\n",
        "\ntag v2\n",
    ] {
        assert!(shown.contains(want), "{want:?} not in {shown}");
    }
    let json = json_lines(ok(&root, &["approvals", "show", "1", "--json"]).as_bytes());
    assert_eq!(json[0]["details"], "tag v2");

    // ask --wait on a request decided: its outcome at once, with the exit status.
    let out = run(&root, &["approvals", "wait", "2", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v = &json_lines(&out.stdout)[0];
    assert_eq!(
        (v["outcome"].as_str(), v["id"].as_u64()),
        (Some("rejected"), Some(2))
    );
}

#[test]
fn bad_requests_and_refused_decisions_exit_with_their_codes_and_store_nothing() {
    let root = Root::new();
    ok(
        &root,
        &["approvals", "ask", "x", "--by", "user", "--as", "bot"],
    );
    ok(&root, &["approve", "1", "--as", "user"]);
    let before = snapshot(root.path());
    let many: Vec<String> = (1..=21).map(|i| format!("a{i}")).collect();
    let many = many.join(",");
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["approvals", "ask", "x", "--by", &many],
            65,
            "aw-ctl: 21 approvers: at most 20",
        ),
        (
            &["approvals", "ask", "x"],
            64,
            "aw-ctl: approvals ask needs --by: who may approve",
        ),
        (
            &["approvals", "ask", "x", "--by", "user", "--then", "skip"],
            64,
            "aw-ctl: --then needs --timeout: it says what happens when it runs out",
        ),
        (
            &["approvals", "ask", "x", "--by", "user", "--kind", "deploy"],
            64,
            "aw-ctl: --kind 'deploy': expected task, run, merge, tool",
        ),
        (
            &["approvals", "ask", "x", "--by", "user", "--timeout", "soon"],
            64,
            "aw-ctl: --timeout 'soon': ",
        ),
        (
            &[
                "approvals",
                "ask",
                "x",
                "--by",
                "user",
                "--timeout",
                "1m",
                "--then",
                "no one",
            ],
            64,
            "aw-ctl: --then 'no one': expected fail, skip or the agent to escalate to",
        ),
        (
            &["approvals", "ask", "two\nlines", "--by", "user"],
            65,
            "aw-ctl: what is asked: expected one line of 1 to 200 bytes",
        ),
        (
            &["approvals", "ask", "x", "--by", "9lives"],
            65,
            "aw-ctl: invalid agent name '9lives'",
        ),
        (
            &["approve", "one"],
            65,
            "aw-ctl: approval id 'one': expected a number such as 3",
        ),
        (&["approve", "9"], 66, "aw-ctl: no approval 9 in instance a"),
        (
            &["reject", "1", "--as", "user"],
            65,
            "aw-ctl: approval 1 is approved already (by user at ",
        ),
        (
            &["reject", "1", "--as", "mallory"],
            77,
            "aw-ctl: mallory may not decide approval 1: only user may",
        ),
        (
            &["approvals", "show", "2"],
            66,
            "aw-ctl: no approval 2 in instance a",
        ),
        (
            &["approvals", "wait", "2"],
            66,
            "aw-ctl: no approval 2 in instance a",
        ),
        (
            &["approvals", "nope"],
            64,
            "aw-ctl: approvals: unknown subcommand 'nope'",
        ),
        (
            &["approve", "1", "--wait"],
            64,
            "aw-ctl: approve takes no --wait",
        ),
    ];
    for (args, code, want) in cases {
        let out = run(&root, args);
        let line = assert_error(&out, "aw-ctl", *code, &format!("{args:?}"));
        assert!(line.starts_with(want), "{args:?}: {line:?} is not {want:?}");
    }
    assert_same_tree(&before, &snapshot(root.path()), "refused commands");
    // No such instance: 66, and no instance is made.
    let out = root.run("aw-ctl", &["-i", "nowhere", "approve", "1"], None);
    assert_error(&out, "aw-ctl", 66, "an instance that does not exist");
    assert!(!root.inst_dir("nowhere").exists());
}

/// `--wait` of `approvals ask` takes no value and that of `lease take` a time: after the
/// command or before it, each is read as its command takes it, and a value where none is
/// taken (or none where one is) is a usage error that stores nothing.
#[test]
fn wait_is_read_as_the_command_named_takes_it_before_or_after_the_command() {
    let root = Root::new();
    // Lease paths are relative to the directory that holds the root, outside any git tree.
    let ctl = |args: &[&str]| {
        let mut c = root.cmd("aw-ctl");
        c.current_dir(root.path()).args(["-i", "a"]).args(args);
        c
    };
    let out = common::run_with(ctl(&["lease", "take", "a.txt", "--as", "bob"]), None);
    assert_eq!(out.stdout, b"L1\n", "{out:?}");
    // Before the command, the word after it is its value for lease take...
    let args = ["--wait", "0.1s", "lease", "take", "a.txt", "--as", "carol"];
    let out = common::run_with(ctl(&args), None);
    let line = assert_error(&out, "aw-ctl", 75, "a wait that runs out");
    assert!(line.contains("leased by bob"), "{line}");
    // ... and a word for approvals ask, which waits: a decision ends the wait.
    let mut c = ctl(&["--wait", "approvals", "ask", "deploy", "--by", "user"]);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let waiter = c.spawn().unwrap();
    common::runner::wait_for("the request", || {
        ok(&root, &["approvals"]).contains("deploy")
    });
    assert_eq!(ok(&root, &["approve", "1"]), "approval 1 approved\n");
    let out = common::runner::wait_hang_guarded(waiter);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.starts_with("1\napproved by user"), "{printed}");
    let before = snapshot(root.path());
    let refused: &[(&[&str], &str)] = &[
        // After the command, each as its own: a bare word is no value of approvals ask's.
        (
            &["approvals", "ask", "x", "--by", "user", "--wait", "5s"],
            "wrong number of arguments for 'approvals ask'",
        ),
        (
            &["--wait=5s", "approvals", "ask", "x", "--by", "user"],
            "unexpected argument for option '--wait'",
        ),
        (
            &["--wait", "--as", "carol", "lease", "take", "a.txt"],
            "--wait needs a value",
        ),
        (
            &["lease", "take", "a.txt", "--wait"],
            "--wait needs a value",
        ),
    ];
    for (args, want) in refused {
        let out = common::run_with(ctl(args), None);
        let line = assert_error(&out, "aw-ctl", 64, &format!("{args:?}"));
        assert!(line.contains(want), "{args:?}: {line}");
    }
    assert_same_tree(&before, &snapshot(root.path()), "refused --wait");
}
