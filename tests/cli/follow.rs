//! `aw-peek --follow`: new entries of a channel or an inbox are printed as they arrive, each
//! once and in order, with inotify and with polling; a closed pipe ends it quietly, even
//! while no entry comes; a removed or replaced instance directory or channel ends it with
//! 69 before anything of the new log is printed.
//!
//! A follower that prints nothing would hang a test, so every read has a deadline; the
//! deadline is generous and only turns a hang into a failure, it measures nothing.

use crate::common;

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
fn following_a_missing_instance_waits_for_it_as_tail_f_does() {
    let root = Root::new();
    root.send("latter", &[], "elsewhere");
    let mut f = Follower::start(&root, &["-i", "later", "--follow", "--json"]);
    // It says once that it waits (with the near name), then waits.
    let stderr = f.child.stderr.take().expect("stderr is piped");
    let (tx, said) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let note = said.recv_timeout(DEADLINE).expect("a line on stderr");
    assert!(
        note.starts_with("aw-peek: no such instance 'later' under ")
            && note.ends_with("(did you mean 'latter'?); waiting for it to be created"),
        "{note}"
    );
    assert!(f.child.try_wait().expect("wait").is_none(), "it ended");
    // The instance appears: its entries are printed, the first one and those after.
    root.send("later", &["--create"], "first");
    assert_eq!(entry_of(&f.json()).message, "first");
    root.send("later", &[], "second");
    assert_eq!(entry_of(&f.json()).message, "second");
    f.quiet();
    assert!(said.try_recv().is_err(), "more on stderr");
}

impl Follower {
    /// Wait for the follower to end by itself (killing it and failing after the deadline);
    /// return its exit code, its stderr, and the lines it printed that were not read yet.
    fn exit(&mut self) -> (Option<i32>, String, Vec<String>) {
        let start = Instant::now();
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                break st;
            }
            if start.elapsed() > DEADLINE {
                let _ = self.child.kill();
                panic!("aw-peek --follow kept running");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut err).unwrap();
        // The reader thread ends at the end of the pipe, so this collects everything.
        let rest = self.lines.iter().collect();
        (status.code(), err, rest)
    }
}

/// Require one error line `aw-peek: ...` that contains one of `want`, and a following
/// `hint:` line at most.
fn one_error(err: &str, want: &[&str]) {
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines.len() == 1 || (lines.len() == 2 && lines[1].starts_with("hint: ")),
        "one error line: {err:?}"
    );
    assert!(lines[0].starts_with("aw-peek: "), "{err:?}");
    assert!(
        want.iter().any(|w| lines[0].contains(w)),
        "{err:?} does not say one of {want:?}"
    );
}

/// Remove the instance directory under a follower, then (when `anew`) create the instance
/// anew with entries: the follower must stop with 69 and print nothing of the new log.
fn removed_instance(extra: &[&str], anew: bool) {
    let root = Root::new();
    root.send("r", &[], "old log");
    let mut args = vec!["-i", "r", "--follow", "--json"];
    args.extend_from_slice(extra);
    let mut f = Follower::start(&root, &args);
    assert_eq!(entry_of(&f.json()).message, "old log");
    f.sync(&root, "r");
    std::fs::remove_dir_all(root.inst_dir("r")).unwrap();
    if anew {
        for n in 0..3 {
            root.send("r", &[], &format!("new log {n}"));
        }
    }
    let (code, err, rest) = f.exit();
    assert_eq!(code, Some(69), "stderr: {err}");
    // Removed, or replaced when the new instance was made before the follower looked.
    let want: &[&str] = if anew {
        &["removed", "replaced"]
    } else {
        &["removed"]
    };
    one_error(&err, want);
    assert!(rest.is_empty(), "printed entries of the new log: {rest:?}");
}

#[test]
fn a_removed_instance_ends_the_follower_with_69_inotify() {
    removed_instance(&[], false);
    removed_instance(&[], true);
}

#[test]
fn a_removed_instance_ends_the_follower_with_69_polling() {
    removed_instance(&["--poll", "0.1"], false);
    removed_instance(&["--poll", "0.1"], true);
}

