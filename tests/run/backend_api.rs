//! The `anthropic` and `openai` backends against a fake API on loopback: the tool loop
//! through the aw tools, the requests sent, usage summed over the steps, retries of 429,
//! 529, 5xx and dropped connections (honouring `retry-after`), failures that are not
//! retried, the end reasons, `max_steps`, a budget stopping the loop, and missing keys.

use crate::common;

use common::fake_api::{FakeApi, Reply};
use common::runner::*;
use serde_json::{Value, json};

pub(crate) const KEY: &str = "sk-test-0123456789";

const ANTHROPIC_WF: &str = "agents:
  alice:
    backend: anthropic
    model: claude-test
    system_prompt: You review code.
    max_steps: 4
kickoff: '@alice look at the diff'
";

/// aw-run -q --retries 1 on `wf`, with the fake's URL and a key in the environment.
fn run_api(s: &Setup, wf: &str, api: &FakeApi, args: &[&str]) -> std::process::Output {
    run_hang_guarded(api_cmd(s, wf, api, args))
}

/// The command of [`run_api`], not started.
fn api_cmd(s: &Setup, wf: &str, api: &FakeApi, args: &[&str]) -> std::process::Command {
    s.write("wf.yaml", wf);
    let mut all = vec!["-q", "--retries", "1"];
    all.extend_from_slice(args);
    let mut c = s.cmd(&all);
    c.env("ANTHROPIC_BASE_URL", &api.url)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("OPENAI_BASE_URL", format!("{}/v1", api.url))
        .env("OPENAI_API_KEY", KEY);
    c
}

/// An Anthropic answer.
pub(crate) fn answer(content: Value, stop: &str, input: u64, output: u64) -> Reply {
    Reply::ok(json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": content, "stop_reason": stop,
        "usage": {"input_tokens": input, "output_tokens": output}
    }))
}

pub(crate) fn tool_use(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn end(t: &str) -> Reply {
    answer(json!([text(t)]), "end_turn", 10, 5)
}

#[test]
fn anthropic_runs_the_tool_loop_through_the_aw_tools() {
    let s = Setup::new();
    let api = FakeApi::start(vec![
        Reply::ok(json!({
            "content": [
                text("Posting my review."),
                tool_use("tu_1", "channel_send", json!({"message": "@user the diff looks fine"})),
                tool_use("tu_2", "team_doc_write", json!({"content": "# Review\nall good\n"})),
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 900}
        })),
        Reply::ok(json!({
            "content": [text("Done.")],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 150, "output_tokens": 10, "cache_read_input_tokens": 900}
        })),
    ]);
    let out = run_api(&s, ANTHROPIC_WF, &api, &[]);
    assert_code(&out, 0);

    // The tools ran as alice; her own post means no fallback reply.
    let entries = s.entries();
    assert_eq!(
        entries
            .iter()
            .filter(|(f, _)| f == "alice")
            .collect::<Vec<_>>(),
        [&("alice".to_string(), "@user the diff looks fine".to_string())]
    );
    let doc = s.root.inst_dir(INST).join("documents/notes.md");
    assert_eq!(
        std::fs::read_to_string(doc).unwrap(),
        "# Review\nall good\n"
    );
    assert_eq!(s.unread("alice"), 0);

    // What was sent.
    let reqs = api.requests();
    assert_eq!(reqs.len(), 2);
    let r0 = &reqs[0];
    assert_eq!(r0.path, "/v1/messages");
    assert_eq!(r0.header("x-api-key"), Some(KEY));
    assert_eq!(r0.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r0.body["model"], "claude-test");
    assert_eq!(r0.body["max_tokens"], 8192);
    let system = r0.body["system"][0]["text"].as_str().unwrap();
    assert!(system.starts_with("You review code.\n\n"), "{system}");
    assert!(system.contains("my_inbox"), "{system}");
    let tools: Vec<&str> = r0.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools.len(), 28);
    assert!(tools.contains(&"channel_send") && tools.contains(&"team_doc_write"));
    let prompt = r0.body["messages"][0]["content"].as_str().unwrap();
    assert!(prompt.contains("@alice look at the diff"), "{prompt}");
    assert!(
        !prompt.contains("You review code."),
        "system prompt left out of the prompt"
    );

    // The second request carries the conversation and both tool results.
    let m = r0.body["messages"].as_array().unwrap().len();
    assert_eq!(m, 1);
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(msgs[1]["content"][1]["id"], "tu_1");
    let results = msgs[2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["tool_use_id"], "tu_1");
    assert_eq!(results[0]["is_error"], false);
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("Sent as #")
    );
    assert_eq!(results[1]["tool_use_id"], "tu_2");
    assert_eq!(results[1]["is_error"], false);

    // Usage summed over both steps; cost unknown for an unknown model.
    let t = s.transcript("alice", 1);
    assert_eq!(t["status"], "ok");
    assert_eq!(
        t["usage"],
        json!({"input_tokens": 250, "output_tokens": 30, "cache_read_tokens": 900, "cache_write_tokens": 900, "cost_usd": null})
    );
    let steps: Vec<Value> = t["stdout"]
        .as_str()
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["finish"], "tool_use");
    assert_eq!(
        steps[0]["tools"][1],
        json!({"name": "team_doc_write", "error": false})
    );
    assert_eq!(steps[1]["finish"], "end_turn");
    assert!(!t.to_string().contains(KEY), "the key is in the transcript");
}

