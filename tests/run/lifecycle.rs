//! Lifecycle hooks (`hooks:` in a workflow) with real processes: a hook's "not yet" (exit 2)
//! runs the agent again with its message; what a hook is given on stdin and in its
//! environment; a hook that hangs is killed at its timeout with its whole group; `on_quiet`,
//! `on_idle`, `on_approval`, `on_card_done` and `on_budget` fire; a bad key is refused.

use crate::common;

use std::path::Path;

use aw::board::State;
use common::runner::{INST, Server, Setup, assert_code, stderr, wait_for};
use serde_json::Value;

/// Write `wf` as `flow/wf.yaml` (hooks run from the workflow file's directory, not aw-run's),
/// with the executable scripts `scripts` (name, body) beside it; aw-run on it with `args`.
fn flow(s: &Setup, wf: &str, scripts: &[(&str, &str)], args: &[&str]) -> std::process::Command {
    std::fs::create_dir_all(s.dir().join("flow")).unwrap();
    s.write("flow/wf.yaml", wf);
    for (name, body) in scripts {
        s.script(&format!("flow/{name}"), body);
    }
    s.cmd_file(args, Path::new("flow/wf.yaml"))
}

/// [`flow`], run to its end.
fn run_flow(s: &Setup, wf: &str, scripts: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    common::runner::run_hang_guarded(flow(s, wf, scripts, args))
}

/// [`flow`], started (killed if the test ends without stopping it).
fn start_flow(s: &Setup, wf: &str, scripts: &[(&str, &str)], args: &[&str]) -> Server {
    Server::new(common::runner::spawn(flow(s, wf, scripts, args)))
}

/// A file of the workflow's directory, or "" when there is none.
fn flow_file(s: &Setup, name: &str) -> String {
    std::fs::read_to_string(s.dir().join("flow").join(name)).unwrap_or_default()
}

