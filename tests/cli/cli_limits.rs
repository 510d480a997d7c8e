//! Limits of what the tools read on stdin, and the exit codes of refusals that come from the
//! file system.
//!
//! - `aw-send -` and `aw-ctl doc write|append|create` read at most the limit plus one byte:
//!   an endless stdin is refused with 65 as soon as the limit is passed (or at the first NUL
//!   byte), exactly the limit is accepted, one byte more is refused, and a refusal writes
//!   nothing.
//! - A root directory that cannot be written gives 77 (permission denied); a directory where
//!   the channel file should be gives 73 (cannot create).
//!
//! A tool that keeps reading an endless stdin would hang a test and eat memory, so every wait
//! is guarded: by a generous deadline and by the number of bytes the tool has read
//! (`rchar` of `/proc/PID/io`). The guards only turn a hang into a failure; they measure nothing.

use crate::common;

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use aw::channel::MAX_MESSAGE;
use aw::document::MAX_DOCUMENT;
use common::{Root, assert_error, assert_same_tree, snapshot};

/// Longest wait for a tool that must end.
const DEADLINE: Duration = Duration::from_secs(30);
/// More than this read from stdin means the tool ignored its limit.
const READ_GUARD: u64 = 256 << 20;

/// Bytes a process has read so far, from `/proc/PID/io` (`None` where it cannot be read).
fn bytes_read(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|n| n.trim().parse().ok())
}

/// Wait for `child` to end; kill it and fail when it reads far more than any limit or runs
/// past the deadline.
fn finish(mut child: Child, what: &str) -> Output {
    let start = Instant::now();
    let status: ExitStatus = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        let read = bytes_read(child.id()).unwrap_or(0);
        if read > READ_GUARD || start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still reading stdin after {read} bytes");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    Output {
        status,
        stdout,
        stderr,
    }
}

/// Run `cmd` with stdin from `/dev/zero`.
fn with_zeros(mut cmd: Command, what: &str) -> Output {
    cmd.stdin(File::open("/dev/zero").expect("/dev/zero"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    finish(cmd.spawn().expect("spawn"), what)
}

/// Run `cmd` with `head` then `y\n` forever on stdin, as `yes` writes it. Returns the output
/// and whether the writer was stopped by a closed pipe (it always is, unless the tool read
/// up to the guard).
fn with_endless(mut cmd: Command, head: &[u8], what: &str) -> (Output, bool) {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let head = head.to_vec();
    let writer = std::thread::spawn(move || {
        let block = b"y\n".repeat(32 << 10);
        let mut sent = 0u64;
        if stdin.write_all(&head).is_err() {
            return true;
        }
        while sent <= READ_GUARD * 2 {
            if stdin.write_all(&block).is_err() {
                return true;
            }
            sent += block.len() as u64;
        }
        false
    });
    let out = finish(child, what);
    let stopped = writer.join().expect("writer");
    (out, stopped)
}

fn aw_send(root: &Root, inst: &str) -> Command {
    let mut c = root.cmd("aw-send");
    c.args(["-i", inst, "-"]);
    c
}

fn aw_ctl_doc(root: &Root, inst: &str, sub: &str, file: &str) -> Command {
    let mut c = root.cmd("aw-ctl");
    c.args(["-i", inst, "doc", sub, file]);
    c
}

/// An instance with one entry and one document, so that a refusal has something to leave alone.
fn seeded() -> Root {
    let root = Root::new();
    root.send("x", &[], "hello");
    root.ok(
        "aw-ctl",
        &["-i", "x", "doc", "write", "x.md"],
        Some(b"old\n"),
    );
    root
}

#[test]
fn send_refuses_a_nul_on_endless_stdin_at_once() {
    let root = seeded();
    let before = snapshot(root.path());
    let out = with_zeros(aw_send(&root, "x"), "aw-send - </dev/zero");
    let line = assert_error(&out, "aw-send", 65, "aw-send - </dev/zero");
    assert!(line.contains("NUL byte"), "{line}");
    assert_same_tree(&before, &snapshot(root.path()), "aw-send - </dev/zero");
    // Nothing is created for a new instance either.
    let out = with_zeros(aw_send(&root, "fresh"), "aw-send - </dev/zero");
    assert_error(&out, "aw-send", 65, "aw-send -i fresh - </dev/zero");
    assert_same_tree(&before, &snapshot(root.path()), "aw-send -i fresh");
}

#[test]
fn send_refuses_endless_text_past_the_limit() {
    let root = seeded();
    let before = snapshot(root.path());
    let (out, stopped) = with_endless(aw_send(&root, "x"), b"", "yes | aw-send -");
    let line = assert_error(&out, "aw-send", 65, "yes | aw-send -");
    assert!(
        line.contains(&format!("over the limit of {MAX_MESSAGE} bytes")),
        "{line}"
    );
    assert!(stopped, "aw-send read all the writer had");
    assert_same_tree(&before, &snapshot(root.path()), "yes | aw-send -");
    // A NUL byte after some text is refused when it arrives, not at the limit.
    let (out, _) = with_endless(aw_send(&root, "x"), b"text\0", "aw-send - (NUL, then text)");
    let line = assert_error(&out, "aw-send", 65, "aw-send - (NUL, then text)");
    assert!(line.contains("NUL byte"), "{line}");
    assert_same_tree(&before, &snapshot(root.path()), "aw-send - (NUL)");
}

#[test]
fn send_takes_exactly_the_limit_and_refuses_one_byte_more() {
    let root = seeded();
    let mut text = "y".repeat(MAX_MESSAGE - 1);
    text.push('\n');
    let id = root.send_stdin("x", &["-"], text.as_bytes());
    assert_eq!(id, 2);
    let entries = root.entries("x");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].message.len(), MAX_MESSAGE);
    assert_eq!(entries[1].message, text);

    let before = snapshot(root.path());
    text.push('y');
    let out = root.run("aw-send", &["-i", "x", "-"], Some(text.as_bytes()));
    let line = assert_error(&out, "aw-send", 65, "aw-send: limit + 1 bytes");
    assert!(
        line.contains(&format!("over the limit of {MAX_MESSAGE} bytes")),
        "{line}"
    );
    assert_same_tree(&before, &snapshot(root.path()), "aw-send: limit + 1 bytes");
}

