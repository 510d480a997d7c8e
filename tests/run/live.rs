//! Seeing a run while it happens: start lines, failed attempts that say why and where to
//! look, the status line and the summary table on a terminal (tested in tmux), plain lines
//! in pipes, and money and JSON numbers without float noise.

use crate::common;

use serde_json::Value;

use common::json_lines;
use common::runner::*;
use common::tmux::{Tmux, quote};

const HELLO: &str = "\
agents:
  alice:
    mock:
      replies: ['@bob what is the answer?', 'Thanks, done.']
      usage: {input_tokens: 100, output_tokens: 20, cost_usd: 0.1}
  bob:
    mock:
      replies: ['@alice the answer is 42.']
      usage: {input_tokens: 10, output_tokens: 5, cost_usd: 0.1}
kickoff: '@alice ask bob'
";

/// aw-ctl `args` run in tmux, which must exit 0: its screen, and the screen's lines that are
/// not blank.
fn aw_ctl_on_a_terminal(s: &Setup, args: &[&str]) -> (String, Vec<String>) {
    let t = Tmux::start(s.dir(), &sh_tool(s, "aw-ctl", args));
    let (code, screen) = t.wait_exit();
    assert_eq!(code, 0, "{screen}");
    let lines = screen
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    (screen, lines)
}

/// Whether the `aw-ctl top` screen `sc` has a row of `agent` whose column `col` (0: the
/// agent) is `value`.
fn top_row_has(sc: &str, agent: &str, col: usize, value: &str) -> bool {
    sc.lines().any(|l| {
        let cols: Vec<&str> = l
            .trim_matches(|c| c == '│' || c == ' ')
            .split_whitespace()
            .collect();
        cols.first() == Some(&agent) && cols.get(col) == Some(&value)
    })
}

/// A shell command line that runs tool `name` of the setup with `args`.
fn sh_tool(s: &Setup, name: &str, args: &[&str]) -> String {
    let mut line = format!(
        "PATH={} {} --root {}",
        quote(&path_with_bins()),
        quote(common::bin(name).to_str().unwrap()),
        quote(s.root.path().to_str().unwrap())
    );
    for a in args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    line
}