/// The lines of the instance's hook log.
fn hook_log(s: &Setup) -> Vec<Value> {
    let p = s.root.inst_dir(INST).join("_state/hooks.log");
    std::fs::read_to_string(&p)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// An exec agent that keeps each prompt in `prompt.N` (from 1) of the workflow's directory.
const RECORDER: &str = "n=$(ls prompt.* 2>/dev/null | wc -l); cat > prompt.$((n + 1)); echo done";

/// A hook that keeps its stdin in `event.N` and its `AW_` environment in `env.N`, and says
/// not yet the first time.
const GATE: &str = "n=$(ls event.* 2>/dev/null | wc -l); n=$((n + 1))
cat > event.$n
env | grep '^AW_' | sort > env.$n
if [ $n = 1 ]; then echo 'tests fail: test_parse (2 of 9)' >&2; exit 2; fi
exit 0
";

fn recorder_agent() -> String {
    "agents:\n  coder:\n    command: [./agent.sh]\n    cwd: .\n".to_string()
}

/// Run the recording agent `coder` with `rest` after its definition and the scripts
/// `scripts` beside it; the run must end with `code`. Its stderr.
fn run_coder(s: &Setup, rest: &str, scripts: &[(&str, &str)], code: i32) -> String {
    let wf = format!("{}{rest}", recorder_agent());
    let mut all = vec![("agent.sh", RECORDER)];
    all.extend_from_slice(scripts);
    let out = run_flow(s, &wf, &all, &["-q"]);
    assert_code(&out, code);
    stderr(&out)
}

#[test]
fn a_run_end_hook_that_says_not_yet_runs_the_agent_again_with_its_message() {
    let s = Setup::new();
    let rest = "kickoff: '@coder make the tests pass'\nhooks:\n  on_run_end: ./gate.sh\n";
    let err = run_coder(&s, rest, &[("gate.sh", GATE)], 0);
    // Two runs: the second on the hook's message, addressed to the agent.
    let first = flow_file(&s, "prompt.1");
    let second = flow_file(&s, "prompt.2");
    assert!(first.contains("make the tests pass"), "{first}");
    assert!(!first.contains("tests fail"), "{first}");
    assert!(
        second.contains("hook on_run_end says not yet:")
            && second.contains("tests fail: test_parse (2 of 9)"),
        "{second}\n{err}"
    );
    assert_eq!(flow_file(&s, "prompt.3"), "", "one run more, not more");
    let posted: Vec<_> = s
        .entries()
        .into_iter()
        .filter(|(_, m)| m.contains("tests fail"))
        .collect();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0].0, "system");
    assert!(
        posted[0]
            .1
            .starts_with("@coder hook on_run_end says not yet:")
    );

    // What the hook was given: the documented fields, on stdin and in the environment.
    let ev: Value = serde_json::from_str(&flow_file(&s, "event.1")).expect("JSON on stdin");
    assert_eq!(ev["event"], "on_run_end");
    assert_eq!(ev["instance"], INST);
    assert_eq!(ev["agent"], "coder");
    assert_eq!(ev["run"], 1);
    assert_eq!(ev["status"], "ok");
    assert!(ev["duration"].as_f64().is_some_and(|d| d >= 0.0), "{ev}");
    assert!(
        ev["time"].as_str().is_some_and(common::is_timestamp),
        "{ev}"
    );
    assert_eq!(ev["messages"].as_array().map(Vec::len), Some(1), "{ev}");
    assert!(ev.get("card").is_none(), "{ev}");
    let second_ev: Value = serde_json::from_str(&flow_file(&s, "event.2")).unwrap();
    assert_eq!(second_ev["run"], 2);
    let env = flow_file(&s, "env.1");
    for line in [
        "AW_EVENT=on_run_end",
        &format!("AW_INSTANCE={INST}"),
        "AW_AGENT=coder",
        "AW_RUN=1",
        "AW_STATUS=ok",
    ] {
        assert!(env.lines().any(|l| l == line), "{line} in\n{env}");
    }
    // The hook log says both.
    let log = hook_log(&s);
    let outcomes: Vec<&str> = log.iter().map(|l| l["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["not yet", "ok"]);
    assert_eq!(log[0]["exit"], 2);
    assert_eq!(log[0]["run"], "./gate.sh");
}

#[test]
fn a_hook_that_hangs_is_killed_at_its_timeout_with_its_group_and_the_run_ends() {
    let s = Setup::new();
    let rest = "kickoff: '@coder go'\nhooks:\n  on_run_end: {run: 'echo $$ > hook.pgid; sleep \
                1000', timeout: 1s}\n";
    let err = run_coder(&s, rest, &[], 0);
    assert!(
        err.contains(
            "aw-run: warning: hook on_run_end for coder: echo $$ > hook.pgid; sleep 1000: ran \
             past its timeout of 1 s and was killed"
        ),
        "{err}"
    );
    assert_eq!(
        flow_file(&s, "prompt.2"),
        "",
        "a failed hook does not run the agent again"
    );
    let pgid: u32 = flow_file(&s, "hook.pgid")
        .trim()
        .parse()
        .expect("the hook's pid");
    assert_eq!(
        common::runner::group_members(pgid),
        Vec::<u32>::new(),
        "nothing of the hook's group survives"
    );
    let log = hook_log(&s);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["outcome"], "failed");
    assert!(
        log[0]["why"].as_str().unwrap().contains("timeout"),
        "{}",
        log[0]
    );
    // Nothing was posted for it.
    assert!(!s.entries().iter().any(|(_, m)| m.contains("hook ")));
}

#[test]
fn other_exit_codes_are_reported_and_the_run_goes_on() {
    let s = Setup::new();
    let rest = "kickoff: '@coder go'\nhooks:\n  on_run_end: 'echo broken >&2; exit 3'\n  \
                on_idle: ./no-such-hook\n";
    let err = run_coder(&s, rest, &[], 0);
    assert!(
        err.contains(
            "aw-run: warning: hook on_run_end for coder: echo broken >&2; exit 3: exit 3 (broken)"
        ),
        "{err}"
    );
    assert!(
        err.contains("aw-run: warning: hook on_idle for coder: ./no-such-hook: exit 127"),
        "{err}"
    );
    let log = hook_log(&s);
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(log.iter().all(|l| l["outcome"] == "failed"));
}

#[test]
fn on_quiet_fires_once_when_the_work_is_done() {
    let s = Setup::new();
    let wf = "agents:\n  a: {mock: {replies: ['@b over']}}\n  b: {mock: {replies: [done]}}\n\
              kickoff: '@a go'\nhooks:\n  on_quiet: 'cat >> quiet.log; echo >> quiet.log'\n";
    let out = run_flow(&s, wf, &[], &["-q"]);
    assert_code(&out, 0);
    let log = flow_file(&s, "quiet.log");
    let lines: Vec<&str> = log.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1, "{log}");
    let ev: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(ev["event"], "on_quiet");
    assert_eq!(ev["runs"], 2);
}

