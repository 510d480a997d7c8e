//! aw-ctl ps, stop, runs, status and `new -- PROGRAM` against real aw-run servers: what they
//! show of served agents and their transcripts, and that stop ends a server cleanly.

use crate::common;

use std::collections::BTreeSet;
use std::process::{Command, Output, Stdio};

use common::runner::*;
use common::{assert_error, json_lines, run_with};
use serde_json::{Value, json};

/// What these tests do with a [`Setup`].
trait Ctl {
    fn tool_with(&self, name: &str, args: &[&str]) -> Command;
    fn ctl(&self, args: &[&str]) -> Output;
    fn ctl_ok(&self, args: &[&str]) -> String;
    fn serve(&self, inst: &str, agents: &[&str]) -> Server;
    fn ps(&self, args: &[&str]) -> Vec<Value>;
}

impl Ctl for Setup {
    fn tool_with(&self, name: &str, args: &[&str]) -> Command {
        let mut c = self.tool_cmd(name);
        c.args(args);
        c
    }

    fn ctl(&self, args: &[&str]) -> Output {
        run_with(self.tool_with("aw-ctl", args), None)
    }

    /// aw-ctl with `args`, which must succeed; its stdout.
    fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        assert_code(&out, 0);
        String::from_utf8(out.stdout).expect("UTF-8")
    }

    /// `aw-run --serve --keep` of `agents` in instance `inst`, once it serves them all.
    fn serve(&self, inst: &str, agents: &[&str]) -> Server {
        let mut args = vec!["-i", inst, "--serve", "--keep", "-q", "--backoff", "0.01s"];
        args.extend_from_slice(agents);
        let mut c = self.tool_with("aw-run", &args);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let server = Server::new(c.spawn().expect("spawn aw-run"));
        let pid = server.pid();
        wait_for("the agents to be served", || {
            let ps = self.ps(&["-i", inst]);
            agents
                .iter()
                .all(|a| ps.iter().any(|p| p["agent"] == *a && p["pid"] == pid))
        });
        server
    }

    /// `aw-ctl ps --json` with `args`.
    fn ps(&self, args: &[&str]) -> Vec<Value> {
        let mut all = vec!["ps", "--json"];
        all.extend_from_slice(args);
        json_lines(self.ctl_ok(&all).as_bytes())
    }
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

fn set(words: &[&str]) -> BTreeSet<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[test]
fn ps_and_status_show_a_kept_server_and_stop_ends_it() {
    let s = Setup::new();
    s.ctl_ok(&["-i", INST, "new", "alice", "--backend", "mock"]);
    // Nothing served: no output.
    assert_eq!(s.ctl_ok(&["ps"]), "");
    assert_eq!(s.ctl_ok(&["ps", "--json"]), "");
    let server = s.serve(INST, &["alice"]);
    let pid = server.pid();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let ps = s.ps(&[]);
    assert_eq!(
        ps,
        [
            json!({"instance": INST, "agent": "alice", "host": host, "pid": pid,
                "state": "idle", "runs": 0, "workflow": null})
        ]
    );
    // Not a terminal: no header row.
    let text = s.ctl_ok(&["ps"]);
    let cols: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(
        cols,
        [
            INST,
            "alice",
            &host,
            pid.to_string().as_str(),
            "idle",
            "0",
            "-"
        ],
        "{text}"
    );
    // A mention: one run, then idle again with nothing unread.
    s.root.send(INST, &[], "@alice hello");
    wait_for("the run", || {
        s.ps(&[])[0]["runs"] == 1 && s.ps(&[])[0]["state"] == "idle" && s.unread("alice") == 0
    });
    // status shows the controller of a served agent.
    let st: Value = serde_json::from_str(&s.ctl_ok(&["-i", INST, "status", "--json"])).unwrap();
    assert_eq!(
        st["agents"][0]["controller"],
        json!({"state": "idle", "host": host, "pid": pid, "runs": 1})
    );
    let text = s.ctl_ok(&["-i", INST, "status"]);
    assert!(
        text.contains(&format!(
            "alice            idle     0 unread  [aw-run pid {pid}, 1 run(s)]"
        )),
        "{text}"
    );
    // stop AGENT@INSTANCE: a clean exit, and nothing served any more.
    let out = s.ctl(&["stop", "alice@w"]);
    assert_code(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("stopped alice@w (aw-run pid {pid})\n")
    );
    assert_code(&server.wait(), 0);
    assert_eq!(s.ctl_ok(&["ps"]), "");
    let st: Value = serde_json::from_str(&s.ctl_ok(&["-i", INST, "status", "--json"])).unwrap();
    assert_eq!(st["agents"][0]["controller"], Value::Null);
    assert!(!s.ctl_ok(&["-i", INST, "status"]).contains("aw-run pid"));
}

