//! The wire of `aw-mcp`: every request line gets an answer. Lines that do not parse, JSON that
//! is not a request, params that do not fit and lines over the length limit each get a
//! JSON-RPC error carrying the request's id where it can be found, the server goes on with the
//! next line, stdout carries only JSON-RPC and stderr one line per refusal.
//!
//! Raw lines are written to a real `aw-mcp` process; answers are read line by line.

use crate::mcp_common;

use std::io::{BufRead, Write};
use std::process::Stdio;
use std::time::Duration;

use aw::mcp::MAX_REQUEST_LINE;
use mcp_common::{Raw, Team, check_jsonrpc, command};
use serde_json::{Value, json};

/// Only stops a hung test; never judges speed.
const GUARD: Duration = Duration::from_secs(10);
/// The same for steps that move about 100 MB through a pipe.
const BIG_GUARD: Duration = Duration::from_secs(30);

/// `aw-mcp` for alice, initialised.
fn start(team: &Team) -> Raw {
    let mut raw = Raw::start(team, "alice");
    raw.initialize();
    raw
}

/// Write `line` and a newline.
fn send_line(raw: &mut Raw, line: &[u8]) {
    raw.send_bytes(line);
    raw.send_bytes(b"\n");
}

/// Write `line`; its answer.
fn ask(raw: &mut Raw, line: &str) -> Value {
    send_line(raw, line.as_bytes());
    raw.next(GUARD)
}

/// Ask for the tool list with `id`: the server is still serving.
fn still_serving(raw: &mut Raw, id: u64) {
    let r = ask(
        raw,
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}).to_string(),
    );
    assert_eq!(r["id"], id, "{r}");
    assert_eq!(
        r["result"]["tools"].as_array().map(Vec::len),
        Some(28),
        "{r}"
    );
}

/// Call `tool`; the answer, which must be a result that is not a tool error.
fn call(raw: &mut Raw, id: u64, tool: &str, args: Value, guard: Duration) -> Value {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                     "params": {"name": tool, "arguments": args}});
    send_line(raw, &serde_json::to_vec(&msg).unwrap());
    drop(msg);
    let r = raw.next(guard);
    assert_eq!(r["id"], id);
    assert_eq!(r["result"]["isError"], false, "{tool} failed");
    r
}

/// Close stdin and wait for the exit: the exit code, the lines written after the last one
/// read, and stderr.
fn finish(mut raw: Raw) -> (Option<i32>, Vec<Value>, String) {
    let read = raw.seen.len();
    raw.close_stdin();
    let (status, stderr) = raw.wait(GUARD);
    let rest = raw.seen[read..].iter().map(|l| check_jsonrpc(l)).collect();
    (status.code(), rest, stderr)
}

/// Check that `r` is a JSON-RPC error with `code` for request `id` (null when none).
fn assert_error(r: &Value, code: i64, id: Value) {
    assert_eq!(r["error"]["code"], code, "{r}");
    assert_eq!(r.get("id"), Some(&id), "{r}");
    assert!(r.get("result").is_none(), "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or("");
    assert!(!msg.is_empty() && !msg.contains('\n'), "{r}");
}

/// stderr must hold exactly one `aw-mcp:` line per refused request, each naming its id.
fn assert_logged(stderr: &str, ids: &[&str]) {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), ids.len(), "one line per refusal: {stderr}");
    for (line, id) in lines.iter().zip(ids) {
        assert!(line.starts_with("aw-mcp: "), "{line}");
        assert!(line.contains(id), "{line} should name {id}");
    }
}

#[test]
fn lines_that_do_not_parse_get_a_parse_error_with_their_id() {
    let team = Team::new();
    let mut raw = start(&team);
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":"deep","method":"tools/list","params":{{"x":{}{}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    // Valid JSON but for the nesting.
    assert!(serde_json::from_str::<serde_json::Value>(&deep).is_err());
    let cases: Vec<(Vec<u8>, Value)> = vec![
        (br#"{"jsonrpc":"2.0","id":2,"method":"tools/list""#.to_vec(), json!(2)),
        (
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"channel_read","arguments":{"limit":1e400}}}"#.to_vec(),
            json!(3),
        ),
        (deep.into_bytes(), json!("deep")),
        (b"{\"jsonrpc\":\"2.0\",\"id\":-4,\"method\":\"x\xff\"}".to_vec(), json!(-4)),
        (b"hello".to_vec(), Value::Null),
        (br#"{"jsonrpc":"2.0","id":5.5,"method":}"#.to_vec(), Value::Null),
    ];
    for (i, (line, id)) in cases.iter().enumerate() {
        send_line(&mut raw, line);
        assert_error(&raw.next(GUARD), -32700, id.clone());
        still_serving(&mut raw, 100 + i as u64);
    }
    let (code, rest, stderr) = finish(raw);
    assert_eq!(code, Some(0));
    assert!(rest.is_empty(), "{rest:?}");
    assert_logged(
        &stderr,
        &[
            "request 2:",
            "request 3:",
            "request \"deep\":",
            "request -4:",
            "without id",
            "without id",
        ],
    );
}

