//! The tool loop of the API backends (`anthropic`, `openai`), in process: send the prompt
//! and the tools, run the tools the model calls, send their results, until the model ends
//! its turn. The aw tools are the `aw-mcp` handlers called directly, as the agent.
//!
//! A [`Dialect`] knows one API's shapes (request, answer, tool results); [`Api`] runs the
//! loop the same way for each:
//!
//! - at most `max_steps` model calls per run (a run that needs more fails, its messages
//!   unread);
//! - after every call the usage is added up and the budgets asked: over one, the run stops
//!   there (status `killed`, no tool of that answer runs);
//! - the stop flag and the run's timeout are seen between steps and while a call waits;
//! - the answer's end: `end_turn` ends the run (its text is the final reply); `tool_use`
//!   runs the tools; `pause_turn` sends the conversation again; `max_tokens` ends the run
//!   with the text so far, or fails it when there is none; a refusal fails it.
//!
//! The run's stdout in its transcript is a JSON line per step (what ended it, the tools
//! called and whether they failed, the step's usage).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::files::{FileTool, Sandbox};
use super::http::{CallError, Client};
use super::{Backend, Capture, RunContext, RunOutcome, Status, Usage};
use crate::mcp::Server;
use crate::mcp::tools::Tool;

/// Model calls per run when the agent sets no `max_steps`.
pub const DEFAULT_MAX_STEPS: u64 = 20;
/// Longest tool result sent back, in bytes; the rest is cut with a note.
pub const MAX_TOOL_RESULT: usize = 100 * 1024;

/// How long a call may go without a byte from the service when the agent sets no
/// `idle_timeout`.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(600);

/// What an API agent is built from.
pub struct Settings<'a> {
    /// The model id the API takes.
    pub model: String,
    /// The agent's own system prompt, rendered.
    pub system: Option<String>,
    pub max_tokens: Option<u64>,
    pub max_steps: Option<u64>,
    /// The agent's `env`, rendered: it may give the key and the base URL.
    pub env: &'a [(String, String)],
    pub read_timeout: Duration,
    /// The built-in file tools the agent is given, and the folder they are confined to.
    pub files: Vec<FileTool>,
    pub cwd: PathBuf,
    /// The aw tools the agent gets.
    pub toolset: crate::mcp::tools::Toolset,
}

impl Settings<'_> {
    /// The sandbox of the file tools, when the agent has any.
    pub fn sandbox(&self) -> Result<Option<(Sandbox, Vec<FileTool>)>, String> {
        if self.files.is_empty() {
            return Ok(None);
        }
        let sandbox = Sandbox::new(&self.cwd).map_err(|e| format!("cwd: {e}"))?;
        Ok(Some((sandbox, self.files.clone())))
    }
}

/// `name` from the agent's `env`, else from aw-run's environment; empty counts as unset.
pub fn lookup(env: &[(String, String)], name: &str) -> Option<String> {
    env.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var(name).ok())
        .filter(|v| !v.is_empty())
}

/// The base URL in `var`, else `default`; only http and https.
pub fn base_url(env: &[(String, String)], var: &str, default: &str) -> Result<String, String> {
    let url = lookup(env, var).unwrap_or_else(|| default.to_string());
    if url.starts_with("https://") || url.starts_with("http://") {
        Ok(url)
    } else {
        Err(format!(
            "{var} must start with https:// or http:// (it is '{}')",
            crate::names::sanitize(&url)
        ))
    }
}

/// A tool as the model is told of it.
#[derive(Debug, Clone)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// JSON Schema of its input (an object schema).
    pub schema: Value,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum Finish {
    EndTurn,
    ToolUse,
    MaxTokens,
    PauseTurn,
    Refusal,
    /// Anything else, as the API named it.
    Other(String),
}

/// A tool call of the model.
#[derive(Debug, Clone)]
pub struct Call {
    pub id: String,
    pub name: String,
    /// The input object, or why it could not be read.
    pub input: Result<Map<String, Value>, String>,
}

/// One answer of the model, read.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The assistant message to append to the conversation, as the API wants it back.
    pub message: Value,
    pub text: String,
    pub calls: Vec<Call>,
    pub finish: Finish,
    pub usage: Usage,
}

/// The result of one tool call.
#[derive(Debug, Clone)]
pub struct ToolResult {
    pub id: String,
    pub text: String,
    pub is_error: bool,
}

