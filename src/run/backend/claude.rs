//! The `claude` backend: Claude Code in print mode (`claude -p --output-format stream-json
//! --verbose`), run like an `exec` program (own process group, prompt on stdin, timeout,
//! idle timeout, stop). It gets the agent's MCP configuration alone (`--strict-mcp-config`),
//! the aw tools and the agent's `tools` allowed by name, the permission mode when the agent
//! names one, the model, the system prompt appended to Claude Code's own, the run limits,
//! and what a USD budget leaves as its own spending cap (`--max-budget-usd`, at least
//! $0.0001). It prints one JSON object per line while it works; the last `result` line gives
//! the final text, the turns, tokens and cost; the first, of type `system` and subtype
//! `init`, the `session_id` of the session it started or resumed: a kept session (`session:
//! keep`) is continued with `--resume ID`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::exec::{Exec, LineReader, fail_keeping_exit, run_and_read};
use super::{Backend, RunContext, RunOutcome, Status};
use crate::run::capture::{Capture, MAX_CAPTURE};
use crate::usage::Usage;

/// The MCP tools of the aw server, as Claude Code names them in `--allowedTools`.
pub const AW_TOOLS: &str = "mcp__aw";

/// The smallest `--max-budget-usd` passed, when the budgets leave less.
const MIN_CAP_USD: f64 = 0.0001;

/// `--max-budget-usd` for what the budgets leave: rounded down to 4 decimals, never past
/// what is left (a float error of far less than a ten-thousandth is not a cent taken away),
/// and at least [`MIN_CAP_USD`]: Claude Code wants a cap above zero.
fn spending_cap(usd: f64) -> String {
    let cap = ((usd * 10_000.0 + 1e-6).floor() / 10_000.0).max(MIN_CAP_USD);
    format!("{cap:.4}")
}

pub struct Claude {
    /// The `claude` program.
    pub program: String,
    pub model: Option<String>,
    pub system: Option<String>,
    /// Extra tools allowed by name (Claude Code's names: `Read`, `Bash(git diff:*)`, ...).
    pub tools: Vec<String>,
    /// `--max-turns`.
    pub max_turns: Option<u64>,
    /// `--permission-mode`, one of [`PERMISSION_MODES`](crate::registry::PERMISSION_MODES).
    pub permission_mode: Option<String>,
    /// Kill a run that writes nothing for this long.
    pub idle_timeout: Duration,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Only coordinating: none of Claude Code's own tools (`--tools ""`), only aw's.
    pub delegate: bool,
}

impl Claude {
    /// The argument vector of one run.
    pub fn argv(&self, ctx: &RunContext) -> Vec<String> {
        let mut v = vec![
            self.program.clone(),
            "-p".into(),
            "--output-format".into(),
            "stream-json".into(),
            "--verbose".into(),
            "--mcp-config".into(),
            ctx.mcp_config.to_string_lossy().into_owned(),
            "--strict-mcp-config".into(),
            "--allowedTools".into(),
        ];
        v.push(
            std::iter::once(AW_TOOLS.to_string())
                .chain(self.tools.iter().cloned())
                .collect::<Vec<_>>()
                .join(","),
        );
        if self.delegate {
            v.extend(["--tools".into(), String::new()]);
        }
        if let Some(m) = &self.permission_mode {
            v.extend(["--permission-mode".into(), m.clone()]);
        }
        if let Some(m) = &self.model {
            v.extend(["--model".into(), m.clone()]);
        }
        if let Some(s) = self.system.as_ref().filter(|s| !s.trim().is_empty()) {
            v.extend(["--append-system-prompt".into(), s.clone()]);
        }
        if let Some(n) = self.max_turns {
            v.extend(["--max-turns".into(), n.to_string()]);
        }
        if let Some(usd) = ctx.remaining_usd {
            v.extend(["--max-budget-usd".into(), spending_cap(usd)]);
        }
        if let Some(k) = ctx.resume {
            v.extend(["--resume".into(), k.id.clone()]);
        }
        v
    }
}

impl Backend for Claude {
    fn run(&mut self, ctx: &RunContext) -> RunOutcome {
        let exec = Exec {
            argv: self.argv(ctx).into(),
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            idle_timeout: Some(self.idle_timeout),
        };
        run_and_read(&exec, ctx, &mut ResultLine::default())
    }

    fn takes_system_prompt(&self) -> bool {
        true
    }
}

/// Keeps the last `result` line of Claude Code's stream; the others tell of its progress.
#[derive(Default)]
struct ResultLine {
    /// The line parsed, and as printed.
    last: Option<(Value, Vec<u8>)>,
    /// The usage of each model call (assistant message) seen so far, by message id: what a
    /// stopped run spent.
    calls: BTreeMap<String, Usage>,
    /// The `session_id` of the last init line.
    session: Option<String>,
}

