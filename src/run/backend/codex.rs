//! The `codex` backend: `codex exec --json -`, run like an `exec` program (own process group,
//! prompt on stdin, timeout, idle timeout, stop). The aw MCP server is given as `-c mcp_servers.aw.*`
//! overrides (required, its tools approved), so the user's configuration files are never
//! edited. The event stream gives the final text (the last agent message), the failure
//! (`turn.failed`, `error`), the tokens (`turn.completed`, summed over turns) and the
//! session (`thread.started`): a kept session (`session: keep`) is continued with `codex exec
//! ... resume ID -`. The tokens of a resumed thread are its whole (those of the runs before
//! too): a run counts what they grew by since the last. Codex reports no cost.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::exec::{Exec, LineReader, fail_keeping_exit, run_and_read};
use super::{Backend, RunContext, RunOutcome, Status};
use crate::usage::Usage;

pub struct Codex {
    /// The `codex` program.
    pub program: String,
    pub model: Option<String>,
    /// The `mcp_servers.aw` keys and their TOML values.
    pub mcp_keys: Vec<(&'static str, String)>,
    /// Kill a run that writes nothing for this long.
    pub idle_timeout: Duration,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Only coordinating: no shell tool, and a read-only sandbox for the rest.
    pub delegate: bool,
}

/// What a delegate agent's Codex is run with (each after `-c`): no shell tool and none of
/// Codex's own sub-agent tools; `--sandbox read-only` covers what is left.
pub const DELEGATE_KEYS: [&str; 2] = ["features.shell_tool=false", "agents.enabled=false"];

impl Codex {
    /// The argument vector of one run, continuing the session `resume` when given.
    pub fn argv(&self, resume: Option<&str>) -> Vec<String> {
        let mut v = vec![self.program.clone(), "exec".into(), "--json".into()];
        let dir = self
            .cwd
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default();
        if !in_git_repository(&dir) {
            v.push("--skip-git-repo-check".into());
        }
        for (k, val) in &self.mcp_keys {
            v.extend(["-c".into(), format!("mcp_servers.aw.{k}={val}")]);
        }
        if self.delegate {
            for key in DELEGATE_KEYS {
                v.extend(["-c".into(), key.into()]);
            }
            v.extend(["--sandbox".into(), "read-only".into()]);
        }
        if let Some(m) = &self.model {
            v.extend(["-m".into(), m.clone()]);
        }
        if let Some(id) = resume {
            v.extend(["resume".into(), id.to_string()]);
        }
        // The prompt comes on stdin.
        v.push("-".into());
        v
    }
}

/// Is `dir` inside a Git working tree (a `.git` in it or a parent)?
fn in_git_repository(dir: &Path) -> bool {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    dir.ancestors().any(|d| d.join(".git").exists())
}

impl Backend for Codex {
    fn run(&mut self, ctx: &RunContext) -> RunOutcome {
        let exec = Exec {
            argv: self.argv(ctx.resume.map(|k| k.id.as_str())).into(),
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            idle_timeout: Some(self.idle_timeout),
        };
        let mut events = Events {
            before: ctx.resume.and_then(|k| k.total.clone()),
            ..Events::default()
        };
        run_and_read(&exec, ctx, &mut events)
    }
}

/// What Codex's JSON Lines events told so far.
#[derive(Default)]
struct Events {
    usage: Usage,
    last_message: Option<String>,
    failure: Option<String>,
    turns: u64,
    /// The thread (session) id `thread.started` gave.
    thread: Option<String>,
    /// The thread's tokens before this run, when it resumes one.
    before: Option<Usage>,
}

impl Events {
    /// This run's share of the thread's tokens `total`: what they grew by since `before`
    /// (all of them when they did not grow from it: another thread).
    fn own(&self, total: &Usage) -> Usage {
        match &self.before {
            Some(b)
                if total.input_tokens >= b.input_tokens
                    && total.output_tokens >= b.output_tokens
                    && total.cache_read_tokens >= b.cache_read_tokens =>
            {
                total.minus(b)
            }
            _ => total.clone(),
        }
    }
}

impl LineReader for Events {
    fn spent(&self) -> Option<Usage> {
        (self.turns > 0).then(|| self.own(&self.usage))
    }

    fn line(&mut self, line: &[u8]) {
        let Ok(e) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        match e["type"].as_str() {
            Some("thread.started") => self.thread = e["thread_id"].as_str().map(str::to_string),
            Some("turn.completed") => {
                self.turns += 1;
                add_usage(&mut self.usage, &e["usage"]);
            }
            Some("turn.failed") => {
                add_usage(&mut self.usage, &e["usage"]);
                self.failure = Some(message(&e["error"]));
            }
            Some("error") => self.failure = Some(message(&e)),
            Some("item.completed") => {
                let item = &e["item"];
                let kind = item["type"].as_str().or(item["item_type"].as_str());
                if kind == Some("agent_message") {
                    self.last_message = item["text"].as_str().map(|t| t.trim().to_string());
                }
            }
            _ => {}
        }
    }