#[test]
fn each_attempt_start_is_told_with_what_woke_it_in_lines_and_json() {
    let s = Setup::new();
    let out = s.run(HELLO, &[]);
    assert_code(&out, 0);
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    let start = lines
        .iter()
        .position(|l| *l == "aw-run: alice: run 1 started (woken by #1 from system)")
        .unwrap_or_else(|| panic!("{err}"));
    let end = lines
        .iter()
        .position(|l| l.starts_with("aw-run: alice: run 1 ok "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(start < end, "{err}");
    assert!(
        err.contains("aw-run: bob: run 1 started (woken by #2 from alice)\n"),
        "{err}"
    );
    assert_eq!(err.matches(" started (woken by ").count(), 3, "{err}");
    // Pipes get plain lines: no status line, no escape, no carriage return.
    assert!(!err.contains('\x1b') && !err.contains('\r'), "{err:?}");
    assert!(!err.contains("agent(s) running"), "{err}");

    let s = Setup::new();
    let out = s.run(HELLO, &["--json"]);
    assert_code(&out, 0);
    let events = json_lines(&out.stdout);
    // Each agent's attempts: a start, then its end, three times in all.
    for (agent, runs) in [("alice", 2), ("bob", 1)] {
        let kinds: Vec<&str> = events
            .iter()
            .filter(|e| e["agent"] == agent && (e["event"] == "start" || e["event"] == "run"))
            .map(|e| e["event"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["start", "run"].repeat(runs), "{agent}");
    }
    let first = &events.iter().find(|e| e["event"] == "start").unwrap();
    assert_eq!(first["run"], 1);
    assert_eq!(first["attempt"], 1);
    assert_eq!(first["transcript"], 1);
    assert_eq!(
        first["woken_by"],
        serde_json::json!([{"id": 1, "from": "system"}])
    );
}

#[test]
fn json_costs_carry_no_float_noise_and_lines_print_money() {
    // alice spends 0.1 twice and bob 0.1: sums that floats get slightly wrong
    // (0.30000000000000004).
    let s = Setup::new();
    let out = s.run(HELLO, &["--json"]);
    assert_code(&out, 0);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(!stdout.contains("0000000000"), "{stdout}");
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["usage"]["cost_usd"].to_string(), "0.3");
    assert_eq!(
        summary["agents"]["alice"]["usage"]["cost_usd"].to_string(),
        "0.2"
    );
    let ledger = std::fs::read_to_string(s.root.inst_dir(INST).join("_state/budget.json")).unwrap();
    assert!(!ledger.contains("0000000000"), "{ledger}");

    let s = Setup::new();
    let out = s.run(HELLO, &[]);
    assert_code(&out, 0);
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.starts_with("aw-run: summary: "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(line.ends_with("; total 255 tokens $0.3000"), "{line}");
}

#[test]
fn a_failed_attempt_says_the_last_stderr_line_and_how_to_see_the_transcript() {
    let s = Setup::new();
    s.script(
        "broken.sh",
        "cat > /dev/null\necho 'starting up' >&2\necho 'fatal: database is locked' >&2\n\
         echo '' >&2\nexit 3\n",
    );
    let wf = "agents:\n  broken:\n    command: ['./broken.sh']\nkickoff: '@broken go'\n";
    let out = s.run(wf, &["--retries", "1"]);
    assert_code(&out, 1);
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.starts_with("aw-run: broken: run 1 failed "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.contains(": exit status 3; stderr: fatal: database is locked;"),
        "{line}"
    );
    assert!(line.ends_with("; see aw-ctl -i w runs broken 1"), "{line}");
    // The command shown shows that attempt.
    let shown = s
        .tool_cmd("aw-ctl")
        .args(["-i", INST, "runs", "broken", "1"])
        .output()
        .unwrap();
    assert_code(&shown, 0);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("status:   failed"), "{text}");
    assert!(text.contains("fatal: database is locked"), "{text}");
    // In JSON too.
    let s2 = Setup::new();
    s2.script(
        "broken.sh",
        "cat > /dev/null\necho 'fatal: no' >&2\nexit 3\n",
    );
    let out = s2.run(wf, &["--retries", "1", "--json"]);
    assert_code(&out, 1);
    let ev = json_lines(&out.stdout)
        .into_iter()
        .find(|e| e["event"] == "run")
        .unwrap();
    assert_eq!(ev["stderr_tail"], "fatal: no");
    assert_eq!(ev["transcript"], 1);
}

#[test]
fn on_a_terminal_a_status_line_shows_progress_and_the_summary_is_a_table() {
    let s = Setup::new();
    s.script(
        "slow.sh",
        "cat > /dev/null\nwhile [ ! -e go ]; do sleep 0.05; done\necho 'all done'\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  slow:\n    command: ['./slow.sh']\nkickoff: '@slow work'\n",
    );
    let t = Tmux::start(s.dir(), &sh_tool(&s, "aw-run", &["-i", INST, "wf.yaml"]));
    let screen = t.wait_for("the status line", |s| {
        s.contains("aw-run: 1 of 1 agent(s) running, ")
    });
    assert!(
        screen.contains("aw-run: slow: run 1 started (woken by #1 from system)"),
        "{screen}"
    );
    std::fs::write(s.dir().join("go"), "").unwrap();
    let (code, screen) = t.wait_exit();
    assert_eq!(code, 0, "{screen}");
    // The status line is gone; the summary is a table with a total row.
    assert!(!screen.contains("agent(s) running"), "{screen}");
    let lines: Vec<&str> = screen.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("agent  runs  failures"))
        .unwrap_or_else(|| panic!("{screen}"));
    let row: Vec<&str> = lines[head + 1].split_whitespace().collect();
    assert_eq!(&row[..3], ["slow", "1", "0"], "{screen}");
    let total: Vec<&str> = lines[head + 2].split_whitespace().collect();
    assert_eq!(&total[..3], ["total", "1", "0"], "{screen}");
    // Numbers are aligned right under their heading.
    assert_eq!(
        lines[head].find("runs").map(|i| i + 4),
        lines[head + 1].find(" 1 ").map(|i| i + 2),
        "{screen}"
    );
}

#[test]
fn runs_has_a_header_row_on_a_terminal_only() {
    let s = Setup::new();
    let out = s.run(HELLO, &[]);
    assert_code(&out, 0);
    let piped = s
        .tool_cmd("aw-ctl")
        .args(["-i", INST, "runs"])
        .output()
        .unwrap();
    assert_code(&piped, 0);
    let piped = String::from_utf8(piped.stdout).unwrap();
    assert_eq!(piped.lines().count(), 3, "{piped}");
    assert!(piped.starts_with("alice "), "{piped}");
    let (screen, lines) = aw_ctl_on_a_terminal(&s, &["-i", INST, "runs"]);
    let cols: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        cols,
        [
            "agent", "n", "run", "att", "status", "exit", "time", "started", "inbox", "reply"
        ],
        "{screen}"
    );
    assert!(lines[1].starts_with("alice "), "{screen}");
    assert_eq!(lines.len(), 5, "{screen}");
}

