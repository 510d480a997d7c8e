//! Budgets against hostile reports and real concurrency, with real aw-run processes: counts
//! and costs that cannot be believed (an API server, fake `claude` and `codex` programs),
//! agents in parallel against a server that counts what it hands out, spending kept across
//! runs of one instance (`aw-ctl budget`), and the loop guard's rate limit on a `--keep`
//! server whose agents answer each other from detached children.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::fake_api::{FakeApi, Reply};
use common::runner::*;
use serde_json::{Value, json};

const KEY: &str = "sk-test-0123456789";

/// aw-run -q --retries 1 on `wf` with `args`, the API URLs at `url`, fakes in `bin/` first
/// in PATH.
fn run(s: &Setup, wf: &str, url: &str, args: &[&str]) -> std::process::Output {
    run_hang_guarded(command(s, wf, url, args))
}

/// The command [`run`] runs.
fn command(s: &Setup, wf: &str, url: &str, args: &[&str]) -> std::process::Command {
    s.write("wf.yaml", wf);
    let mut all = vec!["-q", "--retries", "1"];
    all.extend_from_slice(args);
    let mut c = s.cmd(&all);
    c.env("OPENAI_BASE_URL", format!("{url}/v1"))
        .env("OPENAI_API_KEY", KEY)
        .env(
            "PATH",
            format!("{}:{}", s.dir().join("bin").display(), path_with_bins()),
        );
    c
}

/// `aw-ctl budget [more] --json`.
fn budget(s: &Setup, more: &[&str]) -> (i32, Value) {
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "budget"]).args(more).arg("--json");
    let out = run_hang_guarded(c);
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v)
}

/// A fake CLI `program` in `bin/` that reads its prompt and prints `lines`.
fn fake_cli(s: &Setup, program: &str, lines: &[&str]) {
    std::fs::create_dir_all(s.dir().join("bin")).unwrap();
    let mut body = String::from("cat >/dev/null\n");
    for l in lines {
        body.push_str(&format!("printf '%s\\n' '{l}'\n"));
    }
    s.script(&format!("bin/{program}"), &body);
}

