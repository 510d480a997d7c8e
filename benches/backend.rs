//! Figure 7: what aw adds around a backend. One run of an agent, timed around
//! `Backend::run`, minus the backend's own time:
//!
//! - API backends (`anthropic`, `openai`) against a fake API on loopback that answers at
//!   once: the backend's own time is the time the server spends on each request (from the
//!   request read to the answer written); what is left is aw's (building the request with
//!   the 18 tool schemas, HTTP over loopback, reading the answer, running the aw tools the
//!   model calls). A one-step run and a three-step run (two tool calls).
//! - CLI backends (`claude`, `codex`): the program is this benchmark itself, as a fake CLI
//!   (selected by `AW_BENCH_FAKE` in its environment) that reads the prompt, prints a result
//!   and records the CLOCK_MONOTONIC times of its `main` and of its exit; the backend's own
//!   time is the difference. The floor row starts the same fake directly with
//!   `std::process::Command`, so that starting a process is shown apart from aw's share.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aw::instance::{Instance, Root};
use aw::process::Stop;
use aw::run::backend::anthropic;
use aw::run::backend::api::Settings;
use aw::run::backend::claude::Claude;
use aw::run::backend::codex::Codex;
use aw::run::backend::openai;
use aw::run::backend::{Backend, Later, RunContext, Status};
use aw::usage::Usage;
use common::{Opts, Stats, Table, mono_ns};
use serde_json::{Value, json};

/// The variable that makes this program a fake CLI: `claude:FILE` or `codex:FILE`, FILE
/// receiving "START END" in nanoseconds.
const FAKE: &str = "AW_BENCH_FAKE";

fn main() {
    if let Ok(spec) = std::env::var(FAKE) {
        fake_cli(&spec);
    }
    let opts = Opts::from_args();
    common::heading("model backends: aw's overhead around a run", &opts);
    let dir = common::scratch("backend-");
    let inst = Root::new(dir.path()).instance("b").expect("instance");
    common::create_team(&inst);
    let mut table = Table::new(&["backend, run", "n", "median", "p99", "own time (median)"]);
    api(&inst, dir.path(), &opts, &mut table);
    cli(&inst, dir.path(), &opts, &mut table);
    table.print();
}

/// The fake CLI: read the prompt, print what the real one prints at the end, record times.
fn fake_cli(spec: &str) -> ! {
    let start = mono_ns();
    let (kind, file) = spec.split_once(':').expect("KIND:FILE");
    let mut prompt = Vec::new();
    std::io::stdin().read_to_end(&mut prompt).expect("stdin");
    let out = match kind {
        "claude" => {
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","num_turns":1,"total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":2}}"#
        }
        _ => {
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":\"agent_message\",\"text\":\"ok\"}}\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":10,\"output_tokens\":2}}"
        }
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{out}").expect("stdout");
    stdout.flush().expect("flush");
    let end = mono_ns();
    std::fs::write(file, format!("{start} {end}")).expect("stamp file");
    std::process::exit(0)
}

/// A fake API that answers from a script, over and over; keeps connections open. The time
/// spent on each request is added to `busy`.
struct FakeApi {
    url: String,
    busy: Arc<Mutex<Duration>>,
}

impl FakeApi {
    fn start(script: Vec<Value>) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let busy = Arc::new(Mutex::new(Duration::ZERO));
        let (b, script) = (busy.clone(), Arc::new(script));
        let next = Arc::new(Mutex::new(0usize));
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                let (b, script, next) = (b.clone(), script.clone(), next.clone());
                std::thread::spawn(move || serve(s, &b, &script, &next));
            }
        });
        FakeApi { url, busy }
    }

    fn take_busy(&self) -> Duration {
        std::mem::take(&mut *self.busy.lock().unwrap())
    }
}

