//! Shared code of the `aw-mcp` integration tests: a scratch root directory, MCP clients (rmcp)
//! talking to real `aw-mcp` processes, and the command-line tools run against the same root.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tempfile::TempDir;

/// Guard against a hung server: no single step of a test may take longer than this. It is
/// never used to judge speed.
pub const GUARD: Duration = Duration::from_secs(60);

/// The instance every test works in.
pub const INSTANCE: &str = "default";

pub fn bin(name: &str) -> PathBuf {
    match name {
        "aw-mcp" => PathBuf::from(env!("CARGO_BIN_EXE_aw-mcp")),
        "aw-send" => PathBuf::from(env!("CARGO_BIN_EXE_aw-send")),
        "aw-peek" => PathBuf::from(env!("CARGO_BIN_EXE_aw-peek")),
        "aw-ctl" => PathBuf::from(env!("CARGO_BIN_EXE_aw-ctl")),
        "aw-run" => PathBuf::from(env!("CARGO_BIN_EXE_aw-run")),
        _ => panic!("no binary {name}"),
    }
}

/// A command for one of the tools with a clean environment (no `AW_*` from the caller, and
/// no trace context).
pub fn command(name: &str) -> Command {
    let mut c = Command::new(bin(name));
    for v in crate::common::AW_ENV {
        c.env_remove(v);
    }
    c.stdin(Stdio::null());
    c
}

/// A scratch root directory holding the test's instance.
pub struct Team {
    _dir: TempDir,
    /// The directory that holds `root/` and anything a test puts "outside".
    pub base: PathBuf,
    pub root: PathBuf,
}

impl Default for Team {
    fn default() -> Self {
        Self::new()
    }
}

impl Team {
    pub fn new() -> Team {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().canonicalize().expect("canonical tempdir");
        let root = base.join("root");
        std::fs::create_dir(&root).expect("mkdir root");
        Team {
            _dir: dir,
            base,
            root,
        }
    }

    /// The instance directory.
    pub fn inst(&self) -> PathBuf {
        self.root.join(INSTANCE)
    }

    pub fn docs(&self) -> PathBuf {
        self.inst().join("documents")
    }

    /// A JSON state file under `_state/` (null when missing).
    pub fn state(&self, file: &str) -> Value {
        match std::fs::read(self.inst().join("_state").join(file)) {
            Ok(b) => serde_json::from_slice(&b).expect("state file is JSON"),
            Err(_) => Value::Null,
        }
    }

    /// Start an `aw-mcp` server for `name` and connect an MCP client to it.
    pub async fn join(&self, name: &str) -> Agent {
        self.join_with(name, &[]).await
    }

    /// [`Team::join`] with more `aw-mcp` options (`--collab`, ...).
    pub async fn join_with(&self, name: &str, options: &[&str]) -> Agent {
        self.start(name, options, None).await
    }

    /// [`Team::join`] with the server in the folder `cwd` (a repository, say).
    pub async fn join_in(&self, name: &str, cwd: &Path) -> Agent {
        self.start(name, &[], Some(cwd)).await
    }

    async fn start(&self, name: &str, options: &[&str], cwd: Option<&Path>) -> Agent {
        let mut cmd = tokio::process::Command::new(bin("aw-mcp"));
        if let Some(d) = cwd {
            cmd.current_dir(d);
        }
        cmd.arg("--agent")
            .arg(format!("{name}@{INSTANCE}"))
            .arg("--root")
            .arg(&self.root)
            .args(options);
        for v in ["AW_ROOT", "AW_INSTANCE", "AW_AGENT", "AW_SYNC"] {
            cmd.env_remove(v);
        }
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn aw-mcp");
        let client = tokio::time::timeout(GUARD, ().serve(transport))
            .await
            .expect("aw-mcp initialises in time")
            .expect("MCP initialisation");
        Agent {
            name: name.to_string(),
            client,
        }
    }

    /// Register `name` as an agent without starting anything.
    pub fn register(&self, name: &str) {
        self.ctl_ok(&["new", name, "--backend", "external"]);
    }

    /// Run a tool with `--root` and `args`.
    pub fn run(&self, tool: &str, args: &[&str]) -> Output {
        self.run_stdin(tool, args, None)
    }

