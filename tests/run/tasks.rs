//! Workflow tasks end to end with real aw-run processes and exec agents: the changeset
//! pipeline, `if`, `parallel`, values that stay data, failures, `--json`.

use crate::common;

use common::runner::{Setup, assert_code, stderr};

/// An exec agent that answers `reply` (a shell word list) after reading its prompt.
fn agent(name: &str, script: &str) -> String {
    format!("  {name}:\n    command: [sh, -c, {script:?}]\n")
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_changeset_pipeline_runs_end_to_end() {
    let s = Setup::new();
    s.write("change.txt", "fix: typo in README\n");
    let wf = format!(
        "agents:\n{}{}tasks:\n  - shell: cat change.txt\n    as: diff\n  \
         - send: |\n      Review these changes:\n      ${{{{ diff }}}}\n    to: reviewer\n    as: review\n  \
         - send: |\n      Generate changeset based on:\n      ${{{{ review }}}}\n    to: generator\n    as: changeset\n  \
         - shell: |\n      mkdir -p .changeset\n      printf '%s\\n' \"${{{{ changeset }}}}\" > .changeset/auto.md\n      cat .changeset/auto.md\n",
        agent("reviewer", "grep -q typo && echo 'LGTM: typo fix'"),
        agent("generator", "grep -q LGTM && echo '---\npatch\n---'"),
    );
    let out = s.run(&wf, &[]);
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "---\npatch\n---\n", "{}", stderr(&out));
    let file = std::fs::read_to_string(s.dir().join(".changeset/auto.md")).unwrap();
    assert_eq!(file, "---\npatch\n---\n");
}

#[test]
fn if_runs_a_task_only_when_true() {
    let s = Setup::new();
    let wf = format!(
        "agents:\n{}tasks:\n  - send: review\n    to: rev\n    as: review\n  \
         - if: review contains \"LGTM\"\n    shell: echo approved\n    as: verdict\n  \
         - if: \"!(review contains 'LGTM')\"\n    shell: echo rejected\n    as: verdict\n  \
         - shell: echo \"${{{{ verdict }}}}\"\n",
        agent("rev", "cat >/dev/null; echo 'LGTM \"quoted\" ☃'"),
    );
    let out = s.run(&wf, &[]);
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "approved\n", "{}", stderr(&out));
    // On a fresh root: a second -i is a usage error, not an override.
    let s = Setup::new();
    let wf = wf.replace("echo 'LGTM", "echo 'NOPE");
    let out = s.run(&wf, &[]);
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "rejected\n", "{}", stderr(&out));
}

#[test]
fn parallel_tasks_run_at_the_same_time() {
    let s = Setup::new();
    let body = "cat >/dev/null; date +%s.%N > \"$0.start\"; sleep 0.3; date +%s.%N > \"$0.end\"; echo done";
    let mut agents = String::new();
    let mut group = String::new();
    for n in ["a", "b", "c"] {
        let stamp = s.dir().join(n);
        agents.push_str(&format!(
            "  {n}:\n    command: [sh, -c, {body:?}, {:?}]\n",
            stamp.to_str().unwrap()
        ));
        group.push_str(&format!(
            "      - send: go\n        to: {n}\n        as: r{n}\n"
        ));
    }
    let wf = format!(
        "agents:\n{agents}tasks:\n  - parallel:\n{group}  - shell: echo ${{{{ ra }}}}${{{{ rb }}}}${{{{ rc }}}}\n"
    );
    let out = s.run(&wf, &[]);
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "donedonedone\n", "{}", stderr(&out));
    let read = |n: &str, what: &str| -> f64 {
        let p = s.dir().join(format!("{n}.{what}"));
        std::fs::read_to_string(p).unwrap().trim().parse().unwrap()
    };
    let latest_start = ["a", "b", "c"]
        .map(|n| read(n, "start"))
        .into_iter()
        .fold(0.0, f64::max);
    let earliest_end = ["a", "b", "c"]
        .map(|n| read(n, "end"))
        .into_iter()
        .fold(f64::MAX, f64::min);
    assert!(latest_start < earliest_end, "the three runs overlap");
}

#[test]
fn a_reply_is_only_data_in_a_later_shell_task() {
    let s = Setup::new();
    let wf = format!(
        "agents:\n{}tasks:\n  - send: hi\n    to: rev\n    as: r\n  - shell: echo ${{{{ r }}}}; echo \"${{{{ r }}}}\"\n",
        agent(
            "rev",
            "cat >/dev/null; echo '$(touch pwned) `touch pwned2` \"'"
        ),
    );
    let out = s.run(&wf, &[]);
    assert_code(&out, 0);
    assert!(!s.dir().join("pwned").exists());
    assert!(!s.dir().join("pwned2").exists());
    assert_eq!(
        stdout(&out),
        "$(touch pwned) `touch pwned2` \"\n$(touch pwned) `touch pwned2` \"\n"
    );
}