#[test]
fn on_idle_says_not_yet_and_the_agent_runs_again() {
    let s = Setup::new();
    let gate = "if [ -e said ]; then exit 0; fi; touch said; echo \"@$AW_AGENT check the \
                docs too\" >&2; exit 2";
    let rest = format!("kickoff: '@coder write it'\nhooks:\n  on_idle: '{gate}'\n");
    let err = run_coder(&s, &rest, &[], 0);
    let second = flow_file(&s, "prompt.2");
    assert!(second.contains("check the docs too"), "{second}\n{err}");
    assert_eq!(flow_file(&s, "prompt.3"), "");
}

#[test]
fn a_hook_that_always_says_not_yet_stops_at_the_run_limit() {
    let s = Setup::new();
    let rest =
        "    max_runs: 3\nkickoff: '@coder go'\nhooks:\n  on_run_end: 'echo never >&2; exit 2'\n";
    let err = run_coder(&s, rest, &[], 1);
    assert!(
        err.contains("loop guard: coder reached the run limit"),
        "{err}"
    );
    assert_ne!(flow_file(&s, "prompt.3"), "");
    assert_eq!(flow_file(&s, "prompt.4"), "");
}

#[test]
fn on_approval_fires_when_an_approval_is_asked() {
    let s = Setup::new();
    let wf = format!(
        "{}    needs: {{approval: {{by: [user]}}}}\nkickoff: '@coder go'\nhooks:\n  \
         on_approval: 'cat > approval.json'\n",
        recorder_agent()
    );
    let run = start_flow(&s, &wf, &[("agent.sh", RECORDER)], &["-q"]);
    wait_for("the on_approval hook", || {
        serde_json::from_str::<Value>(&flow_file(&s, "approval.json")).is_ok()
    });
    let ev: Value = serde_json::from_str(&flow_file(&s, "approval.json")).unwrap();
    assert_eq!(ev["event"], "on_approval");
    assert_eq!(ev["approval"], 1);
    assert_eq!(ev["kind"], "run");
    assert_eq!(ev["by"], serde_json::json!(["user"]));
    assert_eq!(ev["status"], "pending");
    assert!(
        ev["what"].as_str().unwrap().contains("a run of coder"),
        "{ev}"
    );
    s.root.ok("aw-ctl", &["-i", INST, "approve", "1"], None);
    let out = run.wait();
    assert_code(&out, 0);
    assert!(flow_file(&s, "prompt.1").contains("go"));
}

#[test]
fn on_card_done_says_not_yet_and_the_card_goes_back_to_its_agent() {
    let s = Setup::new();
    let worker = "n=$(ls prompt.* 2>/dev/null | wc -l); cat > prompt.$((n + 1)); \
                  aw-ctl board done \"$AW_CARD\" --note \"run $((n + 1))\" >/dev/null; echo done";
    let gate = "n=$(ls event.* 2>/dev/null | wc -l); n=$((n + 1)); cat > event.$n
if [ $n = 1 ]; then echo 'the docs are missing' >&2; exit 2; fi
";
    let wf = "agents:\n  w:\n    board: next\n    command: [./worker.sh]\n    cwd: .\n  other:\n    board: next\n    command: [sh, -c, 'cat \
              >/dev/null; echo idle']\nboard:\n  - {title: Write the parser, for: w}\n\
              hooks:\n  on_card_done: ./gate.sh\n";
    let out = run_flow(&s, wf, &[("worker.sh", worker), ("gate.sh", gate)], &["-q"]);
    assert_code(&out, 0);
    let ev: Value = serde_json::from_str(&flow_file(&s, "event.1")).unwrap();
    assert_eq!(ev["event"], "on_card_done");
    assert_eq!(ev["agent"], "w");
    assert_eq!(ev["card"], 1);
    assert_eq!(ev["title"], "Write the parser");
    assert_eq!(ev["note"], "run 1");
    // Opened again, held by the same agent, and done on its second run with the message.
    let second = flow_file(&s, "prompt.2");
    assert!(
        second.contains("the docs are missing") && second.contains("You hold card 1"),
        "{second}\n{}",
        stderr(&out)
    );
    let inst = aw::instance::Root::new(s.root.path())
        .instance(INST)
        .unwrap();
    let card = aw::board::show(&inst, 1).unwrap();
    assert_eq!(card.state, State::Done);
    assert_eq!(card.note.as_deref(), Some("run 2"));
    let events: Vec<(&str, &str)> = card
        .history
        .iter()
        .map(|e| (e.event.as_str(), e.by.as_str()))
        .collect();
    assert_eq!(
        events,
        [
            ("added", "system"),
            ("claimed", "w"),
            ("done", "w"),
            ("reopened", "aw"),
            ("claimed", "w"),
            ("renewed", "w"),
            ("done", "w"),
        ]
    );
}

