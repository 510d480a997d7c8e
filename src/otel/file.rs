//! Where spans go: `_state/otel/<host>-<kind>.jsonl` of the instance, `<kind>` the program
//! (`aw-run`, `aw-mcp`), one line per span. A line is one OTLP JSON `TracesData` (the format of
//! the OpenTelemetry file exporter, read by the Collector's `otlpjsonfile` receiver): one
//! `ResourceSpans` (service.name, service.version, host.name, process.pid), one
//! `ScopeSpans` (`aw`), one span. Ids are lowercase hex, enums numbers, times nanoseconds
//! since the epoch written as strings (64-bit integers, as OTLP JSON writes them).
//!
//! A line is appended (`O_APPEND`) in one write as its span ends: several processes of one
//! kind on one host share their file. Past [`MAX_FILE`] the file is renamed `….jsonl.1`
//! (replacing the one before) and a new one begun.
//!
//! The serde structs below are the few OTLP messages a span needs, rather than the
//! `opentelemetry-proto` crate: that crate brings prost, tonic and their builds for six
//! structs, and its serde mapping would still have to be told to write ids as hex.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::fcntl::OFlag;
use serde::{Deserialize, Serialize};

use super::span::{Span, Status, Value, hex, now_nanos};
use crate::instance::Instance;

/// The variable that turns traces off: `0` (or `false`, `off`, `no`).
pub const AW_OTEL: &str = "AW_OTEL";

/// Size past which a trace file is rotated: 64 MiB.
pub const MAX_FILE: u64 = 64 << 20;

/// The folder of the trace files, in `_state/`.
pub const FOLDER: &str = "otel";

/// Where this process writes its spans, and what it says of itself.
struct Sink {
    path: PathBuf,
    resource: Resource,
}

static SINK: Mutex<Option<Sink>> = Mutex::new(None);

/// Whether this process asked about traces at all ([`start`]): one that never did (aw-ctl)
/// leaves its children's environment as it is.
static STARTED: AtomicBool = AtomicBool::new(false);

/// Whether `AW_OTEL` leaves traces on: unset, empty, or anything but `0`, `false`, `off`, `no`.
pub fn env_on() -> bool {
    match std::env::var(AW_OTEL) {
        Ok(v) => !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "false" | "off" | "no"
        ),
        Err(_) => true,
    }
}

/// Begin writing this process's spans (as program `service`) to the instance `inst`, when
/// `on` (the workflow's `otel:`) and `AW_OTEL` allow; whether they are written.
pub fn start(inst: &Instance, service: &str, on: bool) -> bool {
    let on = on && env_on();
    STARTED.store(true, Ordering::Relaxed);
    let sink = on.then(|| Sink {
        path: path(inst, &crate::host::this().name, service),
        resource: Resource {
            attributes: vec![
                kv("service.name", service.into()),
                kv("service.version", crate::VERSION.into()),
                kv("host.name", crate::host::this().name.as_str().into()),
                kv("process.pid", u64::from(std::process::id()).into()),
            ],
        },
    });
    *SINK.lock().unwrap_or_else(|e| e.into_inner()) = sink;
    on
}

/// Whether this process decided on traces ([`start`]), on or off.
pub fn started() -> bool {
    STARTED.load(Ordering::Relaxed)
}

/// Whether this process writes spans.
pub fn enabled() -> bool {
    SINK.lock().unwrap_or_else(|e| e.into_inner()).is_some()
}

/// The trace file of program `service` on host `host`: its name keeps letters, digits,
/// `.`, `_` and `-` of the host name, `_` for any other.
pub fn path(inst: &Instance, host: &str, service: &str) -> PathBuf {
    let host: String = host
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .collect();
    let host = match host.trim_start_matches('.') {
        "" => "host",
        h => h,
    };
    inst.state_dir()
        .join(FOLDER)
        .join(format!("{host}-{service}.jsonl"))
}

