//! The `claude` and `codex` backends against fake programs: the exact argument vector, the
//! prompt on stdin, the JSON Lines stream read for the reply and the usage, error results,
//! garbage, a missing program, and the watchdog that kills a program gone silent.

use crate::common;

use common::runner::*;

/// A fake `claude` in `bin/` that records its arguments and stdin, then prints `result`.
fn fake_claude(s: &Setup, result: &str, exit: i32) {
    fake(s, "claude", result, exit);
}

/// A fake `program` in `bin/` that records its arguments and stdin, then prints `output`.
fn fake(s: &Setup, program: &str, output: &str, exit: i32) {
    std::fs::create_dir_all(s.dir().join("bin")).unwrap();
    s.script(
        &format!("bin/{program}"),
        &format!(
            "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > argv.txt\ncat > stdin.txt\nprintf '%s\\n' '{output}'\nexit {exit}\n"
        ),
    );
}

fn run_with_fake(s: &Setup, wf: &str) -> std::process::Output {
    run_with_fake_args(s, wf, &[])
}

fn run_with_fake_args(s: &Setup, wf: &str, args: &[&str]) -> std::process::Output {
    s.write("wf.yaml", wf);
    let mut all = vec!["-q", "--retries", "1"];
    all.extend_from_slice(args);
    let mut c = s.cmd(&all);
    let path = format!("{}:{}", s.dir().join("bin").display(), path_with_bins());
    c.env("PATH", path);
    run_hang_guarded(c)
}

/// The arguments the fake `claude` recorded.
fn claude_argv(s: &Setup) -> Vec<String> {
    let argv = std::fs::read_to_string(s.dir().join("argv.txt")).unwrap();
    argv.lines().map(str::to_string).collect()
}

/// What every run of agent alice passes to `claude`, then `rest` (from the allowed tools on).
fn argv_with(s: &Setup, rest: &[&str]) -> Vec<String> {
    let mcp = s.root.inst_dir(INST).join("_state/mcp/alice.json");
    let mcp = std::path::absolute(mcp).unwrap();
    let head = [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        mcp.to_str().unwrap(),
        "--strict-mcp-config",
        "--allowedTools",
    ];
    head.iter().chain(rest).map(|a| a.to_string()).collect()
}

const WF: &str = "agents:\n  alice:\n    backend: claude\n    model: anthropic/claude-sonnet-4-5\n    system_prompt: You review code.\n    tools: [Read]\n    max_steps: 4\nkickoff: '@alice look'\n";