#[test]
fn on_budget_fires_when_a_budget_stops_the_run() {
    let s = Setup::new();
    let wf = "agents:\n  alice:\n    mock:\n      replies: ['@bob again']\n      usage: \
              {input_tokens: 100, output_tokens: 50, cost_usd: 0.02}\n  bob:\n    mock: \
              {replies: ['@alice again']}\nkickoff: '@alice go'\nbudget: {usd: 0.05}\n\
              hooks:\n  on_budget: 'cat > budget.json'\n";
    let out = run_flow(&s, wf, &[], &["-q"]);
    assert_code(&out, 1);
    let ev: Value = serde_json::from_str(&flow_file(&s, "budget.json")).expect("the event");
    assert_eq!(ev["event"], "on_budget");
    assert_eq!(ev["reason"], "budget: $0.0600 spent, over the $0.05 budget");
}

#[test]
fn a_bad_hooks_key_is_refused_with_its_line_and_column() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  a: {mock: {}}\nhooks:\n  on_run_edn: ./gate.sh\n  on_quiet: {run: '', \
         timeout: soon}\n  on_idle: {command: x}\n",
    );
    let out = common::runner::run_hang_guarded(s.cmd(&["--check"]));
    assert_code(&out, 65);
    // A script that is not there yet is a warning (a setup task may make it).
    s.write(
        "ok.yaml",
        "agents:\n  a: {mock: {}}\nhooks:\n  on_merge: ./notify.sh --now\n",
    );
    let ok = common::runner::run_hang_guarded(s.cmd_file(&["--check"], Path::new("ok.yaml")));
    assert_code(&ok, 0);
    assert_eq!(
        stderr(&ok),
        "ok.yaml:4:13: warning: hooks.on_merge: './notify.sh' does not exist (from the \
         workflow file's directory)\n"
    );
    let err = stderr(&out);
    for line in [
        "wf.yaml:4:3: hooks: unknown key 'on_run_edn' (did you mean 'on_run_end'?)",
        "wf.yaml:5:19: hooks.on_quiet.run: must not be empty",
        "wf.yaml:5:32: hooks.on_quiet.timeout: invalid duration 'soon'",
        "wf.yaml:6:13: hooks.on_idle: unknown key 'command'",
        "wf.yaml:6:12: hooks.on_idle: a hook needs run: COMMAND",
    ] {
        assert!(err.contains(line), "{line} in\n{err}");
    }
}

/// A repository at `t/repo` on `main` with `f.txt`, and a branch `aw/w/AGENT` with one
/// commit for each of `changes` (agent, what its `f.txt` holds).
fn repo_with_branches(t: &Path, changes: &[(&str, &str)]) -> std::path::PathBuf {
    use common::git;
    let r = t.join("repo");
    std::fs::create_dir(&r).unwrap();
    git(&r, &["init", "-q", "-b", "main"]);
    git(&r, &["config", "user.name", "t"]);
    git(&r, &["config", "user.email", "t@example.com"]);
    std::fs::write(r.join("f.txt"), "1\n2\n3\n").unwrap();
    git(&r, &["add", "f.txt"]);
    git(&r, &["commit", "-q", "-m", "three lines"]);
    for (agent, text) in changes {
        let branch = format!("aw/{INST}/{agent}");
        let wt = t.join(format!("wt-{agent}"));
        let wt_arg = wt.to_str().unwrap();
        git(
            &r,
            &["worktree", "add", "-q", "-b", &branch, wt_arg, "main"],
        );
        std::fs::write(wt.join("f.txt"), text).unwrap();
        git(&wt, &["commit", "-q", "-am", &format!("{agent}: f.txt")]);
    }
    r
}

