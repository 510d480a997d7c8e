//! `session: keep`: a `claude` or `codex` agent continues one CLI session across runs, its id
//! kept in the instance; against stand-in CLIs that keep sessions of their own: the argument
//! vectors, the short prompt of a continued run, a restart of aw-run, a session the CLI no
//! longer has (a fresh one, said), `aw-ctl session ls|reset`, and the key refused where it
//! does not apply.

use crate::common;

use common::runner::*;

/// A stand-in CLI that keeps sessions in `sessions/`, one file per id holding the prompts
/// of its turns: each call's arguments and stdin go to `calls/N.argv` and `calls/N.stdin`.
/// The session given after the argument `word` is continued; one it does not have runs
/// `unknown` and fails; no session starts `PREFIX-N`. While a file `hold` exists, it waits;
/// then `print` prints the stream, with `$id` the session and `$n` the call.
fn stand_in(word: &str, prefix: &str, unknown: &str, print: &str) -> String {
    format!(
        r#"mkdir -p calls sessions
n=$(($(ls calls | wc -l) / 2 + 1))
for a in "$@"; do printf '%s\n' "$a"; done > calls/$n.argv
cat > calls/$n.stdin
id=
while [ $# -gt 0 ]; do
  [ "$1" = {word} ] && id=$2
  shift
done
if [ -n "$id" ]; then
  if [ ! -e "sessions/$id" ]; then
    {unknown}
    exit 1
  fi
else
  id={prefix}-$n
fi
cat calls/$n.stdin >> sessions/$id
while [ -e hold ]; do sleep 0.05; done
{print}
"#
    )
}

/// A stand-in `claude -p ... [--resume ID]`: a session it does not have is said as Claude
/// Code 2.1 says it (on stderr, and in an error result that names the session, with no init
/// line); the init line and the result carry the session id, 10 input and 2 output
/// tokens and $0.01. Its first call answers `@bob hi`, the others `done N`.
fn claude() -> String {
    stand_in(
        "--resume",
        "s",
        r#"echo "No conversation found with session ID: $id" >&2
    printf '{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"session_id":"%s","errors":["No conversation found with session ID: %s"],"usage":{"input_tokens":0,"output_tokens":0}}\n' "$id" "$id""#,
        r#"if [ "$n" = 1 ]; then answer='@bob hi'; else answer="done $n"; fi
printf '{"type":"system","subtype":"init","session_id":"%s"}\n' "$id"
printf '{"type":"result","subtype":"success","is_error":false,"result":"%s","session_id":"%s","total_cost_usd":0.01,"usage":{"input_tokens":10,"output_tokens":2}}\n' "$answer" "$id""#,
    )
}

const WF: &str = "agents:\n  alice:\n    backend: claude\n    session: keep\n  bob:\n    mock: {replies: ['@alice thanks']}\nkickoff: '@alice go'\n";

fn setup(program: &str, body: &str) -> Setup {
    let s = Setup::new();
    std::fs::create_dir_all(s.dir().join("bin")).unwrap();
    s.script(&format!("bin/{program}"), body);
    s
}

/// aw-run on `wf`, the stand-ins first in PATH.
fn run(s: &Setup, wf: &str) -> std::process::Output {
    s.write("wf.yaml", wf);
    run_hang_guarded(aw_run(s))
}

/// aw-run on `wf.yaml`, the stand-ins first in PATH.
fn aw_run(s: &Setup) -> std::process::Command {
    let mut c = s.cmd(&["-q", "--retries", "1"]);
    let path = format!("{}:{}", s.dir().join("bin").display(), path_with_bins());
    c.env("PATH", path);
    c
}

/// The arguments and the stdin of call `n` of a stand-in.
fn call(s: &Setup, n: u32) -> (Vec<String>, String) {
    let read = |ext: &str| {
        std::fs::read_to_string(s.dir().join(format!("calls/{n}.{ext}")))
            .unwrap_or_else(|e| panic!("call {n}: {e}"))
    };
    let argv = read("argv").lines().map(str::to_string).collect();
    (argv, read("stdin"))
}

/// The session given with `flag`, if any.
fn resumed(argv: &[String], flag: &str) -> Option<String> {
    argv.windows(2).find(|w| w[0] == flag).map(|w| w[1].clone())
}

/// `aw-ctl session ARGS` in the setup: its exit status and stdout.
fn ctl(s: &Setup, args: &[&str]) -> (i32, String) {
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "session"]).args(args);
    let out = c.output().expect("aw-ctl session");
    let code = out.status.code().unwrap_or(-1);
    (code, String::from_utf8(out.stdout).unwrap())
}