#[test]
fn a_tool_error_goes_back_to_the_model_and_the_loop_goes_on() {
    let s = Setup::new();
    let api = FakeApi::start(vec![
        answer(
            json!([
                tool_use("a", "no_such_tool", json!({})),
                tool_use("b", "channel_send", json!({})),
            ]),
            "tool_use",
            1,
            1,
        ),
        end("@user could not post"),
    ]);
    let out = run_api(&s, ANTHROPIC_WF, &api, &[]);
    assert_code(&out, 0);
    let reqs = api.requests();
    let results = &reqs[1].body["messages"][2]["content"];
    assert_eq!(results[0]["is_error"], true);
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("unknown tool 'no_such_tool'"),
        "{results}"
    );
    assert_eq!(results[1]["is_error"], true);
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .contains("'message'"),
        "{results}"
    );
    // Nothing posted by a tool: the final text is the reply.
    assert!(
        s.entries()
            .contains(&("alice".into(), "@user could not post".into()))
    );
}

#[test]
fn rate_limits_overload_and_server_errors_are_retried_honouring_retry_after() {
    let s = Setup::new();
    let api = FakeApi::start(vec![
        Reply::Close,
        Reply::Json(
            500,
            vec![("retry-after", "0".into())],
            json!({"error": {"message": "internal"}}),
        ),
        Reply::Json(
            429,
            vec![("retry-after", "1".into())],
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
        ),
        Reply::Json(
            529,
            vec![("retry-after-ms", "10".into())],
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
        end("@user fine"),
    ]);
    let out = run_api(&s, ANTHROPIC_WF, &api, &[]);
    assert_code(&out, 0);
    let reqs = api.requests();
    assert_eq!(reqs.len(), 5);
    // The retry after the 429 waited at least what retry-after asked.
    let gap = reqs[3].at - reqs[2].at;
    assert!(gap >= std::time::Duration::from_secs(1), "{gap:?}");
    // One run, one attempt: the retries were the HTTP client's, not the controller's.
    let t = s.transcript("alice", 1);
    assert_eq!(t["status"], "ok");
    assert_eq!(t["attempt"], 1);
    assert!(t["stdout"].as_str().unwrap().contains("{\"retries\":4}"));
    assert!(s.entries().contains(&("alice".into(), "@user fine".into())));
}

#[test]
fn a_client_error_fails_at_once_with_the_api_message_and_no_key_leaks() {
    let s = Setup::new();
    let api = FakeApi::start(vec![Reply::status(
        401,
        json!({"type": "error", "error": {"type": "authentication_error", "message": format!("invalid x-api-key {KEY}")}}),
    )]);
    let out = run_api(&s, ANTHROPIC_WF, &api, &[]);
    assert_code(&out, 1);
    assert_eq!(api.requests().len(), 1);
    let t = s.transcript("alice", 1);
    assert_eq!(t["status"], "failed");
    assert_eq!(
        t["reason"],
        "anthropic: HTTP 401: invalid x-api-key [redacted]"
    );
    assert!(!t.to_string().contains(KEY));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(KEY));
    assert_eq!(s.unread("alice"), 1);
}

#[test]
fn a_hanging_api_is_a_timeout_and_the_message_stays_unread() {
    // The read timeout of a request (idle_timeout), and the run's own timeout.
    for (key, reason) in [
        (
            "idle_timeout: 1s",
            "anthropic: no answer within the read timeout",
        ),
        ("timeout: 1s", "the run's timeout passed"),
    ] {
        let s = Setup::new();
        let api = FakeApi::start(vec![Reply::Hang]);
        let wf = ANTHROPIC_WF.replace(
            "    max_steps: 4\n",
            &format!("    max_steps: 4\n    {key}\n"),
        );
        let out = run_api(&s, &wf, &api, &[]);
        assert_code(&out, 1);
        assert_eq!(s.statuses("alice", 1), ["timeout"]);
        let t = s.transcript("alice", 1);
        assert!(t["reason"].as_str().unwrap().starts_with(reason), "{t}");
        assert_eq!(
            api.requests().len(),
            1,
            "a timeout is not retried by the client"
        );
        assert_eq!(s.unread("alice"), 1);
    }
}