fn serve(s: TcpStream, busy: &Mutex<Duration>, script: &[Value], next: &Mutex<usize>) {
    s.set_nodelay(true).ok();
    let mut r = BufReader::new(s.try_clone().expect("clone"));
    let mut w = s;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
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
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let t = Instant::now();
        let answer = {
            let mut n = next.lock().unwrap();
            let a = script[*n % script.len()].to_string();
            *n += 1;
            a
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            answer.len()
        );
        let _ = w.write_all(head.as_bytes());
        let _ = w.write_all(answer.as_bytes());
        let _ = w.flush();
        *busy.lock().unwrap() += t.elapsed();
    }
}

/// One run of `backend` as alice; its wall time.
fn run_once(b: &mut dyn Backend, inst: &Instance, root: &Path, n: u64) -> Duration {
    let stop = Stop::default();
    let over = |_: &Usage| None;
    let prompt: Later<String> = Later::new(Box::new(|| {
        "You are alice.\n\nFrom @user: @alice look at this and answer briefly.\n".into()
    }));
    let log: Later<_> = Later::new(Box::new(|| None));
    let ctx = RunContext {
        inst,
        agent: "alice",
        run: n,
        attempt: 1,
        prompt: &prompt,
        prompt_messages: 1,
        card: None,
        root,
        mcp_config: &root.join("mcp.json"),
        timeout: None,
        stop: &stop,
        over_budget: &over,
        remaining_usd: None,
        log: &log,
        started: &|| {},
        resume: None,
    };
    let t = Instant::now();
    let out = b.run(&ctx);
    let wall = t.elapsed();
    assert_eq!(out.status, Status::Ok, "{:?}", out.reason);
    wall
}

fn settings(env: &[(String, String)]) -> Settings<'_> {
    Settings {
        model: "bench-model".into(),
        system: Some("You review code.".into()),
        max_tokens: Some(1024),
        max_steps: Some(10),
        env,
        read_timeout: Duration::from_secs(30),
        files: Vec::new(),
        cwd: ".".into(),
        aw_root: ".workflow".into(),
        instance_dir: ".workflow/bench".into(),
        toolset: Default::default(),
        approve: None,
    }
}

fn anthropic_answer(content: Value, stop: &str) -> Value {
    json!({"content": content, "stop_reason": stop, "usage": {"input_tokens": 10, "output_tokens": 2}})
}

fn openai_answer(message: Value, finish: &str) -> Value {
    json!({"choices": [{"message": message, "finish_reason": finish}], "usage": {"prompt_tokens": 10, "completion_tokens": 2}})
}

fn api(inst: &Instance, root: &Path, opts: &Opts, table: &mut Table) {
    let n = opts.reps(300);
    let tool =
        |id: &str, name: &str| json!({"type": "tool_use", "id": id, "name": name, "input": {}});
    let call = |id: &str, name: &str| json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}]});
    let cases: Vec<(&str, Vec<Value>, bool)> = vec![
        (
            "anthropic, 1 step",
            vec![anthropic_answer(
                json!([{"type": "text", "text": "ok"}]),
                "end_turn",
            )],
            true,
        ),
        (
            "anthropic, 3 steps (2 tool calls)",
            vec![
                anthropic_answer(json!([tool("a", "team_members")]), "tool_use"),
                anthropic_answer(json!([tool("b", "team_doc_list")]), "tool_use"),
                anthropic_answer(json!([{"type": "text", "text": "ok"}]), "end_turn"),
            ],
            true,
        ),
        (
            "openai, 1 step",
            vec![openai_answer(
                json!({"role": "assistant", "content": "ok"}),
                "stop",
            )],
            false,
        ),
        (
            "openai, 3 steps (2 tool calls)",
            vec![
                openai_answer(call("a", "team_members"), "tool_calls"),
                openai_answer(call("b", "team_doc_list"), "tool_calls"),
                openai_answer(json!({"role": "assistant", "content": "ok"}), "stop"),
            ],
            false,
        ),
    ];
    for (label, script, is_anthropic) in cases {
        let fake = FakeApi::start(script);
        let env = vec![
            ("ANTHROPIC_BASE_URL".to_string(), fake.url.clone()),
            ("ANTHROPIC_API_KEY".to_string(), "bench".to_string()),
            ("OPENAI_BASE_URL".to_string(), format!("{}/v1", fake.url)),
        ];
        let mut backend: Box<dyn Backend> = if is_anthropic {
            Box::new(anthropic::backend(settings(&env)).expect("backend"))
        } else {
            Box::new(openai::backend(settings(&env)).expect("backend"))
        };
        // Warm up: the first run connects.
        run_once(&mut *backend, inst, root, 0);
        fake.take_busy();
        let mut over = Vec::with_capacity(n);
        let mut own = Vec::with_capacity(n);
        for i in 0..n {
            let wall = run_once(&mut *backend, inst, root, i as u64 + 1);
            let busy = fake.take_busy();
            own.push(busy);
            over.push(wall.saturating_sub(busy));
        }
        let o = Stats::of(&over);
        table.stats(label, &o, vec![common::fmt(Stats::of(&own).median)]);
    }
}