#[test]
fn an_api_count_that_overflows_fails_the_answer_and_trips_the_budget() {
    // prompt_tokens = 2^64-1 and one completion token: summed with `+`, the total wraps
    // to 0 and a budget of 100 tokens never trips.
    let s = Setup::new();
    let api = FakeApi::start(vec![Reply::ok(json!({
        "choices": [{"message": {"role": "assistant", "content": "@bob hi"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": u64::MAX, "completion_tokens": 1}
    }))]);
    let wf = "agents:
  alice:
    backend: openai
    model: gpt-test
kickoff: '@alice go'
budget: {tokens: 100}
";
    let out = run(&s, wf, &api.url, &[]);
    assert_code(&out, 1);
    let err = stderr(&out);
    assert_eq!(
        s.transcript("alice", 1)["reason"],
        "implausible usage: 18446744073709551615 input tokens reported (at most 1000000000 \
         are believed of one answer)"
    );
    assert!(
        err.contains("budget: 1000000001 tokens used, over the 100 token budget"),
        "{err}"
    );
    // The answer was not posted.
    assert!(
        s.entries().iter().all(|(f, _)| f != "alice"),
        "{:?}",
        s.entries()
    );
    assert_eq!(api.requests().len(), 1);
}

#[test]
fn a_negative_or_absurd_cli_report_fails_the_run_and_counts_nothing_negative() {
    // Claude Code reporting a cost of -5 USD: accepted, a $2 budget let $8 of runs through.
    let s = Setup::new();
    fake_cli(
        &s,
        "claude",
        &[
            r#"{"type":"result","subtype":"success","is_error":false,"result":"@bob done","num_turns":1,"total_cost_usd":-5,"usage":{"input_tokens":10,"output_tokens":5}}"#,
        ],
    );
    let wf = "agents:
  alice:
    backend: claude
    model: anthropic/claude-sonnet-4-5
kickoff: '@alice go'
budget: {usd: 2}
";
    let out = run(&s, wf, "http://127.0.0.1:9", &[]);
    assert_code(&out, 1);
    assert_eq!(
        s.transcript("alice", 1)["reason"],
        "implausible usage: a cost of -5 USD reported (a cost is a finite number of at least 0)"
    );
    assert!(s.entries().iter().all(|(f, _)| f != "alice"));
    let (code, b) = budget(&s, &[]);
    assert_eq!(code, 0);
    // The tokens count; the cost is the model's price of them, never below 0.
    assert_eq!(b["spent"]["tokens"], 15, "{b}");
    assert!(
        b["spent"]["usage"]["cost_usd"].as_f64().unwrap() >= 0.0,
        "{b}"
    );

    // Codex reporting a negative count.
    let s = Setup::new();
    fake_cli(
        &s,
        "codex",
        &[
            r#"{"type":"item.completed","item":{"type":"agent_message","text":"@bob done"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":-1,"cached_input_tokens":0,"output_tokens":3}}"#,
        ],
    );
    let wf = "agents:
  alice:
    backend: codex
    model: openai/gpt-test
kickoff: '@alice go'
budget: {tokens: 100}
";
    let out = run(&s, wf, "http://127.0.0.1:9", &[]);
    assert_code(&out, 1);
    let err = stderr(&out);
    let why = s.transcript("alice", 1)["reason"].to_string();
    assert!(
        why.contains("implausible usage: 18446744073709551615 input tokens reported"),
        "{why}"
    );
    assert!(
        err.contains("budget: 1000000003 tokens used, over the 100 token budget"),
        "{err}"
    );
}

/// A Chat Completions server that answers every request after `delay` with a call of the
/// `my_inbox` tool and `prompt` + `completion` tokens, counting the tokens it handed out.
fn counting_server(delay: Duration, prompt: u64, completion: u64) -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handed = Arc::new(AtomicU64::new(0));
    let counter = handed.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 {
                        return;
                    }
                    let h = h.trim_end().to_ascii_lowercase();
                    if h.is_empty() {
                        break;
                    }
                    if let Some(v) = h.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                std::thread::sleep(delay);
                let answer = json!({
                    "choices": [{"message": {"role": "assistant", "content": "",
                        "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "my_inbox", "arguments": "{}"}}]},
                        "finish_reason": "tool_calls"}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion}
                })
                .to_string();
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    answer.len()
                );
                // Handed out: counted whether or not the client still reads it.
                counter.fetch_add(prompt + completion, Ordering::SeqCst);
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(answer.as_bytes());
                let _ = stream.flush();
            });
        }
    });
    (url, handed)
}

#[test]
fn parallel_agents_overspend_by_at_most_one_call_each_and_every_answer_counts() {
    // Four agents call the model in parallel, each call 250 tokens, under a 1,500-token
    // budget. Each sees what the others spend as they go, and the calls under way when the
    // budget stops them are waited for and counted.
    let s = Setup::new();
    let (url, handed) = counting_server(Duration::from_millis(300), 100, 150);
    let mut wf = String::from("agents:\n");
    for n in 1..=4 {
        wf.push_str(&format!(
            "  a{n}:\n    backend: openai\n    model: gpt-test\n    max_steps: 50\n"
        ));
    }
    wf.push_str("kickoff: '@a1 @a2 @a3 @a4 go'\nbudget: {tokens: 1500}\n");
    let out = run(&s, &wf, &url, &[]);
    assert_code(&out, 1);
    let err = stderr(&out);
    assert!(err.contains("over the 1500 token budget"), "{err}");
    let (_, b) = budget(&s, &[]);
    let recorded = b["spent"]["tokens"].as_u64().unwrap();
    let server = handed.load(Ordering::SeqCst);
    assert_eq!(recorded, server, "{b}");
    assert!(recorded <= 1500 + 4 * 250, "{recorded}");
    assert!(recorded > 1500, "{recorded}");
}