#[test]
fn stop_during_a_slow_exec_run_kills_the_backend_and_leaves_the_message_unread() {
    let s = Setup::new();
    s.script(
        "slow.sh",
        "cat > /dev/null\necho $$ > \"$1\"\nsleep 1000 &\nwait\n",
    );
    let pgid_file = s.dir().join("pgid");
    let pgid_arg = pgid_file.to_str().unwrap();
    s.ctl_ok(&[
        "-i",
        INST,
        "new",
        "slow",
        "--backend",
        "exec",
        "--",
        "./slow.sh",
        pgid_arg,
    ]);
    let server = s.serve(INST, &["slow"]);
    s.root.send(INST, &[], "@slow take your time");
    wait_for("the backend to start", || {
        std::fs::read_to_string(&pgid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let pgid: u32 = std::fs::read_to_string(&pgid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(s.ps(&[])[0]["state"], "running");
    // One state per agent: the controller's, never `idle` beside `running`.
    let text = s.ctl_ok(&["-i", INST, "status"]);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("slow "))
        .unwrap();
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&cols[..4], ["slow", "running", "1", "unread"], "{text}");
    assert!(!line.contains("idle"), "{text}");
    // AGENT with -i.
    let out = s.ctl(&["-i", INST, "stop", "slow"]);
    assert_code(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("stopped slow@w (aw-run pid {})\n", server.pid())
    );
    assert_code(&server.wait(), 0);
    wait_for("the backend group to be gone", || {
        group_members(pgid).is_empty()
    });
    assert_eq!(s.unread("slow"), 1);
    let t: Value = serde_json::from_str(&s.ctl_ok(&["-i", INST, "runs", "slow", "1", "--json"]))
        .expect("one JSON line");
    assert_eq!(t["status"], "killed");
    assert_eq!(t["command"][1], pgid_arg);
}

#[test]
fn stop_an_instance_or_all_stops_every_server_and_unserved_is_refused() {
    let s = Setup::new();
    for addr in ["a1@w", "a2@w", "b@v"] {
        s.ctl_ok(&["new", addr, "--backend", "mock"]);
    }
    // Two servers of one instance: stop @INSTANCE.
    let one = s.serve(INST, &["a1"]);
    let two = s.serve(INST, &["a2"]);
    let out = s.ctl(&["stop", "@w"]);
    assert_code(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        text,
        format!(
            "stopped a1@w (aw-run pid {})\nstopped a2@w (aw-run pid {})\n",
            one.pid(),
            two.pid()
        )
    );
    assert_code(&one.wait(), 0);
    assert_code(&two.wait(), 0);
    // Servers of two instances: stop --all.
    let one = s.serve(INST, &["a1", "a2"]);
    let two = s.serve("v", &["b"]);
    assert_eq!(s.ps(&[]).len(), 3);
    assert_eq!(s.ps(&["-i", "v"]).len(), 1);
    let out = s.ctl(&["stop", "--all"]);
    assert_code(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3);
    assert_code(&one.wait(), 0);
    assert_code(&two.wait(), 0);
    assert!(s.ps(&[]).is_empty());
    // Nothing served: --all says nothing; a named agent or instance is refused.
    assert_eq!(s.ctl_ok(&["stop", "--all"]), "");
    let before = common::snapshot(s.root.path());
    let line = assert_error(&s.ctl(&["stop", "a1@w"]), "aw-ctl", 1, "unserved agent");
    assert!(line.contains("a1@w: not served"), "{line}");
    let line = assert_error(&s.ctl(&["stop", "@v"]), "aw-ctl", 1, "unserved instance");
    assert!(line.contains("not served"), "{line}");
    assert_error(
        &s.ctl(&["stop", "x@nope"]),
        "aw-ctl",
        66,
        "no such instance",
    );
    assert_error(&s.ctl(&["stop", "a b"]), "aw-ctl", 65, "bad name");
    assert_error(&s.ctl(&["stop", "@../x"]), "aw-ctl", 65, "bad instance");
    assert_error(&s.ctl(&["stop"]), "aw-ctl", 64, "no target");
    assert_error(&s.ctl(&["stop", "a1@w", "--all"]), "aw-ctl", 64, "both");
    common::assert_same_tree(&before, &common::snapshot(s.root.path()), "root");
}

#[test]
fn runs_lists_and_shows_transcripts_and_skips_a_damaged_one() {
    let s = Setup::new();
    s.script(
        "big.sh",
        "cat > /dev/null\nhead -c 70000 /dev/zero | tr '\\0' x\necho oops >&2\nexit 3\n",
    );
    s.write(
        "wf.yaml",
        "\
agents:
  alice:
    command: [./big.sh, 'two words']
    reply_fallback: false
  bob:
    mock:
      replies: ['done']
kickoff: '@alice @bob go'
",
    );
    let out = run_with(
        s.tool_with("aw-run", &["-i", INST, "-q", "--retries", "1", "wf.yaml"]),
        None,
    );
    assert_code(&out, 1);
    // The list, in order (agent, n).
    let text = s.ctl_ok(&["-i", INST, "runs"]);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert_eq!(rows[0].len(), 10, "{text}");
    assert_eq!(
        (rows[0][..6].to_vec(), rows[0][8], rows[0][9]),
        (vec!["alice", "1", "1", "1", "failed", "3"], "1", "-")
    );
    assert_eq!(
        (rows[1][..6].to_vec(), rows[1][8], rows[1][9]),
        (vec!["bob", "1", "1", "1", "ok", "-"], "1", "2")
    );
    assert!(common::is_timestamp(rows[0][7]), "{text}");
    assert_eq!(s.ctl_ok(&["-i", INST, "runs", "bob"]).lines().count(), 1);
    // --json: each transcript without its texts, plus n.
    let list = json_lines(s.ctl_ok(&["-i", INST, "runs", "--json"]).as_bytes());
    assert_eq!(list.len(), 2);
    let want = set(&[
        "agent",
        "run",
        "attempt",
        "status",
        "reason",
        "exit_code",
        "started",
        "duration_ms",
        "inbox",
        "reply",
        "usage",
        "command",
        "stdout_cut",
        "stderr_cut",
        "server",
        "n",
    ]);
    for t in &list {
        assert_eq!(keys(t), want, "{t}");
    }
    assert_eq!(list[0]["stdout_cut"], 70000 - 65536);
    assert_eq!(list[1]["agent"], "bob");
    assert_eq!(list[1]["n"], 1);
    // One transcript: its fields, command, texts, the cut, and the prompt.
    let text = s.ctl_ok(&["runs", "alice@w", "1"]);
    assert!(text.contains("\nstatus:   failed\n"), "{text}");
    assert!(text.contains("\nexit:     3\n"), "{text}");
    let command = text.lines().find(|l| l.starts_with("command:")).unwrap();
    assert!(command.ends_with("big.sh 'two words'"), "{command}");
    assert!(text.contains(&format!("--- stdout ---\n{}", "x".repeat(100))));
    assert!(
        text.contains("--- stdout: 4464 more bytes were cut ---\n"),
        "cut note"
    );
    assert!(
        text.contains("--- stderr ---\noops\n--- prompt ---\n"),
        "stderr"
    );
    assert!(text.contains("@alice @bob go"), "prompt");
    // --json: the whole file on one line.
    let out = s.ctl_ok(&["-i", INST, "runs", "alice", "1", "--json"]);
    assert_eq!(out.lines().count(), 1);
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(s.transcript_path("alice", 1)).unwrap())
            .unwrap();
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), file);
    // Unknown run, unknown agent, a run that is no number, a bad name.
    let line = assert_error(
        &s.ctl(&["-i", INST, "runs", "alice", "2"]),
        "aw-ctl",
        66,
        "N",
    );
    assert!(line.contains("no transcript 2 of alice@w"), "{line}");
    assert_error(
        &s.ctl(&["-i", INST, "runs", "nobody"]),
        "aw-ctl",
        66,
        "agent",
    );
    assert_error(
        &s.ctl(&["-i", INST, "runs", "nobody", "1"]),
        "aw-ctl",
        66,
        "agent N",
    );
    assert_error(
        &s.ctl(&["-i", INST, "runs", "alice", "one"]),
        "aw-ctl",
        64,
        "not N",
    );
    assert_error(
        &s.ctl(&["-i", INST, "runs", "a/b"]),
        "aw-ctl",
        65,
        "bad name",
    );
    assert_error(&s.ctl(&["-i", "nope", "runs"]), "aw-ctl", 66, "instance");
    // A damaged transcript: named with exit 65 when shown, skipped with a warning in a list.
    std::fs::write(s.transcript_path("bob", 2), "{\"agent\": \"bob\"").unwrap();
    std::fs::write(s.transcript_path("bob", 3), "{\"agent\": \"bob\"}").unwrap();
    let line = assert_error(
        &s.ctl(&["-i", INST, "runs", "bob", "2"]),
        "aw-ctl",
        65,
        "damaged",
    );
    assert!(line.contains("bob/2.json: damaged transcript"), "{line}");
    let out = s.ctl(&["-i", INST, "runs"]);
    assert_code(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.contains("bob/2.json: damaged") && err.contains("bob/3.json: damaged"),
        "{err}"
    );
    assert_eq!(
        json_lines(&s.ctl(&["-i", INST, "runs", "--json"]).stdout).len(),
        2
    );
}

