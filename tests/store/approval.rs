//! Approval requests between real processes: a waiter blocked on a request wakes when
//! another process decides it, survives kill -9 (a new waiter finds the request as it is),
//! sees a decision made while no one waited; expiry fails, skips or escalates; a refused
//! decider changes nothing; an approve and a reject racing leave exactly one decision.

use crate::common;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Root;
use serde_json::Value;

const INST: &str = "gate";

/// `aw-ctl -i gate ARGS`, its output piped.
fn ctl(root: &Root, args: &[&str]) -> Command {
    let mut c = root.cmd("aw-ctl");
    c.args(["-i", INST])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn ok(root: &Root, args: &[&str]) -> String {
    let mut all = vec!["-i", INST];
    all.extend_from_slice(args);
    root.ok("aw-ctl", &all, None)
}

/// Ask for an approval by `by` as `bot` with extra options; its id.
fn ask(root: &Root, what: &str, by: &str, extra: &[&str]) -> u64 {
    let mut args = vec!["approvals", "ask", what, "--by", by, "--as", "bot"];
    args.extend_from_slice(extra);
    ok(root, &args).trim().parse().expect("an id")
}

/// The request file of `id`, parsed.
fn request(root: &Root, id: u64) -> Value {
    let p = root.inst_dir(INST).join(format!("approvals/{id}.json"));
    serde_json::from_slice(&std::fs::read(&p).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The raw bytes of the request file of `id`.
fn raw(root: &Root, id: u64) -> Vec<u8> {
    std::fs::read(root.inst_dir(INST).join(format!("approvals/{id}.json"))).unwrap()
}

/// Start `aw-ctl approvals wait ID`.
fn waiter(root: &Root, id: u64) -> Child {
    ctl(root, &["approvals", "wait", &id.to_string()])
        .spawn()
        .expect("spawn aw-ctl")
}

/// CPU time (user + system, in clock ticks) that process `pid` has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Let `child` settle into its wait; it must still be running (the request is pending).
fn still_waiting(child: &mut Child, what: &str) {
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        child.try_wait().unwrap().is_none(),
        "{what}: the waiter returned while the request is pending"
    );
}

/// Wait for `child` to end (it must, within the guard); its output.
fn finish(child: Child, what: &str) -> Output {
    let pid = child.id();
    let guard = std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(60);
        while Instant::now() < end {
            if std::fs::metadata(format!("/proc/{pid}")).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    let out = child.wait_with_output().unwrap();
    guard.join().unwrap();
    assert!(
        out.status.code().is_some(),
        "{what}: the waiter hung: {out:?}"
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The channel's messages from `system`.
fn system_messages(root: &Root) -> Vec<String> {
    root.entries(INST)
        .into_iter()
        .filter(|e| e.from == "system")
        .map(|e| e.message)
        .collect()
}

#[test]
fn a_waiter_blocks_without_spending_cpu_until_another_process_approves() {
    let root = Root::new();
    let id = ask(&root, "deploy to prod", "user", &[]);
    let asked = system_messages(&root);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].starts_with("@user [APPROVAL #1] deploy to prod (task, asked by bot)")
            && asked[0].contains("aw-ctl approve 1"),
        "{asked:?}"
    );
    let mut w = waiter(&root, id);
    still_waiting(&mut w, "before the approval");
    let before = cpu_ticks(w.id());
    std::thread::sleep(Duration::from_secs(1));
    let spent = cpu_ticks(w.id()) - before;
    assert!(
        spent <= 2,
        "the waiter spent {spent} ticks of CPU in a second"
    );
    assert_eq!(
        ok(&root, &["approve", "1", "--reason", "go", "--as", "user"]),
        "approval 1 approved\n"
    );
    let out = finish(w, "after the approval");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(stdout(&out), "approved by user: go\n");
    let r = request(&root, 1);
    assert_eq!(r["state"], "approved");
    assert_eq!(r["decision"]["by"], "user");
}

#[test]
fn a_waiter_killed_9_loses_nothing_and_the_next_one_sees_the_decision() {
    let root = Root::new();
    let id = ask(&root, "merge auth", "lead", &["--kind", "merge"]);
    let mut w = waiter(&root, id);
    still_waiting(&mut w, "first waiter");
    w.kill().unwrap();
    w.wait().unwrap();
    assert_eq!(request(&root, id)["state"], "pending");
    // A new waiter finds it still pending, then approved.
    let mut w = waiter(&root, id);
    still_waiting(&mut w, "second waiter");
    ok(&root, &["approve", "1", "--as", "lead"]);
    let out = finish(w, "second waiter");
    assert_eq!(
        (out.status.code(), stdout(&out)),
        (Some(0), "approved by lead\n".into())
    );

    // Decided while no one waits: the next waiter returns at once with the decision.
    let id = ask(&root, "drop the table", "lead", &[]);
    ok(&root, &["reject", "2", "--reason", "never", "--as", "lead"]);
    let out = finish(waiter(&root, id), "late waiter");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(stdout(&out), "rejected by lead: never\n");
}

#[test]
fn a_script_killed_while_it_waits_asks_once_when_started_again() {
    let root = Root::new();
    let args = [
        "approvals",
        "ask",
        "release v2",
        "--by",
        "user",
        "--key",
        "release-v2",
        "--wait",
        "--as",
        "ci",
    ];
    let mut first = ctl(&root, &args).spawn().unwrap();
    still_waiting(&mut first, "first run of the script");
    first.kill().unwrap();
    first.wait().unwrap();
    let mut again = ctl(&root, &args).spawn().unwrap();
    still_waiting(&mut again, "second run of the script");
    ok(&root, &["approve", "1"]);
    let out = finish(again, "second run");
    assert_eq!(stdout(&out), "1\napproved by user\n");
    assert_eq!(out.status.code(), Some(0));
    let listed = ok(&root, &["approvals", "--all", "--json"]);
    assert_eq!(listed.lines().count(), 1, "asked twice: {listed}");
    let asked = system_messages(&root)
        .iter()
        .filter(|m| m.contains("[APPROVAL #") && m.contains("release v2 (task"))
        .count();
    assert_eq!(asked, 1);
}

#[test]
fn expiry_fails_skips_or_escalates_and_is_posted() {
    let root = Root::new();
    // then: fail
    let id = ask(&root, "a", "user", &["--timeout", "1s"]);
    let out = finish(waiter(&root, id), "then fail");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stdout(&out).starts_with("expired: no answer by "),
        "{out:?}"
    );
    assert_eq!(request(&root, id)["state"], "expired");
    // then: skip
    let id = ask(&root, "b", "user", &["--timeout", "1s", "--then", "skip"]);
    let out = finish(waiter(&root, id), "then skip");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stdout(&out).starts_with("skipped: no answer by "),
        "{out:?}"
    );
    assert_eq!(request(&root, id)["state"], "expired");
    // then: lead — the waiter follows the escalation to the request it makes.
    let id = ask(&root, "c", "user", &["--timeout", "1s", "--then", "lead"]);
    assert_eq!(id, 3);
    let mut w = waiter(&root, id);
    let end = Instant::now() + Duration::from_secs(30);
    while !root.inst_dir(INST).join("approvals/4.json").exists() {
        assert!(Instant::now() < end, "no escalation");
        std::thread::sleep(Duration::from_millis(50));
    }
    still_waiting(&mut w, "escalated");
    let first = request(&root, 3);
    assert_eq!(first["state"], "escalated");
    assert_eq!(first["escalated_to"], 4);
    let second = request(&root, 4);
    assert_eq!(second["state"], "pending");
    assert_eq!(second["by"], serde_json::json!(["lead"]));
    assert_eq!(second["escalated_from"], 3);
    assert_eq!(second["asked_by"], "bot");
    // The first approver is too late.
    let late = ctl(&root, &["approve", "3", "--as", "user"])
        .output()
        .unwrap();
    common::assert_error(&late, "aw-ctl", 65, "approve an escalated request");
    ok(&root, &["approve", "4", "--as", "lead"]);
    let out = finish(w, "escalated");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(stdout(&out), "approved by lead (approval 4, escalated)\n");
    let posts = system_messages(&root);
    let expired: Vec<&String> = posts.iter().filter(|m| m.contains("] expired: ")).collect();
    assert_eq!(expired.len(), 2, "{posts:?}");
    assert!(expired[0].starts_with("@bot [APPROVAL #1] expired: a (no answer by "));
    let escalated: Vec<&String> = posts
        .iter()
        .filter(|m| m.starts_with("@lead [APPROVAL #4] c (asked by bot; escalated from #3"))
        .collect();
    assert_eq!(escalated.len(), 1, "{posts:?}");
}

#[test]
fn an_expiry_is_applied_once_by_whoever_reads_first() {
    let root = Root::new();
    ask(&root, "x", "user", &["--timeout", "1s", "--then", "lead"]);
    std::thread::sleep(Duration::from_millis(1200));
    // Many readers at once: one escalation, one post.
    let readers: Vec<Child> = (0..8)
        .map(|_| ctl(&root, &["approvals", "--json"]).spawn().unwrap())
        .collect();
    for r in readers {
        let out = r.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let lines: Vec<Value> = common::json_lines(&out.stdout);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0]["id"], 2);
    }
    let all = ok(&root, &["approvals", "--all", "--json"]);
    assert_eq!(all.lines().count(), 2, "{all}");
    let posts = system_messages(&root);
    assert_eq!(
        posts
            .iter()
            .filter(|m| m.contains("escalated from #1"))
            .count(),
        1,
        "{posts:?}"
    );
}