/// The sessions `aw-ctl session ls --json` lists.
fn kept(s: &Setup) -> Vec<serde_json::Value> {
    let (code, text) = ctl(s, &["ls", "--json"]);
    assert_eq!(code, 0, "{text}");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn claude_continues_its_session_with_the_new_inbox_across_runs_and_restarts() {
    let s = setup("claude", &claude());
    let out = run(&s, WF);
    assert_code(&out, 0);
    // Run 1: a fresh session with the whole prompt.
    let (argv, prompt) = call(&s, 1);
    assert_eq!(resumed(&argv, "--resume"), None, "{argv:?}");
    assert!(prompt.starts_with("You are @alice"), "{prompt}");
    assert!(prompt.contains("## Recent Activity"), "{prompt}");
    // Run 2: the same session, only what is new, with the instructions.
    let (argv, prompt) = call(&s, 2);
    assert_eq!(
        resumed(&argv, "--resume").as_deref(),
        Some("s-1"),
        "{argv:?}"
    );
    assert!(
        prompt.starts_with("New in the aw workflow instance 'w' since your last run, @alice."),
        "{prompt}"
    );
    assert!(prompt.contains("## Inbox (1 message for you)"), "{prompt}");
    assert!(prompt.contains("- From @bob: @alice thanks"), "{prompt}");
    assert!(prompt.contains("## Instructions"), "{prompt}");
    assert!(
        !prompt.contains("@alice go"),
        "the first inbox is not shown again"
    );
    assert!(!prompt.contains("## Recent Activity"), "{prompt}");
    // The session holds both turns.
    let held = std::fs::read_to_string(s.dir().join("sessions/s-1")).unwrap();
    assert!(held.contains("From @system: @alice go") && held.contains("From @bob: @alice thanks"));
    let k = kept(&s);
    assert_eq!(k.len(), 1, "{k:?}");
    assert_eq!(
        (&k[0]["agent"], &k[0]["backend"], &k[0]["id"], &k[0]["runs"]),
        (
            &"alice".into(),
            &"claude".into(),
            &"s-1".into(),
            &serde_json::json!(2)
        )
    );
    // Each run's usage counts as it did: 2 runs of 12 tokens and $0.01.
    for n in 1..=2 {
        let t = s.transcript("alice", n);
        assert_eq!(t["usage"]["input_tokens"], 10, "{t}");
        assert_eq!(t["usage"]["cost_usd"], 0.01, "{t}");
    }
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "status", "--json"]);
    let v: serde_json::Value =
        serde_json::from_slice(&c.output().expect("aw-ctl status").stdout).unwrap();
    let alice = v["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "alice")
        .unwrap()
        .clone();
    assert_eq!(alice["usage"]["input_tokens"], 20, "{v}");
    assert_eq!(alice["usage"]["output_tokens"], 4, "{v}");
    assert_eq!(alice["usage"]["cost_usd"], 0.02, "{v}");
    // A new aw-run on the instance continues it.
    let out = run(&s, WF);
    assert_code(&out, 0);
    let (argv, prompt) = call(&s, 3);
    assert_eq!(
        resumed(&argv, "--resume").as_deref(),
        Some("s-1"),
        "{argv:?}"
    );
    assert!(prompt.contains("- From @system: @alice go"), "{prompt}");
    assert_eq!(kept(&s)[0]["runs"], 3);
}