#[test]
fn claude_gets_its_argv_and_prompt_and_its_result_is_the_reply() {
    let s = Setup::new();
    fake_claude(
        &s,
        r#"{"type":"result","subtype":"success","is_error":false,"result":"@user all good","num_turns":2,"total_cost_usd":0.0125,"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":7}}"#,
        0,
    );
    let out = run_with_fake(&s, WF);
    assert_code(&out, 0);
    let want = [
        "mcp__aw,Read",
        "--model",
        "claude-sonnet-4-5",
        "--append-system-prompt",
        "You review code.",
        "--max-turns",
        "4",
    ];
    assert_eq!(claude_argv(&s), argv_with(&s, &want));
    let prompt = std::fs::read_to_string(s.dir().join("stdin.txt")).unwrap();
    assert!(prompt.starts_with("You are @alice"), "{prompt}");
    assert!(prompt.contains("From @system: @alice look"), "{prompt}");
    assert!(
        !prompt.contains("You review code."),
        "the system prompt goes in argv only"
    );
    assert_eq!(
        s.entries().last().unwrap(),
        &("alice".to_string(), "@user all good".to_string())
    );
    assert_eq!(s.unread("alice"), 0);
    let t = s.transcript("alice", 1);
    assert_eq!(t["status"], "ok");
    let usage = serde_json::json!({"input_tokens": 10, "output_tokens": 5,
        "cache_read_tokens": 100, "cache_write_tokens": 7, "cost_usd": 0.0125});
    assert_eq!(t["usage"], usage);
    // aw-ctl status sums the transcripts per agent and in total.
    let status = |json: bool| {
        let mut c = s.tool_cmd("aw-ctl");
        c.args(["-i", INST, "status"]);
        if json {
            c.arg("--json");
        }
        let out = c.output().expect("aw-ctl status");
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let v: serde_json::Value = serde_json::from_str(&status(true)).unwrap();
    assert_eq!(v["agents"][0]["usage"], usage);
    assert_eq!(v["usage"], usage);
    let text = status(false);
    assert!(text.contains("15 tokens, $0.0125"), "{text}");
    assert!(text.contains("  total 15 tokens, $0.0125"), "{text}");
}

#[test]
fn an_error_result_fails_the_run_and_leaves_the_message_unread() {
    let s = Setup::new();
    fake_claude(
        &s,
        r#"{"type":"result","subtype":"error_max_turns","is_error":true,"usage":{"input_tokens":3,"output_tokens":1}}"#,
        1,
    );
    let out = run_with_fake(&s, WF);
    assert_code(&out, 1);
    assert!(stderr(&out).contains("alice failed"), "{}", stderr(&out));
    assert_eq!(s.unread("alice"), 1);
    let t = s.transcript("alice", 1);
    assert_eq!(t["status"], "failed");
    assert_eq!(t["reason"], "claude: error_max_turns");
    assert_eq!(t["usage"]["input_tokens"], 3);
    // Garbage instead of a result is a failure too.
    let s = Setup::new();
    fake_claude(&s, "Segmentation fault", 0);
    assert_code(&run_with_fake(&s, WF), 1);
    let reason = s.transcript("alice", 1)["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(reason, "no result from claude");
}

/// The lines a fake prints, as a shell `printf '%s\n'` argument list.
fn quoted(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|l| format!("'{}'", l.replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A fake `claude` that records its arguments and stdin, then prints `lines`.
fn fake_stream(s: &Setup, lines: &[&str], exit: i32) {
    std::fs::create_dir_all(s.dir().join("bin")).unwrap();
    s.script(
        "bin/claude",
        &format!(
            "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > argv.txt\ncat > stdin.txt\nprintf '%s\\n' {}\nexit {exit}\n",
            quoted(lines)
        ),
    );
}

const INIT: &str = r#"{"type":"system","subtype":"init","session_id":"s-1","tools":["Read"],"mcp_servers":[{"name":"aw","status":"connected"}]}"#;
const ASSISTANT: &str = r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"mcp__aw__my_inbox","input":{}}],"usage":{"input_tokens":7,"output_tokens":2}},"session_id":"s-1"}"#;
const USER: &str = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"no messages"}]},"session_id":"s-1"}"#;

#[test]
fn the_stream_gives_its_result_line_after_the_progress_lines() {
    let s = Setup::new();
    let result = r#"{"type":"result","subtype":"success","is_error":false,"result":"@user reviewed","num_turns":3,"session_id":"s-1","total_cost_usd":0.031,"usage":{"input_tokens":40,"output_tokens":9,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}"#;
    fake_stream(&s, &[INIT, ASSISTANT, USER, "not JSON at all", result], 0);
    let out = run_with_fake(&s, WF);
    assert_code(&out, 0);
    assert_eq!(
        s.entries().last().unwrap(),
        &("alice".to_string(), "@user reviewed".to_string())
    );
    let t = s.transcript("alice", 1);
    assert_eq!(t["status"], "ok");
    assert_eq!(t["usage"]["input_tokens"], 40);
    assert_eq!(t["usage"]["output_tokens"], 9);
    assert_eq!(t["usage"]["cost_usd"], 0.031);
    // The transcript keeps the whole (short) stream, the result line with its session last.
    let stdout = t["stdout"].as_str().unwrap();
    assert_eq!(
        stdout,
        format!("{INIT}\n{ASSISTANT}\n{USER}\nnot JSON at all\n{result}\n")
    );
    assert_eq!(t["stdout_cut"], 0);
    // A stream longer than the transcript keeps: its first lines, then its result line.
    let s = Setup::new();
    let progress = vec![ASSISTANT; 400];
    let mut lines = vec![INIT];
    lines.extend_from_slice(&progress);
    lines.push(result);
    fake_stream(&s, &lines, 0);
    assert_code(&run_with_fake(&s, WF), 0);
    let t = s.transcript("alice", 1);
    assert_eq!(t["usage"]["cost_usd"], 0.031);
    let stdout = t["stdout"].as_str().unwrap();
    assert!(stdout.len() <= 64 * 1024, "{}", stdout.len());
    assert!(stdout.starts_with(&format!("{INIT}\n{ASSISTANT}\n")));
    assert!(stdout.ends_with(&format!("{ASSISTANT}\n{result}\n")));
    let printed: usize = lines.iter().map(|l| l.len() + 1).sum();
    assert_eq!(t["stdout_cut"], (printed - stdout.len()) as u64);
}