#[test]
fn the_budget_counts_across_runs_of_one_instance_until_reset() {
    // Each run of alice spends 500 tokens; the instance may spend 1,200.
    let s = Setup::new();
    let wf = "agents:
  alice:
    mock:
      replies: ['done']
      usage: {input_tokens: 400, output_tokens: 100}
kickoff: '@alice go'
budget: {tokens: 1200}
";
    let alice = |s: &Setup| s.entries().iter().filter(|(f, _)| f == "alice").count();
    for n in 1..=2 {
        let out = run(&s, wf, "http://127.0.0.1:9", &[]);
        assert_code(&out, 0);
        assert_eq!(alice(&s), n);
    }
    let (code, b) = budget(&s, &[]);
    assert_eq!(code, 0);
    assert_eq!(
        (
            &b["spent"]["tokens"],
            &b["limit"]["tokens"],
            &b["over"],
            &b["agents"]["alice"]["tokens"]
        ),
        (&json!(1000), &json!(1200), &json!(false), &json!(1000)),
        "{b}"
    );
    // The third run passes the budget: stopped.
    let out = run(&s, wf, "http://127.0.0.1:9", &[]);
    assert_code(&out, 1);
    let why = "budget: 1500 tokens used, over the 1200 token budget";
    assert!(stderr(&out).contains(why), "{}", stderr(&out));
    assert_eq!(alice(&s), 3);
    // The fourth does not start: nothing runs, nothing is posted.
    let before = s.entries().len();
    let out = run(&s, wf, "http://127.0.0.1:9", &[]);
    assert_code(&out, 1);
    let err = stderr(&out);
    assert!(err.contains(why), "{err}");
    assert!(err.contains("aw-ctl budget reset"), "{err}");
    assert_eq!(s.entries().len(), before);
    // The human view says the same.
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "budget"]);
    let shown = String::from_utf8(run_hang_guarded(c).stdout).unwrap();
    assert!(shown.starts_with("spent: 1500 tokens since "), "{shown}");
    assert!(shown.contains("\nlimit: 1200 tokens\n"), "{shown}");
    assert!(shown.contains(&format!("over: {why}")), "{shown}");
    assert!(shown.contains("  alice: 1500 tokens"), "{shown}");
    // Reset: it runs again.
    let (code, r) = budget(&s, &["reset"]);
    assert_eq!(code, 0);
    assert_eq!(r["before"]["spent"]["tokens"], 1500, "{r}");
    let out = run(&s, wf, "http://127.0.0.1:9", &[]);
    assert_code(&out, 0);
    assert_eq!(alice(&s), 4);
    let (_, b) = budget(&s, &[]);
    assert_eq!(b["spent"]["tokens"], 500, "{b}");
    // A flag's budget replaces the recorded one.
    let out = run(&s, wf, "http://127.0.0.1:9", &["--budget-tokens", "100000"]);
    assert_code(&out, 0);
    let (_, b) = budget(&s, &[]);
    assert_eq!(b["limit"]["tokens"], 100000, "{b}");
    // A subcommand that does not exist is refused.
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "budget", "clear"]);
    let out = run_hang_guarded(c);
    assert_code(&out, 64);
    assert!(stderr(&out).contains("budget: unknown subcommand 'clear'"));
}

/// Alice and bob as exec agents that answer each other 0.3 s after their run ended, from a
/// detached child (it has left the run's process group before the run ends).
fn late_pair(s: &Setup) {
    s.script(
        "late.sh",
        "cat >/dev/null
setsid sh -c \"touch detached.$$; sleep 0.3; aw-send '@$1 again'\" </dev/null >/dev/null 2>&1 &
while [ ! -e detached.$$ ]; do sleep 0.01; done
rm -f detached.$$
",
    );
    s.write(
        "wf.yaml",
        "agents:
  alice:
    backend: exec
    command: [./late.sh, bob]
  bob:
    backend: exec
    command: [./late.sh, alice]
kickoff: '@alice go'
",
    );
}

/// The number of channel entries once no new one came for 0.8 s (hang guarded).
fn settled_count(s: &Setup) -> usize {
    let mut n = None;
    wait_for("the channel to settle", || {
        let before = s.entries().len();
        std::thread::sleep(Duration::from_millis(800));
        n = (before == s.entries().len()).then_some(before);
        n.is_some()
    });
    n.unwrap()
}

