//! aw-run: workflows run to their end with the real binary, mock and exec backends,
//! retries, setup, serving locks, the loop guard, and what happens to backends when aw-run
//! dies.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::runner::*;
use common::{assert_error, run_with};

const HELLO: &str = "\
agents:
  alice:
    mock:
      replies: ['@bob what is the answer?', 'Thanks, done.']
  bob:
    mock:
      replies: ['@alice the answer is 42.']
kickoff: '@alice ask bob'
";

#[test]
fn kickoff_wakes_agents_and_chain_ends_with_inboxes_acked() {
    let s = Setup::new();
    let out = s.run(HELLO, &[]);
    assert_code(&out, 0);
    let entries = s.entries();
    let want = [
        ("system", "@alice ask bob"),
        ("alice", "@bob what is the answer?"),
        ("bob", "@alice the answer is 42."),
        ("alice", "Thanks, done."),
    ];
    let got: Vec<(&str, &str)> = entries
        .iter()
        .map(|(f, m)| (f.as_str(), m.as_str()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(s.unread("alice"), 0);
    assert_eq!(s.unread("bob"), 0);
    let err = stderr(&out);
    assert!(err.contains("alice: run 2 ok"), "{err}");
    assert!(
        err.contains("summary: alice 2 run(s) 0 failure(s) "),
        "{err}"
    );
    assert!(err.contains(", bob 1 run(s) 0 failure(s) "), "{err}");
    // The channel's entries, as they arrived, on stdout.
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(printed.lines().count(), 4, "{printed}");
    assert!(
        printed.contains("@bob: @alice the answer is 42."),
        "{printed}"
    );
    // Transcripts: one per run, with the inbox handled and the reply written.
    let t = s.transcript("bob", 1);
    assert_eq!(t["status"], "ok");
    assert_eq!(t["inbox"], serde_json::json!([2]));
    assert_eq!(t["reply"], serde_json::json!([3]));
    assert!(
        t["prompt"]
            .as_str()
            .unwrap()
            .contains("## Inbox (1 message for you)")
    );
    assert!(
        t["prompt"]
            .as_str()
            .unwrap()
            .contains("- From @alice: @bob what is the answer?")
    );
    // The registry holds both agents with their backend.
    let reg = std::fs::read_to_string(s.root.inst_dir(INST).join("_state/agents.json")).unwrap();
    assert!(
        reg.contains("\"alice\"") && reg.contains("\"mock\""),
        "{reg}"
    );
}

#[test]
fn default_mock_reply_names_the_count_and_ends() {
    let s = Setup::new();
    let wf = "agents:\n  alice:\n    mock: {}\nkickoff: '@alice hi'\n";
    let out = s.run(wf, &["--json"]);
    assert_code(&out, 0);
    assert_eq!(
        s.entries()[1],
        ("alice".into(), "alice: handled 1 message(s)".into())
    );
    let events = common::json_lines(&out.stdout);
    let of = |kind: &str| -> Vec<&serde_json::Value> {
        events.iter().filter(|e| e["event"] == kind).collect()
    };
    // Entries are printed by the channel watcher and run events by the controllers, so the
    // two interleave in either order; the summary comes last.
    let (entries, runs) = (of("entry"), of("run"));
    assert_eq!(
        (entries.len(), of("start").len(), runs.len(), events.len()),
        (2, 1, 1, 5),
        "{events:?}"
    );
    assert_eq!(entries[0]["message"], "@alice hi");
    assert_eq!(entries[1]["from"], "alice");
    assert_eq!(runs[0]["status"], "ok");
    let summary = &events[4];
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["agents"]["alice"]["runs"], 1);
    assert!(summary["agents"]["alice"]["duration_ms"].is_u64());
}

#[test]
fn ack_only_after_success_retries_then_succeeds() {
    let s = Setup::new();
    let wf = "agents:\n  alice:\n    mock: {fail: 2, replies: [ok]}\nkickoff: '@alice hi'\n";
    let out = s.run(wf, &[]);
    assert_code(&out, 0);
    assert_eq!(s.entries().len(), 2);
    assert_eq!(s.unread("alice"), 0);
    assert_eq!(s.statuses("alice", 3), ["failed", "failed", "ok"]);
    assert_eq!(s.transcript("alice", 3)["attempt"], 3);
    assert!(
        s.transcript("alice", 2)["prompt"]
            .as_str()
            .unwrap()
            .contains("attempt 2")
    );
}

#[test]
fn failing_agent_leaves_messages_unread_and_exit_1_names_it() {
    let s = Setup::new();
    let wf = "\
agents:
  alice:
    mock: {fail: 99}
  bob:
    mock: {}
kickoff: '@alice @bob hi'
";
    let out = s.run(wf, &[]);
    assert_code(&out, 1);
    let err = stderr(&out);
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("aw-run: alice failed"), "{err}");
    assert!(last.contains("unread"), "{err}");
    // One failure does not stop the other agent.
    assert_eq!(s.unread("alice"), 1);
    assert_eq!(s.unread("bob"), 0);
    assert!(s.entries().iter().any(|(f, _)| f == "bob"));
    // Three attempts, no more (no hot loop).
    assert!(
        err.contains("summary: alice 1 run(s) 3 failure(s)"),
        "{err}"
    );
}