    /// Run a tool with `--root`, `args` and `input` on stdin.
    pub fn run_stdin(&self, tool: &str, args: &[&str], input: Option<&str>) -> Output {
        use std::io::Write;
        let mut c = command(tool);
        c.arg("--root").arg(&self.root).args(args);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        if input.is_some() {
            c.stdin(Stdio::piped());
        }
        let mut child = c.spawn().unwrap_or_else(|e| panic!("spawn {tool}: {e}"));
        if let Some(text) = input {
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(text.as_bytes()).expect("write stdin");
        }
        child.wait_with_output().expect("wait")
    }

    /// `aw-ctl ARGS`, which must succeed; its stdout.
    pub fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.run("aw-ctl", args);
        assert!(
            out.status.success(),
            "aw-ctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    }

    /// `aw-send ARGS`, which must succeed; the entry id it prints.
    pub fn send(&self, args: &[&str]) -> u64 {
        let out = self.run("aw-send", args);
        assert!(
            out.status.success(),
            "aw-send {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("aw-send prints the entry id")
    }

    /// The whole channel as `aw-peek --json` prints it.
    pub fn channel(&self) -> Vec<Value> {
        let out = self.run("aw-peek", &["--json", "-n", "0"]);
        assert!(
            out.status.success(),
            "aw-peek failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        json_lines(&out.stdout)
    }

    /// Channel entries whose message starts with `prefix`.
    pub fn entries_starting(&self, prefix: &str) -> Vec<Value> {
        self.channel()
            .into_iter()
            .filter(|e| e["message"].as_str().unwrap_or("").starts_with(prefix))
            .collect()
    }

    /// `aw-ctl proposals --all --json`.
    pub fn proposals(&self) -> Vec<Value> {
        json_lines(self.ctl_ok(&["proposals", "--all", "--json"]).as_bytes())
    }
}

pub fn json_lines(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The outcome of a successful tool call.
#[derive(Debug, Clone)]
pub struct Reply {
    pub text: String,
    pub data: Value,
}

/// One agent: an MCP client connected to its own `aw-mcp` process.
pub struct Agent {
    pub name: String,
    pub client: RunningService<RoleClient, ()>,
}

/// Arguments as shown in a failure message: the first 300 bytes of their JSON, without
/// serializing large content in full.
fn shown(args: &Value) -> String {
    struct Capped(Vec<u8>);
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let take = buf.len().min(300 - self.0.len());
            if take == 0 && !buf.is_empty() {
                return Err(std::io::Error::other("enough"));
            }
            self.0.extend_from_slice(&buf[..take]);
            Ok(take)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = Capped(Vec::new());
    let complete = serde_json::to_writer(&mut w, args).is_ok();
    let mut s = String::from_utf8_lossy(&w.0).into_owned();
    if !complete {
        s.push_str("...");
    }
    s
}

fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Agent {
    /// Call a tool; a JSON-RPC error or a dead server fails the test.
    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        let args = match args {
            Value::Object(m) => m,
            Value::Null => serde_json::Map::new(),
            other => panic!("tool arguments must be an object, not {other}"),
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        match tokio::time::timeout(GUARD, self.client.call_tool(params)).await {
            Err(_) => panic!("{}: {tool} got no answer", self.name),
            Ok(Err(e)) => panic!("{}: {tool} failed at the protocol level: {e}", self.name),
            Ok(Ok(r)) => r,
        }
    }

    /// Call a tool that must succeed; its text and structured content (null when none).
    pub async fn ok(&self, tool: &str, args: Value) -> Reply {
        let args_shown = shown(&args);
        let r = self.call(tool, args).await;
        let text = text_of(&r);
        assert_ne!(
            r.is_error,
            Some(true),
            "{}: {tool} {args_shown} failed: {text}",
            self.name
        );
        Reply {
            text,
            data: r.structured_content.clone().unwrap_or(Value::Null),
        }
    }

    /// Call a tool that must fail with a tool error; its one-line reason.
    pub async fn fail(&self, tool: &str, args: Value) -> String {
        let args_shown = shown(&args);
        let r = self.call(tool, args).await;
        let text = text_of(&r);
        assert_eq!(
            r.is_error,
            Some(true),
            "{}: {tool} {args_shown} should have failed, got: {text}",
            self.name
        );
        assert_eq!(r.content.len(), 1, "one content block: {r:?}");
        assert!(
            !text.trim().is_empty() && !text.contains('\n'),
            "an error is one line: {text:?}"
        );
        text
    }

    /// `fail`, and the reason must contain every one of `needles`.
    pub async fn fail_with(&self, tool: &str, args: Value, needles: &[&str]) -> String {
        let text = self.fail(tool, args).await;
        for n in needles {
            assert!(text.contains(n), "error {text:?} should mention {n:?}");
        }
        text
    }

    /// Post a message; its entry id.
    pub async fn say(&self, message: &str) -> u64 {
        self.ok("channel_send", json!({ "message": message }))
            .await
            .data["id"]
            .as_u64()
            .expect("entry id")
    }

    /// Close the connection; the server sees end of input and exits.
    pub async fn quit(self) {
        let _ = tokio::time::timeout(GUARD, self.client.cancel()).await;
    }
}

/// Does `path` exist (without following a final symlink)?
pub fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// An `aw-mcp` process driven by hand-written JSON-RPC lines, to check the wire itself.
pub struct Raw {
    pub child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    /// Every line read from stdout so far.
    pub seen: Vec<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Raw {
    /// Start `aw-mcp --agent NAME@default --root ROOT`.
    pub fn start(team: &Team, name: &str) -> Raw {
        Raw::start_with(team, name, &[])
    }

    /// [`Raw::start`] with more `aw-mcp` options.
    pub fn start_with(team: &Team, name: &str, options: &[&str]) -> Raw {
        Raw::start_env(team, name, options, &[])
    }

    /// [`Raw::start_with`] with more environment variables.
    pub fn start_env(team: &Team, name: &str, options: &[&str], env: &[(&str, &str)]) -> Raw {
        use std::io::{BufRead, Read};
        let mut child = command("aw-mcp")
            .envs(env.iter().copied())
            .arg("--agent")
            .arg(format!("{name}@{INSTANCE}"))
            .arg("--root")
            .arg(&team.root)
            .args(options)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn aw-mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Raw {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            seen: Vec::new(),
            stderr: Some(err),
        }
    }

    pub fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(self.child.id() as i32)
    }

    /// Write one JSON-RPC message as a line.
    pub fn send(&mut self, msg: Value) {
        self.send_bytes(format!("{msg}\n").as_bytes());
    }

    /// Write `bytes` as they are: a line of any content, or part of one.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to aw-mcp");
        stdin.flush().unwrap();
    }

    /// The next line on stdout, which must be JSON-RPC 2.0, waiting at most `guard`.
    pub fn next(&mut self, guard: Duration) -> Value {
        let line = self
            .lines
            .recv_timeout(guard)
            .unwrap_or_else(|e| panic!("no answer: {e}"));
        let v = check_jsonrpc(&line);
        self.seen.push(line);
        v
    }

    /// Read lines until the response to request `id`; every line must be JSON-RPC 2.0.
    pub fn response(&mut self, id: u64) -> Value {
        loop {
            let v = self.next(GUARD);
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
        }
    }

    /// initialize + notifications/initialized.
    pub fn initialize(&mut self) -> Value {
        let r = self.initialize_only("2025-06-18");
        self.initialized();
        r
    }

    /// The `initialize` request (id 1) asking for protocol revision `version`; its response.
    pub fn initialize_only(&mut self, version: &str) -> Value {
        self.send(json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"}
            }
        }));
        self.response(1)
    }

    /// The `notifications/initialized` notification.
    pub fn initialized(&mut self) {
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Wait for the process to end (failing the test if it does not within `guard`), then
    /// check the rest of its stdout. Its exit status and its stderr.
    pub fn wait(&mut self, guard: Duration) -> (std::process::ExitStatus, String) {
        let deadline = std::time::Instant::now() + guard;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("aw-mcp did not exit");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            check_jsonrpc(&line);
            self.seen.push(line);
        }
        let err = self
            .stderr
            .take()
            .map(|h| h.join().unwrap())
            .unwrap_or_default();
        (status, err)
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Parse a stdout line, which must be one JSON-RPC 2.0 message.
pub fn check_jsonrpc(line: &str) -> Value {
    let v: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
    assert_eq!(v["jsonrpc"], "2.0", "not JSON-RPC: {line}");
    assert!(
        v.get("result").is_some() || v.get("error").is_some() || v.get("method").is_some(),
        "not a JSON-RPC message: {line}"
    );
    v
}