/// The type of a line of the stream, read without the rest.
#[derive(serde::Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    subtype: Option<Cow<'a, str>>,
    #[serde(borrow)]
    session_id: Option<Cow<'a, str>>,
}

impl LineReader for ResultLine {
    fn line(&mut self, line: &[u8]) {
        // The session is the one the init line says it started in: a session Claude Code
        // could not resume is named by its result line too, but it has no init line.
        if let Ok(Kind {
            kind: Some(kind),
            subtype: Some(subtype),
            session_id: Some(id),
        }) = serde_json::from_slice::<Kind>(line)
            && kind == "system"
            && subtype == "init"
        {
            self.session = Some(id.into_owned());
        }
        let is_result =
            serde_json::from_slice::<Kind>(line).is_ok_and(|k| k.kind.as_deref() == Some("result"));
        if is_result && let Ok(v) = serde_json::from_slice::<Value>(line) {
            self.last = Some((v, line.to_vec()));
        } else if serde_json::from_slice::<Kind>(line)
            .is_ok_and(|k| k.kind.as_deref() == Some("assistant"))
            && let Ok(v) = serde_json::from_slice::<Value>(line)
            && let Some(id) = v["message"]["id"].as_str()
        {
            // Each content block of a message comes on a line of its own, with the
            // message's usage: counted once per message.
            let mut u = usage(&v["message"]);
            u.cost_usd = None;
            self.calls.insert(id.to_string(), u);
        }
    }

    fn spent(&self) -> Option<Usage> {
        let mut total: Option<Usage> = None;
        for u in self.calls.values() {
            total.get_or_insert_with(Usage::default).add(u);
        }
        total
    }

    /// Status, final text and usage from the result.
    fn finish(&mut self, out: &mut RunOutcome) {
        out.session = self.session.take();
        let Some((r, raw)) = self.last.take() else {
            fail_keeping_exit(out, "no result from claude");
            return;
        };
        keep_result_line(&mut out.stdout, &raw);
        out.usage = Some(usage(&r));
        let answer = r["result"].as_str().unwrap_or("").trim().to_string();
        let subtype = r["subtype"].as_str().unwrap_or("unknown");
        if subtype == "success" && r["is_error"] != true && out.status == Status::Ok {
            out.final_text = answer;
            return;
        }
        out.status = Status::Failed;
        // Printed as one line of the failure: control characters made harmless.
        let mut why = format!("claude: {}", crate::names::sanitize(subtype));
        // The text, else the first of the errors Claude Code lists.
        let detail = Some(answer.as_str())
            .filter(|a| !a.is_empty())
            .or(r["errors"][0].as_str())
            .and_then(|d| d.lines().next())
            .filter(|d| !d.trim().is_empty());
        if let Some(d) = detail {
            why.push_str(": ");
            why.push_str(d);
        }
        out.reason = Some(why);
    }
}

/// A stream longer than the capture still shows its result line (session, turns, cost): at
/// the end of the kept text, in place of the last whole lines it displaces. A result line
/// longer than the capture is left out.
fn keep_result_line(c: &mut Capture, raw: &[u8]) {
    if c.cut == 0 || raw.len() >= MAX_CAPTURE {
        return;
    }
    // The capture is full when anything was cut.
    let total = MAX_CAPTURE as u64 + c.cut;
    let room = MAX_CAPTURE - raw.len() - 1;
    let mut end = room.min(c.text.len());
    while !c.text.is_char_boundary(end) {
        end -= 1;
    }
    let head = c.text[..end].rfind('\n').map_or(0, |i| i + 1);
    c.text.truncate(head);
    c.text.push_str(&String::from_utf8_lossy(raw));
    c.text.push('\n');
    c.cut = total - c.text.len() as u64;
}

fn usage(r: &Value) -> Usage {
    let u = &r["usage"];
    let n = |k: &str| super::api::count(&u[k]);
    Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_read_tokens: n("cache_read_input_tokens"),
        cache_write_tokens: n("cache_creation_input_tokens"),
        cost_usd: r["total_cost_usd"].as_f64(),
    }
}

/// What a run makes of `stdout` printed by the program, the run having ended with
/// `status` (the entry point of the fuzz target of this reader).
#[doc(hidden)]
pub fn read_stream(stdout: &[u8], status: Status) -> RunOutcome {
    super::exec::read_stream(&mut ResultLine::default(), stdout, status)
}

