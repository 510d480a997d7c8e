//! Spans and where they stand: trace contexts (W3C `traceparent`), the context of a thread
//! and of the process, random ids, attribute values. A span is written where it is dropped
//! ([`super::file`]).

use std::cell::Cell;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a span stands in its trace: the trace's id and the span's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context {
    pub trace: [u8; 16],
    pub span: [u8; 8],
}

impl Context {
    /// The `traceparent` of this context: `00-<trace>-<span>-01` (sampled).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", hex(&self.trace), hex(&self.span))
    }

    /// A `traceparent` read: version `00` (or a later one, read as `00`), ids of lowercase
    /// hex that are not all zero; `None` for anything else.
    pub fn parse(text: &str) -> Option<Context> {
        let parts: Vec<&str> = text.trim().split('-').collect();
        let [version, trace, span, flags, ..] = parts.as_slice() else {
            return None;
        };
        if version.len() != 2 || *version == "ff" || flags.len() != 2 {
            return None;
        }
        if *version == "00" && parts.len() != 4 {
            return None;
        }
        let trace: [u8; 16] = unhex(trace)?.try_into().ok()?;
        let span: [u8; 8] = unhex(span)?.try_into().ok()?;
        unhex(version)?;
        unhex(flags)?;
        if trace == [0; 16] || span == [0; 8] {
            return None;
        }
        Some(Context { trace, span })
    }
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lowercase hex read as bytes; `None` when it is not.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2)
        || !text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// `N` random bytes from the kernel, never all zero.
fn random<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    loop {
        let mut got = 0;
        while got < N {
            // SAFETY: the buffer is valid for `N - got` bytes from `got`.
            let r = unsafe { nix::libc::getrandom(buf[got..].as_mut_ptr().cast(), N - got, 0) };
            if r > 0 {
                got += r as usize;
            } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                // No getrandom: the clock and the pid, mixed, still differ between spans.
                let seed = now_nanos() ^ (u64::from(std::process::id()) << 32);
                let h = crate::hash::fnv1a(&[seed.to_le_bytes(), got.to_le_bytes()].concat());
                for (i, b) in buf.iter_mut().enumerate().skip(got) {
                    *b = (h >> ((i % 8) * 8)) as u8 ^ (i as u8);
                }
                got = N;
            }
        }
        if buf.iter().any(|&b| b != 0) {
            return buf;
        }
    }
}

/// Nanoseconds since the Unix epoch.
pub fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The context every span of this process descends from when its thread has none: the
/// `invoke_workflow` span of aw-run, or the `TRACEPARENT` aw-mcp was started with; with
/// the `TRACESTATE` that came with it.
static ROOT: Mutex<Option<(Context, Option<String>)>> = Mutex::new(None);

thread_local! {
    /// The span this thread works under (an attempt, while its backend runs).
    static CURRENT: Cell<Option<Context>> = const { Cell::new(None) };
}

/// Make `ctx` (with `state`, a `tracestate`) the context of this process's spans.
pub fn set_root(ctx: Option<Context>, state: Option<String>) {
    *ROOT.lock().unwrap_or_else(|e| e.into_inner()) = ctx.map(|c| (c, state));
}

/// The context a new span of this thread descends from, if any.
pub fn current() -> Option<Context> {
    CURRENT.get().or_else(|| {
        ROOT.lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|r| r.0)
    })
}

/// The `TRACESTATE` this process was given, if any.
pub fn trace_state() -> Option<String> {
    ROOT.lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|r| r.1.clone())
}

/// What a span is to its trace (OTLP `SpanKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Internal = 1,
    Server = 2,
    Client = 3,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Ints(Vec<i64>),
    Strs(Vec<String>),
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Value {
        Value::Int(i64::from(n))
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Value {
        Value::Float(x)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

/// How a span ended (OTLP `Status`): unset, ok, or an error with its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Unset,
    Ok,
    Error(String),
}

/// A span under way: written to the file of this process when it ends (or is dropped).
/// While traces are off it is made and filled all the same, and written nowhere.
#[derive(Debug)]
pub struct Span {
    pub ctx: Context,
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub kind: Kind,
    pub start: u64,
    pub end: u64,
    pub attributes: Vec<(String, Value)>,
    pub status: Status,
    /// Whether it was written.
    pub(super) ended: bool,
}

impl Span {
    /// A span named `name` starting now, a child of `parent` (a new trace when `None`).
    pub fn start(name: impl Into<String>, kind: Kind, parent: Option<Context>) -> Span {
        let ctx = Context {
            trace: parent.map_or_else(random, |p| p.trace),
            span: random(),
        };
        Span {
            ctx,
            parent: parent.map(|p| p.span),
            name: name.into(),
            kind,
            start: now_nanos(),
            end: 0,
            attributes: Vec::new(),
            status: Status::Unset,
            ended: false,
        }
    }

    /// A span of GenAI operation `op` (`gen_ai.operation.name`), named `op` then `what`,
    /// a child of this thread's current span.
    pub fn op(op: &str, what: &str, kind: Kind) -> Span {
        let name = match what {
            "" => op.to_string(),
            w => format!("{op} {w}"),
        };
        let mut s = Span::start(name, kind, current());
        s.set("gen_ai.operation.name", op);
        s
    }

    /// Set attribute `key` to `value` (replacing one set before).
    pub fn set(&mut self, key: &str, value: impl Into<Value>) {
        let value = value.into();
        match self.attributes.iter_mut().find(|(k, _)| k == key) {
            Some(a) => a.1 = value,
            None => self.attributes.push((key.to_string(), value)),
        }
    }

    /// Make this span the current one of this thread until the guard is dropped.
    pub fn enter(&self) -> Entered {
        Entered(CURRENT.replace(Some(self.ctx)))
    }

    /// End the span now: it is written as it is dropped (see [`super::file`]).
    pub fn end(self) {}
}

/// While held, a span is the current one of its thread; the one before comes back after.
pub struct Entered(Option<Context>);

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.set(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_reads_back_and_bad_ones_are_refused() {
        let c = Context {
            trace: [0xab; 16],
            span: [1; 8],
        };
        let t = c.traceparent();
        assert_eq!(t, format!("00-{}-{}-01", "ab".repeat(16), "01".repeat(8)));
        assert_eq!(Context::parse(&t), Some(c));
        for bad in [
            "",
            "00-abc-def-01",
            &format!("00-{}-{}-01", "0".repeat(32), "01".repeat(8)),
            &format!("00-{}-{}-01", "AB".repeat(16), "01".repeat(8)),
            &format!("ff-{}-{}-01", "ab".repeat(16), "01".repeat(8)),
            &format!("00-{}-{}-01-x", "ab".repeat(16), "01".repeat(8)),
        ] {
            assert_eq!(Context::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn ids_are_random_and_children_keep_the_trace() {
        let a = Span::start("a", Kind::Internal, None);
        let b = Span::start("b", Kind::Internal, Some(a.ctx));
        assert_eq!(a.ctx.trace, b.ctx.trace);
        assert_ne!(a.ctx.span, b.ctx.span);
        assert_eq!(b.parent, Some(a.ctx.span));
        let c = Span::start("c", Kind::Internal, None);
        assert_ne!(a.ctx.trace, c.ctx.trace);
    }

    #[test]
    fn an_entered_span_is_current_until_its_guard_goes() {
        let a = Span::start("a", Kind::Internal, None);
        {
            let _g = a.enter();
            assert_eq!(current(), Some(a.ctx));
        }
        assert_ne!(CURRENT.get(), Some(a.ctx));
    }
}
