//! The tool loop of the API backends (`anthropic`, `openai`), in process: send the prompt
//! and the tools, run the tools the model calls, send their results, until the model ends
//! its turn. The aw tools are [`crate::tools`] called directly, as the agent.
//!
//! A [`Dialect`] knows one API's shapes (request, answer, tool results); [`Api`] runs the
//! loop the same way for each:
//!
//! - at most `max_steps` model calls per run (a run that needs more fails, its messages
//!   unread);
//! - after every call the usage is added up and the budgets asked: over one, the run stops
//!   there (status `killed`, no tool of that answer runs);
//! - the stop flag and the run's timeout are seen between steps and while a call waits;
//! - a tool call of a class that needs an approval (`approve_tools:`, see
//!   [`super::approve_tools`]) waits for it before it runs;
//! - the answer's end: `end_turn` ends the run (its text is the final reply); `tool_use`
//!   runs the tools; `pause_turn` sends the conversation again; `max_tokens` ends the run
//!   with the text so far, or fails it when there is none; a refusal fails it.
//!
//! The run's stdout in its transcript is a JSON line per step (what ended it, the tools
//! called and whether they failed, the step's usage), written to the attempt's live log
//! (redacted) as each step ends, for `aw-ctl runs -f`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::http::{CallError, Client};
use super::{Backend, RunContext, RunOutcome, Status};
use crate::run::capture::Capture;
use crate::tools::files::{FileTool, Sandbox};
use crate::tools::{Caller, INSTRUCTIONS, Tool, Toolset};
use crate::usage::Usage;

/// Model calls per run when the agent sets no `max_steps`.
pub const DEFAULT_MAX_STEPS: u64 = 20;
/// Longest tool result sent back, in bytes; the rest is cut with a note.
pub const MAX_TOOL_RESULT: usize = 100 * 1024;
/// Most tool calls of one answer that are run; each call past them gets an error result
/// instead (the model is told), and the step's record counts them as `refused`.
pub const MAX_TOOL_CALLS: usize = 64;

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
    /// The aw root and the instance directory: the file tools never reach them (nor any
    /// `.git` folder).
    pub aw_root: PathBuf,
    pub instance_dir: PathBuf,
    /// The aw tools the agent gets.
    pub toolset: Toolset,
    /// The tool calls that wait for an approval (`approve_tools:`).
    pub approve: Option<crate::run::workflow::ToolGate>,
}

impl Settings<'_> {
    /// The sandbox of the file tools, when the agent has any.
    pub fn sandbox(&self) -> Result<Option<(Sandbox, Vec<FileTool>)>, String> {
        if self.files.is_empty() {
            return Ok(None);
        }
        let sandbox = Sandbox::new(&self.cwd, &self.aw_root, &self.instance_dir)
            .map_err(|e| format!("cwd: {e}"))?;
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
pub use crate::tools::ToolDef;

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
    /// The fields of an answer (its body, UTF-8) that [`read`](Dialect::read) uses, in the
    /// same shape: the rest is skipped as it is parsed, never held.
    fn parse(&self, body: &[u8]) -> Result<Value, String>;
    /// Read an answer.
    fn read(&self, answer: &Value) -> Result<Turn, String>;
    /// The messages that carry the results of a step's tool calls.
    fn results(&self, results: Vec<ToolResult>) -> Vec<Value>;
    /// The provider, as OpenTelemetry names it (`gen_ai.provider.name`).
    fn provider(&self) -> &'static str;
}

/// A backend that runs the tool loop against one API.
pub struct Api<D: Dialect> {
    pub dialect: D,
    pub client: Client,
    pub max_steps: u64,
    /// The built-in file tools given, and their folder.
    pub files: Option<(Sandbox, Vec<FileTool>)>,
    /// The aw tools given.
    pub toolset: Toolset,
    /// The tool calls that wait for an approval.
    pub approve: Option<crate::run::workflow::ToolGate>,
}

/// The aw tools of `toolset`, for the model.
pub fn aw_tools(toolset: &Toolset) -> Vec<ToolDef> {
    toolset.listed()
}