#[test]
fn a_failing_shell_task_stops_the_pipeline() {
    let s = Setup::new();
    let wf = format!(
        "agents:\n{}tasks:\n  - shell: echo one\n  - shell: |\n      exit 3\n      more\n  - shell: touch after\n",
        agent("rev", "cat"),
    );
    let out = s.run(&wf, &[]);
    assert_code(&out, 1);
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert!(
        err.contains("aw-run: task 2 (shell: exit 3) failed: exit status 3"),
        "{err}"
    );
    assert!(!s.dir().join("after").exists());
}

#[test]
fn a_failing_agent_stops_the_pipeline() {
    let s = Setup::new();
    let wf = format!(
        "agents:\n{}tasks:\n  - send: |\n      please review\n      this\n    to: rev\n  - shell: touch after\n",
        agent("rev", "cat >/dev/null; exit 4"),
    );
    let out = s.run(&wf, &["--retries", "1"]);
    assert_code(&out, 1);
    let err = stderr(&out);
    assert!(
        err.contains("aw-run: task 1 (send to rev: please review) failed: rev failed"),
        "{err}"
    );
    assert!(!s.dir().join("after").exists());
}

#[test]
fn json_prints_one_object() {
    let s = Setup::new();
    let wf = format!(
        "agents:\n{}tasks:\n  - shell: echo a\n    as: x\n  - send: hi\n    to: rev\n    as: y\n",
        agent("rev", "cat >/dev/null; echo answer"),
    );
    let out = s.run(&wf, &["--json"]);
    assert_code(&out, 0);
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["output"], "answer");
    assert_eq!(v["results"], serde_json::json!({"x": "a", "y": "answer"}));
    assert!(v["duration_ms"].is_u64());
}

#[test]
fn the_shipped_changeset_example_and_pre_commit_hook_work_in_a_repository() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let s = Setup::new();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
            .args(args)
            .current_dir(s.dir())
            .env("PATH", common::runner::path_with_bins())
            .output()
            .expect("git");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(git(&["init", "-q", "."]).0, Some(0));
    s.write("notes.txt", "hello\n");
    assert_eq!(git(&["add", "notes.txt"]).0, Some(0));

    // The changeset pipeline: the changeset on stdout and in .changeset/.
    let out = run_hang_guarded_file(&s, &repo.join("examples/changeset.yaml"));
    assert_code(&out, 0);
    let changeset = stdout(&out);
    assert!(
        changeset.starts_with("---\n\"aw\": patch\n---\n\nLGTM"),
        "{changeset}"
    );
    let written: Vec<_> = std::fs::read_dir(s.dir().join(".changeset"))
        .unwrap()
        .collect();
    assert_eq!(written.len(), 1);

    // The pre-commit hook lets an approved commit through.
    std::fs::create_dir_all(s.dir().join("examples")).unwrap();
    std::fs::copy(
        repo.join("examples/review.yaml"),
        s.dir().join("examples/review.yaml"),
    )
    .unwrap();
    let hook = s.dir().join(".git/hooks/pre-commit");
    std::fs::copy(repo.join("examples/hooks/pre-commit"), &hook).unwrap();
    let (code, err) = git(&["commit", "-q", "-m", "first"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("LGTM"), "{err}");
    // And stops one the reviewer does not approve.
    let wf = std::fs::read_to_string(s.dir().join("examples/review.yaml")).unwrap();
    s.write(
        "examples/review.yaml",
        &wf.replace("echo \"LGTM", "echo \"NO"),
    );
    s.write("notes.txt", "hello\nagain\n");
    assert_eq!(git(&["add", "notes.txt"]).0, Some(0));
    let (code, err) = git(&["commit", "-q", "-m", "second"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("pre-commit: the review did not approve the change"),
        "{err}"
    );
}

fn run_hang_guarded_file(s: &Setup, file: &std::path::Path) -> std::process::Output {
    common::runner::run_hang_guarded(s.cmd_file(&["-q"], file))
}

#[test]
fn a_send_task_past_its_timeout_stops_the_pipeline() {
    let s = Setup::new();
    let wf = format!(
        "agents:\n{}tasks:\n  - send: take your time\n    to: slow\n    timeout: 0.5s\n  - shell: touch after\n",
        agent("slow", "cat >/dev/null; sleep 30; echo late"),
    );
    let out = s.run(&wf, &[]);
    assert_code(&out, 1);
    let err = stderr(&out);
    assert!(
        err.contains(
            "aw-run: task 1 (send to slow: take your time) failed: no reply from slow after 0.5 s"
        ),
        "{err}"
    );
    assert!(!s.dir().join("after").exists());
    assert_eq!(s.unread("slow"), 1, "the message stays unread");
}

/// `--keep` runs the tasks, prints their result at once, and stays up serving the agents
/// until stopped.
#[test]
fn keep_runs_the_tasks_prints_the_result_and_stays_up() {
    let s = Setup::new();
    let wf = format!(
        "agents:\n{}tasks:\n  - shell: echo first\n    as: a\n  \
         - send: \"${{{{ a }}}} question\"\n    to: bob\n",
        agent("bob", "grep -q hi-there && echo other || echo pong"),
    );
    s.write("wf.yaml", &wf);
    let result = s.dir().join("result.txt");
    let mut cmd = s.cmd(&["--keep"]);
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&result).unwrap())
        .stderr(std::process::Stdio::piped());
    let server = common::runner::Server::new(cmd.spawn().expect("spawn aw-run"));
    common::runner::wait_for("the result on stdout", || {
        std::fs::read_to_string(&result).is_ok_and(|r| r == "pong\n")
    });
    // Still serving bob after the tasks.
    let mut send = s.tool_cmd("aw-send");
    send.args([
        "-i",
        common::runner::INST,
        "--wait",
        "-t",
        "bob",
        "hi-there",
    ]);
    let out = common::runner::run_hang_guarded(send);
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "other\n");
    let out = server.term();
    assert_code(&out, 0);
    assert_eq!(std::fs::read_to_string(&result).unwrap(), "pong\n");
}