#[test]
fn exec_agent_gets_prompt_and_environment_and_posts_with_aw_send() {
    let s = Setup::new();
    s.script(
        "agent.sh",
        "cat > prompt.txt\n\
         printf '%s|%s|%s|%s\\n' \"$AW_AGENT\" \"$AW_INSTANCE\" \"$AW_RUN\" \"$GREETING\" > env.txt\n\
         cp \"$AW_MCP_CONFIG\" mcp.json\n\
         aw-send \"done by $AW_AGENT\" > /dev/null\n",
    );
    let wf = "\
agents:
  alice:
    command: [./agent.sh]
    env: {GREETING: hello}
kickoff: '@alice go'
";
    let out = s.run(wf, &[]);
    assert_code(&out, 0);
    assert_eq!(s.entries()[1], ("alice".into(), "done by alice".into()));
    let env = std::fs::read_to_string(s.dir().join("env.txt")).unwrap();
    assert_eq!(env, format!("alice|{INST}|1|hello\n"));
    let prompt = std::fs::read_to_string(s.dir().join("prompt.txt")).unwrap();
    assert!(prompt.contains("- From @system: @alice go"), "{prompt}");
    let mcp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.dir().join("mcp.json")).unwrap()).unwrap();
    assert_eq!(
        mcp["mcpServers"]["aw"]["args"],
        serde_json::json!(["--agent", format!("alice@{INST}")])
    );
    assert_eq!(s.unread("alice"), 0);
    // The transcript never holds environment values.
    let t = s.transcript("alice", 1).to_string();
    assert!(!t.contains("hello"), "{t}");
}

#[test]
fn exec_stdout_is_posted_when_the_agent_wrote_nothing() {
    let s = Setup::new();
    s.script("agent.sh", "cat > /dev/null\necho 'final answer'\n");
    let wf = "agents:\n  alice:\n    command: [./agent.sh]\nkickoff: '@alice go'\n";
    let out = s.run(wf, &[]);
    assert_code(&out, 0);
    assert_eq!(s.entries()[1], ("alice".into(), "final answer".into()));
    // Not with reply_fallback: false.
    let s = Setup::new();
    s.script("agent.sh", "cat > /dev/null\necho 'final answer'\n");
    let wf = "agents:\n  alice:\n    command: [./agent.sh]\n    reply_fallback: false\nkickoff: '@alice go'\n";
    assert_code(&s.run(wf, &[]), 0);
    assert_eq!(s.entries().len(), 1);
}

