//! Traces as files: aw-run and the aw-mcp its agents start append OpenTelemetry spans to
//! `_state/otel/`, read here with the official OTLP definitions (the Python
//! `opentelemetry-proto` package, `google.protobuf.json_format`), not with aw's reader: one
//! trace per run, an `invoke_workflow` root, an `invoke_agent` span per attempt with its
//! usage, `chat` spans under an API agent's attempt, `execute_tool` spans from aw-mcp under
//! the attempt of the exec agent that started it (through `TRACEPARENT`); off with
//! `AW_OTEL=0` or `otel: false`; `aw-ctl traces` prints the tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::backend_api::{KEY, answer, tool_use};
use crate::common;
use common::fake_api::FakeApi;
use common::runner::*;
use serde_json::{Value, json};

/// Reads every line of the files named as `TracesData` with the official definitions (the
/// ids, hex in OTLP JSON, given to the protobuf parser as base64), unknown fields refused,
/// and prints each span as a JSON line.
const PARSE: &str = r#"
import base64, json, sys
from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

def b64(h):
    return base64.b64encode(bytes.fromhex(h)).decode()

def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind)

for path in sys.argv[1:]:
    for line in open(path, encoding="utf-8"):
        raw = json.loads(line)
        for rs in raw["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    for k in ("traceId", "spanId", "parentSpanId"):
                        if k in s:
                            s[k] = b64(s[k])
        data = json_format.Parse(json.dumps(raw), TracesData(), ignore_unknown_fields=False)
        assert len(data.resource_spans) == 1
        rs = data.resource_spans[0]
        res = {a.key: value(a.value) for a in rs.resource.attributes}
        assert len(rs.scope_spans) == 1 and len(rs.scope_spans[0].spans) == 1
        s = rs.scope_spans[0].spans[0]
        assert s.end_time_unix_nano >= s.start_time_unix_nano > 0
        print(json.dumps({
            "service": res["service.name"],
            "pid": res["process.pid"],
            "host": res["host.name"],
            "trace": s.trace_id.hex(),
            "span": s.span_id.hex(),
            "parent": s.parent_span_id.hex(),
            "name": s.name,
            "kind": s.kind,
            "status": s.status.code,
            "attrs": {a.key: value(a.value) for a in s.attributes},
        }))
"#;

/// The trace files of the instance.
pub(crate) fn files(s: &Setup) -> Vec<PathBuf> {
    let dir = s.root.inst_dir(INST).join("_state/otel");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    out.sort();
    out
}

/// Every span of `files`, as the official definitions read them.
pub(crate) fn spans(files: &[PathBuf]) -> Vec<Value> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(PARSE)
        .args(files)
        .output()
        .expect("python3 (scripts/test-deps.sh installs it and opentelemetry-proto)");
    assert!(
        out.status.success(),
        "the official OTLP definitions refused a line: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn op(s: &Value) -> &str {
    s["attrs"]["gen_ai.operation.name"].as_str().unwrap_or("")
}

/// The spans of operation `name`.
fn of<'a>(all: &'a [Value], name: &str) -> Vec<&'a Value> {
    all.iter().filter(|s| op(s) == name).collect()
}

/// The one `invoke_workflow` span, checked to be the root of every other span's trace.
fn root(all: &[Value]) -> &Value {
    let roots = of(all, "invoke_workflow");
    assert_eq!(roots.len(), 1, "{all:#?}");
    let r = roots[0];
    assert_eq!(r["parent"], "", "the run's span is a root");
    assert_eq!(r["attrs"]["gen_ai.conversation.id"], INST);
    assert_eq!(r["status"], 1, "ok");
    for s in all {
        assert_eq!(s["trace"], r["trace"], "one trace per run: {s}");
    }
    r
}

#[test]
fn a_run_of_hello_is_one_trace_of_its_attempts_and_aw_ctl_prints_it() {
    let s = Setup::new();
    let hello = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello.yaml");
    let out = run_hang_guarded(s.cmd_file(&["-q"], &hello));
    assert_code(&out, 0);
    let files = files(&s);
    assert_eq!(files.len(), 1, "one file per host and program: {files:?}");
    let name = files[0].file_name().unwrap().to_str().unwrap();
    assert!(name.ends_with("-aw-run.jsonl"), "{name}");
    let all = spans(&files);
    let r = root(&all);
    assert_eq!(r["service"], "aw-run");
    assert_eq!(r["name"], "invoke_workflow hello");
    let agents = of(&all, "invoke_agent");
    let who: Vec<&str> = agents
        .iter()
        .map(|s| s["attrs"]["gen_ai.agent.name"].as_str().unwrap())
        .collect();
    assert_eq!(all.len(), 4, "{all:#?}");
    assert_eq!(who.iter().filter(|w| **w == "alice").count(), 2, "{who:?}");
    assert_eq!(who.iter().filter(|w| **w == "bob").count(), 1, "{who:?}");
    for a in &agents {
        assert_eq!(a["parent"], r["span"], "an attempt is a child of the run");
        assert_eq!(a["attrs"]["aw.outcome"], "ok");
        assert_eq!(a["status"], 1);
        assert_eq!(a["kind"], 1, "internal");
    }
    let bob = agents
        .iter()
        .find(|a| a["attrs"]["gen_ai.agent.name"] == "bob");
    assert_eq!(
        bob.unwrap()["attrs"]["aw.woken_by"],
        json!([2]),
        "woken by #2"
    );

    let mut c = s.tool_cmd("aw-ctl");
    c.args(["traces", "-i", INST]);
    let out = c.output().unwrap();
    assert_code(&out, 0);
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("run 1  trace "), "{text}");
    assert!(lines[0].ends_with("4 spans"), "{text}");
    assert!(lines[1].starts_with("invoke_workflow hello  "), "{text}");
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("└─ invoke_agent alice  ") && l.contains("  ok"))
            .count(),
        2,
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("└─ invoke_agent bob  ") && l.contains("woken_by=[2]")),
        "{text}"
    );
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["traces", "-i", INST, "--run", "2"]);
    let out = c.output().unwrap();
    assert_code(&out, 66);
    assert!(stderr(&out).contains("no traced run 2"), "{}", stderr(&out));
}