#[test]
fn json_that_is_not_a_request_gets_invalid_request() {
    let team = Team::new();
    let mut raw = start(&team);
    let cases: &[(&str, Value)] = &[
        ("[1,2]", Value::Null),
        ("[]", Value::Null),
        ("5", Value::Null),
        (r#""tools/list""#, Value::Null),
        ("null", Value::Null),
        (r#"{"jsonrpc":"2.0","id":6}"#, json!(6)),
        (r#"{"jsonrpc":"2.0","id":7,"method":5}"#, json!(7)),
        (
            r#"{"jsonrpc":"1.0","id":"v1","method":"tools/list"}"#,
            json!("v1"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/list","result":{}}"#,
            json!(9),
        ),
        (
            r#"{"jsonrpc":"2.0","id":10,"method":"tools/list","params":"x"}"#,
            json!(10),
        ),
        (r#"{"method":"notifications/initialized"}"#, Value::Null),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":5}"#,
            Value::Null,
        ),
    ];
    for (i, (line, id)) in cases.iter().enumerate() {
        assert_error(&ask(&mut raw, line), -32600, id.clone());
        still_serving(&mut raw, 100 + i as u64);
    }
    // Notifications get no answer, even when their params do not fit; blank lines neither.
    for line in [
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[]}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":[5]}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/no_such_thing","params":{"a":1}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#,
        "",
        "  \r",
    ] {
        send_line(&mut raw, line.as_bytes());
    }
    still_serving(&mut raw, 200);
    let (code, rest, stderr) = finish(raw);
    assert_eq!(code, Some(0));
    assert!(rest.is_empty(), "{rest:?}");
    // One line per refusal, and one for the notification rmcp could not take.
    let mut logged: Vec<String> = cases
        .iter()
        .map(|(_, id)| match id {
            Value::Null => "without id".to_string(),
            id => format!("request {id}:"),
        })
        .collect();
    logged.push("notification 'notifications/cancelled' ignored".into());
    assert_logged(
        &stderr,
        &logged.iter().map(String::as_str).collect::<Vec<_>>(),
    );
}

#[test]
fn params_that_do_not_fit_get_invalid_params() {
    let team = Team::new();
    let mut raw = start(&team);
    let call_line = |id: u64, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "channel_send", "arguments": args}})
        .to_string()
    };
    for (id, args) in [(2, json!("hello")), (3, json!(["hello"])), (4, json!(5))] {
        let r = ask(&mut raw, &call_line(id, args));
        assert_error(&r, -32602, json!(id));
        assert!(
            r["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("tools/call")),
            "{r}"
        );
    }
    for (id, line) in [
        (
            5,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":["channel_send"]}"#,
        ),
        (
            6,
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}"#,
        ),
        (
            7,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[5]}"#,
        ),
    ] {
        assert_error(&ask(&mut raw, line), -32602, json!(id));
    }
    // Nothing was posted, and a call that fits still works.
    let r = call(&mut raw, 8, "channel_read", json!({}), GUARD);
    assert_eq!(
        r["result"]["structuredContent"]["entries"],
        json!([]),
        "{r}"
    );
    // An unknown method is still "method not found", whatever its params.
    for line in [
        r#"{"jsonrpc":"2.0","id":9,"method":"no/such/method"}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"no/such/method","params":[1]}"#,
    ] {
        assert_error(&ask(&mut raw, line), -32601, json!(9));
    }
    let (code, _, stderr) = finish(raw);
    assert_eq!(code, Some(0));
    assert_logged(
        &stderr,
        &[
            "request 2:",
            "request 3:",
            "request 4:",
            "request 5:",
            "request 6:",
            "request 7:",
            "request 9:",
        ],
    );
}