#[test]
fn max_tokens_ends_with_the_text_so_far_or_fails_without_any() {
    let s = Setup::new();
    let api = FakeApi::start(vec![answer(
        json!([text("@user partial answer")]),
        "max_tokens",
        5,
        100,
    )]);
    assert_code(&run_api(&s, ANTHROPIC_WF, &api, &[]), 0);
    assert!(
        s.entries()
            .contains(&("alice".into(), "@user partial answer".into()))
    );

    let s = Setup::new();
    let api = FakeApi::start(vec![answer(json!([]), "max_tokens", 5, 100)]);
    assert_code(&run_api(&s, ANTHROPIC_WF, &api, &[]), 1);
    let t = s.transcript("alice", 1);
    assert_eq!(t["status"], "failed");
    assert_eq!(t["reason"], "the answer reached max_tokens before any text");
}

#[test]
fn pause_turn_continues_and_refusal_fails() {
    let s = Setup::new();
    let api = FakeApi::start(vec![
        answer(json!([text("thinking")]), "pause_turn", 1, 1),
        end("@user resumed"),
    ]);
    assert_code(&run_api(&s, ANTHROPIC_WF, &api, &[]), 0);
    let reqs = api.requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[1]["content"][0]["text"], "thinking");

    let s = Setup::new();
    let api = FakeApi::start(vec![answer(json!([]), "refusal", 1, 1)]);
    assert_code(&run_api(&s, ANTHROPIC_WF, &api, &[]), 1);
    assert_eq!(s.transcript("alice", 1)["reason"], "the model refused");
}

#[test]
fn max_steps_bounds_the_loop() {
    let s = Setup::new();
    let call = || {
        answer(
            json!([tool_use("t", "team_members", json!({}))]),
            "tool_use",
            1,
            1,
        )
    };
    let api = FakeApi::start(vec![call(), call(), call(), call(), call()]);
    let wf = ANTHROPIC_WF.replace("max_steps: 4", "max_steps: 2");
    assert_code(&run_api(&s, &wf, &api, &[]), 1);
    assert_eq!(api.requests().len(), 2);
    let t = s.transcript("alice", 1);
    assert_eq!(
        t["reason"],
        "max_steps (2) reached before the model ended its turn"
    );
    assert_eq!(t["usage"]["input_tokens"], 2);
    assert_eq!(s.unread("alice"), 1);
}

#[test]
fn a_budget_stops_the_loop_after_the_call_that_passed_it() {
    let s = Setup::new();
    let api = FakeApi::start(vec![
        answer(
            json!([tool_use("a", "channel_send", json!({"message": "first"}))]),
            "tool_use",
            80,
            20,
        ),
        answer(
            json!([tool_use("b", "channel_send", json!({"message": "second"}))]),
            "tool_use",
            80,
            20,
        ),
        end("never asked"),
    ]);
    let out = run_api(&s, ANTHROPIC_WF, &api, &["--budget-tokens", "150"]);
    assert_code(&out, 1);
    assert_eq!(api.requests().len(), 2);
    let entries = s.entries();
    assert!(entries.contains(&("alice".into(), "first".into())));
    assert!(
        !entries.iter().any(|(_, m)| m == "second"),
        "the tool of the answer over budget ran"
    );
    let budget = entries
        .iter()
        .filter(|(f, m)| f == "system" && m.contains("200 tokens used, over the 150 token budget"))
        .count();
    assert_eq!(budget, 1, "{entries:?}");
    let t = s.transcript("alice", 1);
    assert_eq!(t["status"], "killed");
    assert_eq!(t["usage"]["input_tokens"], 160);
    assert_eq!(s.unread("alice"), 1);
    assert!(stderr(&out).contains("budget"), "{}", stderr(&out));
}