#[test]
fn new_with_a_command_registers_an_exec_agent_that_aw_run_serves() {
    let s = Setup::new();
    s.script(
        "reply.sh",
        "cat > /dev/null\necho \"got $1 from $AW_AGENT\"\n",
    );
    let out = s.ctl_ok(&[
        "-i",
        INST,
        "new",
        "helper",
        "--backend",
        "exec",
        "--",
        "./reply.sh",
        "--flag",
    ]);
    assert_eq!(out, "helper@w\n");
    // Without --backend a command means exec; a bare program name stays as it is.
    s.ctl_ok(&["-i", INST, "new", "lister", "--", "ls", "-l"]);
    let reg: Value = serde_json::from_str(
        &std::fs::read_to_string(s.root.inst_dir(INST).join("_state/agents.json")).unwrap(),
    )
    .unwrap();
    let program = s.dir().join("reply.sh").to_str().unwrap().to_string();
    assert_eq!(reg["agents"][0]["backend"], "exec");
    assert_eq!(reg["agents"][0]["command"], json!([program, "--flag"]));
    assert_eq!(reg["agents"][1]["backend"], "exec");
    assert_eq!(reg["agents"][1]["command"], json!(["ls", "-l"]));
    // Refused, and nothing changes.
    let before = common::snapshot(s.root.path());
    let cases: [(&[&str], &str); 4] = [
        (&["new", "x", "--backend", "exec"], "needs a command"),
        (&["new", "x", "--backend", "exec", "--"], "needs a command"),
        (&["new", "x", "--backend", "mock", "--", "ls"], "not mock"),
        (
            &[
                "new",
                "x",
                "-m",
                "claude-x",
                "--backend",
                "claude",
                "--",
                "ls",
            ],
            "not claude",
        ),
    ];
    for (args, what) in cases {
        let mut all = vec!["-i", INST];
        all.extend_from_slice(args);
        let line = assert_error(&s.ctl(&all), "aw-ctl", 64, what);
        assert!(line.contains(what), "{line}");
    }
    common::assert_same_tree(&before, &common::snapshot(s.root.path()), "root");
    // Served by aw-run --serve: a mention runs it.
    let server = s.serve(INST, &["helper"]);
    s.root.send(INST, &[], "@helper hi");
    wait_for("the reply", || {
        s.root
            .entries(INST)
            .iter()
            .any(|e| e.from == "helper" && e.message.trim_end() == "got --flag from helper")
    });
    // The inbox is acknowledged once the run is over, a moment after its reply.
    wait_for("the inbox to be acknowledged", || s.unread("helper") == 0);
    s.ctl_ok(&["stop", "helper@w"]);
    assert_code(&server.wait(), 0);
}