#[test]
fn output_streams_while_the_attempt_runs_and_runs_f_follows_attempt_after_attempt() {
    use std::io::Read;
    use std::sync::{Arc, Mutex};
    let s = Setup::new();
    s.script(
        "slow.sh",
        "cat > /dev/null\necho 'step one'\necho 'warn: sk-live-SECRET-123 is slow' >&2\n\
         while [ ! -e go ]; do sleep 0.05; done\necho 'step two'\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  slow:\n    command: ['./slow.sh']\n    env: {TOKEN: sk-live-SECRET-123}\n\
         kickoff: '@slow work'\n",
    );
    let server = spawn(s.cmd(&["--keep", "-q"]));
    let log = s.root.inst_dir(INST).join("_state/runs/slow/1.log");
    // Written while the attempt runs: its transcript is not there yet.
    wait_for("the output of the running attempt", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("step one") && t.contains("warn:"))
    });
    assert!(!s.transcript_path("slow", 1).exists());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("SECRET"), "{text}");
    // Follow it.
    let mut follower = s.tool_cmd("aw-ctl");
    follower.args(["-i", INST, "runs", "-f", "slow"]);
    let mut follower = spawn(follower);
    let seen = Arc::new(Mutex::new(String::new()));
    let reader = {
        let seen = seen.clone();
        let mut stdout = follower.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let has = |what: &str| seen.lock().unwrap().contains(what);
    wait_for("the follower to show the running attempt", || {
        has("--- slow: attempt 1 ---\n") && has("step one\n")
    });
    assert!(!has("step two"));
    std::fs::write(s.dir().join("go"), "").unwrap();
    wait_for("the end of attempt 1", || {
        has("step two\n--- slow: attempt 1 ended: ok ---\n")
    });
    // The next attempt is followed too.
    s.root.send(INST, &[], "@slow again");
    wait_for("attempt 2", || {
        has("--- slow: attempt 2 ---\n") && has("--- slow: attempt 2 ended: ok ---\n")
    });
    // The server stops: so does the follower, with 0.
    let stop = s
        .tool_cmd("aw-ctl")
        .args(["stop", "slow@w"])
        .output()
        .unwrap();
    assert_code(&stop, 0);
    assert_code(&wait_hang_guarded(server), 0);
    let end = wait_hang_guarded(follower);
    assert_code(&end, 0);
    reader.join().unwrap();
    let all = seen.lock().unwrap().clone();
    assert_eq!(all.matches("step one").count(), 2, "{all}");
    assert!(!all.contains("SECRET"), "{all}");
}

