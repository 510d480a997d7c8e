//! The trace files of an instance read back (see [`super::file`]): every span of every file
//! of `_state/otel/` (rotated ones too), gathered into traces, and the runs among them.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::file::{AnyValue, FOLDER, TracesData};
use crate::error::{Error, Result};
use crate::instance::Instance;

/// One span as read.
#[derive(Debug, Clone, Serialize)]
pub struct SpanRec {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root.
    pub parent_span_id: String,
    pub name: String,
    /// The program that wrote it (`service.name`).
    pub service: String,
    pub start_ns: u64,
    pub end_ns: u64,
    /// 0 unset, 1 ok, 2 error.
    pub status: i32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    pub attributes: BTreeMap<String, serde_json::Value>,
    /// How deep it stands in its tree: 0 for a root (or a span whose parent is in no file).
    pub depth: usize,
}

impl SpanRec {
    /// Attribute `key` as text, if set.
    pub fn attr(&self, key: &str) -> Option<String> {
        self.attributes.get(key).map(|v| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }
}

/// One trace: its spans as a tree, depth first, children by start time.
#[derive(Debug, Clone, Serialize)]
pub struct Trace {
    pub trace_id: String,
    /// Its number among the runs (traces with an `invoke_workflow` span), from 1 by start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<u64>,
    pub spans: Vec<SpanRec>,
}

/// The traces of `inst`, oldest first, and the lines that could not be read (as problems).
pub fn traces(inst: &Instance) -> Result<(Vec<Trace>, Vec<String>)> {
    let dir = inst.state_dir().join(FOLDER);
    let mut problems = Vec::new();
    let names = match crate::fs::owned::files(&dir) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io(&dir, e)),
    };
    let mut spans: Vec<SpanRec> = Vec::new();
    let mut seen = BTreeSet::new();
    for name in names {
        let name = name.to_string_lossy().into_owned();
        if !(name.ends_with(".jsonl") || name.ends_with(".jsonl.1")) {
            continue;
        }
        let path = dir.join(&name);
        let bytes = crate::fs::owned::read(&path).map_err(|e| Error::io(&path, e))?;
        for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<TracesData>(line) {
                Ok(data) => {
                    for s in records(data) {
                        if seen.insert((s.trace_id.clone(), s.span_id.clone())) {
                            spans.push(s);
                        }
                    }
                }
                Err(e) => problems.push(format!("{name}:{}: not OTLP JSON: {e}", i + 1)),
            }
        }
    }
    let mut by_trace: BTreeMap<String, Vec<SpanRec>> = BTreeMap::new();
    for s in spans {
        by_trace.entry(s.trace_id.clone()).or_default().push(s);
    }
    let mut traces: Vec<Trace> = by_trace
        .into_iter()
        .map(|(trace_id, spans)| Trace {
            trace_id,
            run: None,
            spans: tree(spans),
        })
        .collect();
    traces.sort_by_key(|t| t.spans.iter().map(|s| s.start_ns).min().unwrap_or(0));
    let mut n = 0;
    for t in &mut traces {
        if t.spans
            .iter()
            .any(|s| s.attr("gen_ai.operation.name").as_deref() == Some("invoke_workflow"))
        {
            n += 1;
            t.run = Some(n);
        }
    }
    Ok((traces, problems))
}

/// The trace of run `n` of `inst` (the last run when `None`).
pub fn run(inst: &Instance, n: Option<u64>) -> Result<(Trace, Vec<String>)> {
    let (traces, problems) = traces(inst)?;
    let count = traces.iter().filter(|t| t.run.is_some()).count() as u64;
    let want = n.unwrap_or(count);
    match traces.into_iter().find(|t| want > 0 && t.run == Some(want)) {
        Some(t) => Ok((t, problems)),
        None => {
            let has = match count {
                0 => "it has none".to_string(),
                1 => "it has run 1".to_string(),
                k => format!("it has runs 1 to {k}"),
            };
            let what = match n {
                Some(n) => format!("no traced run {n} in instance '{}' ({has})", inst.name()),
                None => format!("no traced run in instance '{}'", inst.name()),
            };
            Err(Error::not_found(what).hint(
                "aw-run writes traces unless the workflow says otel: false or AW_OTEL=0 is set",
            ))
        }
    }
}

/// The spans of one line.
fn records(data: TracesData) -> Vec<SpanRec> {
    let mut out = Vec::new();
    for rs in data.resource_spans {
        let service = rs
            .resource
            .attributes
            .iter()
            .find(|kv| kv.key == "service.name")
            .map(|kv| json(&kv.value))
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                out.push(SpanRec {
                    trace_id: s.trace_id,
                    span_id: s.span_id,
                    parent_span_id: s.parent_span_id,
                    name: s.name,
                    service: service.clone(),
                    start_ns: s.start_time_unix_nano.parse().unwrap_or(0),
                    end_ns: s.end_time_unix_nano.parse().unwrap_or(0),
                    status: s.status.code,
                    message: s.status.message,
                    attributes: s
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), json(&kv.value)))
                        .collect(),
                    depth: 0,
                });
            }
        }
    }
    out
}

/// An attribute's value as plain JSON: integers as numbers.
fn json(v: &AnyValue) -> serde_json::Value {
    match v {
        AnyValue::StringValue(s) => s.clone().into(),
        AnyValue::IntValue(s) => s
            .parse::<i64>()
            .map_or_else(|_| s.clone().into(), serde_json::Value::from),
        AnyValue::DoubleValue(x) => (*x).into(),
        AnyValue::BoolValue(b) => (*b).into(),
        AnyValue::ArrayValue { values } => values.iter().map(json).collect(),
    }
}

/// `spans` of one trace in tree order (depth first, each level by start), their depths set.
/// A span whose parent is in no file (its writer was killed, or it came from outside) is a
/// root.
fn tree(spans: Vec<SpanRec>) -> Vec<SpanRec> {
    let ids: BTreeSet<String> = spans.iter().map(|s| s.span_id.clone()).collect();
    let mut children: BTreeMap<String, Vec<SpanRec>> = BTreeMap::new();
    for s in spans {
        let parent = match ids.contains(&s.parent_span_id) && s.parent_span_id != s.span_id {
            true => s.parent_span_id.clone(),
            false => String::new(),
        };
        children.entry(parent).or_default().push(s);
    }
    for list in children.values_mut() {
        list.sort_by_key(|s| (s.start_ns, s.end_ns));
    }
    let mut out = Vec::new();
    let mut stack: Vec<(SpanRec, usize)> = children
        .remove("")
        .unwrap_or_default()
        .into_iter()
        .rev()
        .map(|s| (s, 0))
        .collect();
    while let Some((mut s, depth)) = stack.pop() {
        s.depth = depth;
        if let Some(kids) = children.remove(&s.span_id) {
            stack.extend(kids.into_iter().rev().map(|k| (k, depth + 1)));
        }
        out.push(s);
    }
    out
}