#[test]
fn setup_outputs_and_vars_are_data_never_code() {
    let s = Setup::new();
    let evil = "$(touch p1) `touch p2` '; touch p3; ' \"; touch p4\nphase2; touch p5";
    s.write("evil.txt", evil);
    let wf = "\
agents:
  alice:
    mock: {}
setup:
  - shell: cat evil.txt
    as: evil
  - shell: printf '%s' ${{ evil }} > copy1.txt
  - shell: printf '%s' \"${{ evil }}\" > copy2.txt
  - shell: printf '%s' ${{ v }} > copy3.txt
kickoff: |
  @alice ${{ evil }}
";
    let out = s.run(wf, &["--var", &format!("v={evil}")]);
    assert_code(&out, 0);
    for f in ["p1", "p2", "p3", "p4", "p5"] {
        assert!(
            !s.dir().join(f).exists(),
            "{f} was created: {}",
            stderr(&out)
        );
    }
    for f in ["copy1.txt", "copy2.txt", "copy3.txt"] {
        assert_eq!(
            std::fs::read_to_string(s.dir().join(f)).unwrap(),
            evil,
            "{f}"
        );
    }
    assert_eq!(s.entries()[0].1, format!("@alice {evil}"));
}

#[test]
fn setup_failure_stops_before_the_kickoff() {
    let s = Setup::new();
    let wf = "\
agents:
  alice:
    mock: {}
setup:
  - shell: echo fine
  - shell: |
      exit 3
      echo never
kickoff: '@alice hi'
";
    let out = s.run(wf, &[]);
    let line = assert_error(&out, "aw-run", 1, "setup failure");
    assert!(
        line.contains("setup task 2 (exit 3)") && line.contains("exit status 3"),
        "{line}"
    );
    let chan = s.root.channel(INST);
    assert!(!chan.exists() || s.entries().is_empty(), "kickoff posted");
}

#[test]
fn per_run_timeout_kills_the_backend_group() {
    let s = Setup::new();
    s.script("slow.sh", "echo $$ > pgid\nsleep 1000 &\nwait\n");
    let wf = "\
agents:
  alice:
    command: [./slow.sh]
    timeout: 0.2s
kickoff: '@alice go'
";
    let out = s.run(wf, &["--retries", "1"]);
    assert_code(&out, 1);
    let err = stderr(&out);
    assert!(err.contains("alice: run 1 timeout"), "{err}");
    assert_eq!(s.transcript("alice", 1)["status"], "timeout");
    let pgid: u32 = std::fs::read_to_string(s.dir().join("pgid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_for("the backend group to be gone", || {
        group_members(pgid).is_empty()
    });
    assert_eq!(s.unread("alice"), 1);
}

#[test]
fn kill_9_of_aw_run_takes_the_backend_with_it_and_a_new_run_resumes() {
    let s = Setup::new();
    s.script(
        "agent.sh",
        "cat > /dev/null\n\
         if [ ! -e started ]; then touch started; echo $$ > pid; exec sleep 1000; fi\n\
         aw-send 'handled again' > /dev/null\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    command: [./agent.sh]\nkickoff: '@alice go'\n",
    );
    let mut first = spawn(s.cmd(&[]));
    let pidfile = s.dir().join("pid");
    wait_for("the backend to start", || {
        std::fs::read_to_string(&pidfile).is_ok_and(|t| t.ends_with('\n'))
    });
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    first.kill().expect("kill -9 aw-run");
    first.wait().expect("reap aw-run");
    wait_for("the backend to die with aw-run", || !alive(pid));
    assert_eq!(s.unread("alice"), 1);
    // A new aw-run handles the message the killed one left unacknowledged; no new kickoff
    // is wanted, so run a workflow without one.
    s.write("wf.yaml", "agents:\n  alice:\n    command: [./agent.sh]\n");
    let out = run_hang_guarded(s.cmd(&[]));
    assert_code(&out, 0);
    let entries = s.entries();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1], ("alice".into(), "handled again".into()));
    assert_eq!(s.unread("alice"), 0);
}