#[test]
fn runs_f_of_an_agent_nobody_serves_prints_its_last_attempt_and_ends() {
    let s = Setup::new();
    s.script(
        "agent.sh",
        "cat > /dev/null\necho 'the answer'\necho 'note' >&2\n",
    );
    let wf = "agents:\n  alice:\n    command: ['./agent.sh']\nkickoff: '@alice go'\n";
    assert_code(&s.run(wf, &[]), 0);
    let out = run_hang_guarded({
        let mut c = s.tool_cmd("aw-ctl");
        c.args(["-i", INST, "runs", "-f", "alice"]);
        c
    });
    assert_code(&out, 0);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        "--- alice: attempt 1 ---\nthe answer\nnote\n--- alice: attempt 1 ended: ok ---\n"
    );
    // -f goes with one agent, no N and no --json.
    for args in [
        vec!["-i", INST, "runs", "-f"],
        vec!["-i", INST, "runs", "-f", "alice", "1"],
        vec!["-i", INST, "runs", "-f", "--json", "alice"],
    ] {
        let out = s.tool_cmd("aw-ctl").args(&args).output().unwrap();
        assert_code(&out, 64);
    }
}

#[test]
fn top_shows_agents_attempts_and_the_channel_live_and_q_restores_the_terminal() {
    let s = Setup::new();
    s.script(
        "slow.sh",
        "cat > /dev/null\nwhile [ ! -e go ]; do sleep 0.05; done\necho 'finished the work'\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  slow:\n    command: ['./slow.sh']\n  other:\n    mock: {}\n\
         kickoff: '@slow work'\n",
    );
    let server = spawn(s.cmd(&["--keep", "-q"]));
    wait_for("the attempt to start", || {
        s.root
            .inst_dir(INST)
            .join("_state/runs/slow/1.log")
            .exists()
    });
    let top = format!(
        "{}; code=$?; stty -a | grep -qE '(^| )icanon' && echo terminal-restored; (exit $code)",
        sh_tool(&s, "aw-ctl", &["-i", INST, "top"])
    );
    let t = Tmux::start(s.dir(), &top);
    // The whole frame: tmux may show one the terminal has only begun to draw.
    let screen = t.wait_for("top to show the running attempt", |sc| {
        sc.contains("aw-ctl top: instance w")
            && sc
                .lines()
                .any(|l| l.contains("slow") && l.contains("running") && l.contains("#1"))
            && sc.contains("@system: @slow work")
    });
    assert!(screen.contains("@system: @slow work"), "{screen}");
    let other = screen
        .lines()
        .find(|l| l.contains("│other") || l.contains(" other "))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(other.contains("idle"), "{screen}");
    // Every line fits 80 columns, and the view fits 24 lines.
    assert!(screen.lines().count() <= 24, "{screen}");
    // A change shows without a key pressed: the attempt ends, its reply arrives.
    std::fs::write(s.dir().join("go"), "").unwrap();
    // The controller's state follows (it is recorded just after the reply).
    let slow_idle = |sc: &str| {
        sc.lines().any(|l| {
            l.contains("slow") && !l.contains('@') && l.contains("idle") && !l.contains("running")
        })
    };
    t.wait_for("the reply and slow idle again", |sc| {
        sc.contains("@slow: finished the work") && slow_idle(sc)
    });
    // An agent registered meanwhile appears; its unread count follows its inbox.
    let ctl = |args: &[&str]| {
        let out = s.tool_cmd("aw-ctl").args(args).output().unwrap();
        assert_code(&out, 0);
    };
    ctl(&["-i", INST, "new", "carol", "--backend", "mock"]);
    s.root.send(INST, &[], "@carol look at this");
    let unread = |sc: &str, n: &str| top_row_has(sc, "carol", 4, n);
    t.wait_for("carol with 1 unread", |sc| unread(sc, "1"));
    ctl(&["-i", INST, "ack", "carol"]);
    t.wait_for("carol with nothing unread", |sc| unread(sc, "0"));
    // The board pane comes with the first card and shows who holds one, until when.
    assert!(!t.screen().contains(" board "), "no pane without cards");
    ctl(&[
        "-i",
        INST,
        "board",
        "add",
        "fix the parser",
        "--as",
        "other",
    ]);
    ctl(&["-i", INST, "board", "add", "then test it", "--after", "1"]);
    t.wait_for("a ready card", |sc| {
        sc.contains("2 open (1 ready), 0 claimed") && sc.contains("#1 fix the parser  ready")
    });
    ctl(&["-i", INST, "board", "claim", "1", "--as", "carol"]);
    let held = t.wait_for("the claimed card", |sc| {
        sc.contains("1 open (0 ready), 1 claimed, 0 done")
            && sc.contains("#1 fix the parser  held by carol until 20")
    });
    assert!(held.lines().count() <= 24, "{held}");
    ctl(&[
        "-i", INST, "board", "done", "1", "--as", "carol", "--note", "fixed",
    ]);
    t.wait_for("the card done and the next ready", |sc| {
        sc.contains("#1 fix the parser  done by carol: fixed")
            && sc.contains("#2 then test it  ready")
    });
    t.keys(&["q"]);
    let (code, screen) = t.wait_exit();
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("terminal-restored"), "{screen}");
    assert!(!screen.contains("aw-ctl top: instance"), "{screen}");
    let stop = s.tool_cmd("aw-ctl").args(["stop", "@w"]).output().unwrap();
    assert_code(&stop, 0);
    assert_code(&wait_hang_guarded(server), 0);
    // Not on a terminal: refused with a usage error.
    let out = s
        .tool_cmd("aw-ctl")
        .args(["-i", INST, "top"])
        .output()
        .unwrap();
    assert_code(&out, 64);
    assert!(
        stderr(&out).contains("top needs a terminal"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_mock_attempt_logs_its_reply_and_runs_f_shows_it() {
    let s = Setup::new();
    assert_code(&s.run(HELLO, &[]), 0);
    let dir = s.root.inst_dir(INST).join("_state/runs");
    let log = |agent: &str, n: u64| {
        std::fs::read_to_string(dir.join(format!("{agent}/{n}.log"))).unwrap_or_default()
    };
    assert_eq!(log("alice", 1), "@bob what is the answer?\n");
    assert_eq!(log("alice", 2), "Thanks, done.\n");
    assert_eq!(log("bob", 1), "@alice the answer is 42.\n");
    let out = run_hang_guarded({
        let mut c = s.tool_cmd("aw-ctl");
        c.args(["-i", INST, "runs", "-f", "bob"]);
        c
    });
    assert_code(&out, 0);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "--- bob: attempt 1 ---\n@alice the answer is 42.\n--- bob: attempt 1 ended: ok ---\n"
    );
}

#[test]
fn an_attempt_whose_program_cannot_start_has_an_empty_log_and_runs_f_tells_of_it() {
    let s = Setup::new();
    // Its first run takes the program away: the second cannot start it.
    s.script(
        "once.sh",
        "cat > /dev/null\nrm -- \"$0\"\necho '@echo hi'\n",
    );
    let wf = "agents:\n  bot:\n    command: ['./once.sh']\n  echo:\n    mock: {replies: ['@bot again']}\n\
              kickoff: '@bot go'\n";
    assert_code(&s.run(wf, &["-q"]), 1);
    assert_eq!(s.statuses("bot", 1), ["ok"]);
    let t = s.transcript("bot", 2);
    assert_eq!(t["status"], "failed");
    assert!(
        t["reason"].as_str().unwrap().contains("cannot start"),
        "{t}"
    );
    let log = s.root.inst_dir(INST).join("_state/runs/bot/2.log");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "");
    let out = run_hang_guarded({
        let mut c = s.tool_cmd("aw-ctl");
        c.args(["-i", INST, "runs", "-f", "bot"]);
        c
    });
    assert_code(&out, 0);
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .ends_with("--- bot: attempt 2 ---\n--- bot: attempt 2 ended: failed ---\n")
    );
}