#[test]
fn the_rate_guard_pauses_agents_that_answer_each_other_late_and_the_server_stays_up() {
    // Alice and bob answer each other 0.3 s after their run ended, from a detached child:
    // every quiet moment resets the --max-runs count, so only the rate guard ends it.
    let s = Setup::new();
    late_pair(&s);
    let server = Server::new(spawn(s.cmd(&[
        "--keep",
        "--max-runs",
        "5",
        "--max-rate",
        "4/60s",
        "--debounce",
        "0.01s",
    ])));
    // Alice's first run answers the kickoff, which is no loop: bob's count fills first.
    wait_for("the kickoff", || s.root.channel(INST).exists());
    wait_for("bob paused", || {
        s.entries()
            .iter()
            .any(|(f, m)| f == "system" && m.starts_with("loop guard: bob ran 4 times within 60 s"))
    });
    // Bounded: the kickoff, at most 5 runs' worth of messages each way, two notices.
    let n = settled_count(&s);
    assert!(n <= 1 + 2 * 5 + 2, "{n}: {:?}", s.entries());
    assert!(alive(server.pid()));
    // A message from a user is handled: alice runs, and answers bob late.
    let from_alice = |s: &Setup| s.entries().iter().filter(|(f, _)| f == "alice").count();
    let before = from_alice(&s);
    s.root.send(INST, &["--from", "user"], "@alice once more");
    wait_for("alice to run again", || from_alice(&s) > before);
    assert!(alive(server.pid()));
    // Bob stays paused: her answer is left unread.
    let status =
        std::fs::read_to_string(s.root.inst_dir(INST).join("_state/serve/bob.json")).unwrap();
    assert!(status.contains("\"paused\""), "{status}");
    let out = server.term();
    assert_code(&out, 0);
    let err = stderr(&out);
    assert!(
        err.contains("aw-run: loop guard: bob ran 4 times within 60 s on other agents' messages alone; paused until a message from someone else"),
        "{err}"
    );
}

#[test]
fn the_pair_guard_pauses_two_agents_that_answer_each_other_late_by_default() {
    // The shape of the rate guard's test above, with the default limits: the mentions
    // between alice and bob are counted across the quiet moments that reset --max-runs.
    let s = Setup::new();
    late_pair(&s);
    let server = Server::new(spawn(s.cmd(&[
        "--keep",
        "--max-runs",
        "5",
        "--debounce",
        "0.01s",
    ])));
    let notice = |s: &Setup| {
        s.entries()
            .into_iter()
            .find(|(f, m)| f == "system" && m.contains("mentioned each other 10 times within 60 s"))
    };
    wait_for("the kickoff", || s.root.channel(INST).exists());
    wait_for("the pair guard", || notice(&s).is_some());
    let (_, why) = notice(&s).unwrap();
    assert!(
        why.starts_with("loop guard: alice and bob mentioned")
            || why.starts_with("loop guard: bob and alice mentioned"),
        "{why}"
    );
    let n = settled_count(&s);
    // The kickoff, alice's answer to it, 10 counted mentions, the notice.
    assert!(n <= 1 + 1 + 10 + 1, "{n}: {:?}", s.entries());
    assert!(alive(server.pid()));
    let paused = if why.starts_with("loop guard: alice") {
        "alice"
    } else {
        "bob"
    };
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "status", "--json"]);
    let status = String::from_utf8(run_hang_guarded(c).stdout).unwrap();
    assert!(
        status
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|v| v.to_string().contains(paused) && v.to_string().contains("\"paused\"")),
        "{status}"
    );
    let out = server.term();
    assert_code(&out, 0);
    assert!(
        stderr(&out).contains(&format!("aw-run: {why}")),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_loop_between_agents_of_two_servers_is_stopped_by_the_pair_guard() {
    // alice and bob, registered with aw-ctl new, each served by an aw-run of its own: to
    // either server the other's messages come from an agent it does not serve, and each
    // server is quiet while the other works.
    let s = Setup::new();
    let ping = s.script("ping.sh", "cat >/dev/null\necho \"@$1 again\"\n");
    let ping = ping.to_str().unwrap();
    for (name, other) in [("alice", "bob"), ("bob", "alice")] {
        let mut c = s.tool_cmd("aw-ctl");
        c.args([
            "-i",
            INST,
            "new",
            name,
            "--backend",
            "exec",
            "--",
            ping,
            other,
        ]);
        assert_code(&run_hang_guarded(c), 0);
    }
    let serve = |name: &str| {
        let mut c = s.tool_cmd("aw-run");
        c.args(["-i", INST, "--serve", "--keep", "--debounce", "0.01s", name]);
        Server::new(spawn(c))
    };
    let (a, b) = (serve("alice"), serve("bob"));
    wait_for("both served", || ps(&s).len() == 2);
    s.root.send(INST, &["--from", "user"], "@alice go");
    let notice = |s: &Setup| {
        s.entries()
            .into_iter()
            .any(|(f, m)| f == "system" && m.contains("mentioned each other 10 times within 60 s"))
    };
    wait_for("the pair guard", || notice(&s));
    let n = settled_count(&s);
    // The start, at most 11 answers of each, the notices.
    assert!(n <= 1 + 2 * 11 + 2, "{n}: {:?}", s.entries());
    assert!(alive(a.pid()) && alive(b.pid()));
    assert_code(&a.term(), 0);
    assert_code(&b.term(), 0);
}

#[test]
fn sixty_pings_from_a_user_are_all_handled_by_a_kept_server() {
    // Each ping is sent once the one before is handled, well within the debounce: no quiet
    // moment resets the run count, and 60 runs pass the default --max-runs of 50. Outside
    // traffic is no loop: the server handles them all and stays up.
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  carol:\n    mock: {replies: ['ok']}\n  dave:\n    mock: {}\n",
    );
    let server = Server::new(spawn(s.cmd(&["--keep", "--debounce", "10s"])));
    wait_for("the server", || {
        common::runner::shown(s.root.path(), INST, "carol")
    });
    for i in 0..60 {
        s.root
            .send(INST, &["--from", "user"], &format!("@carol ping {i}"));
        wait_for("carol to read the ping", || s.unread("carol") == 0);
    }
    let from_carol = |s: &Setup| s.entries().iter().filter(|(f, _)| f == "carol").count();
    wait_for("carol's 60 answers", || from_carol(&s) == 60);
    assert!(alive(server.pid()));
    let out = server.term();
    assert_code(&out, 0);
    let err = stderr(&out);
    assert!(!err.contains("loop guard"), "{err}");
    assert!(s.entries().iter().all(|(f, _)| f != "system"));
}