/// Reads a pid that a script wrote to `file` in the working directory, once it is whole.
fn read_pid(s: &Setup, file: &str) -> u32 {
    let path = s.dir().join(file);
    wait_for(file, || {
        std::fs::read_to_string(&path).is_ok_and(|t| t.ends_with('\n'))
    });
    std::fs::read_to_string(&path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The parent of a live process.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The live children of `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if let Ok(child) = e.file_name().to_string_lossy().parse::<u32>()
            && parent_of(child) == Some(pid)
            && alive(child)
        {
            out.push(child);
        }
    }
    out
}

/// Kills a process group that a failed test would leave behind.
struct KillOnPanic(u32);

impl Drop for KillOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.0)])
                .status();
        }
    }
}

#[test]
fn kill_9_of_aw_run_takes_the_backends_whole_group_with_it() {
    // aw-run alone is killed, then aw-run with its whole process group (as a shell's
    // `kill -9 %1` does): either way the programs the backend started die too.
    for whole_group in [false, true] {
        let s = Setup::new();
        s.script(
            "agent.sh",
            "cat > /dev/null\n\
             sleep 1000 & echo $! > child1\n\
             sleep 1001 & echo $! > child2\n\
             echo $$ > pgid\n\
             wait\n",
        );
        s.write(
            "wf.yaml",
            "agents:\n  alice:\n    command: [./agent.sh]\nkickoff: '@alice go'\n",
        );
        let mut cmd = s.cmd(&[]);
        if whole_group {
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        }
        let mut aw_run = spawn(cmd);
        let pgid = read_pid(&s, "pgid");
        let _cleanup = KillOnPanic(pgid);
        let children = [read_pid(&s, "child1"), read_pid(&s, "child2")];
        assert!(children.iter().all(|&c| alive(c)));
        assert_eq!(
            group_members(pgid).len(),
            3,
            "the script and its two children"
        );
        if whole_group {
            Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", aw_run.id())])
                .status()
                .expect("kill -9 the group of aw-run");
        } else {
            aw_run.kill().expect("kill -9 aw-run");
        }
        aw_run.wait().expect("reap aw-run");
        wait_for("the backend's children to die with aw-run", || {
            children.iter().all(|&c| !alive(c))
        });
        wait_for("the backend's group to be empty", || {
            group_members(pgid).is_empty()
        });
        assert_eq!(s.unread("alice"), 1);
    }
}

#[test]
fn kill_9_of_aw_run_takes_a_setup_or_task_shell_with_it() {
    // The shell of a setup task, then of a pipeline's shell task, each with a child of its
    // own in the background: a kill -9 of aw-run leaves neither running.
    let line = "'sleep 1000 & echo $! > child; echo $$ > pgid; wait'";
    for wf in [
        format!("agents:\n  alice: {{mock: {{}}}}\nsetup:\n  - shell: {line}\n"),
        format!("agents:\n  alice: {{mock: {{}}}}\ntasks:\n  - shell: {line}\n"),
    ] {
        let s = Setup::new();
        s.write("wf.yaml", &wf);
        let mut aw_run = spawn(s.cmd(&[]));
        let pgid = read_pid(&s, "pgid");
        let _cleanup = KillOnPanic(pgid);
        let child = read_pid(&s, "child");
        assert!(alive(child));
        assert_eq!(
            group_members(pgid).len(),
            2,
            "{wf}: the shell and its child"
        );
        aw_run.kill().expect("kill -9 aw-run");
        aw_run.wait().expect("reap aw-run");
        wait_for("the shell's child to die with aw-run", || !alive(child));
        wait_for("the shell's group to be empty", || {
            group_members(pgid).is_empty()
        });
    }
}

#[test]
fn the_guard_holds_no_output_of_aw_run_and_ends_with_it() {
    let s = Setup::new();
    s.script(
        "agent.sh",
        "cat > /dev/null\n\
         echo $$ > pid\n\
         while [ ! -e go ]; do sleep 0.01; done\n\
         echo done\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    command: [./agent.sh]\nkickoff: '@alice go'\n",
    );
    let aw_run = Server::new(spawn(s.cmd(&[])));
    let backend = read_pid(&s, "pid");
    let others: Vec<u32> = children_of(aw_run.pid())
        .into_iter()
        .filter(|&c| c != backend)
        .collect();
    assert_eq!(others.len(), 1, "one guard beside the backend: {others:?}");
    let guard = others[0];
    // Its own process group: signals to the group of aw-run do not reach it.
    let stat = std::fs::read_to_string(format!("/proc/{guard}/stat")).unwrap();
    assert_eq!(stat_pgrp(&stat), Some(guard));
    // Its stdin is the pipe from aw-run; it holds nothing else, so a caller reading the
    // output of aw-run to its end never waits for the guard.
    let fds: Vec<(String, String)> = std::fs::read_dir(format!("/proc/{guard}/fd"))
        .unwrap()
        .flatten()
        .map(|e| {
            let target = std::fs::read_link(e.path()).unwrap_or_default();
            (
                e.file_name().to_string_lossy().into_owned(),
                target.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let mut names: Vec<&str> = fds.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(names, ["0", "1", "2"], "{fds:?}");
    for (name, target) in &fds {
        match name.as_str() {
            "0" => assert!(target.starts_with("pipe:"), "{fds:?}"),
            _ => assert_eq!(target, "/dev/null", "{fds:?}"),
        }
    }
    std::fs::write(s.dir().join("go"), "").unwrap();
    // stdout and stderr read to their end.
    let out = aw_run.wait();
    assert_code(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("@alice: done"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    wait_for("the guard to end with aw-run", || !alive(guard));
}

#[test]
fn second_runner_for_a_served_agent_is_refused_and_sigint_stops_the_first() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    mock: {delay: 30s}\nkickoff: '@alice go'\n",
    );
    let first = spawn(s.cmd(&[]));
    let lock = s.root.inst_dir(INST).join("_state/serve/alice.lock");
    let me = first.id().to_string();
    wait_for("the serving lock", || {
        // Its pid on the first line, then its host name and host id.
        std::fs::read_to_string(&lock).is_ok_and(|t| t.lines().next() == Some(me.as_str()))
    });
    // The first runner has posted its kickoff and is running alice (so the kickoff's post,
    // index included, is complete before the snapshot).
    wait_for("the kickoff", || {
        s.root.channel(INST).exists() && s.entries().len() == 1
    });
    let state = s.root.inst_dir(INST).join("_state/serve/alice.json");
    wait_for("alice running", || {
        std::fs::read_to_string(&state).is_ok_and(|t| t.contains("\"state\":\"running\""))
    });
    // The attempt's output log is opened just after the state is published.
    let log = s.root.inst_dir(INST).join("_state/runs/alice/1.log");
    wait_for("the attempt's log", || log.exists());
    // And its MCP configuration, written as the run starts, in any order with the log.
    let mcp = s.root.inst_dir(INST).join("_state/mcp/alice.json");
    wait_for("the attempt's MCP configuration", || mcp.exists());
    let before = common::snapshot(&s.root.inst_dir(INST));
    let out = run_with(s.cmd(&[]), None);
    let line = assert_error(&out, "aw-run", 75, "second runner");
    assert!(
        line.contains("alice@w") && line.contains(&format!("pid {me}")),
        "{line}"
    );
    common::assert_same_tree(
        &before,
        &common::snapshot(&s.root.inst_dir(INST)),
        "instance",
    );
    assert_eq!(s.entries().len(), 1, "the second runner posted");
    // SIGINT: a clean stop, exit 130, the message left unread.
    Command::new("kill")
        .args(["-INT", &me])
        .status()
        .expect("kill -INT");
    let out = first.wait_with_output().expect("wait");
    assert_code(&out, 130);
    assert_eq!(s.unread("alice"), 1);
    assert_eq!(s.transcript("alice", 1)["status"], "killed");
}

#[test]
fn loop_guard_stops_agents_that_mention_each_other_forever() {
    let s = Setup::new();
    let wf = "\
agents:
  alice:
    mock: {replies: ['@bob ping']}
  bob:
    mock: {replies: ['@alice pong']}
kickoff: '@alice start'
";
    let out = s.run(wf, &["--max-runs", "5", "-q"]);
    assert_code(&out, 1);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("aw-run: loop guard: alice, bob reached the run limit"),
        "{err}"
    );
    assert_eq!(s.entries().len(), 11);
}

#[test]
fn workflow_timeout_bounds_the_run() {
    let s = Setup::new();
    let wf = "agents:\n  alice:\n    mock: {delay: 30s}\nkickoff: '@alice go'\n";
    let out = s.run(wf, &["--timeout", "0.3s", "-q"]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("timeout: the workflow was not done after 0.3 s"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn check_reports_line_and_column_and_changes_nothing() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    mock: {}\n    colour: red\n",
    );
    let out = run_with(s.cmd(&["--check"]), None);
    assert_code(&out, 65);
    let err = stderr(&out);
    assert!(err.starts_with("wf.yaml:4:5: "), "{err}");
    assert!(!s.root.inst_dir(INST).exists());
    s.write("wf.yaml", HELLO);
    let out = run_with(s.cmd(&["--check"]), None);
    assert_code(&out, 0);
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    assert!(!s.root.inst_dir(INST).exists());
}

#[test]
fn examples_run_to_their_end() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for (file, entries) in [("hello.yaml", 4), ("exec-agent.yaml", 3)] {
        let s = Setup::new();
        let c = s.cmd_file(&[], &repo.join("examples").join(file));
        let out = run_hang_guarded(c);
        assert_code(&out, 0);
        assert_eq!(s.entries().len(), entries, "{file}");
    }
}

#[test]
fn bad_input_is_refused_with_its_exit_code_and_writes_nothing() {
    let s = Setup::new();
    s.write("wf.yaml", HELLO);
    let cases: [(&[&str], i32, &str); 4] = [
        (&["--var", "novalue"], 64, "--var 'novalue'"),
        (&["--max-runs", "0"], 64, "--max-runs"),
        (&["--debounce", "soon"], 64, "--debounce 'soon'"),
        (&["--retries", "x"], 64, "--retries"),
    ];
    for (args, code, what) in cases {
        let out = run_with(s.cmd(args), None);
        let line = assert_error(&out, "aw-run", code, what);
        assert!(line.contains(what), "{line}");
    }
    let out = run_with(s.cmd_file(&[], Path::new("missing.yaml")), None);
    let line = assert_error(&out, "aw-run", 66, "missing file");
    assert!(line.contains("missing.yaml"), "{line}");
    // A backend this version cannot run: refused before anything is written.
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    backend: claude\nkickoff: '@alice hi'\n",
    );
    let out = run_with(s.cmd(&[]), None);
    let line = assert_error(&out, "aw-run", 69, "claude backend");
    assert!(line.contains("alice: the claude backend"), "{line}");
    assert!(!s.root.inst_dir(INST).exists());
}

#[test]
fn ack_stops_at_the_last_message_the_prompt_showed() {
    let s = Setup::new();
    // The first run waits until the test has sent a second message.
    s.script(
        "agent.sh",
        "cat > /dev/null\n\
         if [ ! -e started ]; then touch started; while [ ! -e go ]; do sleep 0.01; done; fi\n\
         aw-send \"run $AW_RUN\" > /dev/null\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    command: [./agent.sh]\nkickoff: '@alice one'\n",
    );
    let child = spawn(s.cmd(&[]));
    wait_for("the first run", || s.dir().join("started").exists());
    let second = s.root.send(INST, &[], "@alice two");
    std::fs::write(s.dir().join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_code(&out, 0);
    assert_eq!(s.transcript("alice", 1)["inbox"], serde_json::json!([1]));
    assert_eq!(
        s.transcript("alice", 2)["inbox"],
        serde_json::json!([second])
    );
    let from_alice: Vec<String> = s
        .entries()
        .into_iter()
        .filter(|(f, _)| f == "alice")
        .map(|(_, m)| m)
        .collect();
    assert_eq!(from_alice, ["run 1", "run 2"]);
    assert_eq!(s.unread("alice"), 0);
}