/// The own time the fake recorded in `file`.
fn own_time(file: &Path) -> Duration {
    let text = std::fs::read_to_string(file).expect("stamp file");
    let (a, b) = text.split_once(' ').expect("two stamps");
    let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
    Duration::from_nanos(b - a)
}

fn cli(inst: &Instance, root: &Path, opts: &Opts, table: &mut Table) {
    let n = opts.reps(200);
    let me = std::env::current_exe().expect("own path");
    let stamps = root.join("stamps");
    for kind in ["claude", "codex", "floor"] {
        let env = vec![(FAKE.to_string(), format!("{kind}:{}", stamps.display()))];
        let program = me.to_string_lossy().into_owned();
        let mut backend: Option<Box<dyn Backend>> = match kind {
            "claude" => Some(Box::new(Claude {
                program,
                model: Some("sonnet".into()),
                system: Some("You review code.".into()),
                tools: Vec::new(),
                max_turns: None,
                permission_mode: None,
                idle_timeout: Duration::from_secs(60),
                env,
                cwd: None,
                delegate: false,
            })),
            "codex" => Some(Box::new(Codex {
                program,
                model: Some("gpt-5".into()),
                mcp_keys: aw::tools::client_config::codex_keys(
                    Path::new("aw-mcp"),
                    root,
                    "alice@b",
                    &[],
                ),
                idle_timeout: Duration::from_secs(60),
                env,
                cwd: None,
                delegate: false,
            })),
            _ => None,
        };
        let mut over = Vec::with_capacity(n);
        let mut own = Vec::with_capacity(n);
        for i in 0..n {
            let _ = std::fs::remove_file(&stamps);
            let wall = match backend.as_mut() {
                Some(b) => run_once(&mut **b, inst, root, i as u64 + 1),
                None => direct(&me, &stamps),
            };
            let t = own_time(&stamps);
            own.push(t);
            over.push(wall.saturating_sub(t));
        }
        let label = match kind {
            "floor" => "floor: the same fake started directly (spawn, pipes, wait)",
            "claude" => "claude (fake CLI)",
            _ => "codex (fake CLI)",
        };
        table.stats(
            label,
            &Stats::of(&over),
            vec![common::fmt(Stats::of(&own).median)],
        );
    }
}

/// The fake started with `Command`, the prompt written, stdout read, waited for.
fn direct(me: &Path, stamps: &Path) -> Duration {
    let t = Instant::now();
    let mut child = Command::new(me)
        .env(FAKE, format!("claude:{}", stamps.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the fake");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"You are alice.\n\nFrom @user: @alice look at this and answer briefly.\n")
        .expect("write the prompt");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .expect("read");
    child.wait().expect("wait");
    t.elapsed()
}