#[test]
fn steady_traffic_from_a_user_is_no_loop() {
    // 50 pings back to back: each run of carol on them is started by a user, not by
    // another agent, however often.
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  carol:\n    mock: {replies: ['ok']}\n  dave:\n    mock: {}\n",
    );
    let server = Server::new(spawn(s.cmd(&["--keep", "--max-rate", "2/60s"])));
    wait_for("the server", || {
        common::runner::shown(s.root.path(), INST, "carol")
    });
    for i in 0..50 {
        s.root
            .send(INST, &["--from", "user"], &format!("@carol ping {i}"));
    }
    wait_for("carol to read every ping", || s.unread("carol") == 0);
    assert!(alive(server.pid()));
    let out = server.term();
    assert_code(&out, 0);
    let err = stderr(&out);
    assert!(!err.contains("loop guard"), "{err}");
    assert!(
        s.entries().iter().all(|(f, _)| f != "system"),
        "{:?}",
        s.entries()
    );
}

/// A Chat Completions server for a lead that spawns one worker: the lead's first call
/// spawns `worker` (an openai worker), its next ends its turn after `lead_pause`; each call
/// of the worker calls `my_inbox` again after `worker_pause`, for `worker_tokens`. Every
/// answer is 20 tokens for the lead. Counts the tokens handed out.
fn lead_and_worker(
    lead_pause: Duration,
    worker_pause: Duration,
    worker_tokens: u64,
) -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handed = Arc::new(AtomicU64::new(0));
    let counter = handed.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 {
                        return;
                    }
                    let h = h.trim_end().to_ascii_lowercase();
                    if h.is_empty() {
                        break;
                    }
                    if let Some(v) = h.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let body = String::from_utf8_lossy(&body);
                let call = |name: &str, args: Value| {
                    json!([{"id": "c1", "type": "function",
                        "function": {"name": name, "arguments": args.to_string()}}])
                };
                let (message, finish, tokens) = if body.contains("You lead.") {
                    if body.contains("\"role\":\"tool\"") {
                        std::thread::sleep(lead_pause);
                        (
                            json!({"role": "assistant", "content": "spawned"}),
                            "stop",
                            20,
                        )
                    } else {
                        let args = json!({"prompt": "count", "name": "w1", "backend": "openai",
                            "model": "gpt-test", "system_prompt": "You work."});
                        let m = json!({"role": "assistant", "content": "",
                            "tool_calls": call("spawn_agent", args)});
                        (m, "tool_calls", 20)
                    }
                } else {
                    std::thread::sleep(worker_pause);
                    let m = json!({"role": "assistant", "content": "",
                        "tool_calls": call("my_inbox", json!({}))});
                    (m, "tool_calls", worker_tokens)
                };
                let answer = json!({
                    "choices": [{"message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": tokens / 2, "completion_tokens": tokens - tokens / 2}
                })
                .to_string();
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    answer.len()
                );
                counter.fetch_add(tokens, Ordering::SeqCst);
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(answer.as_bytes());
                let _ = stream.flush();
            });
        }
    });
    (url, handed)
}