#[test]
fn an_api_attempt_logs_each_answer_and_its_tool_calls_redacted_while_it_runs() {
    use common::fake_api::{FakeApi, Reply};
    use serde_json::json;
    const KEY: &str = "sk-test-0123456789";
    let s = Setup::new();
    // One answer that calls a tool and quotes the key, then a model that never answers.
    let api = FakeApi::start(vec![
        Reply::ok(json!({
            "content": [
                {"type": "text", "text": format!("Posting; my key is {KEY}.")},
                {"type": "tool_use", "id": "tu_1", "name": "channel_send",
                 "input": {"message": "@user looking"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 100, "output_tokens": 20}
        })),
        Reply::Hang,
    ]);
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    backend: anthropic\n    model: claude-test\n    timeout: 8s\n\
         kickoff: '@alice look'\n",
    );
    let mut c = s.cmd(&["-q", "--retries", "1"]);
    c.env("ANTHROPIC_BASE_URL", &api.url)
        .env("ANTHROPIC_API_KEY", KEY);
    let run = spawn(c);
    let log = s.root.inst_dir(INST).join("_state/runs/alice/1.log");
    wait_for("the first answer in the live log", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("channel_send"))
    });
    // Written while the attempt runs: the model is still being asked.
    assert!(!s.transcript_path("alice", 1).exists());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(KEY), "{text}");
    let line: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(line["step"], 1);
    assert_eq!(line["finish"], "tool_use");
    assert_eq!(line["text"], "Posting; my key is [redacted].");
    assert_eq!(
        line["tools"],
        json!([{"name": "channel_send", "error": false}])
    );
    let out = wait_hang_guarded(run);
    assert_code(&out, 1);
    assert_eq!(s.statuses("alice", 1), ["timeout"]);
}