#[test]
fn a_session_the_cli_cannot_resume_falls_back_to_a_fresh_one_and_says_so() {
    let s = setup("claude", &claude());
    let wf = "agents:\n  alice:\n    backend: claude\n    session: keep\nkickoff: '@alice go'\n";
    assert_code(&run(&s, wf), 0);
    assert_eq!(kept(&s)[0]["id"], "s-1");
    // The CLI lost it.
    std::fs::remove_file(s.dir().join("sessions/s-1")).unwrap();
    let out = run(&s, wf);
    assert_code(&out, 0);
    let err = stderr(&out);
    assert!(
        err.contains("aw-run: warning: alice: session s-1 not resumed (claude: error_during_execution: No conversation found with session ID: s-1); a fresh session\n"),
        "{err}"
    );
    let (argv, _) = call(&s, 2);
    assert_eq!(resumed(&argv, "--resume").as_deref(), Some("s-1"));
    // In the same attempt: a fresh session with the whole prompt.
    let (argv, prompt) = call(&s, 3);
    assert_eq!(resumed(&argv, "--resume"), None, "{argv:?}");
    assert!(prompt.starts_with("You are @alice"), "{prompt}");
    let t = s.transcript("alice", 2);
    assert_eq!(t["status"], "ok");
    assert_eq!(t["attempt"], 1);
    assert!(t["prompt"].as_str().unwrap().starts_with("You are @alice"));
    assert!(!s.transcript_path("alice", 3).exists(), "one attempt");
    let k = kept(&s);
    assert_eq!((&k[0]["id"], &k[0]["runs"]), (&"s-3".into(), &1.into()));
}

#[test]
fn a_reset_while_the_agent_runs_holds() {
    let s = setup("claude", &claude());
    let wf = "agents:\n  alice:\n    backend: claude\n    session: keep\nkickoff: '@alice go'\n";
    assert_code(&run(&s, wf), 0);
    s.write("hold", "");
    let child = spawn(aw_run(&s));
    wait_for("run 2 to be under way", || {
        s.dir().join("calls/2.stdin").exists()
    });
    assert_eq!(resumed(&call(&s, 2).0, "--resume").as_deref(), Some("s-1"));
    let (code, text) = ctl(&s, &["reset", "alice"]);
    assert_eq!(
        (code, text.as_str()),
        (0, "alice: forgot claude session s-1\n")
    );
    std::fs::remove_file(s.dir().join("hold")).unwrap();
    let out = wait_hang_guarded(child);
    assert_code(&out, 0);
    assert!(
        stderr(&out).contains("aw-run: alice: session s-1 not kept: reset while it ran\n"),
        "{}",
        stderr(&out)
    );
    assert_eq!(kept(&s).len(), 0);
    assert_code(&run(&s, wf), 0);
    assert_eq!(resumed(&call(&s, 3).0, "--resume"), None);
}

#[test]
fn session_reset_forgets_it_and_the_next_run_starts_fresh() {
    let s = setup("claude", &claude());
    let wf = "agents:\n  alice:\n    backend: claude\n    session: keep\nkickoff: '@alice go'\n";
    assert_code(&run(&s, wf), 0);
    let (code, text) = ctl(&s, &["ls"]);
    assert_eq!(code, 0);
    assert!(text.starts_with("alice claude s-1 runs 1 since "), "{text}");
    let (code, text) = ctl(&s, &["reset", "alice"]);
    assert_eq!(
        (code, text.as_str()),
        (0, "alice: forgot claude session s-1\n")
    );
    assert_eq!(kept(&s).len(), 0);
    let (code, text) = ctl(&s, &["reset", "alice"]);
    assert_eq!((code, text.as_str()), (0, "alice: no session kept\n"));
    let (code, _) = ctl(&s, &["reset", "-bad"]);
    assert_ne!(code, 0);
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "session", "reset", "no/such"]);
    let err = common::assert_error(&c.output().unwrap(), "aw-ctl", 65, "a bad agent name");
    assert!(err.contains("invalid agent name 'no/such'"), "{err}");
    assert_code(&run(&s, wf), 0);
    let (argv, prompt) = call(&s, 2);
    assert_eq!(resumed(&argv, "--resume"), None, "{argv:?}");
    assert!(prompt.starts_with("You are @alice"), "{prompt}");
    assert_eq!(kept(&s)[0]["id"], "s-2");
    // Without session: keep, nothing is kept or resumed.
    let s = setup("claude", &claude());
    let wf = "agents:\n  alice:\n    backend: claude\nkickoff: '@alice go'\n";
    assert_code(&run(&s, wf), 0);
    assert_code(&run(&s, wf), 0);
    assert_eq!(resumed(&call(&s, 2).0, "--resume"), None);
    assert_eq!(kept(&s).len(), 0);
}