/// A span is written as it ends: once, when it is dropped.
impl Drop for Span {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.end = now_nanos().max(self.start);
        write(self);
    }
}

/// Write `span` as a line of this process's file, when it writes spans. A failure is said
/// once on stderr, and the run goes on.
fn write(span: &Span) {
    let guard = SINK.lock().unwrap_or_else(|e| e.into_inner());
    let Some(sink) = guard.as_ref() else {
        return;
    };
    let line = line(span, &sink.resource);
    if let Err(e) = append(&sink.path, line.as_bytes()) {
        static SAID: AtomicBool = AtomicBool::new(false);
        if !SAID.swap(true, Ordering::Relaxed) {
            crate::warn::warn(
                "aw",
                format!("{}: traces not written: {e}", sink.path.display()),
            );
        }
    }
}

/// Append `line` to the file at `path` in one write, rotating it first when it is full.
fn append(path: &std::path::Path, line: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    crate::fs::owned::folder(dir, true)?;
    let flags = OFlag::O_WRONLY | OFlag::O_APPEND | OFlag::O_CREAT;
    let mut f = crate::fs::owned::open(path, flags, crate::fs::owned::CREATE)?;
    if f.metadata()?.len() + line.len() as u64 > MAX_FILE {
        rotate(path, line.len() as u64)?;
        f = crate::fs::owned::open(path, flags, crate::fs::owned::CREATE)?;
    }
    f.write_all(line)
}

/// Rename the file at `path` to `….1` when a line of `len` bytes does not fit in it, under a
/// lock and looked at again there: of several processes that found it full, one renames it
/// and the others write to the new one.
fn rotate(path: &std::path::Path, len: u64) -> std::io::Result<()> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::ErrorKind::InvalidInput.into());
    };
    let lock_path = dir.join(".rotate.lock");
    let _lock = crate::fs::Lock::exclusive(&lock_path).map_err(std::io::Error::other)?;
    let still_full = crate::fs::owned::open(path, OFlag::O_RDONLY, nix::sys::stat::Mode::empty())
        .and_then(|f| f.metadata())
        .is_ok_and(|m| m.len() + len > MAX_FILE);
    if still_full {
        let mut old = name.to_os_string();
        old.push(".1");
        crate::fs::owned::folder(dir, false)?.rename(name, &old)?;
    }
    Ok(())
}

/// `span` as one line of OTLP JSON, its newline included.
pub fn line(span: &Span, resource: &Resource) -> String {
    let (code, message) = match &span.status {
        Status::Unset => (0, String::new()),
        Status::Ok => (1, String::new()),
        Status::Error(m) => (2, m.clone()),
    };
    let data = TracesData {
        resource_spans: vec![ResourceSpans {
            resource: resource.clone(),
            scope_spans: vec![ScopeSpans {
                scope: Scope {
                    name: "aw".into(),
                    version: crate::VERSION.into(),
                },
                spans: vec![SpanData {
                    trace_id: hex(&span.ctx.trace),
                    span_id: hex(&span.ctx.span),
                    parent_span_id: span.parent.map(|p| hex(&p)).unwrap_or_default(),
                    name: span.name.clone(),
                    kind: span.kind as i32,
                    start_time_unix_nano: span.start.to_string(),
                    end_time_unix_nano: span.end.to_string(),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|(k, v)| kv(k, v.into()))
                        .collect(),
                    status: SpanStatus { message, code },
                }],
            }],
        }],
    };
    let mut text = serde_json::to_string(&data).unwrap_or_default();
    text.push('\n');
    text
}

fn kv(key: &str, value: AnyValue) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value,
    }
}