#[test]
fn on_merge_fires_for_a_merge_and_a_conflict_served_by_another_process() {
    let s = Setup::new();
    let t = tempfile::tempdir().unwrap();
    let repo = repo_with_branches(t.path(), &[("a", "1\nA\n3\n"), ("b", "1\nB\n3\n")]);
    let wf = "agents:\n  a: {mock: {replies: [ok]}}\n  b: {mock: {replies: [ok]}}\n\
              hooks:\n  on_merge: 'cat >> merges.jsonl'\n";
    let server = start_flow(&s, wf, &[], &["--keep", "-q"]);
    wait_for("the agents served", || {
        common::runner::serving(&s).len() == 2
    });
    for (agent, code) in [("a", 0), ("b", 1)] {
        let mut c = s.tool_cmd("aw-ctl");
        c.current_dir(&repo)
            .args(["-i", INST, "merge", "request", agent]);
        assert_code(&common::runner::run_hang_guarded(c), code);
    }
    let merges = || -> Vec<Value> {
        flow_file(&s, "merges.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).expect("one event a line"))
            .collect()
    };
    wait_for("two on_merge events", || merges().len() == 2);
    let out = server.term();
    assert_code(&out, 0);
    let mut got = merges();
    got.sort_by_key(|e| e["merge"].as_u64());
    assert_eq!(got[0]["event"], "on_merge");
    assert_eq!(got[0]["agent"], "a");
    assert_eq!(got[0]["status"], "merged");
    assert_eq!(got[0]["branch"], format!("aw/{INST}/a"));
    assert_eq!(got[0]["into"], "main");
    assert_eq!(
        got[0]["commit"].as_str(),
        Some(common::git(&repo, &["rev-parse", "main"]).trim())
    );
    assert_eq!(got[1]["agent"], "b");
    assert_eq!(got[1]["status"], "conflict");
    assert_eq!(got[1]["conflicts"], serde_json::json!(["f.txt"]));
    assert_eq!(merges().len(), 2, "once each");
}

/// In keep mode a message from `system` is not an agent's, so the loop guard does not count
/// a hook's "not yet": the hook's own limit stops it after 10 in a row.
#[test]
fn in_keep_mode_a_hook_that_always_says_not_yet_is_posted_ten_times_only() {
    let s = Setup::new();
    let wf = format!(
        "{}kickoff: '@coder go'\nhooks:\n  on_run_end: 'echo still failing >&2; exit 2'\n",
        recorder_agent()
    );
    let server = start_flow(&s, &wf, &[("agent.sh", RECORDER)], &["--keep", "-q"]);
    wait_for("the eleventh answer", || hook_log(&s).len() == 11);
    let out = server.term();
    assert_code(&out, 0);
    let log = hook_log(&s);
    assert_eq!(log.len(), 11);
    assert!(log[..10].iter().all(|l| l["outcome"] == "not yet"));
    assert_eq!(log[10]["outcome"], "not yet (not posted)");
    assert_ne!(flow_file(&s, "prompt.11"), "");
    assert_eq!(flow_file(&s, "prompt.12"), "");
    assert!(
        stderr(&out).contains(
            "aw-run: warning: hook on_run_end for coder: said not yet 11 times in a row: no \
             longer posted (at most 10)"
        ),
        "{}",
        stderr(&out)
    );
}

/// A stop (SIGTERM) kills a hook under way with its group, whatever its timeout: aw-run
/// never waits for it.
#[test]
fn a_stop_kills_a_hook_under_way() {
    let s = Setup::new();
    let wf = "agents:\n  a: {mock: {replies: [done]}}\nkickoff: '@a go'\nhooks:\n  on_quiet: {run: \
              'echo $$ > hook.pgid; sleep 1000', timeout: 1h}\n";
    let server = start_flow(&s, wf, &[], &["-q"]);
    wait_for("the hook", || flow_file(&s, "hook.pgid").ends_with('\n'));
    let out = server.term();
    assert_code(&out, 0);
    let pgid: u32 = flow_file(&s, "hook.pgid").trim().parse().unwrap();
    assert_eq!(common::runner::group_members(pgid), Vec::<u32>::new());
    let log = hook_log(&s);
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["outcome"], "failed");
    assert_eq!(log[0]["why"], "killed: aw-run is stopping");
}
