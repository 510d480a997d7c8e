//! aw-run serving the merge queue of a workflow with a `merge:` key, on real git
//! repositories: a request queued while it runs (by `aw-ctl merge request --no-wait`, from
//! an exec agent) is verified and merged, the run waiting for it before it ends; a merge
//! that needs an approval moves the target only once approved, and a rejected one is
//! `rejected` with the target unchanged, its agent told.

use crate::common;

use std::path::{Path, PathBuf};

use common::git;
use common::runner::{INST, Setup, alive, assert_code, spawn, stderr, wait_for, wait_hang_guarded};

/// A repository at `repo` in the working directory, on `main` (checked out), and the branch
/// of agent `coder` (`aw/w/coder`) with one commit that adds `c.txt`; the work tree of that
/// branch.
fn repo(s: &Setup) -> (PathBuf, PathBuf) {
    let r = s.dir().join("repo");
    std::fs::create_dir(&r).unwrap();
    git(&r, &["init", "-q", "-b", "main"]);
    std::fs::write(r.join("f.txt"), "one\n").unwrap();
    git(&r, &["add", "f.txt"]);
    git(&r, &["commit", "-q", "-m", "one"]);
    let wt = s.dir().join("wt-coder");
    let branch = format!("aw/{INST}/coder");
    git(
        &r,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            &branch,
            wt.to_str().unwrap(),
            "main",
        ],
    );
    commit(&wt, "c.txt", "coded\n");
    (r, wt)
}

/// Commit `text` as `file` in the work tree `wt`.
fn commit(wt: &Path, file: &str, text: &str) {
    std::fs::write(wt.join(file), text).unwrap();
    git(wt, &["add", file]);
    git(wt, &["commit", "-q", "-m", file]);
}

/// A workflow whose agent `coder` (in the repository) queues a merge of its branch,
/// without waiting, each time a file `ask` is beside the repository, with `merge`.
fn workflow(merge: &str) -> String {
    let script = "cat >/dev/null; if [ -f ../ask ]; then rm ../ask; \
                  aw-ctl merge request --no-wait >/dev/null; fi; echo done";
    format!(
        "agents:\n  coder:\n    command: [sh, -c, {script:?}]\n    cwd: repo\n\
         merge: {merge}\nkickoff: '@coder merge your work'\n"
    )
}

/// The merge requests of the instance, as `aw-ctl merge ls --json` gives them.
fn requests(s: &Setup) -> Vec<serde_json::Value> {
    let out = s
        .root
        .ok("aw-ctl", &["-i", INST, "merge", "ls", "--json"], None);
    common::json_lines(out.as_bytes())
}

/// `aw-ctl -i INST ARGS`, which must succeed; its stdout.
fn ctl(s: &Setup, args: &[&str]) -> String {
    let mut all = vec!["-i", INST];
    all.extend_from_slice(args);
    s.root.ok("aw-ctl", &all, None)
}

/// The channel's entries as one text.
fn channel(s: &Setup) -> String {
    s.entries()
        .iter()
        .map(|(from, text)| format!("{from}: {text}\n"))
        .collect()
}