/// The system prompt of an API agent: its own, then how to work with the aw tools.
pub fn system_prompt(own: Option<&str>) -> String {
    match own.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => format!("{s}\n\n{INSTRUCTIONS}"),
        None => INSTRUCTIONS.to_string(),
    }
}

impl<D: Dialect> Api<D> {
    fn tools(&self) -> Vec<ToolDef> {
        let mut tools = aw_tools(&self.toolset);
        for t in self.files.iter().flat_map(|(_, given)| given) {
            tools.push(t.definition());
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
    fn call(&self, caller: &Caller, call: &Call) -> ToolResult {
        let input = call.input.clone().map(|mut args| {
            if call.name == Tool::MyInbox.name() {
                args.remove("wait_seconds");
            }
            args
        });
        let mut span = crate::otel::genai::tool(&call.name, &caller.agent, caller.inst.name());
        span.set("gen_ai.tool.call.id", call.id.as_str());
        let outcome = match &input {
            Err(why) => Err(why.clone()),
            Ok(args) => match self.file_tool(&call.name) {
                Some((sandbox, t)) => match &self.approve {
                    Some(gate) => super::approve_tools::allow(gate, t, sandbox, caller, args),
                    None => Ok(()),
                }
                .and_then(|()| t.call_as(sandbox, caller, args).map_err(|e| e.to_string())),
                None => crate::tools::call(caller, &call.name, args)
                    .map(|r| r.text)
                    .map_err(|e| e.to_string()),
            },
        };
        let (text, is_error) = match outcome {
            Ok(t) => (t, false),
            Err(e) => (format!("Error: {e}"), true),
        };
        crate::otel::genai::end_tool(span, text.len(), is_error);
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
        (ctx.started)();
        // Made at the start, as a program's is once it runs: `aw-ctl runs -f` finds it.
        let _ = &**ctx.log;
        let deadline = ctx.timeout.and_then(|t| Instant::now().checked_add(t));
        // A tool that waits (`channel_send` with `wait_for`) is stopped by the run's timeout
        // as by a stop.
        let tool_stop = ctx.stop.child();
        let done = crate::process::Stop::default();
        std::thread::scope(|s| {
            if let Some(d) = deadline {
                let (tool_stop, done) = (&tool_stop, &done);
                s.spawn(move || {
                    if done.sleep(d.saturating_duration_since(Instant::now())) {
                        tool_stop.set();
                    }
                });
            }
            let out = self.steps(ctx, deadline, &tool_stop);
            done.set();
            out
        })
    }

    fn takes_system_prompt(&self) -> bool {
        true
    }
}

impl<D: Dialect> Api<D> {
    /// The tool loop of one run; `tool_stop` stops the tools that wait.
    fn steps(
        &mut self,
        ctx: &RunContext,
        deadline: Option<Instant>,
        tool_stop: &crate::process::Stop,
    ) -> RunOutcome {
        let caller = Caller {
            stop: tool_stop.clone(),
            tools: self.toolset,
            ..Caller::new(ctx.inst.clone(), ctx.agent)
        };
        let tools = self.tools();
        let mut messages = self.dialect.start(ctx.prompt.as_str());
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
            let model = body["model"].as_str().unwrap_or_default();
            let mut chat = crate::otel::genai::chat(self.dialect.provider(), model);
            let answer = match self.client.post(&body, ctx.stop, deadline, &mut retries) {
                Ok(a) => a,
                Err(e) => {
                    let (status, why) = match e {
                        CallError::Stopped => (Status::Killed, "stopped".to_string()),
                        CallError::Timeout(why) => (Status::Timeout, why),
                        CallError::Failed(why) => (Status::Failed, why),
                    };
                    // What a service answered may quote a key: the span says only how it ended.
                    chat.set("error.type", status.name());
                    chat.status = crate::otel::Status::Error(status.name().into());
                    end(&mut out, status, why);
                    break;
                }
            };
            chat.set("aw.response_bytes", answer.len() as u64);
            let turn = match self
                .dialect
                .parse(&answer)
                .and_then(|a| self.dialect.read(&a))
            {
                Ok(t) => t,
                Err(why) => {
                    chat.set("error.type", "unreadable_answer");
                    chat.status = crate::otel::Status::Error("the answer could not be read".into());
                    end(&mut out, Status::Failed, why);
                    break;
                }
            };
            crate::otel::genai::usage(&mut chat, &turn.usage);
            chat.set(
                "gen_ai.response.finish_reasons",
                crate::otel::Value::Strs(vec![finish_name(&turn.finish).to_string()]),
            );
            chat.status = crate::otel::Status::Ok;
            chat.end();
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
                log_line(&mut log, ctx, &record);
                // Counted (at the ceiling), so that a budget trips on it.
                let _ = (ctx.over_budget)(&usage);
                end(&mut out, Status::Failed, why);
                break;
            }
            if let Some(why) = (ctx.over_budget)(&usage) {
                log_line(&mut log, ctx, &record);
                end(&mut out, Status::Killed, why);
                break;
            }
            match turn.finish {
                Finish::ToolUse | Finish::Other(_) if !turn.calls.is_empty() => {
                    let (run, refused) = turn.calls.split_at(turn.calls.len().min(MAX_TOOL_CALLS));
                    let mut results: Vec<ToolResult> =
                        run.iter().map(|c| self.call(&caller, c)).collect();
                    record["tools"] = json!(
                        run.iter()
                            .zip(&results)
                            .map(|(c, r)| json!({"name": c.name, "error": r.is_error}))
                            .collect::<Vec<_>>()
                    );
                    if !refused.is_empty() {
                        record["refused"] = json!(refused.len());
                        crate::warn::warn(
                            "aw-run",
                            format!(
                                "{}: an answer called {} tools; {} refused (at most {MAX_TOOL_CALLS} run per answer)",
                                ctx.agent,
                                turn.calls.len(),
                                refused.len()
                            ),
                        );
                        results.extend(refused.iter().map(|c| ToolResult {
                            id: c.id.clone(),
                            text: format!(
                                "Error: refused: more than {MAX_TOOL_CALLS} tool calls in one answer"
                            ),
                            is_error: true,
                        }));
                    }
                    log_line(&mut log, ctx, &record);
                    messages.extend(self.dialect.results(results));
                }
                Finish::PauseTurn => log_line(&mut log, ctx, &record),
                Finish::EndTurn | Finish::ToolUse | Finish::Other(_) => {
                    log_line(&mut log, ctx, &record);
                    out.final_text = turn.text.trim().to_string();
                    break;
                }
                Finish::MaxTokens => {
                    log_line(&mut log, ctx, &record);
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
                    log_line(&mut log, ctx, &record);
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
            log_line(&mut log, ctx, &json!({"retries": retries}));
        }
        if let Some(l) = &**ctx.log {
            l.finish();
        }
        out.stdout = Capture::of(log.as_bytes());
        out.usage = Some(usage);
        out
    }
}

/// Add one record to the run's log, and to the attempt's live log (redacted there) for
/// `aw-ctl runs -f`.
fn log_line(log: &mut String, ctx: &RunContext, v: &Value) {
    let line = format!("{v}\n");
    if let Some(l) = &**ctx.log {
        l.push(crate::run::attempt_log::Stream::Stdout, line.as_bytes());
    }
    log.push_str(&line);
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

/// Parse an answer's `body` into `T`, whose fields are the ones used: what else it holds is
/// skipped, not kept. `service` names the API in the error.
pub fn parse_answer<T: serde::de::DeserializeOwned + serde::Serialize>(
    service: &str,
    body: &[u8],
) -> Result<Value, String> {
    let known: T =
        serde_json::from_slice(body).map_err(|e| format!("{service}: answer is not JSON: {e}"))?;
    serde_json::to_value(known).map_err(|e| format!("{service}: {e}"))
}

/// Typed shapes for answers, lenient as `serde_json::Value` indexing is: a field of an
/// unexpected type reads as absent instead of failing the answer, and what is not kept is
/// skipped with [`IgnoredAny`](serde::de::IgnoredAny).
pub mod loose {
    use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use serde::{Serialize, Serializer};

    /// A value of `T` when the answer has one of its kind (an object for a struct, an array
    /// for a list, a string for a string, an unsigned integer for a count), else none.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Loose<T>(pub Option<T>);

    impl<T> Default for Loose<T> {
        fn default() -> Self {
            Loose(None)
        }
    }

    impl<T> Loose<T> {
        pub fn is_none(&self) -> bool {
            self.0.is_none()
        }
    }

    impl<T: Serialize> Serialize for Loose<T> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            self.0.serialize(s)
        }
    }

    /// What [`Loose`] may hold: how a value of each JSON kind is taken.
    pub trait Kind: Sized {
        fn from_str(_: &str) -> Option<Self> {
            None
        }
        fn from_u64(_: u64) -> Option<Self> {
            None
        }
        fn from_map<'de, A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
            drain_map(map).map(|_| None)
        }
        fn from_seq<'de, A: SeqAccess<'de>>(seq: A) -> Result<Option<Self>, A::Error> {
            drain_seq(seq).map(|_| None)
        }
    }

    fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    impl Kind for String {
        fn from_str(s: &str) -> Option<Self> {
            Some(s.to_string())
        }
    }

    impl Kind for u64 {
        fn from_u64(n: u64) -> Option<Self> {
            Some(n)
        }
    }

    /// A list whose items are each taken loosely (an item of another kind is left out).
    impl<T: Kind> Kind for Vec<T> {
        fn from_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Option<Self>, A::Error> {
            let mut items = Vec::new();
            while let Some(Loose(item)) = seq.next_element::<Loose<T>>()? {
                items.extend(item);
            }
            Ok(Some(items))
        }
    }

    /// The first item of a list, the rest skipped.
    #[derive(Debug, Clone, PartialEq)]
    pub struct First<T>(pub T);

    impl<T: Kind> Kind for First<Loose<T>> {
        fn from_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Option<Self>, A::Error> {
            let first = seq.next_element::<Loose<T>>()?.unwrap_or_default();
            drain_seq(seq)?;
            Ok(Some(First(first)))
        }
    }

    impl<T: Serialize> Serialize for First<T> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeSeq;
            let mut seq = s.serialize_seq(Some(1))?;
            seq.serialize_element(&self.0)?;
            seq.end()
        }
    }

    /// Any JSON value, kept whole (for what must be sent back as it came).
    impl Kind for serde_json::Value {
        fn from_str(s: &str) -> Option<Self> {
            Some(s.into())
        }
        fn from_u64(n: u64) -> Option<Self> {
            Some(n.into())
        }
        fn from_map<'de, A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
            Deserialize::deserialize(de::value::MapAccessDeserializer::new(map)).map(Some)
        }
        fn from_seq<'de, A: SeqAccess<'de>>(seq: A) -> Result<Option<Self>, A::Error> {
            Deserialize::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Some)
        }
    }

    /// A struct of an answer taken loosely from an object.
    #[macro_export]
    #[doc(hidden)]
    macro_rules! loose_struct {
        ($t:ty) => {
            impl $crate::run::backend::api::loose::Kind for $t {
                fn from_map<'de, A: serde::de::MapAccess<'de>>(
                    map: A,
                ) -> Result<Option<Self>, A::Error> {
                    serde::Deserialize::deserialize(serde::de::value::MapAccessDeserializer::new(
                        map,
                    ))
                    .map(Some)
                }
            }
        };
    }

    impl<'de, T: Kind> Deserialize<'de> for Loose<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V<T>(std::marker::PhantomData<T>);
            impl<'de, T: Kind> Visitor<'de> for V<T> {
                type Value = Loose<T>;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("any JSON value")
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                    Ok(Loose(T::from_str(v)))
                }
                fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                    Ok(Loose(T::from_u64(v)))
                }
                fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                    Ok(Loose(u64::try_from(v).ok().and_then(T::from_u64)))
                }
                fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                    Ok(Loose(None))
                }
                fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                    Ok(Loose(None))
                }
                fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                    Ok(Loose(None))
                }
                fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                    Ok(Loose(None))
                }
                fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                    T::from_map(map).map(Loose)
                }
                fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                    T::from_seq(seq).map(Loose)
                }
            }
            d.deserialize_any(V(std::marker::PhantomData))
        }
    }
}