const LEAD: &str = "agents:
  lead:
    backend: openai
    model: gpt-test
    system_prompt: You lead.
    collab: true
kickoff: '@lead split the work'
budget: {tokens: 3000}
";

/// The servers of instance `w` still running, from `aw-ctl ps --json`.
fn ps(s: &Setup) -> Vec<Value> {
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "ps", "--json"]);
    let out = run_hang_guarded(c);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_worker_on_a_detached_server_stays_under_the_workflow_budget() {
    // Under --poll 4 the workflow's aw-run does not take the worker within spawn_agent's
    // wait: a detached `aw-run --serve --keep` serves it, under the instance's budget.
    let s = Setup::new();
    let (url, handed) = lead_and_worker(Duration::from_secs(2), Duration::ZERO, 5000);
    let out = run(&s, LEAD, &url, &["--poll", "4"]);
    let err = stderr(&out);
    assert_code(&out, 1);
    assert!(err.contains("over the 3000 token budget"), "{err}");
    wait_for("the detached server to end", || ps(&s).is_empty());
    let stop = s
        .entries()
        .into_iter()
        .find(|(f, m)| f == "system" && m.starts_with("budget: "))
        .expect("a budget stop on the channel");
    assert!(stop.1.contains("over the 3000 token budget"), "{stop:?}");
    let (_, b) = budget(&s, &[]);
    let spent = b["spent"]["tokens"].as_u64().unwrap();
    assert_eq!(spent, handed.load(Ordering::SeqCst), "{b}");
    // At most one call of each agent past the budget.
    assert!(spent <= 3000 + 5000 + 20, "{b}");
    assert_eq!(b["agents"]["w1"]["tokens"], 5000, "{b}");
    assert_lock_free(&s, "w1");
}

#[test]
fn a_workflow_whose_worker_on_a_polling_server_passed_the_budget_exits_1() {
    // The lead ends its turn at once; its worker, served by a detached server under
    // --poll 4, spends 2,000 tokens a call. The workflow is not done while its worker
    // works: the worker's spending passes the budget by one call at most, and the
    // workflow exits 1 with the budget's line, as when it serves the worker itself.
    let s = Setup::new();
    let (url, handed) = lead_and_worker(Duration::ZERO, Duration::from_millis(100), 2000);
    let out = run(&s, LEAD, &url, &["--poll", "4"]);
    let err = stderr(&out);
    assert_code(&out, 1);
    assert!(
        err.lines()
            .any(|l| l.starts_with("aw-run: budget: ") && l.contains("over the 3000 token budget")),
        "{err}"
    );
    wait_for("the detached server to end", || ps(&s).is_empty());
    let (_, b) = budget(&s, &[]);
    let spent = b["spent"]["tokens"].as_u64().unwrap();
    assert_eq!(spent, handed.load(Ordering::SeqCst), "{b}");
    // The budget, and at most one call of each agent past it.
    assert!(spent > 3000 && spent <= 3000 + 2000 + 20, "{b}");
}

#[test]
fn a_detached_worker_server_ends_with_the_workflow_that_spawned_it() {
    // The worker would go on for ever (100 tokens a call, well under the budget): its
    // server ends once the lead's workflow has ended.
    let s = Setup::new();
    let (url, _) = lead_and_worker(Duration::ZERO, Duration::from_millis(100), 10);
    let wf = LEAD.replace("tokens: 3000", "tokens: 100000000");
    let out = run(&s, &wf, &url, &["--poll", "4"]);
    assert_code(&out, 0);
    wait_for("the detached server to end", || ps(&s).is_empty());
    let log = std::fs::read_to_string(s.root.inst_dir(INST).join("_state/aw-run.log"))
        .unwrap_or_default();
    assert!(
        log.contains("aw-run: w1: lead, its spawner, is no longer served; so neither is w1"),
        "{log}"
    );
}