#[test]
fn a_16_mib_resource_of_control_characters_is_stored_and_read_back() {
    const LIMIT: usize = 16 << 20;
    let team = Team::new();
    let mut raw = start(&team);
    let content = "\u{1}".repeat(LIMIT);
    let r = call(
        &mut raw,
        2,
        "resource_create",
        json!({"content": content, "type": "text"}),
        BIG_GUARD,
    );
    let data = &r["result"]["structuredContent"];
    assert_eq!(data["bytes"], LIMIT, "{data}");
    let id = data["id"].as_str().expect("resource id").to_string();
    let stored = std::fs::read(team.inst().join("resources").join(format!("{id}.txt"))).unwrap();
    assert!(stored == content.as_bytes(), "stored verbatim");
    drop(stored);
    let r = call(&mut raw, 3, "resource_read", json!({ "id": id }), BIG_GUARD);
    assert_eq!(r["result"]["content"].as_array().map(Vec::len), Some(1));
    assert!(
        r["result"]["content"][0]["text"].as_str() == Some(content.as_str()),
        "read back identical"
    );
    drop(r);
    still_serving(&mut raw, 4);
    let (code, rest, stderr) = finish(raw);
    assert_eq!((code, rest.len(), stderr.as_str()), (Some(0), 0, ""));
}

/// A tools/list request of exactly `len` bytes, padded with an ignored parameter.
fn padded_tools_list(id: u64, len: usize) -> Vec<u8> {
    let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"pad":""#);
    let tail = br#""}}"#;
    let mut line = head.into_bytes();
    line.resize(len - tail.len(), b'a');
    line.extend_from_slice(tail);
    line
}

#[test]
fn a_line_over_the_limit_gets_an_error_and_the_server_goes_on() {
    let team = Team::new();
    let mut raw = start(&team);
    // At the limit: served.
    send_line(&mut raw, &padded_tools_list(2, MAX_REQUEST_LINE));
    let r = raw.next(BIG_GUARD);
    assert_eq!(r["id"], 2, "{}", r["error"]);
    assert_eq!(r["result"]["tools"].as_array().map(Vec::len), Some(28));
    // One byte over: refused with the id read from the start of the line.
    send_line(&mut raw, &padded_tools_list(3, MAX_REQUEST_LINE + 1));
    let r = raw.next(BIG_GUARD);
    assert_error(&r, -32600, json!(3));
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!("over {MAX_REQUEST_LINE} bytes")),
        "{msg}"
    );
    still_serving(&mut raw, 4);
    // Over the limit with no id at its start: refused all the same.
    let mut line = b"[".repeat(MAX_REQUEST_LINE + 10);
    line.extend_from_slice(br#"{"id":5}"#);
    send_line(&mut raw, &line);
    drop(line);
    assert_error(&raw.next(BIG_GUARD), -32600, Value::Null);
    still_serving(&mut raw, 6);
    let (code, rest, stderr) = finish(raw);
    assert_eq!(code, Some(0));
    assert!(rest.is_empty(), "{rest:?}");
    assert_logged(&stderr, &["request 3:", "without id"]);
}

#[test]
fn answers_to_the_last_lines_are_written_before_the_exit() {
    let team = Team::new();
    let mut raw = Raw::start(&team, "alice");
    // Before the initialisation too, a bad line is answered and the server waits on.
    send_line(&mut raw, br#"{"jsonrpc":"2.0","id":"early","method":"#);
    assert_error(&raw.next(GUARD), -32700, json!("early"));
    raw.initialize();
    send_line(&mut raw, b"not json");
    // The last line needs no newline.
    raw.send_bytes(br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    let (code, rest, _) = finish(raw);
    assert_eq!(code, Some(0));
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert_error(&rest[0], -32700, Value::Null);
    assert_eq!(rest[1]["id"], 2);
    assert!(rest[1]["result"]["tools"].is_array());
}

#[test]
fn a_closed_stdout_ends_the_server_with_0() {
    let team = Team::new();
    let mut child = command("aw-mcp")
        .args(["--agent", "alice", "--root"])
        .arg(&team.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn aw-mcp");
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    writeln!(stdin, "{init}").unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(check_jsonrpc(&line)["id"], 1);
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    // Nobody reads the answers any more; stdin stays open. (The server may be gone before
    // the last of these lines, so a failed write is no failure.)
    drop(stdout);
    for id in 2..=4 {
        let r = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        let _ = writeln!(stdin, "{r}");
    }
    let _ = writeln!(stdin, "not json");
    let _ = stdin.flush();
    let deadline = std::time::Instant::now() + GUARD;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("aw-mcp went on with its standard output closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    drop(stdin);
}

#[test]
fn the_manual_states_the_line_limit() {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/man/aw-mcp.1"))
        .expect("man/aw-mcp.1");
    assert!(
        page.contains(&MAX_REQUEST_LINE.to_string()),
        "aw-mcp(1) should give the line limit, {MAX_REQUEST_LINE} bytes"
    );
}