#[test]
fn top_watches_the_controllers_of_agents_served_after_it_started() {
    let s = Setup::new();
    s.write(
        "lead.yaml",
        "agents:\n  lead:\n    mock: {}\nkickoff: '@lead hello'\n",
    );
    let lead = spawn(s.cmd_file(&["--keep", "-q"], std::path::Path::new("lead.yaml")));
    wait_for("lead to answer", || s.transcript_path("lead", 1).exists());
    // No clock: the view is drawn on changes only.
    let top = format!(
        "AW_TOP_CLOCK=0 {}",
        sh_tool(&s, "aw-ctl", &["-i", INST, "top"])
    );
    let t = Tmux::start(s.dir(), &top);
    t.wait_for("top to show lead", |sc| sc.contains("@lead: lead: handled"));
    // Another server starts later with an agent that answers nothing: once it is done,
    // only its controller's state changes.
    s.script(
        "late.sh",
        "cat > /dev/null\nwhile [ ! -e go ]; do sleep 0.05; done\n",
    );
    s.write(
        "late.yaml",
        "agents:\n  late:\n    command: ['./late.sh']\nkickoff: '@late work'\n",
    );
    let late = spawn(s.cmd_file(&["--keep", "-q"], std::path::Path::new("late.yaml")));
    let row = |sc: &str, state: &str| top_row_has(sc, "late", 1, state);
    t.wait_for("late running", |sc| row(sc, "running"));
    std::fs::write(s.dir().join("go"), "").unwrap();
    t.wait_for("late idle again", |sc| row(sc, "idle"));
    t.keys(&["q"]);
    let (code, screen) = t.wait_exit();
    assert_eq!(code, 0, "{screen}");
    for who in ["lead@w", "late@w"] {
        let stop = s.tool_cmd("aw-ctl").args(["stop", who]).output().unwrap();
        assert_code(&stop, 0);
    }
    assert_code(&wait_hang_guarded(lead), 0);
    assert_code(&wait_hang_guarded(late), 0);
}

