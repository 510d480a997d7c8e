//! `aw-ctl merge` on real git repositories: requests served one at a time in order, a
//! conflict or a failing verify command announced to the agent and never on the target, a
//! server killed -9 in the middle of a verify command leaving the target whole and the
//! queue resumed, and no hook of the repository ever run.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{Root, assert_error, git, json_lines};

/// A repository at `t/repo` on `main` (checked out) with `f.txt` of five lines, and the
/// committer named in its configuration.
fn repo(t: &Path) -> PathBuf {
    let r = t.join("repo");
    std::fs::create_dir(&r).unwrap();
    git(&r, &["init", "-q", "-b", "main"]);
    git(&r, &["config", "user.name", "t"]);
    git(&r, &["config", "user.email", "t@example.com"]);
    std::fs::write(r.join("f.txt"), "1\n2\n3\n4\n5\n").unwrap();
    git(&r, &["add", "f.txt"]);
    git(&r, &["commit", "-q", "-m", "five lines"]);
    r
}

/// Make `branch` from `main` with one commit that writes `text` to `file`.
fn branch(repo: &Path, branch: &str, file: &str, text: &str) {
    let wt = repo.join(format!("../wt-{}", branch.replace('/', "-")));
    git(
        repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            branch,
            wt.to_str().unwrap(),
            "main",
        ],
    );
    std::fs::write(wt.join(file), text).unwrap();
    git(&wt, &["add", file]);
    git(&wt, &["commit", "-q", "-m", &format!("{branch}: {file}")]);
}

/// The work tree of `branch` made by [`branch`].
fn wt(repo: &Path, branch: &str) -> PathBuf {
    repo.join(format!("../wt-{}", branch.replace('/', "-")))
}

/// `aw-ctl -i default merge ARGS` run in `repo`.
fn merge(root: &Root, repo: &Path, args: &[&str]) -> Command {
    let mut c = root.cmd("aw-ctl");
    c.current_dir(repo)
        .args(["-i", "default", "merge"])
        .args(args)
        .stdin(Stdio::null());
    c
}

fn run(root: &Root, repo: &Path, args: &[&str]) -> Output {
    merge(root, repo, args).output().unwrap()
}