#[cfg(test)]
mod tests {
    use super::super::exec::read_printed;
    use super::*;

    #[test]
    fn the_spending_cap_never_passes_what_is_left() {
        assert_eq!(spending_cap(4.999475), "4.9994");
        assert_eq!(spending_cap(0.02 - 0.01), "0.0100");
        assert_eq!(spending_cap(0.3 - 0.1), "0.2000");
        assert_eq!(spending_cap(0.0), "0.0001");
        assert_eq!(spending_cap(0.00009), "0.0001");
    }

    fn read(stdout: &str, status: Status) -> RunOutcome {
        read_printed(&mut ResultLine::default(), stdout, status)
    }

    #[test]
    fn a_success_gives_the_answer_and_the_usage() {
        let o = read(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"done\n","num_turns":2,"total_cost_usd":0.0125,"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":7}}"#,
            Status::Ok,
        );
        assert_eq!(o.status, Status::Ok);
        assert_eq!(o.final_text, "done");
        let u = o.usage.unwrap();
        assert_eq!(
            (
                u.input_tokens,
                u.output_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens
            ),
            (10, 5, 100, 7)
        );
        assert_eq!(u.cost_usd, Some(0.0125));
    }

    #[test]
    fn an_error_subtype_fails_with_its_name_and_keeps_the_usage() {
        let o = read(
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"usage":{"input_tokens":3}}"#,
            Status::Failed,
        );
        assert_eq!(o.status, Status::Failed);
        assert_eq!(o.reason.as_deref(), Some("claude: error_max_turns"));
        assert_eq!(o.usage.unwrap().input_tokens, 3);
    }

    /// Found by fuzzing (the `claude_stream` target): a subtype with a newline made a
    /// failure reason of two lines.
    #[test]
    fn a_failure_reason_is_one_line() {
        let o = read(
            r#"{"type":"result","subtype":"error\nforged line","result":"first\nsecond"}"#,
            Status::Ok,
        );
        assert_eq!(o.status, Status::Failed);
        assert_eq!(
            o.reason.as_deref(),
            Some("claude: error?forged line: first")
        );
    }

    #[test]
    fn garbage_or_nothing_is_a_failure() {
        let lines = [
            "",
            "not json",
            r#"{"type":"assistant"}"#,
            "{\"type\":\"result\"",
        ];
        for text in lines {
            let o = read(text, Status::Ok);
            assert_eq!(o.status, Status::Failed, "{text}");
            assert_eq!(o.reason.as_deref(), Some("no result from claude"), "{text}");
        }
    }

    #[test]
    fn the_stream_gives_its_last_result_line() {
        let o = read(
            concat!(
                "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s1\"}\n",
                "{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"early\"}\n",
                "{\"type\":\"assistant\",\"message\":{\"content\":[]}}\n",
                "{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"ok\"}\n",
            ),
            Status::Ok,
        );
        assert_eq!((o.status, o.final_text.as_str()), (Status::Ok, "ok"));
        assert_eq!(o.usage.unwrap().cost_usd, None);
        // The session is the one of the init line.
        assert_eq!(o.session.as_deref(), Some("s1"));
        // A session that could not be resumed has no init line: none, though its result
        // line names it.
        let o = read(
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"session_id":"gone","errors":["No conversation found with session ID: gone"]}"#,
            Status::Failed,
        );
        assert_eq!((o.status, o.session), (Status::Failed, None));
        assert_eq!(
            o.reason.as_deref(),
            Some("claude: error_during_execution: No conversation found with session ID: gone")
        );
    }

    #[test]
    fn a_long_stream_keeps_its_head_and_its_result_line() {
        let progress = format!(
            "{{\"type\":\"assistant\",\"text\":\"{}\"}}\n",
            "x".repeat(999)
        );
        let result = r#"{"type":"result","subtype":"success","result":"ok","session_id":"s1"}"#;
        let stream = format!("{}{result}\n", progress.repeat(100));
        let o = read(&stream, Status::Ok);
        assert_eq!(o.final_text, "ok");
        let kept = &o.stdout.text;
        assert!(kept.len() <= MAX_CAPTURE, "{}", kept.len());
        assert!(kept.starts_with(&progress));
        assert!(
            kept.ends_with(&format!("}}\n{result}\n")),
            "whole lines, then the result"
        );
        assert_eq!(o.stdout.cut, (stream.len() - kept.len()) as u64);
        // A short stream is kept as it is.
        let o = read(&format!("{progress}{result}\n"), Status::Ok);
        assert_eq!(
            (o.stdout.text, o.stdout.cut),
            (format!("{progress}{result}\n"), 0)
        );
    }
}