/// The file of approval request `id`.
fn approval_file(s: &Setup, id: u64) -> std::path::PathBuf {
    s.root
        .inst_dir(common::runner::INST)
        .join(format!("approvals/{id}.json"))
}

/// What the tasks wrote to `log` in the working directory.
fn log_of(s: &Setup) -> String {
    std::fs::read_to_string(s.dir().join("log")).unwrap_or_default()
}

/// `aw-ctl -i INST ARGS`, which must succeed; its stdout.
fn ctl_ok(s: &Setup, args: &[&str]) -> String {
    let mut all = vec!["-i", common::runner::INST];
    all.extend_from_slice(args);
    s.root.ok("aw-ctl", &all, None)
}

/// A task that needs an approval waits for it across a kill -9 of aw-run: started again,
/// aw-run finds the request it asked (no second request) and runs the task once when it
/// is approved; an approval given while no aw-run runs takes effect at the next start; a
/// rejection fails the workflow without running the task.
#[test]
fn a_task_that_needs_approval_survives_kill_9_and_runs_once() {
    use common::runner::{spawn, wait_for, wait_hang_guarded};
    let s = Setup::new();
    s.write(
        "wf.yaml",
        &format!(
            "agents:\n{}tasks:\n  - shell: echo before >> log\n  \
             - shell: echo ran >> log; echo deployed\n    needs: {{approval: {{by: [user]}}}}\n",
            agent("idle", "cat >/dev/null"),
        ),
    );
    let request = |id: u64| approval_file(&s, id);
    let log = || log_of(&s);
    let ctl = |args: &[&str]| ctl_ok(&s, args);
    let pending_then_kill = |id: u64| {
        let mut run = spawn(s.cmd(&[]));
        wait_for("the approval request", || request(id).exists());
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            run.try_wait().unwrap().is_none(),
            "aw-run ended while it waits"
        );
        run.kill().unwrap();
        run.wait().unwrap();
    };

    pending_then_kill(1);
    assert_eq!(log(), "before\n");
    // Started again: the same request, still pending; approved, the task runs once.
    let mut run = spawn(s.cmd(&[]));
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        run.try_wait().unwrap().is_none(),
        "aw-run ended while it waits"
    );
    assert!(!request(2).exists(), "asked twice");
    assert_eq!(ctl(&["approve", "1"]), "approval 1 approved\n");
    let out = wait_hang_guarded(run);
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "deployed\n", "{}", stderr(&out));
    assert_eq!(log(), "before\nbefore\nran\n");

    // The next run of the workflow asks again; approved while no aw-run runs, the task
    // runs at the next start without waiting.
    pending_then_kill(2);
    ctl(&["approve", "2", "--reason", "go ahead"]);
    let out = wait_hang_guarded(spawn(s.cmd(&[])));
    assert_code(&out, 0);
    assert!(!request(3).exists(), "asked again");
    assert_eq!(log(), "before\nbefore\nran\nbefore\nbefore\nran\n");

    // Rejected: the workflow fails and the task does not run.
    let mut run = spawn(s.cmd(&[]));
    wait_for("the third request", || request(3).exists());
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(run.try_wait().unwrap().is_none());
    ctl(&["reject", "3", "--reason", "not today"]);
    let out = wait_hang_guarded(run);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("task 2 (shell: echo ran >> log; echo deployed): approval #3 rejected by user: not today"),
        "{}",
        stderr(&out)
    );
    assert_eq!(log().matches("ran").count(), 2);
}