#[test]
fn ps_has_a_header_row_on_a_terminal_only() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    mock: {}\nkickoff: '@alice hi'\n",
    );
    let server = spawn(s.cmd(&["--keep", "-q"]));
    let ps = || {
        let out = s.tool_cmd("aw-ctl").arg("ps").output().unwrap();
        assert_code(&out, 0);
        String::from_utf8(out.stdout).unwrap()
    };
    wait_for("alice served", || ps().starts_with("w "));
    assert_eq!(ps().lines().count(), 1);
    let (screen, lines) = aw_ctl_on_a_terminal(&s, &["ps"]);
    let cols: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        cols,
        [
            "INSTANCE", "AGENT", "HOST", "PID", "STATE", "RUNS", "WORKFLOW"
        ],
        "{screen}"
    );
    assert!(lines[1].starts_with("w "), "{screen}");
    let stop = s.tool_cmd("aw-ctl").args(["stop", "@w"]).output().unwrap();
    assert_code(&stop, 0);
    assert_code(&wait_hang_guarded(server), 0);
}

#[test]
fn agents_nobody_serves_show_as_unserved_in_status_and_top() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    mock: {replies: [done]}\n  bob:\n    mock: {}\nkickoff: '@alice go'\n",
    );
    let server = spawn(s.cmd(&["--keep", "-q"]));
    wait_for("both agents served", || serving(&s).len() == 2);
    let status = || {
        let out = s
            .tool_cmd("aw-ctl")
            .args(["-i", INST, "status"])
            .output()
            .unwrap();
        assert_code(&out, 0);
        String::from_utf8(out.stdout).unwrap()
    };
    let row = |text: &str, agent: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(agent))
            .unwrap_or_else(|| panic!("{text}"))
            .to_string()
    };
    wait_for("alice's reply", || {
        s.entries().iter().any(|(f, _)| f == "alice")
    });
    let served = status();
    assert!(row(&served, "bob").contains(" idle "), "{served}");
    let stop = s.tool_cmd("aw-ctl").args(["stop", "@w"]).output().unwrap();
    assert_code(&stop, 0);
    assert_code(&wait_hang_guarded(server), 0);
    // A person's agent is never served by aw-run: its own state stays.
    let out = s
        .tool_cmd("aw-ctl")
        .args(["-i", INST, "new", "carol"])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let after = status();
    for agent in ["alice", "bob"] {
        let r = row(&after, agent);
        assert!(r.contains(" unserved "), "{after}");
        assert!(!r.contains("idle"), "{after}");
    }
    assert!(row(&after, "carol").contains(" idle "), "{after}");
    let t = Tmux::start(s.dir(), &sh_tool(&s, "aw-ctl", &["-i", INST, "top"]));
    t.wait_for("top to show alice and bob unserved", |sc| {
        top_row_has(sc, "alice", 1, "unserved")
            && top_row_has(sc, "bob", 1, "unserved")
            && top_row_has(sc, "carol", 1, "idle")
    });
    t.keys(&["q"]);
    let (code, screen) = t.wait_exit();
    assert_eq!(code, 0, "{screen}");
}