#[test]
fn a_detached_worker_server_gets_the_workflows_caps_and_ends_with_it() {
    // The lead waits 6 s in its last call: the detached server started for its worker after
    // spawn_agent's 2 s is seen at work, then ends with the workflow.
    let s = Setup::new();
    let (url, _) = lead_and_worker(Duration::from_secs(6), Duration::from_millis(100), 10);
    let wf = LEAD.replace("tokens: 3000", "tokens: 100000000");
    let args = [
        "--poll",
        "4",
        "--max-runs",
        "7",
        "--max-rate",
        "5/30s",
        "--retries",
        "2",
        "--backoff",
        "0.5s",
        "--cooldown",
        "9s",
        "--timeout",
        "600s",
    ];
    let run = spawn(command(&s, &wf, &url, &args));
    let record = s.root.inst_dir(INST).join("_state/serve/w1.json");
    let mut served = Value::Null;
    wait_for("the detached server to serve w1", || {
        served = std::fs::read(&record)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        served["state"] == "running"
    });
    let pid = served["pid"].as_u64().unwrap() as u32;
    assert_ne!(pid, run.id());
    let caps = &served["caps"];
    assert_eq!(caps["max_runs"], 7, "{served}");
    assert_eq!(caps["max_rate"], "5/30.000s", "{served}");
    assert_eq!(caps["retries"], 2, "{served}");
    assert_eq!(caps["backoff"], 0.5, "{served}");
    assert_eq!(caps["cooldown"], 9.0, "{served}");
    // What is left of the workflow's 600 s, not a fresh 600 s.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let argv: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let at = argv
        .iter()
        .position(|a| a == "--timeout")
        .expect("a --timeout");
    let left: f64 = argv[at + 1].trim_end_matches('s').parse().unwrap();
    assert!(left > 0.0 && left < 600.0, "{argv:?}");
    let out = wait_hang_guarded(run);
    assert_code(&out, 0);
    let log = s.root.inst_dir(INST).join("_state/aw-run.log");
    let end = std::time::Instant::now() + Duration::from_secs(20);
    while alive(pid) {
        assert!(
            std::time::Instant::now() < end,
            "the detached server did not end: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ps(&s).is_empty());
    assert_lock_free(&s, "w1");
}

/// The serving lock of `agent` is free: a server of it may start again.
fn assert_lock_free(s: &Setup, agent: &str) {
    let path = s
        .root
        .inst_dir(INST)
        .join(format!("_state/serve/{agent}.lock"));
    let lock = std::fs::File::open(path).unwrap();
    assert!(
        nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok(),
        "the serving lock of {agent} is still held"
    );
    // Nor does its claim name a live server.
    let inst = aw::instance::Root::new(s.root.path())
        .instance(INST)
        .unwrap();
    assert!(
        !aw::serve::is_served(&inst, agent),
        "{agent} is still served"
    );
}

#[test]
fn a_bad_rate_or_a_damaged_ledger_is_refused_by_name() {
    let s = Setup::new();
    s.write("wf.yaml", "agents:\n  alice:\n    mock: {}\n");
    for (rate, why) in [
        (
            "0/60s",
            "--max-rate '0/60s': the runs must be a whole number of at least 1",
        ),
        (
            "20",
            "--max-rate '20': expected RUNS/DURATION (such as 20/60s) or off",
        ),
    ] {
        let out = run_hang_guarded(s.cmd(&["--keep", "--max-rate", rate]));
        assert_code(&out, 64);
        assert_eq!(
            stderr(&out).lines().next(),
            Some(&*format!("aw-run: {why}"))
        );
    }
    // A damaged budget file is named, and left as it is.
    let out = run(
        &s,
        "agents:\n  alice:\n    mock: {}\n",
        "http://127.0.0.1:9",
        &[],
    );
    assert_code(&out, 0);
    let file = s.root.inst_dir(INST).join("_state/budget.json");
    std::fs::write(&file, "{not json").unwrap();
    let out = run(
        &s,
        "agents:\n  alice:\n    mock: {}\n",
        "http://127.0.0.1:9",
        &[],
    );
    assert_code(&out, 65);
    assert!(stderr(&out).contains("budget.json"), "{}", stderr(&out));
    let (code, _) = budget(&s, &[]);
    assert_eq!(code, 65);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{not json");
}