#[test]
fn aw_run_serves_a_request_queued_while_it_runs_and_ends_once_it_is_merged() {
    let s = Setup::new();
    let (r, _wt) = repo(&s);
    let before = git(&r, &["rev-parse", "main"]);
    s.write("ask", "");
    s.write(
        "wf.yaml",
        &workflow("{into: main, how: rebase, verify: 'test -f c.txt && echo verified'}"),
    );
    let out = wait_hang_guarded(spawn(s.cmd(&[])));
    assert_code(&out, 0);
    // The settings are the instance's.
    let settings: serde_json::Value = serde_json::from_slice(
        &std::fs::read(s.root.inst_dir(INST).join("_state/merge.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(settings["wait"], false, "{settings}");
    assert_eq!(settings["verify"], "test -f c.txt && echo verified");
    let ls = requests(&s);
    assert_eq!(ls.len(), 1, "{ls:?}\n{}", stderr(&out));
    assert_eq!(ls[0]["state"], "merged", "{ls:?}");
    assert_eq!(ls[0]["asked_by"], "coder");
    let now = git(&r, &["rev-parse", "main"]);
    assert_ne!(now, before, "main moved");
    assert_eq!(ls[0]["result"]["commit"], now.as_str());
    assert_eq!(std::fs::read_to_string(r.join("c.txt")).unwrap(), "coded\n");
    let log = std::fs::read_to_string(s.root.inst_dir(INST).join("merges/1.1.log")).unwrap();
    assert!(log.contains("verified"), "{log}");
    let ch = channel(&s);
    assert!(
        ch.contains(&format!(
            "system: merge #1 of coder: aw/{INST}/coder into main: merged"
        )),
        "{ch}"
    );
}

#[test]
fn a_merge_that_needs_approval_moves_the_target_only_once_approved_and_a_rejected_one_never() {
    let s = Setup::new();
    let (r, wt) = repo(&s);
    let before = git(&r, &["rev-parse", "main"]);
    s.write(
        "wf.yaml",
        &workflow("{verify: 'true', needs: {approval: {by: lead}}}"),
    );
    let approval = |id: u64| s.root.inst_dir(INST).join(format!("approvals/{id}.json"));

    // Approved: merged.
    s.write("ask", "");
    let mut run = spawn(s.cmd(&[]));
    wait_for("the approval of the merge", || approval(1).exists());
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        run.try_wait().unwrap().is_none(),
        "aw-run ended before the approval"
    );
    let a: serde_json::Value =
        serde_json::from_slice(&std::fs::read(approval(1)).unwrap()).unwrap();
    assert_eq!(
        (a["kind"].as_str(), a["state"].as_str()),
        (Some("merge"), Some("pending"))
    );
    assert_eq!(a["what"], format!("merge #1: aw/{INST}/coder into main"));
    let ls = requests(&s);
    assert_eq!(
        (ls[0]["state"].as_str(), ls[0]["approval"].as_u64()),
        (Some("running"), Some(1))
    );
    assert_eq!(
        git(&r, &["rev-parse", "main"]),
        before,
        "main moved before the approval"
    );
    ctl(&s, &["approve", "1", "--as", "lead"]);
    let out = wait_hang_guarded(run);
    assert_code(&out, 0);
    assert_eq!(requests(&s)[0]["state"], "merged", "{}", stderr(&out));
    let merged = git(&r, &["rev-parse", "main"]);
    assert_ne!(merged, before);
    merge_spans(&s, "merged", "approved", 1);

    // Rejected: the target stays, the request is rejected, its agent told why.
    git(&wt, &["rebase", "-q", "main"]);
    commit(&wt, "d.txt", "more\n");
    s.write("ask", "");
    let run = spawn(s.cmd(&[]));
    wait_for("the approval of the second merge", || approval(2).exists());
    let why = "not before the release";
    ctl(&s, &["reject", "2", "--as", "lead", "--reason", why]);
    let out = wait_hang_guarded(run);
    assert_code(&out, 0);
    let ls = requests(&s);
    assert_eq!(ls[1]["state"], "rejected", "{ls:?}\n{}", stderr(&out));
    assert_eq!(
        ls[1]["result"]["note"],
        "approval #2 rejected by lead: not before the release"
    );
    assert_eq!(
        git(&r, &["rev-parse", "main"]),
        merged,
        "main moved though rejected"
    );
    assert!(!r.join("d.txt").exists());
    merge_spans(&s, "rejected", "rejected", 2);
    let ch = channel(&s);
    assert!(
        ch.contains(&format!(
            "system: @coder merge #2: aw/{INST}/coder into main: rejected, main is unchanged: \
             approval #2 rejected by lead: not before the release."
        )),
        "{ch}"
    );
}

/// The traces of the runs so far, read with the official OTLP definitions: the last run's
/// attempt at merging coder's branch is a span under its `invoke_workflow` root, ended with
/// `merge` and OTLP status `status` (1 ok, 2 error), and the wait for its approval is a span
/// under it, ended with `approval` and decided by lead.
fn merge_spans(s: &Setup, merge: &str, approval: &str, status: u64) {
    let all = crate::otel::spans(&crate::otel::files(s));
    let roots: Vec<&serde_json::Value> = all
        .iter()
        .filter(|x| x["attrs"]["gen_ai.operation.name"] == "invoke_workflow")
        .collect();
    let root = *roots.last().expect("a trace per run");
    let trace: Vec<&serde_json::Value> =
        all.iter().filter(|x| x["trace"] == root["trace"]).collect();
    let named = |name: &str| -> &serde_json::Value {
        let found: Vec<_> = trace.iter().filter(|x| x["name"] == name).collect();
        assert_eq!(found.len(), 1, "one {name} span: {trace:#?}");
        found[0]
    };
    let m = named("merge coder");
    assert_eq!(m["parent"], root["span"], "{m}");
    assert_eq!(m["attrs"]["aw.merge.outcome"], merge, "{m}");
    assert_eq!(m["attrs"]["aw.merge.branch"], format!("aw/{INST}/coder"));
    assert_eq!(m["attrs"]["aw.merge.into"], "main");
    assert_eq!(m["status"], status, "{m}");
    let a = named("approval merge");
    assert_eq!(a["parent"], m["span"], "the wait is part of the merge: {a}");
    assert_eq!(a["attrs"]["aw.approval.outcome"], approval, "{a}");
    assert_eq!(a["attrs"]["aw.approval.decided_by"], "lead");
    assert_eq!(a["status"], status, "{a}");
}

/// aw-run killed -9 while a merge waits for its approval: started again, it serves the
/// request again (verified again) and waits for the same approval, asking nothing new; an
/// approval given while no aw-run ran merges it at once.
#[test]
fn a_merge_waiting_for_its_approval_survives_kill_9_and_asks_once() {
    let s = Setup::new();
    let (r, _wt) = repo(&s);
    let before = git(&r, &["rev-parse", "main"]);
    let verified = s.dir().join("verified");
    s.write(
        "wf.yaml",
        &workflow(&format!(
            "{{verify: 'echo verified >> {}', needs: {{approval: {{by: lead}}}}}}",
            verified.display()
        )),
    );
    let approval = |id: u64| s.root.inst_dir(INST).join(format!("approvals/{id}.json"));
    s.write("ask", "");
    let mut run = spawn(s.cmd(&[]));
    wait_for("the approval of the merge", || approval(1).exists());
    run.kill().unwrap();
    run.wait().unwrap();
    assert_eq!(requests(&s)[0]["state"], "running");

    // Started again: the same approval, still pending.
    let mut run = spawn(s.cmd(&[]));
    wait_for("the request verified again", || {
        std::fs::read_to_string(&verified).is_ok_and(|v| v.lines().count() == 2)
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        run.try_wait().unwrap().is_none(),
        "aw-run ended while the merge waits"
    );
    assert!(!approval(2).exists(), "asked twice");
    assert_eq!(git(&r, &["rev-parse", "main"]), before);
    run.kill().unwrap();
    run.wait().unwrap();

    // Approved while no aw-run runs: the next one merges it.
    ctl(&s, &["approve", "1", "--as", "lead"]);
    let out = wait_hang_guarded(spawn(s.cmd(&[])));
    assert_code(&out, 0);
    let ls = requests(&s);
    assert_eq!(
        (ls.len(), ls[0]["state"].as_str()),
        (1, Some("merged")),
        "{}",
        stderr(&out)
    );
    assert_eq!(ls[0]["attempts"], 3);
    assert!(!approval(2).exists(), "asked twice");
    assert_ne!(git(&r, &["rev-parse", "main"]), before);
}

/// aw-run stopped while a verify command runs kills it and ends, leaving the request to be
/// served again by the next server.
#[test]
fn a_stopped_aw_run_kills_the_verify_under_way_and_leaves_the_request_to_serve_again() {
    let s = Setup::new();
    let (r, _wt) = repo(&s);
    let before = git(&r, &["rev-parse", "main"]);
    s.write("wf.yaml", &workflow("{verify: 'echo started; sleep 600'}"));
    s.write("ask", "");
    let run = spawn(s.cmd(&[]));
    let log = s.root.inst_dir(INST).join("merges/1.1.log");
    wait_for("the verify command", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("started"))
    });
    ctl(&s, &["stop", &format!("@{INST}")]);
    let out = wait_hang_guarded(run);
    assert_code(&out, 0);
    let ls = requests(&s);
    assert_eq!(ls[0]["state"], "running", "{ls:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("# stopped: killed, to be served again"),
        "{text}"
    );
    assert_eq!(git(&r, &["rev-parse", "main"]), before);
}

/// aw-run killed with SIGKILL while a verify command runs: the verify command and what it
/// started in the background do not outlive it (the guard kills their group).
#[test]
fn a_verify_command_and_its_children_die_with_aw_run_killed_9() {
    let s = Setup::new();
    let _ = repo(&s);
    let pids = s.dir().join("pids");
    s.write(
        "wf.yaml",
        &workflow(&format!(
            "{{verify: 'sleep 600 & echo $$ $! > {}; wait'}}",
            pids.display()
        )),
    );
    s.write("ask", "");
    let mut run = spawn(s.cmd(&[]));
    wait_for("the verify command", || {
        std::fs::read_to_string(&pids).is_ok_and(|p| p.split_whitespace().count() == 2)
    });
    let pids: Vec<u32> = std::fs::read_to_string(&pids)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(pids.iter().all(|&p| alive(p)), "{pids:?}");
    run.kill().unwrap();
    run.wait().unwrap();
    wait_for("the verify command and its child gone", || {
        pids.iter().all(|&p| !alive(p))
    });
    assert_eq!(requests(&s)[0]["state"], "running");
}

/// A merge's approval whose time runs out with `then: skip` leaves it unmerged
/// (`cancelled`); with `then: AGENT` it is asked of that agent, whose approval merges it.
#[test]
fn a_merge_whose_approval_runs_out_is_skipped_or_asked_of_someone_else() {
    let s = Setup::new();
    let (r, wt) = repo(&s);
    let before = git(&r, &["rev-parse", "main"]);
    let approval = |id: u64| s.root.inst_dir(INST).join(format!("approvals/{id}.json"));
    s.write(
        "wf.yaml",
        &workflow("{needs: {approval: {by: lead, timeout: 1s, then: skip}}}"),
    );
    s.write("ask", "");
    let out = wait_hang_guarded(spawn(s.cmd(&[])));
    assert_code(&out, 0);
    let ls = requests(&s);
    assert_eq!(ls[0]["state"], "cancelled", "{ls:?}\n{}", stderr(&out));
    let note = ls[0]["result"]["note"].as_str().unwrap();
    assert!(
        note.starts_with("approval #1 skipped by aw: no answer by ")
            && note.ends_with(": not merged"),
        "{note}"
    );
    assert_eq!(git(&r, &["rev-parse", "main"]), before);

    commit(&wt, "e.txt", "again\n");
    s.write(
        "wf.yaml",
        &workflow("{needs: {approval: {by: lead, timeout: 1s, then: ops}}}"),
    );
    s.write("ask", "");
    let run = spawn(s.cmd(&[]));
    wait_for("the escalated approval", || approval(3).exists());
    ctl(&s, &["approve", "3", "--as", "ops"]);
    let out = wait_hang_guarded(run);
    assert_code(&out, 0);
    let ls = requests(&s);
    assert_eq!(ls[1]["state"], "merged", "{ls:?}\n{}", stderr(&out));
    assert_eq!(ls[1]["approval"], 2);
    assert_ne!(git(&r, &["rev-parse", "main"]), before);
}