#[test]
fn a_missing_key_is_refused_before_anything_runs_and_by_the_check() {
    let s = Setup::new();
    s.write("wf.yaml", ANTHROPIC_WF);
    for args in [vec!["-q"], vec!["--check"]] {
        let mut c = s.cmd(&args);
        c.env_remove("ANTHROPIC_API_KEY");
        let out = run_hang_guarded(c);
        assert_code(&out, 69);
        let err = stderr(&out);
        assert!(
            err.contains("alice: the anthropic backend needs ANTHROPIC_API_KEY"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert!(!s.root.inst_dir(INST).exists(), "something was written");

    // The key may come from the agent's env.
    let api = FakeApi::start(vec![end("@user ok")]);
    let wf = ANTHROPIC_WF.replace(
        "    max_steps: 4\n",
        &format!(
            "    max_steps: 4\n    env:\n      ANTHROPIC_API_KEY: from-env-1234\n      ANTHROPIC_BASE_URL: {}\n",
            api.url
        ),
    );
    s.write("wf.yaml", &wf);
    let mut c = s.cmd(&["-q"]);
    c.env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL");
    assert_code(&run_hang_guarded(c), 0);
    assert_eq!(api.requests()[0].header("x-api-key"), Some("from-env-1234"));
}

const OPENAI_WF: &str = "agents:
  olga:
    backend: openai
    model: local-model
    max_tokens: 64
kickoff: '@olga summarize'
";

fn chat(message: Value, finish: &str, usage: Value) -> Reply {
    Reply::ok(json!({
        "id": "c1", "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage
    }))
}

#[test]
fn openai_runs_the_tool_loop_with_function_calls() {
    let s = Setup::new();
    let api = FakeApi::start(vec![
        chat(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "channel_send", "arguments": "{\"message\":\"@user summary: ok\"}"}}
            ]}),
            "tool_calls",
            json!({"prompt_tokens": 300, "completion_tokens": 12, "prompt_tokens_details": {"cached_tokens": 200}}),
        ),
        chat(
            json!({"role": "assistant", "content": "Posted."}),
            "stop",
            json!({"prompt_tokens": 330, "completion_tokens": 3}),
        ),
    ]);
    let out = run_api(&s, OPENAI_WF, &api, &[]);
    assert_code(&out, 0);
    assert!(
        s.entries()
            .contains(&("olga".into(), "@user summary: ok".into()))
    );
    let reqs = api.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let b = &reqs[0].body;
    assert_eq!(b["model"], "local-model");
    assert_eq!(b["max_tokens"], 64);
    assert_eq!(b["messages"][0]["role"], "system");
    assert_eq!(b["tools"].as_array().unwrap().len(), 28);
    assert_eq!(b["tools"][0]["type"], "function");
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 4);
    assert_eq!(msgs[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(msgs[3]["role"], "tool");
    assert_eq!(msgs[3]["tool_call_id"], "call_1");
    let t = s.transcript("olga", 1);
    assert_eq!(
        t["usage"],
        json!({"input_tokens": 430, "output_tokens": 15, "cache_read_tokens": 200, "cache_write_tokens": 0, "cost_usd": null})
    );
}

#[test]
fn openai_on_a_server_of_ones_own_needs_no_key() {
    let s = Setup::new();
    let api = FakeApi::start(vec![chat(
        json!({"role": "assistant", "content": "@user hi"}),
        "stop",
        json!({"prompt_tokens": 1, "completion_tokens": 1}),
    )]);
    s.write("wf.yaml", OPENAI_WF);
    let mut c = s.cmd(&["-q"]);
    c.env_remove("OPENAI_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", api.url));
    assert_code(&run_hang_guarded(c), 0);
    assert_eq!(api.requests()[0].header("authorization"), None);

    // Without a base URL, the key is needed.
    let mut c = s.cmd(&["--check"]);
    c.env_remove("OPENAI_API_KEY").env_remove("OPENAI_BASE_URL");
    let out = run_hang_guarded(c);
    assert_code(&out, 69);
    assert!(stderr(&out).contains("olga: the openai backend needs OPENAI_API_KEY"));
}