    /// Status, final text and usage from the events.
    fn finish(&mut self, out: &mut RunOutcome) {
        out.session = self.thread.take();
        out.usage = Some(self.own(&self.usage));
        // A run that reported no tokens leaves the thread's total as it was.
        out.session_total = Some(std::mem::take(&mut self.usage)).filter(|u| u.tokens() > 0);
        if let Some(why) = self.failure.take() {
            out.status = Status::Failed;
            out.reason = Some(format!("codex: {why}"));
        } else if self.turns == 0 {
            fail_keeping_exit(out, "codex completed no turn");
        } else if out.status == Status::Ok {
            out.final_text = self.last_message.take().unwrap_or_default();
        }
    }
}

/// Codex counts cached input inside `input_tokens`; [`Usage`] keeps them apart, so that
/// each is priced once.
fn add_usage(u: &mut Usage, v: &Value) {
    let n = |k: &str| super::api::count(&v[k]);
    let cached = n("cached_input_tokens");
    u.add(&Usage {
        input_tokens: n("input_tokens").saturating_sub(cached),
        output_tokens: n("output_tokens"),
        cache_read_tokens: cached,
        ..Usage::default()
    });
}

fn message(v: &Value) -> String {
    v["message"]
        .as_str()
        .unwrap_or("failed")
        .lines()
        .next()
        .unwrap_or("failed")
        .to_string()
}

/// What a run makes of `stdout` printed by the program, the run having ended with
/// `status` (the entry point of the fuzz target of this reader).
#[doc(hidden)]
pub fn read_stream(stdout: &[u8], status: Status) -> RunOutcome {
    super::exec::read_stream(&mut Events::default(), stdout, status)
}

#[cfg(test)]
mod tests {
    use super::super::exec::read_printed;
    use super::*;

    fn read(stdout: &str, status: Status) -> RunOutcome {
        read_printed(&mut Events::default(), stdout, status)
    }

    #[test]
    fn turns_give_the_last_agent_message_and_summed_tokens() {
        let o = read(
            concat!(
                "{\"type\":\"thread.started\",\"thread_id\":\"t1\"}\n",
                "{\"type\":\"item.completed\",\"item\":{\"id\":\"i0\",\"type\":\"agent_message\",\"text\":\"first\"}}\n",
                "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":10,\"cached_input_tokens\":4,\"output_tokens\":2}}\n",
                "{\"type\":\"item.completed\",\"item\":{\"id\":\"i1\",\"item_type\":\"agent_message\",\"text\":\"@user done\\n\"}}\n",
                "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":5,\"cached_input_tokens\":1,\"output_tokens\":3}}\n",
            ),
            Status::Ok,
        );
        assert_eq!(
            (o.status, o.final_text.as_str()),
            (Status::Ok, "@user done")
        );
        let u = o.usage.unwrap();
        assert_eq!(
            (u.input_tokens, u.cache_read_tokens, u.output_tokens),
            (10, 5, 5)
        );
        assert_eq!(u.cost_usd, None);
        assert_eq!(o.session.as_deref(), Some("t1"));
    }

    #[test]
    fn a_resumed_thread_counts_what_its_tokens_grew_by() {
        let turn = concat!(
            r#"{"type":"thread.started","thread_id":"t1"}"#,
            "\n",
            r#"{"type":"turn.completed","usage":{"input_tokens":40,"cached_input_tokens":10,"output_tokens":20}}"#,
        );
        let before = |input, output| Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        };
        let read_after = |b: Usage| {
            let mut e = Events {
                before: Some(b),
                ..Events::default()
            };
            read_printed(&mut e, turn, Status::Ok)
        };
        let o = read_after(before(20, 15));
        let u = o.usage.unwrap();
        assert_eq!(
            (u.input_tokens, u.cache_read_tokens, u.output_tokens),
            (10, 10, 5)
        );
        assert_eq!(o.session_total.unwrap().input_tokens, 30);
        // Fewer tokens than before: another thread, counted whole.
        let u = read_after(before(50, 15)).usage.unwrap();
        assert_eq!((u.input_tokens, u.output_tokens), (30, 20));
    }

    #[test]
    fn a_failed_turn_or_an_error_fails_the_run() {
        let o = read(
            "{\"type\":\"turn.failed\",\"error\":{\"message\":\"stream disconnected\\nmore\"}}",
            Status::Ok,
        );
        assert_eq!(o.status, Status::Failed);
        assert_eq!(o.reason.as_deref(), Some("codex: stream disconnected"));
        let o = read("{\"type\":\"error\",\"message\":\"quota\"}", Status::Failed);
        assert_eq!(o.reason.as_deref(), Some("codex: quota"));
        let o = read("garbage", Status::Ok);
        assert_eq!(o.status, Status::Failed);
        assert!(o.reason.unwrap().starts_with("codex completed no turn"));
    }
}