/// One API's shapes.
pub trait Dialect: Send {
    /// The conversation's first messages, for this prompt.
    fn start(&self, prompt: &str) -> Vec<Value>;
    /// The request body.
    fn body(&self, messages: &[Value], tools: &[ToolDef]) -> Value;
    /// Read an answer.
    fn read(&self, answer: &Value) -> Result<Turn, String>;
    /// The messages that carry the results of a step's tool calls.
    fn results(&self, results: Vec<ToolResult>) -> Vec<Value>;
}

/// A backend that runs the tool loop against one API.
pub struct Api<D: Dialect> {
    pub dialect: D,
    pub client: Client,
    pub max_steps: u64,
    /// The built-in file tools given, and their folder.
    pub files: Option<(Sandbox, Vec<FileTool>)>,
    /// The aw tools given.
    pub toolset: crate::mcp::tools::Toolset,
}

/// The aw tools of `toolset`, for the model.
pub fn aw_tools(toolset: &crate::mcp::tools::Toolset) -> Vec<ToolDef> {
    toolset
        .listed()
        .iter()
        .map(|t| ToolDef {
            name: t.name.to_string(),
            description: t.description.as_deref().unwrap_or("").to_string(),
            schema: Value::Object((*t.input_schema).clone()),
        })
        .collect()
}

/// The system prompt of an API agent: its own, then how to work with the aw tools.
pub fn system_prompt(own: Option<&str>) -> String {
    match own.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => format!("{s}\n\n{}", crate::mcp::INSTRUCTIONS),
        None => crate::mcp::INSTRUCTIONS.to_string(),
    }
}

impl<D: Dialect> Api<D> {
    fn tools(&self) -> Vec<ToolDef> {
        let mut tools = aw_tools(&self.toolset);
        for t in self.files.iter().flat_map(|(_, given)| given) {
            let (description, schema) = t.definition();
            tools.push(ToolDef {
                name: t.name().to_string(),
                description: description.to_string(),
                schema,
            });
        }
        tools
    }

    /// The file tool `name`, when the agent was given it.
    fn file_tool(&self, name: &str) -> Option<(&Sandbox, FileTool)> {
        let (sandbox, given) = self.files.as_ref()?;
        let t = FileTool::from_name(name).filter(|t| given.contains(t))?;
        Some((sandbox, t))
    }

    /// Run one tool call as the agent. `my_inbox` does not wait here: the run would hold
    /// its controller, and aw-run wakes the agent anyway when a message comes.
    fn call(&self, server: &Server, call: &Call) -> ToolResult {
        let input = call.input.clone().map(|mut args| {
            if call.name == Tool::MyInbox.name() {
                args.remove("wait_seconds");
            }
            args
        });
        let outcome = match &input {
            Err(why) => Err(why.clone()),
            Ok(args) => match self.file_tool(&call.name) {
                Some((sandbox, t)) => sandbox.call(t, args).map_err(|e| e.to_string()),
                None => crate::mcp::handlers::call(server, &call.name, args)
                    .map(|r| r.text)
                    .map_err(|e| e.to_string()),
            },
        };
        let (text, is_error) = match outcome {
            Ok(t) => (t, false),
            Err(e) => (format!("Error: {e}"), true),
        };
        ToolResult {
            id: call.id.clone(),
            text: cut(text),
            is_error,
        }
    }
}

/// `text`, at most [`MAX_TOOL_RESULT`] bytes.
fn cut(mut text: String) -> String {
    if text.len() > MAX_TOOL_RESULT {
        let mut end = MAX_TOOL_RESULT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let dropped = text.len() - end;
        text.truncate(end);
        text.push_str(&format!("\n[cut: {dropped} more bytes]"));
    }
    text
}