#[test]
fn a_stream_without_a_result_line_or_with_garbage_fails() {
    for (lines, exit, reason) in [
        (&[INIT, ASSISTANT, USER][..], 0, "no result from claude"),
        (
            &[INIT, ASSISTANT][..],
            1,
            "no result from claude (exit status 1)",
        ),
        (
            &["Segmentation fault", "{\"type\":\"result\",", "[1, 2]"][..],
            0,
            "no result from claude",
        ),
    ] {
        let s = Setup::new();
        fake_stream(&s, lines, exit);
        let out = run_with_fake(&s, WF);
        assert_code(&out, 1);
        let t = s.transcript("alice", 1);
        assert_eq!(t["status"], "failed", "{lines:?}");
        assert_eq!(t["reason"], reason, "{lines:?}");
        assert_eq!(t["usage"], serde_json::Value::Null, "{lines:?}");
        assert_eq!(s.unread("alice"), 1, "{lines:?}");
        assert_eq!(s.entries().len(), 1, "nothing posted for alice: {lines:?}");
    }
}

#[test]
fn permission_mode_and_the_budget_left_reach_claude() {
    let s = Setup::new();
    let result = r#"{"type":"result","subtype":"success","is_error":false,"result":"@user ok","total_cost_usd":0.0125,"usage":{"input_tokens":1,"output_tokens":1}}"#;
    fake_stream(&s, &[result], 0);
    let wf = "agents:\n  alice:\n    backend: claude\n    permission_mode: acceptEdits\n    max_steps: 2\nkickoff: '@alice look'\n";
    let out = run_with_fake_args(&s, wf, &["--budget-usd", "0.5"]);
    assert_code(&out, 0);
    let want = [
        "mcp__aw",
        "--permission-mode",
        "acceptEdits",
        "--max-turns",
        "2",
        "--max-budget-usd",
        "0.5000",
    ];
    assert_eq!(claude_argv(&s), argv_with(&s, &want));
    // Without a USD budget or a mode, neither flag.
    let s = Setup::new();
    fake_stream(&s, &[result], 0);
    let out = run_with_fake_args(&s, WF, &["--budget-tokens", "1000"]);
    assert_code(&out, 0);
    let argv = claude_argv(&s);
    assert!(!argv.iter().any(|a| a == "--max-budget-usd"), "{argv:?}");
    assert!(!argv.iter().any(|a| a == "--permission-mode"), "{argv:?}");
}

#[test]
fn the_spending_cap_is_what_the_budget_leaves() {
    let s = Setup::new();
    std::fs::create_dir_all(s.dir().join("bin")).unwrap();
    // Each run costs $0.01 and mentions bob, who mentions alice back.
    s.script(
        "bin/claude",
        "cat > /dev/null\nwhile [ $# -gt 0 ]; do\n  [ \"$1\" = --max-budget-usd ] && echo \"$2\" >> caps.txt\n  shift\ndone\nprintf '%s\\n' '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"@bob again\",\"total_cost_usd\":0.01,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}'\n",
    );
    let wf = "agents:\n  alice:\n    backend: claude\n  bob:\n    mock: {replies: ['@alice again']}\nkickoff: '@alice go'\n";
    let out = run_with_fake_args(&s, wf, &["--budget-usd", "0.02"]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("over the $0.02 budget"),
        "{}",
        stderr(&out)
    );
    let caps = std::fs::read_to_string(s.dir().join("caps.txt")).unwrap();
    // Nothing left is still a cap Claude Code takes: the smallest.
    assert_eq!(
        caps.lines().collect::<Vec<_>>(),
        ["0.0200", "0.0100", "0.0001"]
    );
}