/// `aw-ctl top` has a pane for the merge queue (the counts, the running request and the
/// approval it waits for, the queued ones, the last results) and one for the pending
/// approvals (id, kind, what, approvers, expiry), each shown once it has something to show
/// and drawn again as the queue and the approvals change.
#[test]
fn top_shows_the_merge_queue_and_the_pending_approvals_live() {
    let s = Setup::new();
    let repo = s.dir().join("repo");
    std::fs::create_dir(&repo).unwrap();
    common::git(&repo, &["init", "-q", "-b", "main"]);
    s.write("repo/f.txt", "one\n");
    common::git(&repo, &["add", "f.txt"]);
    common::git(&repo, &["commit", "-q", "-m", "one"]);
    let branch = format!("aw/{INST}/coder");
    common::git(&repo, &["branch", &branch]);
    common::git(&repo, &["checkout", "-q", &branch]);
    s.write("repo/c.txt", "coded\n");
    common::git(&repo, &["add", "c.txt"]);
    common::git(&repo, &["commit", "-q", "-m", "c"]);
    common::git(&repo, &["checkout", "-q", "main"]);
    // aw-ctl in the repository, which must succeed: its stdout.
    let ctl = |args: &[&str]| {
        let out = s
            .tool_cmd("aw-ctl")
            .current_dir(&repo)
            .args(["-i", INST])
            .args(args)
            .output()
            .unwrap();
        assert_code(&out, 0);
        String::from_utf8(out.stdout).unwrap()
    };
    ctl(&["new", "coder", "--backend", "mock"]);
    // Merges of this instance need lead's approval once verified.
    s.write(
        &format!("{}/_state/merge.json", s.root.inst_dir(INST).display()),
        r#"{"verify": "true", "needs": {"by": ["lead"]}}"#,
    );
    let t = Tmux::start(s.dir(), &sh_tool(&s, "aw-ctl", &["-i", INST, "top"]));
    let screen = t.wait_for("top", |sc| sc.contains("aw-ctl top: instance w"));
    assert!(
        !screen.contains(" merges ") && !screen.contains(" approvals "),
        "{screen}"
    );

    ctl(&[
        "approvals",
        "ask",
        "deploy to prod",
        "--by",
        "lead",
        "--timeout",
        "1h",
    ]);
    t.wait_for("the pending approval", |sc| {
        sc.contains(" approvals ")
            && sc.contains("1 pending")
            && sc.contains("#1 task deploy to prod  by lead  expires 20")
    });
    ctl(&["merge", "request", "coder", "--no-wait"]);
    t.wait_for("the queued request", |sc| {
        sc.contains(" merges ")
            && sc.contains("1 queued, 0 running, 0 merged")
            && sc.contains(&format!("#1 coder {branch} -> main  queued by user"))
    });
    // Served: verified, it waits for lead, and both panes say so.
    let server = spawn({
        let mut c = s.tool_cmd("aw-ctl");
        c.current_dir(&repo).args(["-i", INST, "merge", "serve"]);
        c
    });
    let waiting = t.wait_for("the request waiting for its approval", |sc| {
        sc.contains("0 queued, 1 running")
            && sc.contains(&format!(
                "#1 coder {branch} -> main  running, waits for approval #2"
            ))
            && sc.contains("2 pending")
            && sc.contains(&format!(
                "#2 merge merge #1: {branch} into main  by lead  no time limit"
            ))
    });
    assert!(waiting.lines().count() <= 24, "{waiting}");
    ctl(&["approve", "2", "--as", "lead"]);
    assert_code(&wait_hang_guarded(server), 0);
    let commit = common::git(&repo, &["rev-parse", "main"]);
    t.wait_for("the merged request and one approval left", |sc| {
        sc.contains("0 queued, 0 running, 1 merged")
            && sc.contains(&format!(
                "#1 coder {branch} -> main  merged: {}",
                &commit[..12]
            ))
            && sc.contains("1 pending")
            && !sc.contains("#2 merge")
    });
    ctl(&["reject", "1", "--as", "lead"]);
    t.wait_for("no approval pending", |sc| !sc.contains(" approvals "));
    t.keys(&["q"]);
    let (code, screen) = t.wait_exit();
    assert_eq!(code, 0, "{screen}");

    // aw-ctl status says the same, in lines and JSON.
    ctl(&["approvals", "ask", "ship it", "--by", "lead"]);
    ctl(&["merge", "request", "coder", "--no-wait"]);
    let text = ctl(&["status"]);
    assert!(
        text.contains("  approval #3 pending: ship it (task, by lead)")
            && text.contains(&format!("  merge #2 queued: coder {branch} into main")),
        "{text}"
    );
    let v: Value = serde_json::from_str(&ctl(&["status", "--json"])).unwrap();
    assert_eq!(v["merges"][0]["id"], 2, "{v}");
    assert_eq!(v["merges"][0]["state"], "queued", "{v}");
    assert_eq!(v["approvals"][0]["id"], 3, "{v}");
    assert_eq!(v["approvals"][0]["what"], "ship it", "{v}");
}