/// An exec agent that records its trace context and calls `channel_send` through aw-mcp,
/// as a CLI would.
const WORKER: &str = r#"cat > /dev/null
printf '%s\n' "${TRACEPARENT:-none}" > traceparent.txt
printf '%s\n' "${AW_OTEL:-unset}" > aw_otel.txt
printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"worker","version":"0"}}}' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"channel_send","arguments":{"message":"working on it"}}}' |
  aw-mcp --root "$AW_ROOT" --agent "$AW_AGENT@$AW_INSTANCE" | grep -q '"id":2'
echo done
"#;

fn both_wf(otel: &str) -> String {
    format!(
        "{otel}agents:
  worker:
    command: [./worker.sh]
    cwd: .
  reviewer:
    backend: anthropic
    model: claude-test
    max_steps: 4
kickoff: '@worker @reviewer start'
"
    )
}

/// aw-run on the workflow of an exec and an API agent against a fake Anthropic API that
/// calls one tool, then ends.
fn run_both(s: &Setup, otel: &str, env: &[(&str, &str)]) -> FakeApi {
    s.script("worker.sh", WORKER);
    let api = FakeApi::start(vec![
        answer(
            json!([tool_use(
                "tu_1",
                "my_status_set",
                json!({"status": "reviewing"})
            )]),
            "tool_use",
            100,
            20,
        ),
        answer(
            json!([{"type": "text", "text": "Reviewed."}]),
            "end_turn",
            150,
            10,
        ),
    ]);
    s.write("wf.yaml", &both_wf(otel));
    let mut c = s.cmd(&["-q", "--retries", "1"]);
    c.env("ANTHROPIC_BASE_URL", &api.url)
        .env("ANTHROPIC_API_KEY", KEY);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = run_hang_guarded(c);
    assert_code(&out, 0);
    api
}

#[test]
fn chat_and_tool_spans_hang_under_their_attempts_and_aw_mcp_joins_through_traceparent() {
    let s = Setup::new();
    let _api = run_both(&s, "", &[]);
    let files = files(&s);
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names.iter().any(|n| n.ends_with("-aw-mcp.jsonl")),
        "{names:?}"
    );
    let all = spans(&files);
    let r = root(&all);
    let agents = of(&all, "invoke_agent");
    assert_eq!(agents.len(), 2, "{all:#?}");
    let attempt = |who: &str| {
        *agents
            .iter()
            .find(|a| a["attrs"]["gen_ai.agent.name"] == who)
            .unwrap_or_else(|| panic!("no attempt of {who}: {all:#?}"))
    };
    let (worker, reviewer) = (attempt("worker"), attempt("reviewer"));
    for a in [worker, reviewer] {
        assert_eq!(a["parent"], r["span"]);
        assert_eq!(a["status"], 1, "{a}");
    }
    // The API agent: two model calls, its usage summed on the attempt, one tool call.
    assert_eq!(reviewer["attrs"]["gen_ai.usage.input_tokens"], 250);
    assert_eq!(reviewer["attrs"]["gen_ai.usage.output_tokens"], 30);
    let chats = of(&all, "chat");
    assert_eq!(chats.len(), 2, "{all:#?}");
    for c in &chats {
        assert_eq!(
            c["parent"], reviewer["span"],
            "a model call is under its attempt"
        );
        assert_eq!(c["kind"], 3, "client");
        assert_eq!(c["name"], "chat claude-test");
        assert_eq!(c["attrs"]["gen_ai.request.model"], "claude-test");
        assert_eq!(c["attrs"]["gen_ai.provider.name"], "anthropic");
    }
    let inputs: Vec<i64> = chats
        .iter()
        .map(|c| c["attrs"]["gen_ai.usage.input_tokens"].as_i64().unwrap())
        .collect();
    assert_eq!(inputs.iter().sum::<i64>(), 250, "{inputs:?}");
    let tools = of(&all, "execute_tool");
    let by_service: BTreeMap<&str, Vec<&&Value>> =
        tools.iter().fold(BTreeMap::new(), |mut m, t| {
            m.entry(t["service"].as_str().unwrap()).or_default().push(t);
            m
        });
    let api_tools = &by_service["aw-run"];
    assert_eq!(api_tools.len(), 1, "{tools:#?}");
    assert_eq!(api_tools[0]["parent"], reviewer["span"]);
    assert_eq!(api_tools[0]["attrs"]["gen_ai.tool.name"], "my_status_set");
    assert_eq!(api_tools[0]["attrs"]["gen_ai.tool.call.id"], "tu_1");
    // The exec agent's aw-mcp: its span in the same trace, under the worker's attempt.
    let mcp_tools = &by_service["aw-mcp"];
    assert_eq!(mcp_tools.len(), 1, "{tools:#?}");
    let t = mcp_tools[0];
    assert_eq!(
        t["parent"], worker["span"],
        "aw-mcp joins through TRACEPARENT"
    );
    assert_eq!(t["attrs"]["gen_ai.tool.name"], "channel_send");
    assert_eq!(t["attrs"]["gen_ai.agent.name"], "worker");
    assert_eq!(t["status"], 1);
    assert_ne!(t["pid"], r["pid"], "written by aw-mcp's own process");
    let seen = std::fs::read_to_string(s.dir().join("traceparent.txt")).unwrap();
    assert_eq!(
        seen.trim(),
        format!(
            "00-{}-{}-01",
            worker["trace"].as_str().unwrap(),
            worker["span"].as_str().unwrap()
        ),
        "the exec agent saw its attempt's context"
    );
    // No message content in any span: what the agent sent is not there.
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(!text.contains("working on it") && !text.contains("Reviewed."));
        assert!(!text.contains(KEY));
    }
}

