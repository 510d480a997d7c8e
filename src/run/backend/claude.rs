//! The `claude` backend: Claude Code in print mode (`claude -p --output-format json`), run
//! like an `exec` program (own process group, prompt on stdin, timeout, stop). It gets the
//! agent's MCP configuration alone (`--strict-mcp-config`), the aw tools and the agent's
//! `tools` allowed by name, the model, the system prompt appended to Claude Code's own, and
//! the run limits; its JSON result gives the final text, the turns, tokens and cost.

use std::path::PathBuf;

use serde_json::Value;

use super::exec::run_and_read;
use super::{Backend, RunContext, RunOutcome, Status, Usage};

/// The MCP tools of the aw server, as Claude Code names them in `--allowedTools`.
pub const AW_TOOLS: &str = "mcp__aw";

pub struct Claude {
    /// The `claude` program.
    pub program: String,
    pub model: Option<String>,
    pub system: Option<String>,
    /// Extra tools allowed by name (Claude Code's names: `Read`, `Bash(git diff:*)`, ...).
    pub tools: Vec<String>,
    /// `--max-turns`.
    pub max_turns: Option<u64>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

impl Claude {
    /// The argument vector of one run.
    pub fn argv(&self, ctx: &RunContext) -> Vec<String> {
        let mut v = vec![
            self.program.clone(),
            "-p".into(),
            "--output-format".into(),
            "json".into(),
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
        if let Some(m) = &self.model {
            v.extend(["--model".into(), m.clone()]);
        }
        if let Some(s) = self.system.as_ref().filter(|s| !s.trim().is_empty()) {
            v.extend(["--append-system-prompt".into(), s.clone()]);
        }
        if let Some(n) = self.max_turns {
            v.extend(["--max-turns".into(), n.to_string()]);
        }
        v
    }
}

impl Backend for Claude {
    fn run(&mut self, ctx: &RunContext) -> RunOutcome {
        run_and_read(
            self.argv(ctx),
            &self.env,
            self.cwd.as_ref(),
            ctx,
            read_result,
        )
    }

    fn takes_system_prompt(&self) -> bool {
        true
    }
}

/// Read Claude Code's JSON result from the run's output: status, final text, usage.
fn read_result(out: &mut RunOutcome) {
    let text = std::mem::take(&mut out.final_text);
    // The result is the last JSON object printed (stream-json prints one per line).
    let result: Option<Value> = serde_json::from_str(&text).ok().or_else(|| {
        text.lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
    });
    let Some(r) = result.filter(|r| r["type"] == "result") else {
        out.status = Status::Failed;
        let exit = out
            .reason
            .take()
            .map_or(String::new(), |r| format!(" ({r})"));
        out.reason = Some(format!("claude printed no JSON result{exit}"));
        return;
    };
    out.usage = Some(usage(&r));
    let answer = r["result"].as_str().unwrap_or("").trim().to_string();
    let subtype = r["subtype"].as_str().unwrap_or("unknown");
    if subtype == "success" && r["is_error"] != true && out.status == Status::Ok {
        out.final_text = answer;
        return;
    }
    out.status = Status::Failed;
    let mut why = format!("claude: {subtype}");
    if !answer.is_empty() {
        why.push_str(": ");
        why.push_str(answer.lines().next().unwrap_or(""));
    }
    out.reason = Some(why);
}

fn usage(r: &Value) -> Usage {
    let u = &r["usage"];
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_read_tokens: n("cache_read_input_tokens"),
        cache_write_tokens: n("cache_creation_input_tokens"),
        cost_usd: r["total_cost_usd"].as_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_gives_the_answer_and_the_usage() {
        let mut o = RunOutcome::printed(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"done\n","num_turns":2,"total_cost_usd":0.0125,"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":7}}"#,
            Status::Ok,
        );
        read_result(&mut o);
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
        let mut o = RunOutcome::printed(
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"usage":{"input_tokens":3}}"#,
            Status::Failed,
        );
        read_result(&mut o);
        assert_eq!(o.status, Status::Failed);
        assert_eq!(o.reason.as_deref(), Some("claude: error_max_turns"));
        assert_eq!(o.usage.unwrap().input_tokens, 3);
    }

    #[test]
    fn garbage_or_nothing_is_a_failure() {
        for text in ["", "not json", r#"{"type":"assistant"}"#] {
            let mut o = RunOutcome::printed(text, Status::Ok);
            read_result(&mut o);
            assert_eq!(o.status, Status::Failed, "{text}");
            assert!(o.reason.unwrap().contains("no JSON result"));
        }
    }

    #[test]
    fn stream_json_takes_the_last_result_line() {
        let mut o = RunOutcome::printed(
            "{\"type\":\"system\"}\n{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"ok\"}",
            Status::Ok,
        );
        read_result(&mut o);
        assert_eq!((o.status, o.final_text.as_str()), (Status::Ok, "ok"));
        assert_eq!(o.usage.unwrap().cost_usd, None);
    }
}
