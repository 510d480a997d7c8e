//! aw-run against misbehaving programs and API servers: a background child that keeps an
//! exec program's stdout open, programs and setup tasks that print without end, API answers
//! that are huge, trickle, are not UTF-8 or call a tool thousands of times, and an inbox far
//! larger than a prompt. Memory is measured as the peak RSS of the real aw-run process.

use crate::common;

use std::io::Read;
use std::process::{Command, Stdio};

use common::fake_api::{FakeApi, Reply};
use common::runner::*;
use serde_json::{Value, json};

/// What a measured run gave: exit code, stdout, stderr, and aw-run's peak RSS in bytes.
struct Measured {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    peak_rss: u64,
}

/// Run `cmd` to its end and read its peak RSS: its high-water mark (`VmHWM`), sampled every
/// 5 ms while it runs (a high-water mark only grows, so a sample misses at most a peak of
/// the last 5 ms). Killed if it hangs or grows past 1.5 GB (bounds that only stop a failing
/// test from taking the machine).
// Reaped by waitpid below (the pid is needed by the sampling thread while it runs).
#[allow(clippy::zombie_processes)]
fn run_measured(mut cmd: Command) -> Measured {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start aw-run");
    let pid = child.id() as i32;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The peak is aw-run's own high-water mark (VmHWM), sampled while it runs: the
    // `ru_maxrss` of wait4 would also count the resident size of this test process at the
    // fork (kept across exec), which other tests of this binary may have made large.
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let guard = {
        let (done, peak) = (done.clone(), peak.clone());
        std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                peak.fetch_max(
                    status_bytes(pid, "VmHWM:"),
                    std::sync::atomic::Ordering::SeqCst,
                );
                if t0.elapsed() > std::time::Duration::from_secs(60) || rss(pid) > 1500 * MB {
                    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        })
    };
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let mut status = 0;
    // SAFETY: waitpid fills the status of the child it reaps.
    let r = unsafe { nix::libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid, "waitpid");
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = guard.join();
    let code = nix::libc::WIFEXITED(status).then(|| nix::libc::WEXITSTATUS(status));
    Measured {
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        peak_rss: peak.load(std::sync::atomic::Ordering::SeqCst),
    }
}

const MB: u64 = 1_000_000;

/// The resident set of a running process, in bytes (0 once it is gone).
fn rss(pid: i32) -> u64 {
    status_bytes(pid, "VmRSS:")
}