#[test]
fn file_tools_are_given_by_name_and_confined_to_the_cwd() {
    let s = Setup::new();
    std::fs::create_dir_all(s.dir().join("work")).unwrap();
    s.write("work/notes.txt", "inside\n");
    s.write("secret.txt", "outside\n");
    std::os::unix::fs::symlink(s.dir().join("secret.txt"), s.dir().join("work/link.txt")).unwrap();
    let read = |id: &str, path: &str| tool_use(id, "read_file", json!({"path": path}));
    let api = FakeApi::start(vec![
        answer(
            json!([
                read("r1", "notes.txt"),
                read("r2", "../secret.txt"),
                read("r3", "link.txt"),
                tool_use(
                    "w1",
                    "write_file",
                    json!({"path": "out/result.md", "content": "# Result\n"})
                ),
                tool_use("l1", "list_files", json!({})),
            ]),
            "tool_use",
            1,
            1,
        ),
        end("@user done"),
    ]);
    let wf = ANTHROPIC_WF.replace(
        "    max_steps: 4\n",
        "    max_steps: 4\n    cwd: work\n    tools: [read_file, write_file]\n",
    );
    assert_code(&run_api(&s, &wf, &api, &[]), 0);
    let reqs = api.requests();
    let names: Vec<&str> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 30);
    assert_eq!(&names[28..], ["read_file", "write_file"]);
    let results = reqs[1].body["messages"][2]["content"].as_array().unwrap();
    let result = |i: usize| {
        (
            results[i]["is_error"].as_bool().unwrap(),
            results[i]["content"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(result(0), (false, "inside\n".to_string()));
    for i in [1, 2, 4] {
        let (err, text) = result(i);
        assert!(err, "{i}: {text}");
        assert!(!text.contains("outside\n"), "{i}: {text}");
        assert!(
            !text.contains(s.dir().to_str().unwrap()),
            "{i}: host path: {text}"
        );
    }
    assert!(
        result(4).1.contains("unknown tool 'list_files'"),
        "{}",
        result(4).1
    );
    assert!(!result(3).0, "{}", result(3).1);
    assert_eq!(
        std::fs::read_to_string(s.dir().join("work/out/result.md")).unwrap(),
        "# Result\n"
    );
}

#[test]
fn my_inbox_does_not_wait_inside_an_api_run() {
    let s = Setup::new();
    let api = FakeApi::start(vec![
        answer(
            json!([
                tool_use("a", "my_inbox_ack", json!({"until": 1})),
                tool_use("b", "my_inbox", json!({"wait_seconds": 120})),
            ]),
            "tool_use",
            1,
            1,
        ),
        end("@user nothing more"),
    ]);
    let t0 = std::time::Instant::now();
    assert_code(&run_api(&s, ANTHROPIC_WF, &api, &[]), 0);
    // Bound only against a hang: a wait would take 120 s.
    assert!(t0.elapsed() < std::time::Duration::from_secs(60));
    let reqs = api.requests();
    let results = &reqs[1].body["messages"][2]["content"];
    assert_eq!(results[1]["is_error"], false, "{results}");
}

#[test]
fn a_key_from_a_setup_output_is_checked_once_known_and_file_tools_need_their_cwd() {
    let s = Setup::new();
    let api = FakeApi::start(vec![end("@user ok")]);
    let wf = format!(
        "agents:
  alice:
    backend: anthropic
    model: claude-test
    env:
      ANTHROPIC_API_KEY: ${{{{ key }}}}
      ANTHROPIC_BASE_URL: {}
setup:
  - shell: echo from-setup-5678
    as: key
kickoff: '@alice go'
",
        api.url
    );
    s.write("wf.yaml", &wf);
    let mut c = s.cmd(&["-q"]);
    c.env_remove("ANTHROPIC_API_KEY");
    assert_code(&run_hang_guarded(c), 0);
    assert_eq!(
        api.requests()[0].header("x-api-key"),
        Some("from-setup-5678")
    );

    // File tools in a cwd that does not exist: refused by the check, before anything runs.
    let s = Setup::new();
    let wf = ANTHROPIC_WF.replace(
        "    max_steps: 4\n",
        "    max_steps: 4\n    cwd: nowhere\n    tools: [read_file]\n",
    );
    s.write("wf.yaml", &wf);
    for args in [vec!["--check"], vec!["-q"]] {
        let mut c = s.cmd(&args);
        c.env("ANTHROPIC_API_KEY", KEY);
        let out = run_hang_guarded(c);
        assert_code(&out, 66);
        let err = stderr(&out);
        assert!(
            err.contains("alice: cwd ") && err.contains("nowhere: no such folder"),
            "{err}"
        );
    }
    assert!(!s.root.inst_dir(INST).exists());
}

#[test]
fn an_api_agent_with_collab_spawns_waits_for_and_closes_a_worker_in_process() {
    let s = Setup::new();
    let api = FakeApi::start(vec![
        answer(
            json!([tool_use(
                "tu_1",
                "spawn_agent",
                json!({"prompt": "count the files", "backend": "mock"})
            )]),
            "tool_use",
            10,
            5,
        ),
        answer(
            json!([tool_use(
                "tu_2",
                "wait",
                json!({"agents": ["worker-1"], "timeout_seconds": 30})
            )]),
            "tool_use",
            10,
            5,
        ),
        answer(
            json!([tool_use(
                "tu_3",
                "close_agent",
                json!({"agent": "worker-1"})
            )]),
            "tool_use",
            10,
            5,
        ),
        end("The worker counted them."),
    ]);
    let wf = "agents:\n  alice:\n    backend: anthropic\n    model: claude-test\n    collab: true\n\
              kickoff: '@alice count the files, with a worker'\n";
    let out = run_api(&s, wf, &api, &[]);
    assert_code(&out, 0);
    let reqs = api.requests();
    assert_eq!(reqs.len(), 4);
    let tools: Vec<&str> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools.len(), 32);
    assert_eq!(
        &tools[25..29],
        ["spawn_agent", "send_input", "wait", "close_agent"]
    );
    // What each tool gave back reached the model.
    let sent = |i: usize| reqs[i].body["messages"].to_string();
    assert!(sent(1).contains("Spawned @worker-1 (mock)"), "{}", sent(1));
    assert!(sent(2).contains("All done."), "{}", sent(2));
    assert!(
        sent(2).contains("worker-1: handled 1 message(s)"),
        "{}",
        sent(2)
    );
    assert!(sent(3).contains("@worker-1: closed."), "{}", sent(3));
    // The worker was an agent of the instance, run by this aw-run.
    let entries = s.entries();
    assert!(
        entries.contains(&("alice".to_string(), "@worker-1 count the files".to_string())),
        "{entries:?}"
    );
    assert!(
        entries.contains(&(
            "worker-1".to_string(),
            "worker-1: handled 1 message(s)".to_string()
        )),
        "{entries:?}"
    );
    let reg: Value = serde_json::from_slice(
        &std::fs::read(s.root.inst_dir(INST).join("_state/agents.json")).unwrap(),
    )
    .unwrap();
    let w = reg["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "worker-1")
        .unwrap();
    assert_eq!(w["spawned_by"], "alice");
    assert_eq!(w["closed"], true);
    assert!(
        s.root
            .inst_dir(INST)
            .join("_state/runs/worker-1/1.json")
            .exists()
    );
}

/// A lead's answers: `spawn_agent` and `close_agent` of a worker, then the `final` reply
/// (after `posted`, a channel_send of its own, when given).
fn lead_script(posted: Option<&str>, last: &str) -> Vec<Reply> {
    let mut script = vec![answer(
        json!([tool_use(
            "tu_1",
            "spawn_agent",
            json!({"prompt": "count the files", "backend": "mock"})
        )]),
        "tool_use",
        10,
        5,
    )];
    if let Some(m) = posted {
        script.push(answer(
            json!([tool_use("tu_2", "channel_send", json!({"message": m}))]),
            "tool_use",
            10,
            5,
        ));
    }
    script.push(answer(
        json!([tool_use(
            "tu_3",
            "close_agent",
            json!({"agent": "worker-1"})
        )]),
        "tool_use",
        10,
        5,
    ));
    script.push(end(last));
    script
}

#[test]
fn a_lead_that_spawned_workers_keeps_its_final_answer() {
    let wf = "agents:\n  alice:\n    backend: anthropic\n    model: claude-test\n    collab: true\n\
              kickoff: '@alice count the files, with a worker'\n";
    // It only talked to its worker: the final answer is posted, once.
    let s = Setup::new();
    let api = FakeApi::start(lead_script(None, "There are 42 files."));
    assert_code(&run_api(&s, wf, &api, &[]), 0);
    let entries = s.entries();
    let answers: Vec<_> = entries
        .iter()
        .filter(|(f, m)| f == "alice" && m == "There are 42 files.")
        .collect();
    assert_eq!(answers.len(), 1, "{entries:?}");
    assert!(
        entries.contains(&("alice".to_string(), "@worker-1 count the files".to_string())),
        "{entries:?}"
    );
    // It answered on the channel itself: its closing words are not posted besides.
    let s = Setup::new();
    let api = FakeApi::start(lead_script(Some("@user 42 files"), "Posted the count."));
    assert_code(&run_api(&s, wf, &api, &[]), 0);
    let entries = s.entries();
    assert!(
        entries.contains(&("alice".to_string(), "@user 42 files".to_string())),
        "{entries:?}"
    );
    assert!(
        !entries.iter().any(|(_, m)| m == "Posted the count."),
        "{entries:?}"
    );
}

#[test]
fn a_workers_usage_counts_in_the_workflow_budget() {
    let s = Setup::new();
    // The lead spawns an anthropic worker and ends; the two answers after the first cost
    // 1005 tokens each, whichever of the lead and the worker gets which.
    let api = FakeApi::start(vec![
        answer(
            json!([tool_use(
                "tu_1",
                "spawn_agent",
                json!({"prompt": "summarise", "backend": "anthropic", "model": "claude-test"})
            )]),
            "tool_use",
            10,
            5,
        ),
        answer(json!([text("done")]), "end_turn", 1000, 5),
        answer(json!([text("done")]), "end_turn", 1000, 5),
    ]);
    let wf = "agents:\n  alice:\n    backend: anthropic\n    model: claude-test\n    collab: true\n\
              kickoff: '@alice summarise, with a worker'\n";
    // The lead alone spends 1020 tokens: under the budget; with its worker, 2025: over.
    let out = run_api(&s, wf, &api, &["--budget-tokens", "1500"]);
    assert_code(&out, 1);
    assert!(stderr(&out).contains("budget"), "{}", stderr(&out));
    assert_eq!(api.requests().len(), 3);
    let entries = s.entries();
    assert!(
        entries
            .iter()
            .any(|(f, m)| f == "system" && m.contains("over the 1500 token budget")),
        "{entries:?}"
    );
}

#[test]
fn a_worker_is_priced_by_the_workflows_pricing() {
    let s = Setup::new();
    let api = FakeApi::start(vec![
        answer(
            json!([tool_use(
                "tu_1",
                "spawn_agent",
                json!({"prompt": "summarise", "backend": "anthropic", "model": "claude-test"})
            )]),
            "tool_use",
            0,
            0,
        ),
        answer(json!([text("done")]), "end_turn", 1_000_000, 0),
        answer(json!([text("done")]), "end_turn", 1_000_000, 0),
    ]);
    // $1 per million input tokens: the lead's run costs $1, its worker's $1 more, which only
    // the workflow's pricing knows.
    let wf = "pricing:\n  claude-test: {input: 1, output: 1}\n\
              agents:\n  alice:\n    backend: anthropic\n    model: claude-test\n    collab: true\n\
              kickoff: '@alice summarise, with a worker'\n";
    let out = run_api(&s, wf, &api, &["--budget-usd", "1.5"]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("over the $1.5 budget"),
        "{}",
        stderr(&out)
    );
    assert_eq!(api.requests().len(), 3);
}

/// `aw-ctl -i INST ARGS...`, its standard output (exit 0).
fn ctl_out(s: &Setup, args: &[&str]) -> String {
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST]).args(args);
    let out = run_hang_guarded(c);
    assert_code(&out, 0);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn status_and_runs_count_the_tokens_of_a_run_once_as_budget_does() {
    let s = Setup::new();
    // One call of 300 + 208 tokens: the attempt log beside the transcript holds that call's
    // line too, and is no transcript.
    let api = FakeApi::start(vec![answer(json!([text("Done.")]), "end_turn", 300, 208)]);
    let out = run_api(&s, ANTHROPIC_WF, &api, &[]);
    assert_code(&out, 0);
    let state = s.root.inst_dir(INST).join("_state/runs/alice");
    assert!(state.join("1.log").exists() && state.join("1.json").exists());

    let budget: Value = serde_json::from_str(&ctl_out(&s, &["budget", "--json"])).unwrap();
    assert_eq!(budget["agents"]["alice"]["tokens"], 508, "{budget}");
    let status: Value = serde_json::from_str(&ctl_out(&s, &["status", "--json"])).unwrap();
    assert_eq!(
        status["agents"][0]["usage"]["input_tokens"], 300,
        "{status}"
    );
    assert_eq!(
        status["agents"][0]["usage"]["output_tokens"], 208,
        "{status}"
    );
    assert_eq!(status["usage"]["input_tokens"], 300, "{status}");
    let text = ctl_out(&s, &["status"]);
    assert!(text.contains("  508 tokens"), "{text}");
    assert!(text.contains("total 508 tokens"), "{text}");
    let runs: Vec<Value> = ctl_out(&s, &["runs", "--json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["usage"]["output_tokens"], 208);
}

#[test]
fn an_api_agent_adds_claims_leases_and_finishes_cards_through_the_aw_tools() {
    let s = Setup::new();
    let api = FakeApi::start(vec![
        answer(
            json!([
                tool_use(
                    "a1",
                    "board_add",
                    json!({"title": "first", "body": "do it"})
                ),
                tool_use("a2", "board_add", json!({"title": "second", "after": [1]})),
                tool_use("c1", "board_claim", json!({})),
                tool_use(
                    "l1",
                    "lease_take",
                    json!({"paths": ["src/**"], "reason": "first"})
                ),
            ]),
            "tool_use",
            1,
            1,
        ),
        answer(
            json!([tool_use(
                "d1",
                "board_done",
                json!({"id": 1, "note": "did it"})
            )]),
            "tool_use",
            1,
            1,
        ),
        end("@user first is done"),
    ]);
    assert_code(&run_api(&s, ANTHROPIC_WF, &api, &[]), 0);
    let reqs = api.requests();
    let results = reqs[1].body["messages"][2]["content"].as_array().unwrap();
    let text = |i: usize| results[i]["content"].as_str().unwrap().to_string();
    assert!(
        results.iter().all(|r| r["is_error"] == false),
        "{results:?}"
    );
    assert!(text(2).contains("You hold card 1"), "{}", text(2));
    assert!(text(3).contains("Leased src/** to you"), "{}", text(3));
    let done = reqs[2].body["messages"][4]["content"][0]["content"].to_string();
    assert!(done.contains("Card 1 is done"), "{done}");
    assert!(done.contains("Released your leases L1"), "{done}");
    assert!(done.contains("Now ready: card 2"), "{done}");
    let card: Value =
        serde_json::from_str(&ctl_out(&s, &["board", "show", "1", "--json"])).unwrap();
    assert_eq!(
        (&card["state"], &card["note"]),
        (&json!("done"), &json!("did it"))
    );
    assert_eq!(card["creator"], "alice");
    let ready = ctl_out(&s, &["board", "ls", "--ready", "--json"]);
    let ready: Value = serde_json::from_str(ready.trim()).unwrap();
    assert_eq!(ready["id"], 2);
    assert_eq!(
        ctl_out(&s, &["board", "ls", "--mine", "alice"])
            .lines()
            .count(),
        0
    );
}

/// With `approve_tools: {write_outside: ...}`, a write inside the globs runs at once; one
/// outside waits for an approval (the file unwritten meanwhile) and runs once approved; a
/// rejected one is not written and the model is told who rejected it and why.
#[test]
fn writes_outside_the_approved_paths_wait_for_an_approval_and_a_rejection_tells_the_model() {
    use common::runner::{spawn, wait_for, wait_hang_guarded};
    let s = Setup::new();
    std::fs::create_dir_all(s.dir().join("work/src")).unwrap();
    // Paths are named relative to the work tree, as leases name them.
    common::git(&s.dir().join("work"), &["init", "-q"]);
    let write = |id: &str, path: &str, text: &str| {
        answer(
            json!([tool_use(
                id,
                "write_file",
                json!({"path": path, "content": text})
            )]),
            "tool_use",
            1,
            1,
        )
    };
    let api = FakeApi::start(vec![
        write("w1", "src/a.rs", "fn a() {}\n"),
        write("w2", "README.md", "# Read me\n"),
        write("w3", "notes.txt", "my notes\n"),
        end("@user done"),
    ]);
    let wf = ANTHROPIC_WF.replace(
        "    max_steps: 4\n",
        "    max_steps: 4\n    cwd: work\n    tools: [write_file]\n    \
         approve_tools: {write_outside: 'src/**', by: lead}\n",
    );
    let approval = |id: u64| s.root.inst_dir(INST).join(format!("approvals/{id}.json"));
    let run = spawn(api_cmd(&s, &wf, &api, &[]));
    wait_for("the approval of the write", || approval(1).exists());
    let work = s.dir().join("work");
    assert_eq!(
        std::fs::read_to_string(work.join("src/a.rs")).unwrap(),
        "fn a() {}\n"
    );
    assert!(
        !work.join("README.md").exists(),
        "written before the approval"
    );
    let a: Value = serde_json::from_slice(&std::fs::read(approval(1)).unwrap()).unwrap();
    assert_eq!(a["kind"], "tool");
    assert_eq!(a["what"], "alice: write_file README.md (10 bytes)");
    assert_eq!(a["by"], json!(["lead"]));
    assert!(a["details"].as_str().unwrap().contains("# Read me"), "{a}");
    ctl_out(&s, &["approve", "1", "--as", "lead"]);
    wait_for("the approval of the second write", || approval(2).exists());
    let why = "no notes in the tree";
    ctl_out(&s, &["reject", "2", "--as", "lead", "--reason", why]);
    let out = wait_hang_guarded(run);
    assert_code(&out, 0);
    assert_eq!(
        std::fs::read_to_string(work.join("README.md")).unwrap(),
        "# Read me\n"
    );
    assert!(!work.join("notes.txt").exists(), "written though rejected");
    let reqs = api.requests();
    assert_eq!(reqs.len(), 4);
    let result = |i: usize| {
        reqs[i].body["messages"].as_array().unwrap().last().unwrap()["content"][0].clone()
    };
    assert_eq!(result(1)["is_error"], false, "{}", result(1));
    assert_eq!(result(2)["is_error"], false, "{}", result(2));
    assert_eq!(result(3)["is_error"], true);
    assert_eq!(
        result(3)["content"],
        "Error: write_file notes.txt: not written: approval #2 rejected by lead: no notes in \
         the tree. Do not write it again as it is; change what you do, or ask in the channel."
    );
}