impl<D: Dialect> Backend for Api<D> {
    fn run(&mut self, ctx: &RunContext) -> RunOutcome {
        let server = Server {
            stop: ctx.stop.clone(),
            tools: self.toolset,
            ..Server::new(ctx.inst.clone(), ctx.agent)
        };
        let tools = self.tools();
        let deadline = ctx.timeout.map(|t| Instant::now() + t);
        let mut messages = self.dialect.start(ctx.prompt);
        let mut usage = Usage::default();
        let mut log = String::new();
        let mut retries = 0;
        let mut out = RunOutcome::new(Status::Ok);
        out.command = vec!["POST".into(), self.client.url.clone()];
        let end = |out: &mut RunOutcome, status: Status, reason: String| {
            out.status = status;
            out.reason = Some(reason);
        };
        let mut step = 0;
        loop {
            if step == self.max_steps {
                end(
                    &mut out,
                    Status::Failed,
                    format!(
                        "max_steps ({}) reached before the model ended its turn",
                        step
                    ),
                );
                break;
            }
            step += 1;
            let body = self.dialect.body(&messages, &tools);
            let answer = match self.client.post(&body, ctx.stop, deadline, &mut retries) {
                Ok(a) => a,
                Err(CallError::Stopped) => {
                    end(&mut out, Status::Killed, "stopped".into());
                    break;
                }
                Err(CallError::Timeout(why)) => {
                    end(&mut out, Status::Timeout, why);
                    break;
                }
                Err(CallError::Failed(why)) => {
                    end(&mut out, Status::Failed, why);
                    break;
                }
            };
            let turn = match self.dialect.read(&answer) {
                Ok(t) => t,
                Err(why) => {
                    end(&mut out, Status::Failed, why);
                    break;
                }
            };
            let implausible = turn.usage.implausible();
            usage.add(&turn.usage.believed());
            let mut record = json!({
                "step": step,
                "finish": finish_name(&turn.finish),
                "usage": turn.usage,
            });
            if !turn.text.is_empty() {
                record["text"] = json!(turn.text);
            }
            messages.push(turn.message.clone());
            if let Some(why) = implausible {
                log_line(&mut log, &record);
                // Counted (at the ceiling), so that a budget trips on it.
                let _ = (ctx.over_budget)(&usage);
                end(&mut out, Status::Failed, why);
                break;
            }
            if let Some(why) = (ctx.over_budget)(&usage) {
                log_line(&mut log, &record);
                end(&mut out, Status::Killed, why);
                break;
            }
            match turn.finish {
                Finish::ToolUse | Finish::Other(_) if !turn.calls.is_empty() => {
                    let results: Vec<ToolResult> =
                        turn.calls.iter().map(|c| self.call(&server, c)).collect();
                    record["tools"] = json!(
                        turn.calls
                            .iter()
                            .zip(&results)
                            .map(|(c, r)| json!({"name": c.name, "error": r.is_error}))
                            .collect::<Vec<_>>()
                    );
                    log_line(&mut log, &record);
                    messages.extend(self.dialect.results(results));
                }
                Finish::PauseTurn => log_line(&mut log, &record),
                Finish::EndTurn | Finish::ToolUse | Finish::Other(_) => {
                    log_line(&mut log, &record);
                    out.final_text = turn.text.trim().to_string();
                    break;
                }
                Finish::MaxTokens => {
                    log_line(&mut log, &record);
                    if turn.text.trim().is_empty() {
                        end(
                            &mut out,
                            Status::Failed,
                            "the answer reached max_tokens before any text".into(),
                        );
                    } else {
                        out.final_text = turn.text.trim().to_string();
                    }
                    break;
                }
                Finish::Refusal => {
                    log_line(&mut log, &record);
                    end(&mut out, Status::Failed, "the model refused".into());
                    break;
                }
            }
            if ctx.stop.is_set() {
                end(&mut out, Status::Killed, "stopped".into());
                break;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                end(&mut out, Status::Timeout, "the run's timeout passed".into());
                break;
            }
        }
        if retries > 0 {
            log_line(&mut log, &json!({"retries": retries}));
        }
        out.stdout = Capture::of(log.as_bytes());
        out.usage = Some(usage);
        out
    }

    fn takes_system_prompt(&self) -> bool {
        true
    }
}

fn log_line(log: &mut String, v: &Value) {
    log.push_str(&v.to_string());
    log.push('\n');
}

fn finish_name(f: &Finish) -> &str {
    match f {
        Finish::EndTurn => "end_turn",
        Finish::ToolUse => "tool_use",
        Finish::MaxTokens => "max_tokens",
        Finish::PauseTurn => "pause_turn",
        Finish::Refusal => "refusal",
        Finish::Other(s) => s,
    }
}

/// A count from a usage object: a missing or non-numeric value counts 0; a number that is
/// not a whole count of at most `u64::MAX` (negative, fractional, too large) counts
/// `u64::MAX`, which [`Usage::implausible`] then refuses.
pub fn count(v: &Value) -> u64 {
    match v {
        Value::Number(n) => n.as_u64().unwrap_or(u64::MAX),
        _ => 0,
    }
}