/// A size in kilobytes of `/proc/PID/status`, in bytes (0 when there is none).
fn status_bytes(pid: i32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with(key))?.to_string();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// Kill the process whose pid a script wrote to `file` in the working directory, if any.
fn kill_pid_in(s: &Setup, file: &str) {
    if let Ok(t) = std::fs::read_to_string(s.dir().join(file))
        && let Ok(pid) = t.trim().parse::<i32>()
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

// ---------------------------------------------------------------------------------------
// exec programs and shell tasks

/// An exec program that exits at once, leaving a child of its own session (out of its
/// process group) that writes to the inherited stdout every 0.2 s forever.
#[test]
fn a_background_child_holding_stdout_does_not_hold_the_run() {
    let s = Setup::new();
    s.script(
        "agent.sh",
        "cat > /dev/null\n\
         setsid sh -c 'echo $$ > ticker.pid; while :; do echo tick; sleep 0.2; done' &\n\
         while [ ! -s ticker.pid ]; do sleep 0.05; done\n\
         echo done\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  bob:\n    command: [./agent.sh]\nkickoff: '@bob go'\n",
    );
    let out = run_measured(s.cmd(&["-q"]));
    kill_pid_in(&s, "ticker.pid");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let entries = s.entries();
    let (from, reply) = entries.last().unwrap();
    assert_eq!(from, "bob");
    assert!(reply.lines().any(|l| l == "done"), "{reply}");
    assert_eq!(s.unread("bob"), 0);
    assert_eq!(s.transcript("bob", 1)["status"], "ok");
}

/// The same with a child that writes as fast as it can: what is kept is bounded.
#[test]
fn a_background_yes_is_cut_off_and_not_kept() {
    let s = Setup::new();
    s.script(
        "agent.sh",
        "cat > /dev/null\nsetsid sh -c 'echo $$ > yes.pid; exec yes' &\n\
         while [ ! -s yes.pid ]; do sleep 0.05; done\nsleep 0.2\nexit 0\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  bob:\n    command: [./agent.sh]\nkickoff: '@bob go'\n",
    );
    let out = run_measured(s.cmd(&["-q"]));
    kill_pid_in(&s, "yes.pid");
    // Its reply (whatever `yes` wrote in the grace) is longer than a message, or was posted
    // whole: either way aw-run ended and kept little.
    assert!(out.code.is_some(), "{}", out.stderr);
    assert!(out.peak_rss < 200 * MB, "peak RSS {} MB", out.peak_rss / MB);
    assert!(s.transcript_path("bob", 1).exists());
}

/// 512 MiB on an exec program's stdout: at most a message's worth is kept.
#[test]
fn an_exec_program_printing_half_a_gigabyte_is_not_kept_in_memory() {
    let s = Setup::new();
    s.script("agent.sh", "cat > /dev/null\nyes | head -c 536870912\n");
    s.write(
        "wf.yaml",
        "agents:\n  bob:\n    command: [./agent.sh]\nkickoff: '@bob go'\n",
    );
    let out = run_measured(s.cmd(&["-q", "--retries", "1"]));
    assert!(out.peak_rss < 200 * MB, "peak RSS {} MB", out.peak_rss / MB);
    // The reply cannot be posted: it is longer than a message.
    let t = s.transcript("bob", 1);
    assert_eq!(t["status"], "failed", "{t}");
    assert!(
        t["reason"]
            .as_str()
            .unwrap()
            .contains("cannot post the reply"),
        "{t}"
    );
    assert_eq!(
        t["stdout_cut"].as_u64().unwrap() + t["stdout"].as_str().unwrap().len() as u64,
        536_870_912
    );
    assert_eq!(s.unread("bob"), 1);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
}

/// A setup task printing 512 MiB is stopped past the documented limit.
#[test]
fn a_setup_task_printing_without_end_fails_with_its_limit() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "setup:\n  - shell: yes | head -c 536870912\n    as: big\n\
         agents:\n  bob:\n    backend: mock\nkickoff: '@bob go'\n",
    );
    let out = run_measured(s.cmd(&["-q"]));
    assert!(out.peak_rss < 200 * MB, "peak RSS {} MB", out.peak_rss / MB);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("setup task 1") && out.stderr.contains("more than 16 MiB"),
        "{}",
        out.stderr
    );
    let _ = out.stdout;
}

/// A setup task that leaves a background job writing to its stdout still ends: its output
/// is what came before the grace ran out.
#[test]
fn a_setup_task_whose_background_job_keeps_stdout_open_ends() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "setup:\n  - shell: \"setsid sh -c 'echo $$ > job.pid; while :; do sleep 0.2; echo more; done' & while [ ! -s job.pid ]; do sleep 0.05; done; echo ready\"\n    as: state\n\
         agents:\n  bob:\n    backend: mock\nkickoff: '@bob ${{ state }}'\n",
    );
    let out = run_measured(s.cmd(&["-q"]));
    kill_pid_in(&s, "job.pid");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let entries = s.entries();
    assert!(entries[0].1.starts_with("@bob ready"), "{entries:?}");
}

