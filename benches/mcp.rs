//! Figure 4: `aw-mcp`. Spawn → `initialize` → `tools/list` answered, and `channel_send` /
//! `my_inbox` round trips on a channel of 100k entries.
//!
//! The client here is a plain pipe speaking JSON-RPC lines, so that the figures are the
//! server's and the pipe's, not a client library's.

mod common;

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use aw::channel::{Channel, Entry, render};
use aw::instance::{Instance, Root};
use common::{Opts, Stats, Table, fmt, ratio, time};

const BIG: u64 = 100_000;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

/// One running `aw-mcp` with line-oriented pipes.
struct Server {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    fn spawn(root: &Path, agent: &str) -> Server {
        let mut child = Command::new(common::aw_mcp())
            .args(["--root"])
            .arg(root)
            .args(["--agent", agent])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn aw-mcp");
        let stdin = BufWriter::new(child.stdin.take().unwrap());
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Server {
            child,
            stdin,
            stdout,
            next_id: 10,
        }
    }

    fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).expect("write");
        self.stdin.write_all(b"\n").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// Read lines until the response to `id`; return it.
    fn response(&mut self, id: u64) -> serde_json::Value {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).expect("read");
            assert!(n > 0, "aw-mcp closed its stdout");
            let v: serde_json::Value = serde_json::from_str(&line).expect("JSON-RPC line");
            if v["id"] == id {
                return v;
            }
        }
    }

    fn handshake(&mut self) -> serde_json::Value {
        self.send(INITIALIZE);
        self.response(1);
        self.send(INITIALIZED);
        self.send(TOOLS_LIST);
        self.response(2)
    }

    /// Call a tool and return its result; panics on an error result.
    fn call(&mut self, tool: &str, args: serde_json::Value) -> serde_json::Value {
        self.next_id += 1;
        let id = self.next_id;
        let req = serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}
        });
        self.send(&req.to_string());
        let r = self.response(id);
        let result = &r["result"];
        assert!(
            result["isError"] != true,
            "{tool} failed: {}",
            result["content"][0]["text"]
        );
        result.clone()
    }

    /// Close stdin and wait for the exit; returns the time from the close to the exit.
    fn close(mut self) -> std::time::Duration {
        let t = Instant::now();
        drop(self.stdin);
        let st = self.child.wait().expect("wait for aw-mcp");
        let d = t.elapsed();
        assert!(st.success(), "aw-mcp ended with {st} on end of input");
        d
    }
}

fn main() {
    let opts = Opts::from_args();
    common::heading("aw-mcp: start-up and tool round trips", &opts);
    startup(&opts);
    round_trips(&opts);
}

/// Spawn → initialize → tools/list answered, against spawning /bin/true.
fn startup(opts: &Opts) {
    let scratch = common::scratch("mcp-start-");
    let root = scratch.path();
    // Register the agent once, so every run measures a server start, not a first registration.
    Server::spawn(root, "alice@bench").close();
    let n = opts.reps(500);
    let (mut t_true, mut t_mcp) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut t_eof = Vec::with_capacity(n);
    for i in 0..n {
        let run_true = || {
            let (d, st) = time(|| Command::new("/bin/true").status().expect("/bin/true"));
            assert!(st.success());
            d
        };
        let run_mcp = || {
            let t = Instant::now();
            let mut s = Server::spawn(root, "alice@bench");
            let list = s.handshake();
            let d = t.elapsed();
            let tools = list["result"]["tools"].as_array().map_or(0, Vec::len);
            assert_eq!(tools, 28, "tools/list should list 28 tools");
            (d, s.close())
        };
        if i % 2 == 0 {
            t_true.push(run_true());
            let (up, down) = run_mcp();
            t_mcp.push(up);
            t_eof.push(down);
        } else {
            let (up, down) = run_mcp();
            t_mcp.push(up);
            t_eof.push(down);
            t_true.push(run_true());
        }
    }
    let (st, sm) = (Stats::of(&t_true), Stats::of(&t_mcp));
    let mut t = Table::new(&["what", "n", "median", "p99", "median ÷ /bin/true"]);
    t.stats("/bin/true", &st, vec!["1.00".into()]);
    t.stats(
        "aw-mcp spawn → initialize → tools/list answered",
        &sm,
        vec![format!("{:.2}", ratio(sm.median, st.median))],
    );
    t.stats(
        "aw-mcp stdin closed → process exited",
        &Stats::of(&t_eof),
        vec!["-".into()],
    );
    t.print();
}

/// `channel_send` and `my_inbox` through one server, on a channel of 100k entries.
fn round_trips(opts: &Opts) {
    let scratch = common::scratch("mcp-big-");
    let inst = Root::new(scratch.path()).instance("big").expect("name");
    let t = Instant::now();
    fill(&inst, BIG);
    println!(
        "channel of {BIG} entries written and indexed in {}",
        fmt(t.elapsed())
    );
    println!();
    let mut alice = Server::spawn(scratch.path(), "alice@big");
    let mut bob = Server::spawn(scratch.path(), "bob@big");
    alice.handshake();
    bob.handshake();
    // Bob starts with nothing unread.
    bob.call("my_inbox_ack", serde_json::json!({"until": BIG}));

    let n = opts.reps(2000);
    let mut send = Vec::with_capacity(n);
    let mut empty = Vec::with_capacity(n);
    let mut one = Vec::with_capacity(n);
    for i in 0..n {
        // alice → bob; bob reads one unread mention, acks it, then reads an empty inbox.
        let (d, r) = time(|| {
            alice.call(
                "channel_send",
                serde_json::json!({"message": format!("@bob round {i}: please check the offsets")}),
            )
        });
        send.push(d);
        let id = r["structuredContent"]["id"].as_u64().expect("entry id");
        let (d, r) = time(|| bob.call("my_inbox", serde_json::json!({})));
        one.push(d);
        assert_eq!(count(&r), 1, "bob should have one unread message");
        bob.call("my_inbox_ack", serde_json::json!({"until": id}));
        let (d, r) = time(|| bob.call("my_inbox", serde_json::json!({})));
        empty.push(d);
        assert_eq!(count(&r), 0, "bob's inbox should be empty");
    }
    alice.close();
    bob.close();
    let mut t = Table::new(&["tool call, 100k-entry channel", "n", "median", "p99"]);
    t.stats("channel_send (with one mention)", &Stats::of(&send), vec![]);
    t.stats("my_inbox, one unread", &Stats::of(&one), vec![]);
    t.stats("my_inbox, nothing unread", &Stats::of(&empty), vec![]);
    t.print();
}

/// Messages in a `my_inbox` result.
fn count(result: &serde_json::Value) -> usize {
    result["structuredContent"]["messages"]
        .as_array()
        .map_or(0, Vec::len)
}

/// Write `n` entries between alice and carol (the last one through `Channel::append`, which
/// builds the index), with alice, bob and carol registered.
fn fill(inst: &Instance, n: u64) {
    common::create_team(inst);
    let f = File::create(inst.channel_path()).expect("create channel.md");
    let mut w = BufWriter::with_capacity(1 << 20, f);
    for id in 1..n {
        let e = Entry {
            id,
            timestamp: "2026-11-22T10:00:05.123Z".into(),
            from: if id % 2 == 0 { "alice" } else { "carol" }.into(),
            message: format!("entry {id}: the second test run still fails on the empty input"),
            mentions: Vec::new(),
        };
        w.write_all(&render(&e)).expect("write");
    }
    w.flush().expect("flush");
    Channel::new(inst)
        .append("carol", "last filler entry", Vec::new(), false)
        .expect("append");
}