#[test]
fn doc_commands_refuse_endless_stdin() {
    let root = seeded();
    let before = snapshot(root.path());
    for (sub, file) in [("write", "x.md"), ("append", "x.md"), ("create", "new.md")] {
        let what = format!("aw-ctl doc {sub} {file} </dev/zero");
        let out = with_zeros(aw_ctl_doc(&root, "x", sub, file), &what);
        let line = assert_error(&out, "aw-ctl", 65, &what);
        assert!(line.contains("NUL byte"), "{what}: {line}");
        assert_same_tree(&before, &snapshot(root.path()), &what);

        let what = format!("yes | aw-ctl doc {sub} {file}");
        let (out, stopped) = with_endless(aw_ctl_doc(&root, "x", sub, file), b"", &what);
        let line = assert_error(&out, "aw-ctl", 65, &what);
        assert!(
            line.contains(&format!("over the limit of {MAX_DOCUMENT} bytes")),
            "{what}: {line}"
        );
        assert!(stopped, "{what}: aw-ctl read all the writer had");
        assert_same_tree(&before, &snapshot(root.path()), &what);
    }
}

#[test]
fn doc_write_takes_exactly_the_limit_and_refuses_one_byte_more() {
    let root = seeded();
    let mut text = b"y\n".repeat(MAX_DOCUMENT / 2);
    assert_eq!(text.len(), MAX_DOCUMENT);
    root.ok("aw-ctl", &["-i", "x", "doc", "write", "x.md"], Some(&text));
    let stored = std::fs::read(root.inst_dir("x").join("documents/x.md")).unwrap();
    assert!(stored == text, "the document is stored as sent");

    let before = snapshot(root.path());
    text.push(b'y');
    let out = root.run("aw-ctl", &["-i", "x", "doc", "write", "x.md"], Some(&text));
    let line = assert_error(&out, "aw-ctl", 65, "aw-ctl doc write: limit + 1 bytes");
    assert!(
        line.contains(&format!("over the limit of {MAX_DOCUMENT} bytes")),
        "{line}"
    );
    assert_same_tree(&before, &snapshot(root.path()), "doc write: limit + 1");
}

/// The user and group ids of `nobody`, who may not write a root directory owned by root.
const NOBODY: u32 = 65534;

#[test]
fn a_read_only_root_is_permission_denied_77() {
    let root = Root::new();
    let ro = root.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    // The temporary directory itself must let another user through to `ro`.
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = common::tool("aw-send");
    cmd.arg("--root").arg(&ro).args(["-i", "x", "hello"]);
    // A new directory belongs to the effective user.
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(root.path()).unwrap());
    if uid == 0 {
        // The superuser is never denied: run the tool as nobody instead.
        use std::os::unix::process::CommandExt;
        cmd.uid(NOBODY).gid(NOBODY);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Run as root (scripts/test-deps.sh, CI), which may switch to nobody; it must.
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("cannot run aw-send as user nobody ({e}): run the tests as root")
    });
    let line = assert_error(&out, "aw-send", 77, "aw-send into a read-only root");
    assert!(line.contains("Permission denied"), "{line}");
    assert_eq!(
        std::fs::read_dir(&ro).unwrap().count(),
        0,
        "nothing created"
    );
}

#[test]
fn a_directory_in_place_of_the_channel_cannot_be_created_73() {
    let root = Root::new();
    root.send("x", &[], "first");
    std::fs::remove_file(root.channel("x")).unwrap();
    std::fs::create_dir(root.channel("x")).unwrap();
    let before = snapshot(root.path());
    let out = root.run("aw-send", &["-i", "x", "hello"], None);
    let line = assert_error(&out, "aw-send", 73, "aw-send to a directory channel.md");
    assert!(line.contains("channel.md"), "{line}");
    assert_same_tree(&before, &snapshot(root.path()), "aw-send to a directory");
}