#[test]
fn aw_otel_0_or_otel_false_write_no_trace_and_tell_the_children() {
    for (otel, env) in [("", &[("AW_OTEL", "0")][..]), ("otel: false\n", &[][..])] {
        let s = Setup::new();
        let _api = run_both(&s, otel, env);
        let dir = s.root.inst_dir(INST).join("_state/otel");
        assert!(!dir.exists(), "{otel:?} {env:?}: {dir:?} written");
        let seen = std::fs::read_to_string(s.dir().join("traceparent.txt")).unwrap();
        assert_eq!(seen.trim(), "none", "{otel:?} {env:?}");
        let off = std::fs::read_to_string(s.dir().join("aw_otel.txt")).unwrap();
        assert_eq!(
            off.trim(),
            "0",
            "{otel:?} {env:?}: the agent's aw-mcp is told"
        );
        let mut c = s.tool_cmd("aw-ctl");
        c.args(["traces", "-i", INST]);
        let out = c.output().unwrap();
        assert_code(&out, 66);
        assert!(stderr(&out).contains("otel: false"), "{}", stderr(&out));
    }
}

#[test]
fn a_full_file_is_rotated_to_dot_1_and_a_new_one_begun() {
    let s = Setup::new();
    let hello = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello.yaml");
    assert_code(&run_hang_guarded(s.cmd_file(&["-q"], &hello)), 0);
    let file = files(&s).remove(0);
    // The file made full (sparse: no 64 MiB written) before the next run.
    let full = 64u64 << 20;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(full)
        .unwrap();
    assert_code(&run_hang_guarded(s.cmd_file(&["-q"], &hello)), 0);
    let rotated = file.with_extension("jsonl.1");
    assert_eq!(std::fs::metadata(&rotated).unwrap().len(), full);
    let all = spans(&files(&s));
    assert_eq!(
        all.len(),
        4,
        "only the second run in the new file: {all:#?}"
    );
    root(&all);
}

/// aw-mcp for `alice` of the instance, started by hand with `env`, calling `my_status_set`.
fn mcp_by_hand(s: &Setup, env: &[(&str, &str)]) {
    let mut c = s.tool_cmd("aw-mcp");
    c.args(["--agent", &format!("alice@{INST}")]);
    for (k, v) in env {
        c.env(k, v);
    }
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"my_status_set","arguments":{"status":"here"}}}"#,
    ]
    .join("\n")
        + "\n";
    let out = common::run_with(c, Some(input.as_bytes()));
    assert_code(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains(r#""id":2"#));
}

#[test]
fn aw_mcp_started_by_hand_writes_spans_only_when_asked() {
    let s = Setup::new();
    mcp_by_hand(&s, &[]);
    let dir = s.root.inst_dir(INST).join("_state/otel");
    assert!(
        !dir.exists(),
        "a session started by hand writes no trace unasked"
    );
    mcp_by_hand(&s, &[("AW_OTEL", "1")]);
    let all = spans(&files(&s));
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0]["service"], "aw-mcp");
    assert_eq!(all[0]["name"], "execute_tool my_status_set");
    assert_eq!(all[0]["parent"], "", "a trace of its own without a context");
}
