//! The files of an instance are opened beneath the instance directory with no symbolic link
//! followed, and only when they are regular files: a link committed in a cloned repository
//! (or planted by another user) in place of a state file, or of the channel, never leads a
//! write anywhere else, and a FIFO in place of a state file is refused at once instead of
//! blocking the tool. The source holds no other way to open such a file.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Root, assert_error, git, tool};

/// Tool `name` run in `dir` (the root found as `.workflow/` there).
fn run_in(dir: &Path, name: &str, args: &[&str]) -> Output {
    let mut c = tool(name);
    c.current_dir(dir).args(args).stdin(Stdio::null());
    c.output().unwrap()
}

/// A repository with an instance `default` (agent `coder`, one message to it) in which
/// `plant` replaces what it likes with links, committed with `git add -f`; cloned. The
/// clone's directory.
fn cloned_with(t: &Path, plant: impl FnOnce(&Path)) -> PathBuf {
    let src = t.join("src");
    std::fs::create_dir(&src).unwrap();
    git(&src, &["init", "-q"]);
    std::fs::write(src.join("README"), "a project\n").unwrap();
    let ok = |o: Output| assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    ok(run_in(&src, "aw-ctl", &["new", "coder"]));
    ok(run_in(&src, "aw-send", &["--", "@coder hello"]));
    plant(&src.join(".workflow/default"));
    git(&src, &["add", "-f", "README", ".workflow"]);
    git(&src, &["commit", "-q", "-m", "with an instance"]);
    let clone = t.join("clone");
    git(
        t,
        &[
            "clone",
            "-q",
            src.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    clone
}

/// Replace the file `rel` of the instance at `inst` with a symbolic link to `to`.
fn link(inst: &Path, rel: &str, to: &str) {
    let p = inst.join(rel);
    if p.is_dir() {
        std::fs::remove_dir_all(&p).unwrap();
    } else {
        let _ = std::fs::remove_file(&p);
    }
    std::os::unix::fs::symlink(to, &p).unwrap();
}

/// A link committed in place of a state file of the instance (or of the channel, or of
/// `_state/` itself) leads, in every clone, to that clone's own `.git/config`: the first
/// `aw-send` there refuses it (exit 77, naming the file), and `.git/config` is the same to
/// the byte.
#[test]
fn a_link_committed_in_a_cloned_repository_is_refused_and_its_target_kept() {
    let cases = [
        ("_state/channel.idx", "../../../.git/config"),
        ("_state/channel.lock", "../../../.git/config"),
        ("_state/mentions/_head", "../../../../.git/config"),
        ("_state/mentions/coder", "../../../../.git/config"),
        ("channel.md", "../../.git/config"),
        ("_state", "../../.git"),
    ];
    for (rel, to) in cases {
        let t = tempfile::tempdir().unwrap();
        let clone = cloned_with(t.path(), |inst| link(inst, rel, to));
        let config = clone.join(".git/config");
        let before = std::fs::read(&config).unwrap();
        let git_files = std::fs::read_dir(clone.join(".git")).unwrap().count();
        let out = run_in(&clone, "aw-send", &["--", "@coder again"]);
        let line = assert_error(&out, "aw-send", 77, rel);
        let name = Path::new(rel).file_name().unwrap().to_str().unwrap();
        assert!(
            line.contains(name),
            "{rel}: the error names the file: {line}"
        );
        assert!(line.contains("symbolic link"), "{rel}: {line}");
        assert_eq!(
            std::fs::read(&config).unwrap(),
            before,
            "{rel}: .git/config"
        );
        assert_eq!(
            std::fs::read_dir(clone.join(".git")).unwrap().count(),
            git_files,
            "{rel}: a file made in .git"
        );
        // Nothing was appended where the link is not.
        let log =
            std::fs::read_to_string(clone.join(".workflow/default/channel.md")).unwrap_or_default();
        assert!(!log.contains("again"), "{rel}: the message was stored");
    }
}

/// A channel that is a link to a file outside the instance is neither read nor written.
#[test]
fn a_channel_linked_to_a_file_outside_is_neither_read_nor_written() {
    let root = Root::new();
    root.ok("aw-ctl", &["new", "coder"], None);
    root.send("default", &[], "@coder first");
    let outside = root.path().join("outside.md");
    std::fs::copy(root.channel("default"), &outside).unwrap();
    let kept = std::fs::read(&outside).unwrap();
    std::fs::remove_file(root.channel("default")).unwrap();
    std::os::unix::fs::symlink(&outside, root.channel("default")).unwrap();
    let out = root.run("aw-send", &["--", "@coder second"], None);
    assert_error(&out, "aw-send", 77, "send");
    let out = root.run("aw-peek", &["-n", "0"], None);
    let line = assert_error(&out, "aw-peek", 77, "peek");
    assert!(line.contains("channel.md"), "{line}");
    assert_eq!(std::fs::read(&outside).unwrap(), kept);
}

/// Run `cmd`, killing it when it has not ended after a generous while: `None` when it hung.
fn within(mut cmd: Command, limit: Duration) -> Option<Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let end = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A FIFO in place of a state file: `aw-peek --inbox`, `aw-ctl ls` and `aw-ctl status` end
/// with an error naming it (exit 77) instead of waiting for a writer forever; in place of
/// derived files (the indexes) or a serving record, they end too.
#[test]
fn a_fifo_as_a_state_file_is_refused_instead_of_blocking() {
    let root = Root::new();
    for a in ["coder", "reviewer"] {
        root.ok("aw-ctl", &["new", a], None);
    }
    root.send("default", &[], "@coder first");
    root.ok("aw-ctl", &["ack", "coder"], None);
    let state = root.inst_dir("default").join("_state");
    let fifo = |rel: &str| {
        let p = state.join(rel);
        let _ = std::fs::remove_file(&p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    };
    let tools: [(&str, &[&str]); 3] = [
        ("aw-peek", &["--inbox", "coder"]),
        ("aw-ctl", &["ls"]),
        ("aw-ctl", &["status"]),
    ];
    fifo("cursors.json");
    for (name, args) in tools {
        let mut c = root.cmd(name);
        c.args(args);
        let out = within(c, Duration::from_secs(60))
            .unwrap_or_else(|| panic!("{name} {args:?} hung on a FIFO"));
        let line = assert_error(&out, name, 77, &format!("{name} {args:?}"));
        assert!(line.contains("cursors.json"), "{line}");
        assert!(line.contains("not a regular file"), "{line}");
    }
    std::fs::remove_file(state.join("cursors.json")).unwrap();
    for rel in [
        "channel.idx",
        "mentions/_head",
        "mentions/coder",
        "serve/coder.json",
    ] {
        fifo(rel);
        for (name, args) in tools {
            let mut c = root.cmd(name);
            c.args(args);
            assert!(
                within(c, Duration::from_secs(60)).is_some(),
                "{name} {args:?} hung on a FIFO at {rel}"
            );
        }
        std::fs::remove_file(state.join(rel)).unwrap();
    }
}

/// Files of `src/` allowed to open files by path directly, and why: none of them opens a
/// file of an instance.
const ALLOWED: &[(&str, &str)] = &[
    (
        "src/fs/owned.rs",
        "the one way to open a file of an instance",
    ),
    ("src/fs/beneath.rs", "opens beneath a folder's descriptor"),
    (
        "src/fs/netfs.rs",
        "lists folders; its reads go through fs/owned.rs",
    ),
    ("src/host.rs", "reads /proc"),
    ("src/run/backend/exec.rs", "reads /proc"),
    (
        "src/run/guard.rs",
        "reads /proc: the environment of programs aw-run started",
    ),
    ("src/instance.rs", "the root's .gitignore"),
    ("src/run/workflow.rs", "the workflow file the user names"),
    ("src/cli/ctl/agents.rs", "a prompt file the user names"),
    ("src/run/iter/git.rs", "files of the user's work tree"),
    (
        "src/lease/hook.rs",
        "the hooks of the user's git repository, where the user installs the guard",
    ),
    (
        "src/trust.rs",
        "the user's allow list of roots, in the user's config",
    ),
];

/// Ways to open a file by its path that follow links and block on a FIFO.
const RAW: [&str; 6] = [
    "File::open(",
    "File::create(",
    "OpenOptions::new(",
    "fs::read(",
    "fs::read_to_string(",
    "fs::write(",
];

/// Every open of a file by path in `src/` (tests aside) goes through `fs/owned.rs`, but in
/// the files allowed above.
#[test]
fn no_file_of_an_instance_is_opened_but_beneath_it() {
    let mut problems = Vec::new();
    let mut stack = vec![PathBuf::from("src")];
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seen = 0;
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(base.join(&p)).unwrap() {
            let e = e.unwrap();
            let rel = p.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                stack.push(rel);
                continue;
            }
            let name = rel.to_str().unwrap().to_string();
            if !name.ends_with(".rs") || name.ends_with("/tests.rs") {
                continue;
            }
            seen += 1;
            if ALLOWED.iter().any(|(f, _)| *f == name) {
                continue;
            }
            let text = std::fs::read_to_string(e.path()).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            for (i, line) in code.lines().enumerate() {
                let line = line.trim_start();
                if line.starts_with("//") {
                    continue;
                }
                for raw in RAW {
                    if line.contains(raw) {
                        problems.push(format!("{name}:{}: {raw}", i + 1));
                    }
                }
            }
        }
    }
    assert!(seen > 50, "found only {seen} source files");
    assert!(
        problems.is_empty(),
        "open these through crate::fs::owned (or allow the file, with why):\n{}",
        problems.join("\n")
    );
}