/// A setup command that needs an approval runs once it is approved; with `then: skip` and
/// no answer in time it is skipped (its output empty) and the workflow goes on.
#[test]
fn a_setup_command_that_needs_approval_waits_for_it_or_is_skipped() {
    use common::runner::{spawn, wait_for, wait_hang_guarded};
    let s = Setup::new();
    s.write(
        "wf.yaml",
        &format!(
            "agents:\n{}setup:\n  - shell: echo migrated\n    as: m\n    \
             needs: {{approval: {{by: lead, timeout: 2s, then: skip}}}}\n\
             tasks:\n  - shell: echo \"[${{{{ m }}}}]\"\n",
            agent("idle", "cat >/dev/null"),
        ),
    );
    let request = |id: u64| approval_file(&s, id);
    let run = spawn(s.cmd(&[]));
    wait_for("the approval request", || request(1).exists());
    s.root.ok(
        "aw-ctl",
        &["-i", common::runner::INST, "approve", "1", "--as", "lead"],
        None,
    );
    let out = wait_hang_guarded(run);
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "[migrated]\n", "{}", stderr(&out));
    // No answer within 2 s: skipped.
    let out = wait_hang_guarded(spawn(s.cmd(&[])));
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "[]\n", "{}", stderr(&out));
    assert!(request(2).exists() && !request(3).exists());
}

/// An agent with `needs: approval` waits for an approval before each run: killed -9 while
/// it waits and started again, aw-run finds the same request and the agent runs once
/// when it is approved; a rejected run does not happen and its messages are handled.
#[test]
fn an_agent_that_needs_approval_waits_before_each_run_across_kill_9() {
    use common::runner::{spawn, wait_for, wait_hang_guarded};
    let s = Setup::new();
    s.write(
        "wf.yaml",
        &format!(
            "agents:\n{}    needs: {{approval: {{by: lead}}}}\n",
            agent("coder", "cat >/dev/null; echo coded >> log; echo done"),
        ),
    );
    let request = |id: u64| approval_file(&s, id);
    let log = || log_of(&s);
    let ctl = |args: &[&str]| ctl_ok(&s, args);
    // Messages sent before aw-run starts (a kickoff would be posted again at a restart),
    // to the agent registered already.
    ctl(&["new", "coder", "--backend", "external"]);
    s.root
        .send(common::runner::INST, &["--from", "user"], "@coder write it");
    let mut run = spawn(s.cmd(&[]));
    wait_for("the approval request", || request(1).exists());
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(run.try_wait().unwrap().is_none());
    run.kill().unwrap();
    run.wait().unwrap();
    assert_eq!(log(), "", "the agent ran before the approval");

    let mut run = spawn(s.cmd(&[]));
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        run.try_wait().unwrap().is_none(),
        "aw-run ended while it waits"
    );
    assert!(!request(2).exists(), "asked twice");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(request(1)).unwrap()).unwrap();
    assert_eq!(
        (r["kind"].as_str(), r["state"].as_str()),
        (Some("run"), Some("pending"))
    );
    ctl(&["approve", "1", "--as", "lead"]);
    let out = wait_hang_guarded(run);
    assert_code(&out, 0);
    assert_eq!(log(), "coded\n", "{}", stderr(&out));

    // The next run asks again; rejected, the agent does not run and aw-run ends.
    s.root.send(
        common::runner::INST,
        &["--from", "user"],
        "@coder once more",
    );
    let run = spawn(s.cmd(&[]));
    wait_for("the second request", || request(2).exists());
    ctl(&["reject", "2", "--as", "lead", "--reason", "no"]);
    let out = wait_hang_guarded(run);
    assert_code(&out, 0);
    assert!(
        stderr(&out).contains("approval #2 rejected; not run"),
        "{}",
        stderr(&out)
    );
    assert_eq!(log(), "coded\n");
}
