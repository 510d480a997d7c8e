//! `aw-ctl lease` from the command line, in a real git work tree: taking, conflicts that
//! name the holder, until when and why, paths made relative to the work tree, renewal,
//! release, listing and checking, waiting for a release by another process, lapse when the
//! holder's server is killed, and release when the holder's card is done; the pre-commit
//! guard, with real commits.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use common::{assert_error, json_lines, snapshot, tool};

/// A git work tree with the root `.workflow/` at its top.
pub struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    pub fn new() -> Tree {
        let dir = tempfile::tempdir().expect("temporary directory");
        let t = Tree { dir };
        std::fs::create_dir_all(t.work().join("src/sub")).unwrap();
        t.git(&["init", "-q", "-b", "main"]);
        t
    }

    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    pub fn root(&self) -> PathBuf {
        self.work().join(".workflow")
    }

    /// git in the work tree (created first), as no agent.
    pub fn git_cmd(&self, args: &[&str]) -> Command {
        std::fs::create_dir_all(self.work()).unwrap();
        let mut c = Command::new("git");
        c.current_dir(self.work())
            .env_remove("AW_AGENT")
            .env_remove("AW_ROOT")
            .env_remove("AW_INSTANCE")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
            .args(args);
        c
    }

    /// git in the work tree; requires success, returns stdout.
    pub fn git(&self, args: &[&str]) -> String {
        let out = self.git_cmd(args).output().expect("git must be installed");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// aw-ctl on instance `l` of the root, run in `cwd` (relative to the work tree).
    pub fn ctl_in(&self, cwd: &str, args: &[&str]) -> Command {
        let mut c = tool("aw-ctl");
        c.current_dir(self.work().join(cwd))
            .arg("--root")
            .arg(self.root())
            .args(["-i", "l"])
            .args(args);
        c
    }

    pub fn run_in(&self, cwd: &str, args: &[&str]) -> Output {
        common::run_with(self.ctl_in(cwd, args), None)
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_in("", args)
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    fn leases(&self) -> Vec<serde_json::Value> {
        json_lines(&self.run(&["lease", "ls", "--json"]).stdout)
    }
}

#[test]
fn a_conflict_fails_with_75_naming_holder_until_and_reason_and_release_frees_the_paths() {
    let t = Tree::new();
    let args = [
        "lease",
        "take",
        "src/**",
        "--as",
        "alice",
        "--reason",
        "split the parser",
    ];
    assert_eq!(t.ok(&args), "L1\n");
    let until = t.leases()[0]["until"].as_str().unwrap().to_string();
    let out = t.run(&["lease", "take", "src/a.rs", "--as", "bob", "--shared"]);
    let line = assert_error(&out, "aw-ctl", 75, "conflict");
    for part in ["src/a.rs", "alice", &until, "split the parser", "L1"] {
        assert!(line.contains(part), "{part} not in {line}");
    }
    // The same holder, and disjoint paths, are never in the way.
    assert_eq!(
        t.ok(&["lease", "take", "src/a.rs", "--as", "alice"]),
        "L2\n"
    );
    assert_eq!(
        t.ok(&["lease", "take", "docs/*.md", "--as", "bob", "--shared"]),
        "L3\n"
    );
    let ls = t.ok(&["lease", "ls"]);
    assert_eq!(ls.lines().count(), 3, "{ls}");
    assert!(
        ls.lines()
            .next()
            .unwrap()
            .starts_with("L1 alice exclusive src/** until ")
    );
    let json = t.leases();
    assert_eq!(
        json.iter()
            .map(|l| l["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["L1", "L2", "L3"]
    );
    assert_eq!(json[2]["mode"], "shared");
    assert_eq!(json[0]["reason"], "split the parser");
    // check: exit 1 naming who holds what, for someone else; 0 for the holder.
    let out = t.run(&["lease", "check", "src/sub/x.rs", "README.md", "--as", "bob"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("src/sub/x.rs: L1 alice exclusive src/**"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1, "{text}");
    let out = t.run(&["lease", "check", "src/sub/x.rs", "--as", "alice"]);
    assert_eq!(
        (out.status.code(), out.stdout.len()),
        (Some(0), 0),
        "{out:?}"
    );
    // Only the holder releases or renews a lease.
    assert_error(
        &t.run(&["lease", "release", "L1", "--as", "bob"]),
        "aw-ctl",
        77,
        "not bob's",
    );
    assert_error(
        &t.run(&["lease", "renew", "L1", "--as", "bob"]),
        "aw-ctl",
        77,
        "not bob's",
    );
    assert_error(
        &t.run(&["lease", "renew", "L9", "--as", "bob"]),
        "aw-ctl",
        66,
        "no L9",
    );
    assert!(
        t.ok(&["lease", "renew", "L1", "--as", "alice"])
            .starts_with("L1 until ")
    );
    // By path: the leases of the agent that name it.
    assert_eq!(
        t.ok(&["lease", "release", "src/a.rs", "--as", "alice"]),
        "L2\n"
    );
    assert_eq!(t.ok(&["lease", "release", "--as", "alice"]), "L1\n");
    let out = t.run(&["lease", "release", "--as", "alice"]);
    assert_error(&out, "aw-ctl", 1, "nothing left to release");
    assert_eq!(t.ok(&["lease", "take", "src/a.rs", "--as", "bob"]), "L4\n");
}

#[test]
fn paths_are_relative_to_the_work_tree_and_one_out_of_it_is_refused_with_65() {
    let t = Tree::new();
    let abs = t.work().join("src/b.rs");
    let out = common::run_with(
        t.ctl_in(
            "src/sub",
            &[
                "lease",
                "take",
                "x.rs",
                "../a.rs",
                ".//c//d.rs",
                abs.to_str().unwrap(),
                "--as",
                "alice",
            ],
        ),
        None,
    );
    assert_eq!(out.stdout, b"L1\n", "{out:?}");
    assert_eq!(
        t.leases()[0]["paths"],
        serde_json::json!(["src/sub/x.rs", "src/a.rs", "src/sub/c/d.rs", "src/b.rs"])
    );
    // check from another folder names the same paths.
    let out = t.run_in("src", &["lease", "check", "sub/x.rs", "--as", "bob"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let before = snapshot(&t.root());
    let outside = t.dir.path().join("elsewhere.rs");
    for bad in [
        "../../../x.rs",
        "../..",
        outside.to_str().unwrap(),
        "../../..",
    ] {
        let out = t.run_in("src/sub", &["lease", "take", bad, "--as", "alice"]);
        assert_error(&out, "aw-ctl", 65, bad);
    }
    assert_eq!(
        snapshot(&t.root()),
        before,
        "a refused take stored something"
    );
}

/// `aw-ctl lease take` started in the background, its output collected later.
fn spawn(t: &Tree, args: &[&str]) -> std::process::Child {
    let mut c = t.ctl_in("", args);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().expect("spawn aw-ctl")
}

#[test]
fn a_taker_that_waits_gets_the_lease_once_another_process_releases_it() {
    let t = Tree::new();
    assert_eq!(t.ok(&["lease", "take", "src/**", "--as", "alice"]), "L1\n");
    let waiter = spawn(
        &t,
        &["lease", "take", "src/a.rs", "--as", "bob", "--wait", "10m"],
    );
    // The waiter found the lease in the way and watches the leases with inotify.
    let fds = format!("/proc/{}/fd", waiter.id());
    common::runner::wait_for("the waiter to watch", || {
        std::fs::read_dir(&fds).unwrap().flatten().any(|f| {
            std::fs::read_link(f.path()).is_ok_and(|l| l.to_string_lossy().contains("inotify"))
        })
    });
    let release = t.run(&["lease", "release", "L1", "--as", "alice"]);
    assert_eq!(release.stdout, b"L1\n", "{release:?}");
    let out = common::runner::wait_hang_guarded(waiter);
    assert_eq!(out.stdout, b"L2\n", "{out:?}");
    let json = t.leases();
    assert_eq!((json.len(), &json[0]["agent"]), (1, &"bob".into()));
    // A wait that runs out fails like a take at once.
    let out = t.run(&["lease", "take", "src/**", "--as", "carol", "--wait", "0.2s"]);
    assert_error(&out, "aw-ctl", 75, "still leased");
}

#[test]
fn a_lease_held_by_an_agents_server_lapses_when_the_server_is_killed() {
    use common::runner::{INST, Setup, serve_mock};
    let s = Setup::new();
    let ctl = |args: &[&str]| {
        let mut c = s.tool_cmd("aw-ctl");
        c.args(["-i", INST]).args(args);
        common::run_with(c, None)
    };
    let mut server = serve_mock(&s, "alice");
    let pid = server.pid();
    assert_eq!(
        ctl(&["lease", "take", "src/**", "--as", "alice"]).stdout,
        b"L1\n"
    );
    let json = json_lines(&ctl(&["lease", "ls", "--json"]).stdout);
    assert_eq!(
        (&json[0]["pid"], &json[0]["served"]),
        (&pid.into(), &true.into())
    );
    let out = ctl(&["lease", "take", "src/a.rs", "--as", "bob"]);
    assert_error(&out, "aw-ctl", 75, "held while its server runs");
    // SIGKILL: the server leaves its records behind, and the lease lapses all the same.
    server.child().kill().unwrap();
    server.wait();
    assert!(ctl(&["lease", "ls"]).stdout.is_empty());
    assert_eq!(
        ctl(&["lease", "take", "src/a.rs", "--as", "bob"]).stdout,
        b"L2\n"
    );
    assert!(!s.root.path().join(INST).join("leases/L1.json").exists());
}

#[test]
fn the_leases_taken_while_holding_a_card_are_released_when_it_is_done_or_dropped() {
    let t = Tree::new();
    assert_eq!(t.ok(&["board", "add", "parser", "--as", "lead"]), "1\n");
    assert_eq!(t.ok(&["board", "add", "docs", "--as", "lead"]), "2\n");
    assert_eq!(t.ok(&["board", "claim", "1", "--as", "alice"]), "1\n");
    // The one card alice holds; then an explicit one.
    assert_eq!(t.ok(&["lease", "take", "src/**", "--as", "alice"]), "L1\n");
    assert_eq!(
        t.ok(&["lease", "take", "docs/**", "--as", "alice", "--card", "2"]),
        "L2\n"
    );
    assert_eq!(t.ok(&["board", "claim", "2", "--as", "alice"]), "2\n");
    // Holding two cards, a lease goes with none unless told.
    assert_eq!(
        t.ok(&["lease", "take", "README.md", "--as", "alice"]),
        "L3\n"
    );
    let cards: Vec<serde_json::Value> = t.leases().iter().map(|l| l["card"].clone()).collect();
    assert_eq!(cards, [1.into(), 2.into(), serde_json::Value::Null]);
    t.ok(&["board", "done", "1", "--as", "alice", "--note", "merged"]);
    let ids: Vec<String> = t.leases().iter().map(|l| l["id"].to_string()).collect();
    assert_eq!(ids, ["\"L2\"", "\"L3\""]);
    t.ok(&["board", "drop", "2", "--as", "alice"]);
    let ids: Vec<String> = t.leases().iter().map(|l| l["id"].to_string()).collect();
    assert_eq!(ids, ["\"L3\""]);
}

/// Write `text` to `rel` in the work tree, stage everything and commit as `agent` (through
/// `AW_AGENT`), with `extra` options.
fn commit(t: &Tree, rel: &str, agent: Option<&str>, extra: &[&str]) -> Output {
    let path = t.work().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("{rel} {agent:?} {extra:?}\n")).unwrap();
    t.git(&["add", "-A", "--", ":!.workflow"]);
    let mut c = t.git_cmd(&["commit", "-q", "-m", rel]);
    c.args(extra);
    if let Some(a) = agent {
        c.env("AW_AGENT", a);
    }
    c.output().unwrap()
}

fn commits(t: &Tree) -> usize {
    match t
        .git_cmd(&["rev-list", "--count", "HEAD"])
        .output()
        .unwrap()
    {
        o if o.status.success() => String::from_utf8(o.stdout).unwrap().trim().parse().unwrap(),
        _ => 0,
    }
}

#[test]
fn the_guard_refuses_a_commit_touching_a_path_leased_by_another_naming_the_holder() {
    let t = Tree::new();
    assert!(t.ok(&["hooks", "install"]).starts_with("installed "));
    let take = [
        "lease",
        "take",
        "--reason",
        "new parser",
        "src/**",
        "--as",
        "alice",
    ];
    t.ok(&take);
    assert_eq!(
        commit(&t, "README.md", Some("bob"), &[]).status.code(),
        Some(0)
    );
    let out = commit(&t, "src/a[1].rs", Some("bob"), &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("src/a\\[1\\].rs: L1 alice exclusive src/** until ")
            && err.contains("new parser")
            && err.contains("--no-verify"),
        "{err}"
    );
    assert_eq!(commits(&t), 1);
    // The holder commits, named by AW_AGENT or by git config aw.agent.
    assert_eq!(
        commit(&t, "src/b.rs", Some("alice"), &[]).status.code(),
        Some(0)
    );
    t.git(&["config", "aw.agent", "alice"]);
    assert_eq!(commit(&t, "src/c.rs", None, &[]).status.code(), Some(0));
    t.git(&["config", "aw.agent", "bob"]);
    assert_eq!(commit(&t, "src/d.rs", None, &[]).status.code(), Some(1));
    // git commit --no-verify commits all the same.
    let out = commit(&t, "src/e.rs", Some("bob"), &["--no-verify"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(commits(&t), 4);
    // Released, the paths are free again.
    t.ok(&["lease", "release", "--as", "alice"]);
    assert_eq!(
        commit(&t, "src/d.rs", Some("bob"), &[]).status.code(),
        Some(0)
    );
}

/// An executable hook at `path` that appends its name to `log`, and fails when `fail` exists.
fn hook(path: &std::path::Path, log: &std::path::Path, fail: &std::path::Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let text = format!(
        "#!/bin/sh\necho ran >>'{}'\n[ -e '{}' ] && exit 1\nexit 0\n",
        log.display(),
        fail.display()
    );
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, &text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    text
}

#[test]
fn the_guard_runs_the_hook_it_found_first_follows_core_hooks_path_and_uninstall_restores_it() {
    let t = Tree::new();
    // A hook manager's folder, as core.hooksPath names it.
    t.git(&["config", "core.hooksPath", ".githooks"]);
    let hooks = t.work().join(".githooks");
    let (log, fail) = (t.dir.path().join("log"), t.dir.path().join("fail"));
    let before = hook(&hooks.join("pre-commit"), &log, &fail);
    let said = t.ok(&["hooks", "install"]);
    assert!(
        said.contains("pre-commit.local") && said.contains("runs first"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-commit.local")).unwrap(),
        before
    );
    let guard = std::fs::read_to_string(hooks.join("pre-commit")).unwrap();
    assert!(guard.contains("# aw pre-commit guard"), "{guard}");
    assert!(!t.work().join(".git/hooks/pre-commit").exists());
    // Installing again changes nothing: the hook found stays where it was put.
    assert!(t.ok(&["hooks", "install"]).contains("installed already"));
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-commit.local")).unwrap(),
        before
    );
    // The hook found runs first, and its refusal stands.
    assert_eq!(commit(&t, "a.txt", Some("bob"), &[]).status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "ran\n");
    std::fs::write(&fail, "").unwrap();
    assert_eq!(commit(&t, "b.txt", Some("bob"), &[]).status.code(), Some(1));
    std::fs::remove_file(&fail).unwrap();
    // The guard works from the folder core.hooksPath names.
    t.ok(&["lease", "take", "b.txt", "--as", "alice"]);
    let out = commit(&t, "b.txt", Some("bob"), &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("b.txt: L1 alice"));
    // Uninstall puts the hook found back, as it was.
    assert!(t.ok(&["hooks", "uninstall"]).contains("removed the guard"));
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-commit")).unwrap(),
        before
    );
    assert!(!hooks.join("pre-commit.local").exists());
    assert_eq!(commit(&t, "b.txt", Some("bob"), &[]).status.code(), Some(0));
    assert!(t.ok(&["hooks", "uninstall"]).contains("no guard of aw's"));
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-commit")).unwrap(),
        before
    );
}

#[test]
fn install_replaces_nothing_it_cannot_keep_and_an_edited_guard_only_with_force() {
    let t = Tree::new();
    let hooks = t.work().join(".git/hooks");
    let (log, fail) = (t.dir.path().join("log"), t.dir.path().join("fail"));
    let theirs = hook(&hooks.join("pre-commit"), &log, &fail);
    let kept = hook(
        &hooks.join("pre-commit.local"),
        &log,
        &t.dir.path().join("x"),
    );
    let out = t.run(&["hooks", "install"]);
    assert_error(&out, "aw-ctl", 73, "two hooks in the way");
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-commit")).unwrap(),
        theirs
    );
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-commit.local")).unwrap(),
        kept
    );
    std::fs::remove_file(hooks.join("pre-commit.local")).unwrap();
    t.ok(&["hooks", "install"]);
    let guard = hooks.join("pre-commit");
    let edited = std::fs::read_to_string(&guard).unwrap() + "# mine\n";
    std::fs::write(&guard, &edited).unwrap();
    assert_error(&t.run(&["hooks", "install"]), "aw-ctl", 73, "edited guard");
    assert_eq!(std::fs::read_to_string(&guard).unwrap(), edited);
    assert!(
        t.ok(&["hooks", "install", "--force"])
            .starts_with("installed ")
    );
    assert!(!std::fs::read_to_string(&guard).unwrap().contains("# mine"));
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-commit.local")).unwrap(),
        theirs
    );
    // Outside a git work tree there is nothing to install into.
    let none = tempfile::tempdir().unwrap();
    let mut c = tool("aw-ctl");
    c.current_dir(none.path())
        .args(["--root", ".workflow", "hooks", "install"]);
    assert_error(&common::run_with(c, None), "aw-ctl", 66, "no git");
}

#[test]
fn an_api_agents_write_file_is_refused_on_a_path_another_agent_leases() {
    use common::fake_api::{FakeApi, Reply};
    use serde_json::json;
    let s = common::runner::Setup::new();
    let dir = s.dir();
    s.write(
        "wf.yaml",
        "agents:\n  olga:\n    backend: openai\n    model: local-model\n    \
         tools: [write_file]\nkickoff: '@olga edit'\n",
    );
    let mut c = tool("aw-ctl");
    c.current_dir(dir)
        .args(["-i", "w", "lease", "take", "src/**"]);
    c.args(["--as", "bob", "--reason", "bob rewrites it"]);
    assert_eq!(common::run_with(c, None).stdout, b"L1\n");
    let write = |id: &str, path: &str| {
        let args = json!({"path": path, "content": "olga\n"}).to_string();
        json!({"id": id, "type": "function",
               "function": {"name": "write_file", "arguments": args}})
    };
    let calls = vec![write("w1", "src/a.rs"), write("w2", "lib/b.rs")];
    let api = FakeApi::start(Reply::calls_then_done(calls));
    let mut c = tool("aw-run");
    c.current_dir(dir)
        .env("PATH", common::runner::path_with_bins())
        .env("OPENAI_BASE_URL", format!("{}/v1", api.url))
        .env("OPENAI_API_KEY", "sk-test-0123456789")
        .args(["-i", "w", "-q", "--retries", "1", "wf.yaml"]);
    let out = common::runner::run_hang_guarded(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(!dir.join("src/a.rs").exists(), "a leased path was written");
    assert_eq!(
        std::fs::read_to_string(dir.join("lib/b.rs")).unwrap(),
        "olga\n"
    );
    let reqs = api.requests();
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let told: Vec<&str> = msgs[msgs.len() - 2..]
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        told[0].starts_with("Error: path src/a.rs is leased by bob until ")
            && told[0].ends_with(
                ": \"bob rewrites it\"; take another card or wait (lease_take with wait)"
            ),
        "{told:?}"
    );
    assert!(told[1].starts_with("wrote 5 bytes to lib/b.rs"), "{told:?}");
}