#[test]
fn a_non_approver_is_refused_and_nothing_changes() {
    let root = Root::new();
    let id = ask(&root, "rotate keys", "user,lead", &[]);
    let before = raw(&root, id);
    let entries = root.entries(INST).len();
    for verb in ["approve", "reject"] {
        let out = ctl(&root, &[verb, "1", "--as", "bot", "--reason", "mine"])
            .output()
            .unwrap();
        let line = common::assert_error(&out, "aw-ctl", 77, verb);
        assert_eq!(
            line,
            "aw-ctl: bot may not decide approval 1: only user, lead may"
        );
    }
    assert_eq!(raw(&root, id), before);
    assert_eq!(root.entries(INST).len(), entries);
}

#[test]
fn an_approve_and_a_reject_racing_leave_exactly_one_decision() {
    let root = Root::new();
    for round in 1..=10u64 {
        let id = ask(&root, &format!("race {round}"), "user,lead", &[]);
        assert_eq!(id, round);
        let a = ctl(&root, &["approve", &id.to_string(), "--as", "user"])
            .spawn()
            .unwrap();
        let r = ctl(&root, &["reject", &id.to_string(), "--as", "lead"])
            .spawn()
            .unwrap();
        let (a, r) = (a.wait_with_output().unwrap(), r.wait_with_output().unwrap());
        let codes = [a.status.code(), r.status.code()];
        let won = match codes {
            [Some(0), Some(65)] => "approved",
            [Some(65), Some(0)] => "rejected",
            _ => panic!("round {round}: {a:?} {r:?}"),
        };
        let req = request(&root, id);
        assert_eq!(req["state"], won, "round {round}");
        let decided = system_messages(&root)
            .iter()
            .filter(|m| m.starts_with(&format!("@bot [APPROVAL #{id}] {won} by ")))
            .count();
        assert_eq!(decided, 1, "round {round}");
    }
}

