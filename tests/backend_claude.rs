//! The `claude` backend against a fake `claude` program: the exact argument vector, the
//! prompt on stdin, the JSON result read for the reply and the usage, error results, and a
//! missing program.

mod common;

use common::runner::*;

/// A fake `claude` in `bin/` that records its arguments and stdin, then prints `result`.
fn fake_claude(s: &Setup, result: &str, exit: i32) {
    std::fs::create_dir_all(s.dir().join("bin")).unwrap();
    s.script(
        "bin/claude",
        &format!(
            "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > argv.txt\ncat > stdin.txt\nprintf '%s\\n' '{result}'\nexit {exit}\n"
        ),
    );
}

fn run_with_fake(s: &Setup, wf: &str) -> std::process::Output {
    s.write("wf.yaml", wf);
    let mut c = s.cmd(&["-q", "--retries", "1"]);
    let path = format!("{}:{}", s.dir().join("bin").display(), path_with_bins());
    c.env("PATH", path);
    run_hang_guarded(c)
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
    let argv = std::fs::read_to_string(s.dir().join("argv.txt")).unwrap();
    let mcp = s.root.inst_dir(INST).join("_state/mcp/alice.json");
    let mcp = std::path::absolute(mcp).unwrap();
    let want = [
        "-p",
        "--output-format",
        "json",
        "--mcp-config",
        mcp.to_str().unwrap(),
        "--strict-mcp-config",
        "--allowedTools",
        "mcp__aw,Read",
        "--model",
        "claude-sonnet-4-5",
        "--append-system-prompt",
        "You review code.",
        "--max-turns",
        "4",
    ];
    assert_eq!(argv.lines().collect::<Vec<_>>(), want);
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
    assert_eq!(
        t["usage"],
        serde_json::json!({"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 100,
            "cache_write_tokens": 7, "cost_usd": 0.0125})
    );
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
    assert!(reason.contains("no JSON result"), "{reason}");
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