fn ok(root: &Root, repo: &Path, args: &[&str]) -> String {
    let out = run(root, repo, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "merge {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The requests, as `aw-ctl merge ls --json` gives them.
fn requests(root: &Root, repo: &Path) -> Vec<serde_json::Value> {
    json_lines(ok(root, repo, &["ls", "--json"]).as_bytes())
}

/// Register `names` as agents of instance `default`.
fn agents(root: &Root, names: &[&str]) {
    for n in names {
        root.ok("aw-ctl", &["-i", "default", "new", n], None);
    }
}

#[test]
fn the_second_of_two_branches_on_one_file_conflicts_is_told_and_merges_once_rebased() {
    let t = tempfile::tempdir().unwrap();
    let root = Root::new();
    let r = repo(t.path());
    agents(&root, &["a", "b"]);
    branch(&r, "aw/default/a", "f.txt", "1\nA\n3\n4\n5\n");
    branch(&r, "aw/default/b", "f.txt", "1\nB\n3\n4\n5\n");

    assert_eq!(ok(&root, &r, &["request", "a"]), "1\n");
    let after_a = git(&r, &["rev-parse", "main"]);
    assert_eq!(
        std::fs::read_to_string(r.join("f.txt")).unwrap(),
        "1\nA\n3\n4\n5\n",
        "main's checked-out work tree follows"
    );

    let out = run(&root, &r, &["request", "b"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("aw-ctl: merge #2 conflict: "), "{err}");
    assert!(err.contains("f.txt"), "{err}");
    assert_eq!(git(&r, &["rev-parse", "main"]), after_a, "main unchanged");

    let ls = requests(&root, &r);
    assert_eq!(ls.len(), 2);
    assert_eq!(ls[0]["state"], "merged");
    assert_eq!(ls[0]["result"]["commit"], after_a.as_str());
    assert_eq!(ls[1]["state"], "conflict");
    assert_eq!(ls[1]["branch"], "aw/default/b");
    assert_eq!(ls[1]["result"]["conflicts"], serde_json::json!(["f.txt"]));
    let plain = ok(&root, &r, &["ls"]);
    let second: Vec<&str> = plain.lines().nth(1).unwrap().split('\t').collect();
    assert_eq!(
        [
            second[0], second[1], second[2], second[3], second[4], second[6]
        ],
        ["2", "b", "aw/default/b", "main", "conflict", "f.txt"]
    );

    // Told in the channel: a merge without waking the agent, a conflict mentioning it (so
    // that it wakes), with the path.
    let entries = root.entries("default");
    let told: Vec<_> = entries.iter().filter(|e| e.from == "system").collect();
    assert_eq!(told.len(), 2, "{entries:?}");
    assert!(told[0].mentions.is_empty(), "{:?}", told[0]);
    assert!(
        told[0]
            .message
            .starts_with("merge #1 of a: aw/default/a into main: merged"),
        "{}",
        told[0].message
    );
    assert_eq!(told[1].mentions, ["b"]);
    assert!(
        told[1].message.contains("conflict in f.txt"),
        "{}",
        told[1].message
    );

    // b brings its branch up to date by hand, and asks again.
    let b = wt(&r, "aw/default/b");
    let rebase = Command::new("git")
        .current_dir(&b)
        .args(["rebase", "main"])
        .output()
        .unwrap();
    assert!(!rebase.status.success(), "the rebase conflicts");
    std::fs::write(b.join("f.txt"), "1\nA\nB\n3\n4\n5\n").unwrap();
    git(&b, &["add", "f.txt"]);
    git(&b, &["-c", "core.editor=true", "rebase", "--continue"]);
    assert_eq!(ok(&root, &r, &["request", "b"]), "3\n");
    assert_eq!(
        git(&r, &["show", "main:f.txt"]),
        "1\nA\nB\n3\n4\n5",
        "both on main"
    );
    assert_eq!(git(&r, &["rev-parse", "main~1"]), after_a);
    assert_eq!(requests(&root, &r)[2]["state"], "merged");
    let show = ok(&root, &r, &["show", "2"]);
    assert!(show.contains("state: conflict"), "{show}");
    assert!(
        show.contains("CONFLICT (content): Merge conflict in f.txt"),
        "{show}"
    );
    // No scratch work tree is left.
    let trees = git(&r, &["worktree", "list", "--porcelain"]);
    assert!(!trees.contains("merges/work"), "{trees}");
}

#[test]
fn a_failing_verify_never_moves_the_target_and_is_told_with_its_last_lines() {
    let t = tempfile::tempdir().unwrap();
    let root = Root::new();
    let r = repo(t.path());
    agents(&root, &["coder"]);
    branch(&r, "aw/default/coder", "g.txt", "new\n");
    let before = git(&r, &["rev-parse", "main"]);
    let verify = "for i in $(seq 1 40); do echo \"line $i of $AW_MERGE_BRANCH\"; done; \
                  test -e g.txt && exit 3";
    let out = run(&root, &r, &["request", "coder", "--verify", verify]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("merge #1 failed: verify failed: exit 3"),
        "{err}"
    );
    assert_eq!(git(&r, &["rev-parse", "main"]), before, "main unchanged");
    assert!(!r.join("g.txt").exists());

    let ls = requests(&root, &r);
    assert_eq!(ls[0]["state"], "failed");
    assert_eq!(ls[0]["verify"], verify);
    let tail = ls[0]["result"]["output"].as_str().unwrap();
    assert_eq!(tail.lines().count(), 20, "{tail}");
    assert!(tail.ends_with("line 40 of aw/default/coder"), "{tail}");
    assert!(!tail.contains("line 20 "), "{tail}");
    let said = root.entries("default").pop().unwrap();
    assert_eq!(
        (said.from.as_str(), said.mentions.clone()),
        ("system", vec!["coder".to_string()])
    );
    assert!(
        said.message.contains("main is unchanged"),
        "{}",
        said.message
    );
    assert!(
        said.message.contains("line 40 of aw/default/coder"),
        "{}",
        said.message
    );
    // The whole output is kept beside the request.
    let show = ok(&root, &r, &["show", "1"]);
    assert!(show.contains("line 1 of aw/default/coder\n"), "{show}");

    // A verify that passes moves it.
    assert_eq!(
        ok(
            &root,
            &r,
            &["request", "coder", "--verify", "test -e g.txt"]
        ),
        "2\n"
    );
    assert_eq!(git(&r, &["rev-parse", "main~1"]), before);
    assert_eq!(git(&r, &["show", "main:g.txt"]), "new");
}

/// Wait (at most a minute) until `path` exists.
fn wait_for(path: &Path) {
    for _ in 0..600 {
        if path.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{} never appeared", path.display());
}

#[test]
fn a_server_killed_during_verify_leaves_the_target_whole_and_the_next_one_resumes() {
    let t = tempfile::tempdir().unwrap();
    let root = Root::new();
    let r = repo(t.path());
    branch(&r, "aw/default/slow", "s.txt", "slow\n");
    branch(&r, "aw/default/next", "n.txt", "next\n");
    let before = git(&r, &["rev-parse", "main"]);
    let (started, go) = (t.path().join("started"), t.path().join("go"));
    let verify = format!(
        "touch '{}'; test -e '{}' || sleep 300",
        started.display(),
        go.display()
    );
    let mut server = merge(&root, &r, &["request", "slow", "--verify", &verify])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&started);
    server.kill().unwrap();
    server.wait().unwrap();

    assert_eq!(git(&r, &["rev-parse", "main"]), before, "main untouched");
    let ls = requests(&root, &r);
    assert_eq!(ls[0]["state"], "running");
    assert_eq!(ls[0]["holder"]["pid"], server.id());
    let scratch = ls[0]["scratch"].as_str().unwrap().to_string();
    let show = ok(&root, &r, &["show", "1"]);
    assert!(
        show.contains(&format!("served by: pid {} on ", server.id())) && show.contains("(gone: "),
        "{show}"
    );
    assert!(Path::new(&scratch).is_dir());

    // The next request serves the first again, from scratch, then itself.
    std::fs::remove_file(&started).unwrap();
    std::fs::write(&go, "").unwrap();
    assert_eq!(ok(&root, &r, &["request", "next", "--no-wait"]), "2\n");
    assert_eq!(requests(&root, &r)[1]["state"], "queued");
    let served = ok(&root, &r, &["serve"]);
    assert_eq!(served.lines().count(), 2, "{served}");
    let ls = requests(&root, &r);
    assert_eq!(ls[0]["state"], "merged", "{:?}", ls[0]);
    assert_eq!(ls[0]["attempts"], 2);
    assert_eq!(ls[1]["state"], "merged");
    assert!(started.exists(), "the verify ran again");
    assert_eq!(git(&r, &["rev-parse", "main~2"]), before);
    assert_eq!(git(&r, &["show", "main:s.txt"]), "slow");
    assert_eq!(git(&r, &["show", "main:n.txt"]), "next");
    assert!(
        !Path::new(&scratch).exists(),
        "the scratch work tree is removed"
    );
    let trees = git(&r, &["worktree", "list", "--porcelain"]);
    assert!(!trees.contains("merges/work"), "{trees}");
    let log = std::fs::read_to_string(root.inst_dir("default").join("merges/1.2.log")).unwrap();
    assert!(log.starts_with("# served again"), "{log}");
    // What the killed verify left running was killed with it.
    let left = running(&format!("test -e '{}'", go.display()));
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn two_requesters_at_once_are_served_one_at_a_time_in_order() {
    let t = tempfile::tempdir().unwrap();
    let root = Root::new();
    let r = repo(t.path());
    branch(&r, "aw/default/one", "one.txt", "1\n");
    branch(&r, "aw/default/two", "two.txt", "2\n");
    let trace = t.path().join("trace");
    let verify = format!(
        "echo start $AW_MERGE_ID >> '{0}'; sleep 0.3; echo end $AW_MERGE_ID >> '{0}'",
        trace.display()
    );
    // The first is queued before the second starts, so that the order is known.
    let first = merge(&root, &r, &["request", "one", "--verify", &verify])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ids = root.inst_dir("default").join("merges/1.json");
    wait_for(&ids);
    let second = merge(&root, &r, &["request", "two", "--verify", &verify])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (a, b) = (
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    );
    assert_eq!(a.status.code(), Some(0), "{a:?}");
    assert_eq!(b.status.code(), Some(0), "{b:?}");
    assert_eq!(String::from_utf8_lossy(&a.stdout), "1\n");
    assert_eq!(String::from_utf8_lossy(&b.stdout), "2\n");
    assert_eq!(
        std::fs::read_to_string(&trace).unwrap(),
        "start 1\nend 1\nstart 2\nend 2\n"
    );
    let ls = requests(&root, &r);
    assert!(ls.iter().all(|q| q["state"] == "merged"), "{ls:?}");
    assert_eq!(git(&r, &["show", "main:one.txt"]), "1");
    assert_eq!(git(&r, &["show", "main:two.txt"]), "2");
    assert_eq!(
        git(&r, &["rev-parse", "main~1"]),
        ls[0]["result"]["commit"].as_str().unwrap()
    );
}

#[test]
fn no_hook_of_the_repository_runs_whether_rebased_or_merged() {
    let t = tempfile::tempdir().unwrap();
    let root = Root::new();
    let r = repo(t.path());
    branch(&r, "aw/default/a", "a.txt", "a\n");
    branch(&r, "aw/default/b", "b.txt", "b\n");
    let marks = t.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    let hooks = [
        "pre-rebase",
        "post-rewrite",
        "post-merge",
        "post-checkout",
        "pre-merge-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "reference-transaction",
        "pre-commit",
    ];
    for dir in [r.join(".git/hooks"), t.path().join("hooks")] {
        std::fs::create_dir_all(&dir).unwrap();
        for h in hooks {
            let p = dir.join(h);
            std::fs::write(
                &p,
                format!("#!/bin/sh\ntouch '{}'\n", marks.join(h).display()),
            )
            .unwrap();
            let mut perm = std::fs::metadata(&p).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
            std::fs::set_permissions(&p, perm).unwrap();
        }
    }
    // And a filter driver, which checking out the scratch work tree would run.
    std::fs::create_dir_all(r.join(".git/info")).unwrap();
    std::fs::write(r.join(".git/info/attributes"), "*.txt filter=mark\n").unwrap();
    for key in ["clean", "smudge"] {
        let cmd = format!("touch '{}'; cat", marks.join(key).display());
        git(&r, &["config", &format!("filter.mark.{key}"), &cmd]);
    }
    ok(&root, &r, &["request", "a"]);
    git(
        &r,
        &[
            "config",
            "core.hooksPath",
            t.path().join("hooks").to_str().unwrap(),
        ],
    );
    ok(&root, &r, &["request", "b", "--how", "merge"]);
    let ran: Vec<_> = std::fs::read_dir(&marks)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(ran.is_empty(), "hooks ran: {ran:?}");
    assert_eq!(
        git(&r, &["log", "-1", "--format=%s", "main"]),
        "Merge branch 'aw/default/b' into main"
    );
    assert_eq!(git(&r, &["show", "main:a.txt"]), "a");
    // The hooks and the filter are there, and run for git itself.
    git(&r, &["commit", "-q", "--allow-empty", "-m", "by hand"]);
    assert!(marks.join("post-commit").exists());
    git(&r, &["cat-file", "--filters", "main:a.txt"]);
    assert!(marks.join("smudge").exists());
}

#[test]
fn a_target_checked_out_with_changes_is_left_alone_and_bad_requests_store_nothing() {
    let t = tempfile::tempdir().unwrap();
    let root = Root::new();
    let r = repo(t.path());
    branch(&r, "aw/default/a", "a.txt", "a\n");
    let before = git(&r, &["rev-parse", "main"]);
    std::fs::write(r.join("f.txt"), "mine\n").unwrap();
    let out = run(&root, &r, &["request", "a"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is checked out in"), "{err}");
    assert!(err.contains("changes to tracked files"), "{err}");
    assert_eq!(git(&r, &["rev-parse", "main"]), before);
    assert_eq!(std::fs::read_to_string(r.join("f.txt")).unwrap(), "mine\n");

    // A request queued and cancelled is never served; cancelling twice is refused.
    assert_eq!(ok(&root, &r, &["request", "a", "--no-wait"]), "2\n");
    assert_eq!(ok(&root, &r, &["cancel", "2", "--as", "lead"]), "2\n");
    assert_eq!(ok(&root, &r, &["serve"]), "");
    let e = assert_error(&run(&root, &r, &["cancel", "2"]), "aw-ctl", 1, "twice");
    assert!(e.contains("is cancelled"), "{e}");
    assert_eq!(requests(&root, &r)[1]["state"], "cancelled");

    for (args, code, what) in [
        (&["request", "nobody"][..], 66, "no such branch"),
        (&["request", "a", "--into", "nope"], 66, "no such branch"),
        (&["request", "a", "--how", "squash"], 65, "squash"),
        (
            &["request", "x", "--branch", "-rf"],
            65,
            "not a branch name",
        ),
        (
            &["request", "x", "--branch", "main"],
            65,
            "target branch itself",
        ),
        (&["show", "9"], 66, "no merge request 9"),
        (&["show", "x"], 65, "expected a number"),
    ] {
        let e = assert_error(&run(&root, &r, args), "aw-ctl", code, what);
        assert!(e.contains(what), "{args:?}: {e}");
    }
    let e = assert_error(
        &run(&root, t.path(), &["request", "a"]),
        "aw-ctl",
        66,
        "outside",
    );
    assert!(e.contains("not in a git repository"), "{e}");
    assert_eq!(requests(&root, &r).len(), 2, "nothing more stored");
}

#[test]
fn a_target_moved_during_the_verify_is_never_overwritten_the_request_is_tried_again_on_it() {
    let t = tempfile::tempdir().unwrap();
    let root = Root::new();
    let r = repo(t.path());
    branch(&r, "aw/default/a", "a.txt", "a\n");
    git(&r, &["checkout", "-q", "--detach", "main"]);
    // The first verify moves main, as another merge (or a push) would meanwhile.
    let mark = t.path().join("moved");
    let verify = format!(
        "test -e '{0}' || {{ touch '{0}'; c=$(git commit-tree 'main^{{tree}}' -p main -m moved) \
         && git update-ref refs/heads/main $c; }}",
        mark.display()
    );
    ok(&root, &r, &["request", "a", "--verify", &verify]);
    assert_eq!(
        git(&r, &["log", "--format=%s", "main"]),
        "aw/default/a: a.txt\nmoved\nfive lines"
    );
    let q = &requests(&root, &r)[0];
    assert_eq!(q["state"], "merged");
    assert_eq!(q["attempts"], 1);
    let log = std::fs::read_to_string(root.inst_dir("default").join("merges/1.1.log")).unwrap();
    assert_eq!(log.matches("$ git worktree add").count(), 2, "{log}");
    assert_eq!(log.matches("$ git update-ref").count(), 2, "{log}");
}

/// The live processes whose command line holds `needle`.
fn running(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|p| std::fs::read(p.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(needle))
        .collect()
}

#[test]
fn a_verify_past_its_time_is_killed_with_what_it_started_and_fails() {
    let t = tempfile::tempdir().unwrap();
    let root = Root::new();
    let r = repo(t.path());
    branch(&r, "aw/default/a", "a.txt", "a\n");
    let before = git(&r, &["rev-parse", "main"]);
    let state = root.inst_dir("default").join("_state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join("merge.json"),
        r#"{"timeout": 1, "verify": "echo begun; sleep 417 & sleep 418"}"#,
    )
    .unwrap();
    let out = run(&root, &r, &["request", "a"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("verify failed: ran past its 1 s and was killed"),
        "{err}"
    );
    assert_eq!(git(&r, &["rev-parse", "main"]), before);
    let q = &requests(&root, &r)[0];
    assert_eq!(q["timeout"], 1);
    assert_eq!(q["result"]["output"], "begun");
    for s in ["sleep 417", "sleep 418"] {
        assert_eq!(running(s), Vec::<String>::new(), "{s}");
    }
}