/// `aw-ctl runs --json` of the setup: one JSON object per transcript.
fn runs(s: &Setup) -> Vec<serde_json::Value> {
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "runs", "--json"]);
    let out = c.output().expect("aw-ctl runs");
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

#[test]
fn a_program_gone_silent_is_killed_with_its_whole_group() {
    let s = Setup::new();
    std::fs::create_dir_all(s.dir().join("bin")).unwrap();
    // One line, then silence: it waits for a child that sleeps (in its process group).
    s.script(
        "bin/claude",
        &format!(
            "cat > /dev/null\necho $$ > pid.txt\nsleep 600 &\necho $! > child.txt\nprintf '%s\\n' '{INIT}'\nwait\n"
        ),
    );
    let wf =
        "agents:\n  alice:\n    backend: claude\n    idle_timeout: 1s\nkickoff: '@alice look'\n";
    let out = run_with_fake(&s, wf);
    assert_code(&out, 1);
    let list = runs(&s);
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["status"], "timeout");
    assert_eq!(list[0]["reason"], "no output for 1s; killed");
    assert_eq!(s.transcript("alice", 1)["stdout"], format!("{INIT}\n"));
    assert_eq!(s.unread("alice"), 1);
    let pid = |f: &str| -> u32 {
        let text = std::fs::read_to_string(s.dir().join(f)).unwrap();
        text.trim().parse().unwrap()
    };
    let (leader, child) = (pid("pid.txt"), pid("child.txt"));
    wait_for("the group to be gone", || {
        !alive(leader) && !alive(child) && group_members(leader).is_empty()
    });
    // An exec program the same way, when it sets an idle timeout.
    let s = Setup::new();
    s.script("quiet.sh", "echo started\nexec sleep 600\n");
    let wf =
        "agents:\n  bot:\n    command: [./quiet.sh]\n    idle_timeout: 0.5s\nkickoff: '@bot go'\n";
    let out = run_with_fake(&s, wf);
    assert_code(&out, 1);
    let list = runs(&s);
    assert_eq!(list[0]["status"], "timeout");
    assert_eq!(list[0]["reason"], "no output for 0.5s; killed");
    assert_eq!(s.transcript("bot", 1)["stdout"], "started\n");
    // Output on stderr counts: a program that keeps telling its progress there lives on.
    let s = Setup::new();
    s.script(
        "busy.sh",
        "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do echo \"step $i\" >&2; sleep 0.1; done\necho '@user done'\n",
    );
    let wf =
        "agents:\n  bot:\n    command: [./busy.sh]\n    idle_timeout: 1s\nkickoff: '@bot go'\n";
    assert_code(&run_with_fake(&s, wf), 0);
    assert_eq!(s.transcript("bot", 1)["status"], "ok");
    assert_eq!(
        s.entries().last().unwrap(),
        &("bot".to_string(), "@user done".to_string())
    );
}

#[test]
fn a_missing_claude_program_is_refused_before_anything_runs() {
    let s = Setup::new();
    s.write("wf.yaml", WF);
    let mut c = s.cmd(&["-q"]);
    c.env("PATH", "/nonexistent");
    let out = run_hang_guarded(c);
    assert_code(&out, 69);
    assert!(
        stderr(&out).contains("no 'claude' in PATH"),
        "{}",
        stderr(&out)
    );
    assert!(!s.root.inst_dir(INST).join("channel.md").exists());
}

