//! OpenTelemetry traces as files: what `aw-run` and `aw-mcp` did, as spans that any
//! OpenTelemetry tool reads (the `otlpjsonfile` receiver of a Collector, Langfuse, Phoenix).
//!
//! | file | what it holds |
//! |------|---------------|
//! | `mod.rs` | what a child program is given: `TRACEPARENT`, `TRACESTATE`, or `AW_OTEL=0` |
//! | `span.rs` | trace contexts (W3C `traceparent`), the current one of a thread and of the process, spans |
//! | `file.rs` | where spans go: `_state/otel/<host>-<kind>.jsonl`, one OTLP JSON `TracesData` a line, rotated past [`file::MAX_FILE`] |
//! | `genai.rs` | the spans of aw, with the attributes of the GenAI conventions |
//! | `work.rs` | the spans of aw's own work: an approval waited for, a merge served |
//! | `read.rs` | reading those files back: the traces of an instance as trees, for `aw-ctl traces` |
//!
//! A span is written when it ends (or is dropped), in one `write` of one line. Spans carry
//! ids, names, counts, sizes and outcomes, never what a message or a prompt says.

pub mod file;
pub mod genai;
pub mod read;
pub mod span;
pub mod work;

pub use file::{AW_OTEL, enabled, start};
pub use span::{Context, Kind, Span, Status, Value, current, hex, set_root};

/// The variable that carries a trace context to a child program (W3C Trace Context).
pub const TRACEPARENT: &str = "TRACEPARENT";
/// The vendor part of a trace context, passed on as it came.
pub const TRACESTATE: &str = "TRACESTATE";

/// The variables a child program gets: `TRACEPARENT` (and `TRACESTATE`) of the current span
/// while traces are on; `AW_OTEL=0` while they are off, so that the aw tools it starts
/// write none either; nothing in a process that never decided ([`start`]).
pub fn child_env() -> Vec<(&'static str, String)> {
    if !file::started() {
        return Vec::new();
    }
    if !enabled() {
        return vec![(AW_OTEL, "0".to_string())];
    }
    let mut env = Vec::new();
    if let Some(c) = current() {
        env.push((TRACEPARENT, c.traceparent()));
        if let Some(s) = span::trace_state() {
            env.push((TRACESTATE, s));
        }
    }
    env
}

/// The context given by this process's environment (`TRACEPARENT`, `TRACESTATE`), if a
/// valid one.
pub fn from_env() -> (Option<Context>, Option<String>) {
    let ctx = std::env::var(TRACEPARENT)
        .ok()
        .and_then(|t| Context::parse(&t));
    let state = std::env::var(TRACESTATE)
        .ok()
        .filter(|s| ctx.is_some() && !s.is_empty() && s.len() <= 512 && s.is_ascii());
    (ctx, state)
}