#[test]
fn an_approver_may_answer_in_the_channel_when_the_request_lets_it() {
    let root = Root::new();
    let id = ask(&root, "ship it", "user", &["--replies"]);
    assert!(
        system_messages(&root)[0].contains("or reply `approve #1` or `reject #1: REASON`"),
        "{:?}",
        system_messages(&root)
    );
    let mut w = waiter(&root, id);
    still_waiting(&mut w, "before any answer");
    // Not an approver, and not an answer: neither decides.
    root.send(INST, &["--from", "bot"], "approve #1");
    root.send(INST, &["--from", "user"], "I will approve #1 later");
    still_waiting(&mut w, "after a non-approver's answer");
    assert_eq!(request(&root, id)["state"], "pending");
    root.send(INST, &["--from", "user"], "@bot reject #1: not on a Friday");
    let out = finish(w, "after the approver's answer");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(stdout(&out), "rejected by user: not on a Friday\n");
    // A request that does not let replies answer it is not decided by one.
    let id = ask(&root, "no replies", "user", &[]);
    root.send(INST, &["--from", "user"], "approve #2");
    let out = ctl(&root, &["approvals", "wait", "2", "--timeout", "1"])
        .output()
        .unwrap();
    common::assert_error(&out, "aw-ctl", 1, "a wait that times out");
    assert_eq!(request(&root, id)["state"], "pending");
}
