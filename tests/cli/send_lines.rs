//! `aw-send --lines`: one message per line of stdin, each sent as soon as it is read.
//!
//! Every test runs the real binaries. A line that must arrive has a deadline, so that a
//! writer that waits for the end of its input fails the test instead of hanging it.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdout, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use common::{Root, assert_error, json_lines, parse_entries, snapshot};

/// How long a line that must come may take.
const DEADLINE: Duration = Duration::from_secs(20);

/// The stdout lines of a child, as they arrive.
fn lines_of(stdout: ChildStdout) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn next(rx: &Receiver<String>, what: &str) -> String {
    rx.recv_timeout(DEADLINE)
        .unwrap_or_else(|_| panic!("{what}: nothing printed"))
}

/// The text of line `i` (from 1) of the big input: plain, escaped, mentions, Unicode.
fn big_line(i: usize) -> String {
    match i % 5 {
        0 => format!("### heading {i}"),
        1 => format!("\\back {i}  trailing  "),
        2 => format!("@bob look at {i}"),
        3 => format!("ünïcode {i} — ✓"),
        _ => format!("plain line {i}"),
    }
}

#[test]
fn a_hundred_thousand_lines_dense_exact_one_bad_refused_alone() {
    const N: usize = 100_000;
    const BAD: usize = 50_000;
    let root = Root::new();
    root.ok("aw-ctl", &["-i", "l", "new", "bob"], None);
    let mut input = Vec::new();
    for i in 1..=N {
        if i == BAD {
            input.extend_from_slice(b"bad \xff byte");
        } else {
            input.extend_from_slice(big_line(i).as_bytes());
        }
        input.push(b'\n');
    }
    let out = root.run(
        "aw-send",
        &["-i", "l", "--from", "ci", "--lines"],
        Some(&input),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "stderr: {stderr}");
    assert_eq!(
        stderr,
        format!("aw-send: line {BAD}: not valid UTF-8 (invalid byte at offset 4)\n")
    );
    let ids: Vec<u64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().expect("an id per line"))
        .collect();
    assert_eq!(ids, (1..N as u64).collect::<Vec<_>>(), "ids dense from 1");

    let entries = root.entries("l");
    assert_eq!(entries.len(), N - 1);
    let want = (1..=N).filter(|&i| i != BAD).map(big_line);
    for (k, (e, text)) in entries.iter().zip(want).enumerate() {
        assert_eq!(e.id, k as u64 + 1);
        assert_eq!(e.from, "ci");
        assert_eq!(e.message, text, "entry #{}", e.id);
        let mentions: &[&str] = if text.starts_with("@bob") {
            &["bob"]
        } else {
            &[]
        };
        assert_eq!(e.mentions, mentions, "entry #{}", e.id);
    }
}

#[test]
fn mentions_route_to_inboxes_and_blank_lines_are_skipped() {
    let root = Root::new();
    root.ok("aw-ctl", &["-i", "m", "new", "bob"], None);
    root.ok("aw-ctl", &["-i", "m", "new", "carol"], None);
    let input = "@bob one\n\n   \nplain\n@carol and @bob\nlast without newline";
    let out = root.ok(
        "aw-send",
        &["-i", "m", "--from", "alice", "--lines", "--json"],
        Some(input.as_bytes()),
    );
    let printed = parse_entries(out.as_bytes());
    let texts: Vec<&str> = printed.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        texts,
        [
            "@bob one",
            "plain",
            "@carol and @bob",
            "last without newline"
        ]
    );
    assert_eq!(
        printed,
        root.entries("m"),
        "--json prints the stored entries"
    );

    let inbox = |agent: &str| -> Vec<u64> {
        let out = root.ok("aw-peek", &["-i", "m", "--inbox", agent, "--json"], None);
        json_lines(out.as_bytes())
            .iter()
            .map(|v| v["entry"]["id"].as_u64().expect("entry id"))
            .collect()
    };
    assert_eq!(inbox("bob"), [1, 3]);
    assert_eq!(inbox("carol"), [3]);

    // --to puts the mention in front of each line that lacks it.
    let out = root.ok(
        "aw-send",
        &["-i", "m", "--to", "carol", "--lines"],
        Some(b"first\n@carol second\n"),
    );
    assert_eq!(out, "5\n6\n");
    let entries = root.entries("m");
    assert_eq!(entries[4].message, "@carol first");
    assert_eq!(entries[5].message, "@carol second");
    assert_eq!(inbox("carol"), [3, 5, 6]);
}

#[test]
fn bad_lines_are_refused_alone_with_their_numbers() {
    let root = Root::new();
    root.ok("aw-ctl", &["-i", "b", "new", "bob"], None);
    let mut input = b"ok 1\nnul \0 here\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', (4 << 20) + 1));
    input.extend_from_slice(b"\nok 4\n@nobody strict\nok 6\n");
    let out = root.run("aw-send", &["-i", "b", "--lines", "--strict"], Some(&input));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "stderr: {stderr}");
    let errors: Vec<&str> = stderr.lines().collect();
    assert_eq!(errors.len(), 3, "{stderr}");
    assert_eq!(errors[0], "aw-send: line 2: message contains a NUL byte");
    assert_eq!(
        errors[1],
        "aw-send: line 3: line is over the limit of 4194304 bytes"
    );
    assert!(
        errors[2].starts_with("aw-send: line 5: unknown agent @nobody"),
        "{stderr}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n2\n3\n");
    let texts: Vec<String> = root.entries("b").into_iter().map(|e| e.message).collect();
    assert_eq!(texts, ["ok 1", "ok 4", "ok 6"]);
}

#[test]
fn lines_with_a_message_argument_is_a_usage_error() {
    let root = Root::new();
    root.send("u", &[], "before");
    let before = snapshot(root.path());
    let out = root.run("aw-send", &["-i", "u", "--lines", "hello"], Some(b"x\n"));
    assert_error(&out, "aw-send", 64, "--lines with a MESSAGE");
    common::assert_same_tree(&before, &snapshot(root.path()), "--lines with a MESSAGE");
}

#[test]
fn a_follower_sees_each_line_while_the_pipe_stays_open() {
    let root = Root::new();
    root.send("f", &[], "start");
    let mut follower = root.cmd("aw-peek");
    follower
        .args(["-i", "f", "--follow", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut follower = follower.spawn().expect("spawn aw-peek --follow");
    let seen = lines_of(follower.stdout.take().unwrap());
    assert!(next(&seen, "follower").contains("\"start\""));

    let mut writer = root.cmd("aw-send");
    writer
        .args(["-i", "f", "--from", "ci", "--lines"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut writer = writer.spawn().expect("spawn aw-send --lines");
    let mut pipe = writer.stdin.take().unwrap();
    let ids = lines_of(writer.stdout.take().unwrap());
    for (k, text) in ["build started", "step 1 ok"].iter().enumerate() {
        pipe.write_all(format!("{text}\n").as_bytes()).unwrap();
        pipe.flush().unwrap();
        assert_eq!(next(&ids, "aw-send --lines"), (k + 2).to_string());
        let v: serde_json::Value = serde_json::from_str(&next(&seen, "follower")).unwrap();
        assert_eq!(v["id"], k + 2);
        assert_eq!(v["message"], *text);
        assert_eq!(v["from"], "ci");
    }
    assert!(
        writer.try_wait().unwrap().is_none(),
        "aw-send --lines stopped while its input was open"
    );
    drop(pipe);
    assert_eq!(writer.wait().unwrap().code(), Some(0));
    let _ = follower.kill();
    let _ = follower.wait();
}