/// Move `channel.md` away under a follower (of the channel, then of an inbox) and start a new
/// one in the same directory: the follower must stop with 69 and print nothing of the new log.
fn replaced_channel(extra: &[&str]) {
    for target in ["@c", "bob"] {
        let root = Root::new();
        root.ok("aw-ctl", &["-i", "c", "new", "bob"], None);
        for n in 0..3 {
            root.send("c", &[], &format!("@bob old log {n}"));
        }
        let mut args = vec!["-i", "c", "--follow", "--json", target];
        args.extend_from_slice(extra);
        let mut f = Follower::start(&root, &args);
        for _ in 0..3 {
            assert!(entry_of(&f.json()).message.contains("old log"));
        }
        // Both followers print this one: once it is read, the watch is armed.
        let id = root.send("c", &["--from", "marker"], "@bob sync");
        assert_eq!(entry_of(&f.json()).id, id);
        let ch = root.channel("c");
        std::fs::rename(&ch, ch.with_extension("old")).unwrap();
        root.send("c", &[], "@bob new log");
        let (code, err, rest) = f.exit();
        assert_eq!(code, Some(69), "{target}: stderr: {err}");
        one_error(&err, &["channel.md: removed", "channel.md: replaced"]);
        assert!(
            rest.is_empty(),
            "{target}: printed entries of the new log: {rest:?}"
        );
    }
}

#[test]
fn a_replaced_channel_ends_the_follower_with_69_inotify() {
    replaced_channel(&[]);
}

#[test]
fn a_replaced_channel_ends_the_follower_with_69_polling() {
    replaced_channel(&["--poll", "0.1"]);
}

/// Close the reader of an idle follower's stdout, as `aw-peek -F | head -1` does after one
/// line: the follower must end quietly with 0 without waiting for another entry.
fn closed_reader(extra: &[&str]) {
    let root = Root::new();
    root.send("q", &[], "first");
    let mut args = vec!["-i", "q", "--follow", "--json"];
    args.extend_from_slice(extra);
    let mut cmd = root.cmd("aw-peek");
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn aw-peek --follow");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut line = String::new();
        let _ = r.read_line(&mut line);
        let _ = tx.send((line, r));
    });
    let (line, reader) = rx.recv_timeout(DEADLINE).expect("the first entry");
    assert_eq!(entry_of(&serde_json::from_str(&line).unwrap()).id, 1);
    drop(reader);
    let mut f = Follower {
        child,
        lines: mpsc::channel().1,
    };
    let (code, err, _) = f.exit();
    assert_eq!(code, Some(0), "stderr: {err}");
    assert_eq!(err, "", "a closed pipe is not an error");
}

#[test]
fn a_closed_reader_ends_an_idle_follower_inotify() {
    closed_reader(&[]);
}

#[test]
fn a_closed_reader_ends_an_idle_follower_polling() {
    closed_reader(&["--poll", "0.1"]);
}

/// The times the threads of process `pid` went to sleep of their own accord (blocked in a
/// system call): one more at every wake-up of any of them.
fn sleeps(pid: u32) -> u64 {
    let mut n = 0;
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the follower's threads");
    for t in tasks.flatten() {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        n += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    n
}

#[test]
fn readers_of_the_channel_do_not_wake_a_follower() {
    let root = Root::new();
    for n in 0..5 {
        root.send("r", &[], &format!("old {n}"));
    }
    let f = Follower::start(&root, &["-i", "r", "--follow", "--json"]);
    for _ in 0..5 {
        f.json();
    }
    f.sync(&root, "r");
    // Asleep for good: its count stays put between two looks (a bounded wait, not a timing).
    let pid = f.child.id();
    let end = Instant::now() + DEADLINE;
    let mut before = sleeps(pid);
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let now = sleeps(pid);
        if now == before {
            break;
        }
        assert!(Instant::now() < end, "the follower never went to sleep");
        before = now;
    }
    // Thirty readers, each opening, reading and closing the channel: the follower is woken
    // by none of them (it was once for every open, read and close).
    let channel = root.channel("r");
    for n in 0..30 {
        if n % 2 == 0 {
            let out = root.ok("aw-peek", &["-i", "r", "-n", "3"], None);
            assert!(out.contains("old 4"), "{out}");
        } else {
            let out = std::process::Command::new("cat")
                .arg(&channel)
                .output()
                .expect("cat");
            assert!(out.status.success(), "{out:?}");
            assert!(String::from_utf8_lossy(&out.stdout).contains("old 0"));
        }
    }
    let woken = sleeps(pid) - before;
    assert!(woken <= 2, "30 readers woke the follower {woken} times");
    // A writer still wakes it.
    let id = root.send("r", &["--from", "alice"], "new");
    assert_eq!(entry_of(&f.json()).id, id);
    f.quiet();
}