#[test]
fn codex_gets_the_mcp_server_as_overrides_and_its_events_give_the_reply() {
    let s = Setup::new();
    let events = concat!(
        r#"{"type":"thread.started","thread_id":"t1"}"#,
        "\n",
        r#"{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"@user fixed"}}"#,
        "\n",
        r#"{"type":"turn.completed","usage":{"input_tokens":20,"cached_input_tokens":8,"output_tokens":4}}"#
    );
    fake(&s, "codex", events, 0);
    let wf =
        "agents:\n  bob:\n    backend: codex\n    model: openai/gpt-5\nkickoff: '@bob fix it'\n";
    let out = run_with_fake(&s, wf);
    assert_code(&out, 0);
    let argv = std::fs::read_to_string(s.dir().join("argv.txt")).unwrap();
    let argv: Vec<&str> = argv.lines().collect();
    assert_eq!(&argv[..3], ["exec", "--json", "--skip-git-repo-check"]);
    let root = std::path::absolute(s.root.path()).unwrap();
    let overrides: Vec<&str> = argv
        .windows(2)
        .filter(|w| w[0] == "-c")
        .map(|w| w[1])
        .collect();
    assert_eq!(overrides.len(), 6, "{argv:?}");
    assert!(
        overrides[0].starts_with("mcp_servers.aw.command=\""),
        "{argv:?}"
    );
    assert!(overrides[0].ends_with("aw-mcp\""), "{argv:?}");
    assert_eq!(
        overrides[1],
        format!("mcp_servers.aw.args=[\"--agent\", \"bob@{INST}\"]")
    );
    assert_eq!(
        overrides[2],
        format!("mcp_servers.aw.env={{ AW_ROOT = \"{}\" }}", root.display())
    );
    assert_eq!(overrides[3], "mcp_servers.aw.required=true");
    assert_eq!(overrides[5], "mcp_servers.aw.tool_timeout_sec=330");
    assert_eq!(argv[argv.len() - 3..], ["-m", "gpt-5", "-"]);
    let prompt = std::fs::read_to_string(s.dir().join("stdin.txt")).unwrap();
    assert!(prompt.contains("From @system: @bob fix it"), "{prompt}");
    assert_eq!(
        s.entries().last().unwrap(),
        &("bob".to_string(), "@user fixed".to_string())
    );
    let t = s.transcript("bob", 1);
    assert_eq!(
        t["usage"],
        serde_json::json!({"input_tokens": 12, "output_tokens": 4, "cache_read_tokens": 8,
            "cache_write_tokens": 0, "cost_usd": 0.000056})
    );
}

#[test]
fn a_budget_stops_every_agent_and_says_so() {
    // Each run costs $0.02 and 150 tokens and mentions the other agent: a loop that only a
    // budget ends here.
    let s = Setup::new();
    fake(
        &s,
        "claude",
        r#"{"type":"result","subtype":"success","is_error":false,"result":"@bob again","total_cost_usd":0.02,"usage":{"input_tokens":100,"output_tokens":50}}"#,
        0,
    );
    let wf = "agents:\n  alice:\n    backend: claude\n  bob:\n    mock: {replies: ['@alice again']}\nkickoff: '@alice go'\n";
    let out = run_with_fake_args(&s, wf, &["--budget-usd", "0.05"]);
    assert_code(&out, 1);
    let err = stderr(&out);
    assert!(
        err.contains("aw-run: budget: $0.0600 spent, over the $0.05 budget"),
        "{err}"
    );
    let entries = s.entries();
    let last = entries.last().unwrap();
    assert_eq!(last.0, "system");
    assert!(last.1.starts_with("budget: $0.0600 spent"), "{entries:?}");
    assert_eq!(
        entries.iter().filter(|(f, _)| f == "alice").count(),
        3,
        "{entries:?}"
    );
    // alice's third run is counted before its answer wakes bob: bob starts no run after it.
    assert_eq!(
        entries.iter().filter(|(f, _)| f == "bob").count(),
        2,
        "{entries:?}"
    );
    // A token budget the same way.
    let s = Setup::new();
    fake(
        &s,
        "claude",
        r#"{"type":"result","subtype":"success","is_error":false,"result":"@bob again","usage":{"input_tokens":100,"output_tokens":50}}"#,
        0,
    );
    let out = run_with_fake_args(&s, wf, &["--budget-tokens", "200"]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("budget: 300 tokens used, over the 200 token budget"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn every_example_workflow_passes_the_check() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // The check also asks for the CLIs the examples name: stand-ins do.
    let s = Setup::new();
    fake(&s, "claude", "", 0);
    fake(&s, "codex", "", 0);
    let path = format!("{}:{}", s.dir().join("bin").display(), path_with_bins());
    let mut n = 0;
    for e in std::fs::read_dir(repo.join("examples")).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "yaml") {
            let mut c = common::tool("aw-run");
            // API examples need their keys: any value does for the check.
            c.env("PATH", &path)
                .env("ANTHROPIC_API_KEY", "sk-ant-example")
                .env("OPENAI_API_KEY", "sk-example")
                .arg("--check")
                .arg(&p);
            let out = run_hang_guarded(c);
            assert_code(&out, 0);
            assert!(out.stderr.is_empty(), "{}: {}", p.display(), stderr(&out));
            n += 1;
        }
    }
    assert!(n >= 4, "{n} examples");
}