/// A stand-in `codex exec --json ... [resume ID] -`: a thread it does not have is an
/// `error` event; `thread.started` gives the thread, then one message and one turn whose
/// usage, as Codex reports it, is the thread's whole: 10 input tokens (4 cached) and 2
/// output tokens more at each call.
fn codex() -> String {
    stand_in(
        "resume",
        "t",
        r#"printf '{"type":"error","message":"no rollout found for thread id %s"}\n' "$id""#,
        r#"printf '{"type":"thread.started","thread_id":"%s"}\n' "$id"
printf '{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"done %s"}}\n' "$n"
t=$(($(cat "sessions/$id.calls" 2>/dev/null || echo 0) + 1))
echo $t > "sessions/$id.calls"
printf '{"type":"turn.completed","usage":{"input_tokens":%s,"cached_input_tokens":%s,"output_tokens":%s}}\n' $((t * 10)) $((t * 4)) $((t * 2))"#,
    )
}

#[test]
fn codex_continues_its_thread_with_exec_resume() {
    let s = setup("codex", &codex());
    let wf = "agents:\n  bob:\n    backend: codex\n    session: keep\nkickoff: '@bob go'\n";
    assert_code(&run(&s, wf), 0);
    let (argv, _) = call(&s, 1);
    assert!(!argv.contains(&"resume".to_string()), "{argv:?}");
    assert_eq!(kept(&s)[0]["id"], "t-1");
    assert_eq!(kept(&s)[0]["backend"], "codex");
    assert_code(&run(&s, wf), 0);
    let (argv, prompt) = call(&s, 2);
    assert_eq!(&argv[..2], ["exec", "--json"]);
    assert_eq!(argv[argv.len() - 3..], ["resume", "t-1", "-"], "{argv:?}");
    assert!(
        prompt.starts_with("New in the aw workflow instance"),
        "{prompt}"
    );
    // Each run counts its own tokens: what the thread's grew by.
    let usage = |n| {
        let u = s.transcript("bob", n)["usage"].clone();
        (
            u["input_tokens"].clone(),
            u["cache_read_tokens"].clone(),
            u["output_tokens"].clone(),
        )
    };
    assert_eq!(usage(1), (6.into(), 4.into(), 2.into()));
    assert_eq!(usage(2), (6.into(), 4.into(), 2.into()));
    let total = &kept(&s)[0]["total"];
    assert_eq!(
        (&total["input_tokens"], &total["cache_read_tokens"]),
        (&12.into(), &8.into())
    );
    // A thread Codex no longer has: a fresh one in the same attempt.
    std::fs::remove_file(s.dir().join("sessions/t-1")).unwrap();
    let out = run(&s, wf);
    assert_code(&out, 0);
    assert!(
        stderr(&out).contains(
            "aw-run: warning: bob: session t-1 not resumed (codex: no rollout found for thread id t-1); a fresh session\n"
        ),
        "{}",
        stderr(&out)
    );
    let (argv, _) = call(&s, 4);
    assert!(!argv.contains(&"resume".to_string()), "{argv:?}");
    assert_eq!(kept(&s)[0]["id"], "t-4");
}

#[test]
fn the_key_is_refused_where_it_does_not_apply() {
    let s = Setup::new();
    for (wf, want) in [
        (
            "agents:\n  bob:\n    mock: {replies: [hi]}\n    session: keep\n",
            "wf.yaml:4:5: agents.bob.session: only for backends claude and codex (this agent's is mock)",
        ),
        (
            "agents:\n  bob:\n    backend: anthropic\n    model: anthropic/claude-sonnet-4-5\n    session: keep\n",
            "wf.yaml:5:5: agents.bob.session: only for backends claude and codex (this agent's is anthropic)",
        ),
        (
            "agents:\n  bob:\n    backend: claude\n    session: kept\n",
            "wf.yaml:4:14: agents.bob.session: expected fresh or keep, found 'kept' (did you mean 'keep'?)",
        ),
    ] {
        s.write("wf.yaml", wf);
        let mut c = s.cmd(&["--check"]);
        c.env("ANTHROPIC_API_KEY", "sk-ant-example");
        let out = run_hang_guarded(c);
        assert_code(&out, 65);
        assert!(stderr(&out).contains(want), "{wf}: {}", stderr(&out));
    }
}
