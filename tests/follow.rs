//! `aw-peek --follow`: new entries of a channel or an inbox are printed as they arrive, each
//! once and in order, with inotify and with polling; a closed pipe ends it quietly.
//!
//! A follower that prints nothing would hang a test, so every read has a deadline; the
//! deadline is generous and only turns a hang into a failure, it measures nothing.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use common::{Root, entry_from_json};
use serde_json::Value;

/// Longest wait for a line that must come.
const DEADLINE: Duration = Duration::from_secs(20);
/// How long to watch for a line that must not come.
const QUIET: Duration = Duration::from_millis(500);

/// An `aw-peek --follow` child whose stdout lines arrive on a channel.
struct Follower {
    child: Child,
    lines: Receiver<String>,
}

impl Follower {
    fn start(root: &Root, args: &[&str]) -> Follower {
        let mut cmd = root.cmd("aw-peek");
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn aw-peek --follow");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Follower { child, lines }
    }

    /// The next line, which must come.
    fn line(&self) -> String {
        self.lines
            .recv_timeout(DEADLINE)
            .expect("aw-peek --follow printed nothing for a new entry")
    }

    fn json(&self) -> Value {
        let l = self.line();
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}"))
    }

    /// Nothing more is printed for a while.
    fn quiet(&self) {
        if let Ok(l) = self.lines.recv_timeout(QUIET) {
            panic!("aw-peek --follow printed an unexpected line: {l}");
        }
    }

    /// Wait until the follower has armed its watch: send a marker entry and read it back.
    /// Entries sent after this are certain to be new to the follower.
    fn sync(&self, root: &Root, inst: &str) -> u64 {
        let id = root.send(inst, &["--from", "marker"], "sync");
        loop {
            let v = self.json();
            let e = entry_of(&v);
            if e.id == id {
                return id;
            }
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The entry of a channel record, or of an inbox record (`{"entry":…}`).
fn entry_of(v: &Value) -> common::Entry {
    match v.get("entry") {
        Some(e) => entry_from_json(e),
        None => entry_from_json(v),
    }
}

fn follow_channel(extra: &[&str]) {
    let root = Root::new();
    for n in 0..25 {
        root.send("f", &[], &format!("old {n}"));
    }
    let mut args = vec!["-i", "f", "--follow", "--json"];
    args.extend_from_slice(extra);
    let f = Follower::start(&root, &args);
    // First the last 20 entries, as without --follow.
    let first: Vec<u64> = (0..20).map(|_| entry_of(&f.json()).id).collect();
    assert_eq!(first, (6..=25).collect::<Vec<_>>());
    let marker = f.sync(&root, "f");
    assert_eq!(marker, 26);
    // Then every new entry once, in order, whatever the sender and the text.
    let texts: Vec<String> = (0..40)
        .map(|n| format!("new {n}\n### not a header\nline three  "))
        .collect();
    for (n, t) in texts.iter().enumerate() {
        let from = if n % 2 == 0 { "alice" } else { "bob" };
        root.send("f", &["--from", from], t);
    }
    for (n, t) in texts.iter().enumerate() {
        let e = entry_of(&f.json());
        assert_eq!(
            e.id,
            27 + n as u64,
            "entries in order, none skipped or repeated"
        );
        assert_eq!(&e.message, t);
    }
    f.quiet();
}

#[test]
fn follows_the_channel_with_inotify() {
    follow_channel(&[]);
}

#[test]
fn follows_the_channel_by_polling() {
    follow_channel(&["--poll", "0.05"]);
}

#[test]
fn follows_an_inbox_with_only_its_mentions() {
    let root = Root::new();
    root.ok("aw-ctl", &["-i", "t", "new", "bob"], None);
    root.ok("aw-ctl", &["-i", "t", "new", "carol"], None);
    root.send("t", &[], "@bob before the follower");
    let f = Follower::start(&root, &["-i", "t", "--follow", "--json", "bob"]);
    let v = f.json();
    assert_eq!(v["unread"], true);
    assert_eq!(entry_of(&v).message, "@bob before the follower");
    let sent = [
        ("user", "@carol not for bob", false),
        ("bob", "@bob bob to himself", false),
        ("carol", "@bob from carol", true),
        ("user", "mail bob@example.com", false),
        ("user", "@bob @carol both, urgent", true),
    ];
    for (from, text, _) in sent {
        root.send("t", &["--from", from], text);
    }
    for (_, text, _) in sent.iter().filter(|s| s.2) {
        let v = f.json();
        assert_eq!(entry_of(&v).message, *text);
        assert_eq!(v["unread"], true);
        let want = if text.contains("urgent") {
            "high"
        } else {
            "normal"
        };
        assert_eq!(v["priority"], want, "{text}");
    }
    f.quiet();
}

#[test]
fn follows_from_an_id() {
    let root = Root::new();
    for n in 1..=5 {
        root.send("s", &[], &format!("entry {n}"));
    }
    let f = Follower::start(&root, &["-i", "s", "--follow", "--json", "--since", "3"]);
    assert_eq!(entry_of(&f.json()).id, 4);
    assert_eq!(entry_of(&f.json()).id, 5);
    root.send("s", &[], "entry 6");
    assert_eq!(entry_of(&f.json()).id, 6);
    f.quiet();
}

#[test]
fn a_closed_pipe_ends_the_follower_with_status_0() {
    let root = Root::new();
    root.send("p", &[], "first");
    let mut f = Follower::start(&root, &["-i", "p", "--follow", "--json"]);
    assert_eq!(entry_of(&f.json()).id, 1);
    // Close the read end of the pipe, as `| head -1` does, then give it more to write.
    let (_, dead) = mpsc::channel();
    drop(std::mem::replace(&mut f.lines, dead));
    let start = Instant::now();
    let status = loop {
        root.send("p", &[], "more");
        if let Some(st) = f.child.try_wait().expect("wait") {
            break st;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "aw-peek --follow kept running after its stdout was closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(f.child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(0), "stderr: {err}");
    assert_eq!(err, "", "a closed pipe is not an error");
}

#[test]
fn following_a_missing_instance_is_refused() {
    let root = Root::new();
    let out = root.run("aw-peek", &["-i", "nope", "--follow"], None);
    assert_eq!(out.status.code(), Some(66));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("aw-peek: "), "{err}");
}