#[test]
fn a_prompt_larger_than_a_pipe_reaches_a_reader_and_does_not_hold_a_non_reader() {
    let s = Setup::new();
    let big = "x".repeat(300_000);
    let wf = format!(
        "agents:\n  counter:\n    command: [wc, -c]\n  deaf:\n    command: [echo, '@user not reading']\nkickoff: '@counter @deaf {big}'\n"
    );
    let out = run_with_fake(&s, &wf);
    assert_code(&out, 0);
    let t = s.transcript("counter", 1);
    let prompt = t["prompt"].as_str().unwrap();
    assert!(prompt.len() > 300_000);
    let counted = s
        .entries()
        .into_iter()
        .find(|(from, _)| from == "counter")
        .unwrap()
        .1;
    assert_eq!(counted.trim(), prompt.len().to_string());
    assert_eq!(s.transcript("deaf", 1)["status"], "ok");
}

#[test]
fn a_stopped_run_still_counts_what_it_spent() {
    // Claude Code: two model calls seen (one on two lines), then silence.
    let s = Setup::new();
    std::fs::create_dir_all(s.dir().join("bin")).unwrap();
    let call = |id: &str, block: &str| {
        format!(
            r#"{{"type":"assistant","message":{{"id":"{id}","role":"assistant","content":[{block}],"usage":{{"input_tokens":100,"output_tokens":10,"cache_read_input_tokens":50}}}}}}"#
        )
    };
    let lines = [
        INIT.to_string(),
        call("m1", r#"{"type":"text","text":"looking"}"#),
        call(
            "m1",
            r#"{"type":"tool_use","id":"t","name":"Read","input":{}}"#,
        ),
        call("m2", r#"{"type":"text","text":"still looking"}"#),
    ];
    s.script(
        "bin/claude",
        &format!(
            "cat > /dev/null\nprintf '%s\\n' {}\nexec sleep 600\n",
            quoted(&lines.iter().map(String::as_str).collect::<Vec<_>>())
        ),
    );
    let wf =
        "agents:\n  alice:\n    backend: claude\n    idle_timeout: 1s\nkickoff: '@alice look'\n";
    assert_code(&run_with_fake(&s, wf), 1);
    let t = s.transcript("alice", 1);
    assert_eq!(t["status"], "timeout");
    assert_eq!(t["usage"]["input_tokens"], 200, "{t}");
    assert_eq!(t["usage"]["output_tokens"], 20);
    assert_eq!(t["usage"]["cache_read_tokens"], 100);

    // Codex: one turn completed, then silence.
    let s = Setup::new();
    std::fs::create_dir_all(s.dir().join("bin")).unwrap();
    let turn = r#"{"type":"turn.completed","usage":{"input_tokens":30,"cached_input_tokens":10,"output_tokens":5}}"#;
    s.script(
        "bin/codex",
        &format!("cat > /dev/null\nprintf '%s\\n' '{turn}'\nexec sleep 600\n"),
    );
    let wf = "agents:\n  bob:\n    backend: codex\n    idle_timeout: 1s\nkickoff: '@bob fix'\n";
    assert_code(&run_with_fake(&s, wf), 1);
    let t = s.transcript("bob", 1);
    assert_eq!(t["status"], "timeout");
    assert_eq!(t["usage"]["input_tokens"], 20, "{t}");
    assert_eq!(t["usage"]["cache_read_tokens"], 10);
    assert_eq!(t["usage"]["output_tokens"], 5);
}