impl From<&Value> for AnyValue {
    fn from(v: &Value) -> AnyValue {
        match v {
            Value::Str(s) => AnyValue::StringValue(s.clone()),
            Value::Int(n) => AnyValue::IntValue(n.to_string()),
            Value::Float(x) if x.is_finite() => AnyValue::DoubleValue(*x),
            Value::Float(x) => AnyValue::StringValue(x.to_string()),
            Value::Bool(b) => AnyValue::BoolValue(*b),
            Value::Ints(ns) => AnyValue::ArrayValue {
                values: ns
                    .iter()
                    .map(|n| AnyValue::IntValue(n.to_string()))
                    .collect(),
            },
            Value::Strs(ss) => AnyValue::ArrayValue {
                values: ss
                    .iter()
                    .map(|s| AnyValue::StringValue(s.clone()))
                    .collect(),
            },
        }
    }
}

impl From<&str> for AnyValue {
    fn from(s: &str) -> AnyValue {
        AnyValue::StringValue(s.to_string())
    }
}

impl From<u64> for AnyValue {
    fn from(n: u64) -> AnyValue {
        AnyValue::IntValue(n.to_string())
    }
}

/// OTLP `TracesData`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TracesData {
    #[serde(default)]
    pub resource_spans: Vec<ResourceSpans>,
}

/// OTLP `ResourceSpans`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpans {
    #[serde(default)]
    pub resource: Resource,
    #[serde(default)]
    pub scope_spans: Vec<ScopeSpans>,
}

/// OTLP `Resource`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    #[serde(default)]
    pub attributes: Vec<KeyValue>,
}

/// OTLP `ScopeSpans`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeSpans {
    #[serde(default)]
    pub scope: Scope,
    #[serde(default)]
    pub spans: Vec<SpanData>,
}

/// OTLP `InstrumentationScope`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scope {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
}

/// OTLP `Span`, the fields aw writes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanData {
    pub trace_id: String,
    pub span_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parent_span_id: String,
    pub name: String,
    #[serde(default)]
    pub kind: i32,
    #[serde(default)]
    pub start_time_unix_nano: String,
    #[serde(default)]
    pub end_time_unix_nano: String,
    #[serde(default)]
    pub attributes: Vec<KeyValue>,
    #[serde(default)]
    pub status: SpanStatus,
}

/// OTLP `Status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default)]
    pub code: i32,
}

/// OTLP `KeyValue`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeyValue {
    pub key: String,
    pub value: AnyValue,
}

/// OTLP `AnyValue`, the kinds aw writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AnyValue {
    StringValue(String),
    /// A 64-bit integer, as a string (a number is read too).
    IntValue(#[serde(deserialize_with = "int_text")] String),
    DoubleValue(f64),
    BoolValue(bool),
    ArrayValue {
        #[serde(default)]
        values: Vec<AnyValue>,
    },
}

/// An integer written as a string or as a number, read as its text.
fn int_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => Ok(s),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        other => Err(serde::de::Error::custom(format!(
            "an integer, found {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otel::span::Kind;

    #[test]
    fn a_line_is_one_traces_data_with_hex_ids_and_string_times() {
        let mut s = Span::start("chat m", Kind::Client, None);
        s.set("gen_ai.usage.input_tokens", 12u64);
        s.set("aw.cost_usd", 0.5);
        s.set("aw.woken_by", Value::Ints(vec![3, 4]));
        s.status = Status::Error("failed".into());
        s.end = s.start + 5;
        let res = Resource::default();
        let text = line(&s, &res);
        assert!(text.ends_with('\n') && text.matches('\n').count() == 1);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let span = &v["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], hex(&s.ctx.trace));
        assert_eq!(span["kind"], 3);
        assert_eq!(span["endTimeUnixNano"], (s.start + 5).to_string());
        assert_eq!(span["status"]["code"], 2);
        assert!(span.get("parentSpanId").is_none());
        assert_eq!(span["attributes"][0]["value"]["intValue"], "12");
        assert_eq!(span["attributes"][1]["value"]["doubleValue"], 0.5);
        assert_eq!(
            span["attributes"][2]["value"]["arrayValue"]["values"][1]["intValue"],
            "4"
        );
        let back: TracesData = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back.resource_spans[0].scope_spans[0].spans[0].name,
            "chat m"
        );
        std::mem::forget(s);
    }
}
