//! `aw-ctl traces [--run N] [--json]`: the spans of a run (one aw-run's trace, the last one
//! by default) as a tree: name, duration, outcome and the attributes that matter most.

use super::Call;
use crate::cli::Out;
use crate::error::Result;
use crate::otel::read::{SpanRec, Trace};

/// The attributes shown on a span's line, and how they are named there.
const SHOWN: &[(&str, &str)] = &[
    ("aw.run", "run"),
    ("aw.attempt", "attempt"),
    ("aw.woken_by", "woken_by"),
    ("aw.card", "card"),
    ("gen_ai.provider.name", "provider"),
    ("gen_ai.usage.input_tokens", "in"),
    ("gen_ai.usage.output_tokens", "out"),
    ("aw.cost_usd", "cost_usd"),
    ("aw.result_bytes", "bytes"),
    ("aw.exit_code", "exit"),
];

/// `aw-ctl traces`: the tree, or with `--json` the trace with its spans in tree order.
pub(super) fn traces(out: &mut Out, c: &Call, _args: &[&str]) -> Result<u8> {
    let run: Option<u64> = c.number("run")?;
    let inst = c.common.instance()?;
    let (trace, problems) = crate::otel::read::run(&inst, run)?;
    for p in &problems {
        crate::warn::warn("aw-ctl", p);
    }
    if c.has("json") {
        out.line(&serde_json::to_string(&trace).expect("a trace serializes"))?;
        return Ok(0);
    }
    for line in render(&trace) {
        out.line(&line)?;
    }
    Ok(0)
}

/// The lines of `trace`: a header, then a line per span indented by its depth.
fn render(t: &Trace) -> Vec<String> {
    let start = t.spans.iter().map(|s| s.start_ns).min().unwrap_or(0);
    let when = chrono::DateTime::from_timestamp_nanos(i64::try_from(start).unwrap_or(0))
        .format("%Y-%m-%d %H:%M:%S UTC");
    let mut lines = vec![format!(
        "run {}  trace {}  {when}  {} spans",
        t.run.unwrap_or(0),
        t.trace_id,
        t.spans.len()
    )];
    lines.extend(t.spans.iter().map(line));
    lines
}

/// One span's line.
fn line(s: &SpanRec) -> String {
    let indent = match s.depth {
        0 => String::new(),
        d => format!("{}└─ ", "   ".repeat(d - 1)),
    };
    let status = match s.status {
        1 => "ok".to_string(),
        2 if s.message.is_empty() => "error".to_string(),
        2 => format!("error: {}", crate::term::visible(&s.message)),
        _ => "-".to_string(),
    };
    let mut text = format!(
        "{indent}{}  {}  {status}",
        crate::term::visible(&s.name),
        duration(s.end_ns.saturating_sub(s.start_ns))
    );
    if s.service == "aw-mcp" {
        text.push_str("  via aw-mcp");
    }
    for (key, shown) in SHOWN {
        if let Some(v) = s.attr(key) {
            text.push_str(&format!("  {shown}={}", crate::term::visible(&v)));
        }
    }
    text
}

/// A duration in nanoseconds as people read it: `850µs`, `12ms`, `1.52s`, `3m05s`.
fn duration(ns: u64) -> String {
    match ns {
        0..1_000_000 => format!("{}µs", ns / 1_000),
        1_000_000..1_000_000_000 => format!("{}ms", ns / 1_000_000),
        1_000_000_000..60_000_000_000 => format!("{:.2}s", ns as f64 / 1e9),
        _ => crate::time::clock(std::time::Duration::from_nanos(ns)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_as_people_read_them() {
        assert_eq!(super::duration(850_000), "850µs");
        assert_eq!(super::duration(12_400_000), "12ms");
        assert_eq!(super::duration(1_520_000_000), "1.52s");
        assert_eq!(super::duration(185_000_000_000), "3m05s");
    }
}
