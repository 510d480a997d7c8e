//! The spans aw writes, with the attributes of OpenTelemetry's GenAI conventions: a run of a
//! workflow (`invoke_workflow`), an attempt of an agent (`invoke_agent`), a call of a model
//! (`chat`), a call of a tool (`execute_tool`). What they say is ids, names, counts, sizes
//! and outcomes: never a prompt, a message or a tool's arguments or result.

use super::{Kind, Span, Status, Value};
use crate::instance::Instance;
use crate::usage::Usage;

/// Begin this aw-run's trace on `inst` (when `on` and `AW_OTEL` allow): the
/// `invoke_workflow` span of workflow `name`, a child of the `TRACEPARENT` aw-run was given
/// if any, made the context of every span and child program of the process.
pub fn workflow(inst: &Instance, name: &str, on: bool) -> Span {
    super::start(inst, "aw-run", on);
    let (parent, state) = super::from_env();
    let mut s = Span::start(format!("invoke_workflow {name}"), Kind::Internal, parent);
    s.set("gen_ai.operation.name", "invoke_workflow");
    s.set("gen_ai.conversation.id", inst.name());
    s.set("aw.workflow", name);
    super::set_root(Some(s.ctx), state);
    s
}

/// End the trace's root span with aw-run's exit code, or the error it stopped on.
pub fn end_workflow(mut s: Span, result: Result<u8, String>) {
    s.status = match result {
        Ok(0) => Status::Ok,
        Ok(code) => {
            s.set("aw.exit_code", u64::from(code));
            Status::Error(format!("exit status {code}"))
        }
        Err(e) => Status::Error(e),
    };
    s.end();
}

/// Begin the spans of aw-mcp for `inst`: written when it was started in a trace (the
/// `TRACEPARENT` aw-run gives an agent's programs), its tool calls then children of that
/// span, or when `AW_OTEL=1` asks for them (each call a trace of its own without a
/// context). A session started by hand writes none unasked: reading the instance leaves it
/// as it was.
pub fn mcp(inst: &Instance) {
    let (parent, state) = super::from_env();
    let asked = std::env::var(super::AW_OTEL).is_ok_and(|v| v.trim() == "1");
    super::start(inst, "aw-mcp", parent.is_some() || asked);
    super::set_root(parent, state);
}

/// What an attempt is: agent `agent` of instance `instance`, run `run`, attempt `attempt`,
/// woken by the entries `woken_by` (and starting from card `card`).
pub struct Attempt<'a> {
    pub agent: &'a str,
    pub instance: &'a str,
    pub run: u64,
    pub attempt: u32,
    pub woken_by: &'a [u64],
    pub card: Option<u64>,
}

/// The `invoke_agent` span of an attempt, a child of the current span (the run's).
pub fn agent(a: &Attempt) -> Span {
    let mut s = Span::op("invoke_agent", a.agent, Kind::Internal);
    s.set("gen_ai.agent.name", a.agent);
    s.set("gen_ai.conversation.id", a.instance);
    s.set("aw.run", a.run);
    s.set("aw.attempt", a.attempt);
    s.set(
        "aw.woken_by",
        Value::Ints(
            a.woken_by
                .iter()
                .map(|&id| i64::try_from(id).unwrap_or(i64::MAX))
                .collect(),
        ),
    );
    if let Some(c) = a.card {
        s.set("aw.card", c);
    }
    s
}

/// Set the usage attributes of a span: tokens, and the cost when known.
pub fn usage(s: &mut Span, u: &Usage) {
    s.set("gen_ai.usage.input_tokens", u.input_tokens);
    s.set("gen_ai.usage.output_tokens", u.output_tokens);
    s.set("gen_ai.usage.cache_read.input_tokens", u.cache_read_tokens);
    s.set(
        "gen_ai.usage.cache_creation.input_tokens",
        u.cache_write_tokens,
    );
    if let Some(c) = u.cost_usd {
        s.set("aw.cost_usd", c);
    }
}

/// End an attempt's span: the size of its prompt (built once the program runs, so known
/// only now), its outcome (`ok`, `failed`, `timeout`, `killed`) and the reason (already
/// redacted) when it did not succeed.
pub fn end_agent(
    mut s: Span,
    prompt_bytes: usize,
    outcome: &str,
    reason: Option<&str>,
    u: Option<&Usage>,
) {
    s.set("aw.prompt_bytes", prompt_bytes as u64);
    if let Some(u) = u {
        usage(&mut s, u);
    }
    s.set("aw.outcome", outcome);
    s.status = match outcome {
        "ok" => Status::Ok,
        _ => {
            s.set("error.type", outcome);
            Status::Error(reason.unwrap_or(outcome).to_string())
        }
    };
    s.end();
}

/// The `chat` span of a call of model `model` at `provider`, a child of the current span.
pub fn chat(provider: &str, model: &str) -> Span {
    let mut s = Span::op("chat", model, Kind::Client);
    s.set("gen_ai.provider.name", provider);
    s.set("gen_ai.request.model", model);
    s
}

/// The `execute_tool` span of a call of tool `tool` by agent `agent` of `instance`, a child
/// of the current span.
pub fn tool(tool: &str, agent: &str, instance: &str) -> Span {
    let mut s = Span::op("execute_tool", tool, Kind::Internal);
    s.set("gen_ai.tool.name", tool);
    s.set("gen_ai.agent.name", agent);
    s.set("gen_ai.conversation.id", instance);
    s
}

/// End a tool's span: the size of its result, and whether it was an error (what it said is
/// not kept).
pub fn end_tool(mut s: Span, result_bytes: usize, error: bool) {
    s.set("aw.result_bytes", result_bytes as u64);
    s.status = match error {
        false => Status::Ok,
        true => {
            s.set("error.type", "tool_error");
            Status::Error("the tool answered with an error".into())
        }
    };
    s.end();
}