/// `--timeout` bounds setup too: a setup task that would run for a minute is killed.
#[test]
fn the_workflow_timeout_stops_a_setup_task() {
    let s = Setup::new();
    let out = s.run(
        "setup:\n  - shell: echo $$ > setup.pid; exec sleep 60\n\
         agents:\n  bob:\n    backend: mock\nkickoff: '@bob go'\n",
        &["-q", "--timeout", "1s"],
    );
    assert_code(&out, 1);
    let err = stderr(&out);
    assert!(
        err.contains("setup task 1") && err.contains("--timeout passed"),
        "{err}"
    );
    let pid: u32 = std::fs::read_to_string(s.dir().join("setup.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_for("the setup task to be gone", || !alive(pid));
    // Nothing was posted: setup comes first.
    assert!(s.entries().is_empty());
}

/// 60 MiB of unread messages: the prompt shows the newest whole (past the 64 KiB of
/// `MAX_INBOX_BYTES`, a message is shown whole only when it is the newest) and summarises
/// the 59 older ones by count and id range; one run acknowledges them all, and every one of
/// them is still in the channel.
#[test]
fn a_huge_inbox_is_shown_newest_first_and_the_rest_summarised() {
    let s = Setup::new();
    s.script("agent.sh", "cat > /dev/null\necho ok\n");
    s.write(
        "wf.yaml",
        "agents:\n  bob:\n    command: [./agent.sh]\n    max_runs: 100\n",
    );
    // A first run registers bob, so that the messages mention him.
    assert_code(&run_hang_guarded(s.cmd(&["-q"])), 0);
    let mut lines = Vec::new();
    for i in 0..60 {
        lines.extend_from_slice(format!("@bob {i:03} ").as_bytes());
        lines.extend(std::iter::repeat_n(b'x', 1 << 20));
        lines.push(b'\n');
    }
    let mut send = s.tool_cmd("aw-send");
    send.args(["-i", INST, "--lines"]);
    let sent = common::run_with(send, Some(&lines));
    assert_eq!(sent.status.code(), Some(0), "{}", stderr(&sent));
    drop(lines);
    let out = run_measured(s.cmd(&["-q"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(s.unread("bob"), 0);
    let t = s.transcript("bob", 1);
    assert_eq!(t["status"], "ok");
    assert_eq!(t["inbox"], json!([60]));
    let prompt = t["prompt"].as_str().unwrap();
    assert!(
        prompt.len() < (1 << 20) + (256 << 10),
        "prompt of {} bytes",
        prompt.len()
    );
    assert!(
        prompt.contains("## Inbox (1 message for you)"),
        "{}",
        &prompt[..400]
    );
    assert!(
        prompt.contains("(59 older unread messages for you, ids 1 to 59, not shown here"),
        "{}",
        &prompt[..400]
    );
    assert!(!s.transcript_path("bob", 2).exists());
    // The 60 messages, then bob's reply.
    let mut kept = s.entries();
    assert_eq!(kept.pop(), Some(("bob".to_string(), "ok".to_string())));
    assert_eq!(kept.len(), 60);
    for (i, (_, text)) in kept.iter().enumerate() {
        assert!(
            text.starts_with(&format!("@bob {i:03} x")),
            "entry {}",
            i + 1
        );
        assert_eq!(text.len(), 9 + (1 << 20));
    }
    assert!(out.peak_rss < 200 * MB, "peak RSS {} MB", out.peak_rss / MB);
}

/// 100,000 unread messages (sent with `aw-send --lines`): the one prompt the agent receives
/// shows the newest `MAX_INBOX_MESSAGES` (50) in full and names the count and id range of
/// the others and how to read them; after the run nothing is unread and nothing is lost.
#[test]
fn a_prompt_over_100k_unread_messages_is_bounded_and_summarises_the_rest() {
    const N: u64 = 100_000;
    let s = Setup::new();
    // The agent keeps each prompt it receives on stdin.
    s.script("agent.sh", "cat > \"prompt.$AW_RUN.txt\"\necho ok\n");
    s.write(
        "wf.yaml",
        "agents:\n  bob:\n    command: [./agent.sh]\n    max_runs: 100\n",
    );
    assert_code(&run_hang_guarded(s.cmd(&["-q"])), 0);
    let lines: String = (1..=N).map(|i| format!("@bob message {i}\n")).collect();
    let mut send = s.tool_cmd("aw-send");
    send.args(["-i", INST, "--lines"]);
    let sent = common::run_with(send, Some(lines.as_bytes()));
    assert_eq!(sent.status.code(), Some(0), "{}", stderr(&sent));
    assert_eq!(s.unread("bob"), N as usize);
    let out = run_measured(s.cmd(&["-q"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let prompts: Vec<_> = std::fs::read_dir(s.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("prompt."))
        .collect();
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    let prompt = std::fs::read_to_string(s.dir().join(&prompts[0])).unwrap();
    // 50 short messages, the summary and the instructions: a few KiB, not 8.5 MB.
    assert!(prompt.len() < 16 << 10, "prompt of {} bytes", prompt.len());
    assert!(
        prompt.contains("## Inbox (50 messages for you)"),
        "{prompt}"
    );
    assert!(
        prompt.contains(&format!(
            "({} older unread messages for you, ids 1 to {}, not shown here",
            N - 50,
            N - 50
        )),
        "{prompt}"
    );
    assert!(prompt.contains("channel_read tool (since: 0,"), "{prompt}");
    assert!(
        prompt.contains(&format!("`aw-peek -i {INST} --since 0`")),
        "{prompt}"
    );
    let shown: Vec<u64> = prompt
        .lines()
        .filter(|l| l.starts_with("- From @"))
        .filter_map(|l| l.split_once(": @bob message "))
        .map(|(_, n)| n.trim().parse().unwrap())
        .collect();
    assert_eq!(shown, (N - 49..=N).collect::<Vec<_>>());
    let t = s.transcript("bob", 1);
    assert_eq!(t["inbox"].as_array().unwrap().len(), 50);
    assert!(!s.transcript_path("bob", 2).exists());
    // Acknowledged, and still in the channel, every one of them.
    assert_eq!(s.unread("bob"), 0);
    let mut kept = s.entries();
    assert_eq!(kept.pop(), Some(("bob".to_string(), "ok".to_string())));
    assert_eq!(kept.len(), N as usize);
    for (i, (_, text)) in kept.iter().enumerate() {
        assert_eq!(text, &format!("@bob message {}", i + 1));
    }
}

// ---------------------------------------------------------------------------------------
// API answers

const KEY: &str = "sk-test-0123456789";

/// aw-run on `wf` with the fake's URL and a key in the environment.
fn api_cmd(s: &Setup, wf: &str, api: &FakeApi, args: &[&str]) -> Command {
    s.write("wf.yaml", wf);
    let mut c = s.cmd(args);
    c.env("ANTHROPIC_BASE_URL", &api.url)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("OPENAI_BASE_URL", format!("{}/v1", api.url))
        .env("OPENAI_API_KEY", KEY);
    c
}

const OPENAI_WF: &str = "agents:
  alice:
    backend: openai
    model: gpt-test
kickoff: '@alice go'
";

/// A Chat Completions answer.
fn chat(message: Value, finish: &str) -> Value {
    json!({
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}
    })
}

#[test]
fn an_answer_that_is_not_utf8_fails_at_once_without_retries() {
    let s = Setup::new();
    let mut body = br#"{"choices":[{"message":{"role":"assistant","content":"caf"#.to_vec();
    body.extend_from_slice(b"\xe9\xff");
    body.extend_from_slice(br#""},"finish_reason":"stop"}]}"#);
    let api = FakeApi::start(vec![Reply::Raw(200, std::sync::Arc::new(body)); 8]);
    let out = run_hang_guarded(api_cmd(&s, OPENAI_WF, &api, &["-q", "--retries", "1"]));
    assert_code(&out, 1);
    assert_eq!(api.requests().len(), 1);
    let t = s.transcript("alice", 1);
    assert_eq!(t["status"], "failed");
    let reason = t["reason"].as_str().unwrap();
    assert!(reason.contains("not UTF-8"), "{reason}");
    assert_eq!(s.unread("alice"), 1);
}

#[test]
fn tool_calls_past_the_limit_of_one_answer_are_refused() {
    let s = Setup::new();
    let calls: Vec<Value> = (0..3000)
        .map(|i| {
            json!({"id": format!("c{i}"), "type": "function", "function": {
                "name": "channel_send", "arguments": json!({"message": format!("note {i}")}).to_string()}})
        })
        .collect();
    let api = FakeApi::start(vec![
        Reply::ok(chat(
            json!({"role": "assistant", "content": null, "tool_calls": calls}),
            "tool_calls",
        )),
        Reply::ok(chat(
            json!({"role": "assistant", "content": "done"}),
            "stop",
        )),
    ]);
    let out = run_hang_guarded(api_cmd(&s, OPENAI_WF, &api, &["-q", "--retries", "1"]));
    assert_code(&out, 0);
    // The documented default: 64 calls of one answer run.
    let posted: Vec<String> = s
        .entries()
        .into_iter()
        .filter(|(f, _)| f == "alice")
        .map(|(_, m)| m)
        .collect();
    assert_eq!(posted.len(), 64);
    assert_eq!(posted[63], "note 63");
    // Every call got a result; the refused ones an error saying why.
    let reqs = api.requests();
    assert_eq!(reqs.len(), 2);
    let results: Vec<&Value> = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 3000);
    let refused = results
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .unwrap()
                .contains("more than 64 tool calls in one answer")
        })
        .count();
    assert_eq!(refused, 2936);
    assert_eq!(results[2999]["tool_call_id"], "c2999");
    // The attempt says so.
    let t = s.transcript("alice", 1);
    let first: Value =
        serde_json::from_str(t["stdout"].as_str().unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(first["refused"], 2936);
    assert!(stderr(&out).contains("2936 refused"), "{}", stderr(&out));
}

/// Four agents each get a valid 30 MiB answer, most of it an array no one reads.
#[test]
fn huge_answers_are_read_without_keeping_what_is_not_used() {
    let s = Setup::new();
    let mut body = br#"{"choices":[{"message":{"role":"assistant","content":"fine"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5},"extra":["#.to_vec();
    while body.len() < 30 << 20 {
        body.extend_from_slice(b"1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,");
    }
    body.extend_from_slice(b"1]}");
    let body = std::sync::Arc::new(body);
    let api = FakeApi::start(vec![Reply::Raw(200, body); 4]);
    let mut wf = String::from("agents:\n");
    for a in ["a1", "a2", "a3", "a4"] {
        wf.push_str(&format!(
            "  {a}:\n    backend: openai\n    model: gpt-test\n"
        ));
    }
    wf.push_str("kickoff: '@a1 @a2 @a3 @a4 go'\n");
    let out = run_measured(api_cmd(&s, &wf, &api, &["-q", "--retries", "1"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.peak_rss < 200 * MB, "peak RSS {} MB", out.peak_rss / MB);
    let replies = s.entries().into_iter().filter(|(_, m)| m == "fine").count();
    assert_eq!(replies, 4);
}

/// An API agent's `timeout` ends a tool that waits for a reply, as a stop does.
#[test]
fn the_run_timeout_ends_a_tool_waiting_for_a_reply() {
    let s = Setup::new();
    let api = FakeApi::start(vec![Reply::ok(chat(
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
            "type": "function", "function": {"name": "channel_send", "arguments":
            json!({"message": "@carol hi", "wait_for": "carol", "wait_seconds": 300}).to_string()}}]}),
        "tool_calls",
    ))]);
    let wf = "agents:\n  alice:\n    backend: openai\n    model: gpt-test\n    timeout: 1s\n\
              \x20 carol:\n    mock: {delay: 60s}\nkickoff: '@alice go'\n";
    let out = run_hang_guarded(api_cmd(
        &s,
        wf,
        &api,
        &["-q", "--retries", "1", "--timeout", "5s"],
    ));
    assert_code(&out, 1);
    let t = s.transcript("alice", 1);
    assert_eq!(t["status"], "timeout", "{t}");
    assert_eq!(api.requests().len(), 1);
}

/// The threads of a process, and its open sockets.
fn threads_and_sockets(pid: u32) -> (usize, usize) {
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
    let sockets = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| {
        d.flatten()
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
            })
            .count()
    });
    (threads, sockets)
}

/// A server that trickles its answers (a byte every 0.1 s, never done): every attempt times
/// out, and what it started is gone with it.
#[test]
fn timed_out_requests_leave_no_thread_or_socket_behind() {
    let s = Setup::new();
    let every = std::time::Duration::from_millis(100);
    let api = FakeApi::start(vec![Reply::Trickle(every); 40]);
    let wf = "agents:\n  alice:\n    backend: openai\n    model: gpt-test\n    timeout: 0.4s\n\
              kickoff: '@alice go'\n";
    // Ten attempts of one run, then it has failed for good (and waits out its cooldown).
    let server = Server::new(spawn(api_cmd(
        &s,
        wf,
        &api,
        &["-q", "--keep", "--retries", "10", "--backoff", "0.01s"],
    )));
    let pid = server.pid();
    wait_for("2 attempts", || s.transcript_path("alice", 2).exists());
    let (threads_2, sockets_2) = threads_and_sockets(pid);
    wait_for("10 attempts", || s.transcript_path("alice", 10).exists());
    // The server sees every request closed.
    wait_for("the requests to be closed", || api.open_connections() == 0);
    let (threads_10, sockets_10) = threads_and_sockets(pid);
    let out = server.term();
    assert_code(&out, 0);
    assert_eq!(s.statuses("alice", 10), vec!["timeout"; 10]);
    assert!(!s.transcript_path("alice", 11).exists());
    assert!(
        threads_10 <= threads_2 && sockets_10 <= sockets_2,
        "after 2 attempts: {threads_2} threads, {sockets_2} sockets; after 10: {threads_10}, {sockets_10}"
    );
}

/// A server that trickles a byte a second: 13 runs, each ended by the agent's timeout, each
/// with its request closed when it was given up: aw-run holds no socket once the last
/// attempt has ended, and the server sees every request closed.
#[test]
fn requests_abandoned_at_the_timeout_are_closed_when_abandoned() {
    let s = Setup::new();
    let api = FakeApi::start(vec![Reply::Trickle(std::time::Duration::from_secs(1)); 13]);
    let wf = "agents:\n  alice:\n    backend: openai\n    model: gpt-test\n    timeout: 1s\n\
              kickoff: '@alice go'\n";
    let server = Server::new(spawn(api_cmd(
        &s,
        wf,
        &api,
        &["-q", "--keep", "--retries", "1"],
    )));
    let pid = server.pid();
    wait_for("the first run", || s.transcript_path("alice", 1).exists());
    for i in 2..=13 {
        // A newer message starts a run at once, cooldown or not.
        s.root
            .send(INST, &["--from", "user"], &format!("@alice ping {i}"));
        wait_for("the run", || s.transcript_path("alice", i).exists());
    }
    wait_for("the last run to end", || {
        s.transcript("alice", 13)["status"] == "timeout"
    });
    // Closed as the attempts ended, not later.
    let (_, sockets) = threads_and_sockets(pid);
    wait_for("the server to see the requests closed", || {
        api.open_connections() == 0
    });
    let out = server.term();
    assert_code(&out, 0);
    assert_eq!(s.statuses("alice", 13), vec!["timeout"; 13]);
    assert_eq!(api.requests().len(), 13);
    assert_eq!(sockets, 0);
}
