//! `aw-ctl inbox-hook`: a Claude Code hook (`Stop`, `SubagentStop`, `PostToolUse`) that keeps
//! a session without channel pushes going while its agent has unread messages.

use serde_json::{Value, json};

use super::{Call, agent_instance};
use crate::cli::Out;
use crate::error::{Error, Result};
use crate::inbox;
use crate::registry::Registry;

/// The most bytes of hook input read (Claude Code sends a small object; `PostToolUse` carries
/// the tool's input and answer).
const MAX_INPUT: usize = 16 << 20;

/// The hook events answered, and how.
const EVENTS: &[&str] = &["Stop", "SubagentStop", "PostToolUse"];

/// `aw-ctl inbox-hook [AGENT[@INSTANCE]]`: reads the hook's JSON on stdin; when the agent has
/// unread messages, prints `{"decision": "block", "reason": ...}` (Claude Code then goes on
/// with the reason as its next instruction), else prints nothing. Never blocks a stop that a
/// stop hook already continued (`stop_hook_active`), nor after the inbox tools themselves.
pub(super) fn inbox_hook(out: &mut Out, c: &Call, args: &[&str]) -> Result<u8> {
    out.exact();
    let addr = match args.first() {
        Some(a) => a.to_string(),
        None => crate::names::agent_from_env().ok_or_else(|| {
            Error::Usage("no agent".into()).hint("pass AGENT[@INSTANCE] or set AW_AGENT")
        })?,
    };
    let (name, inst) = agent_instance(&c.common, &addr)?;
    let input = crate::cli::read_stdin("the hook input", MAX_INPUT, None)?;
    let hook: Value = match input.trim() {
        "" => json!({}),
        text => serde_json::from_str(text)
            .map_err(|e| Error::invalid(format!("the hook input on stdin is not JSON: {e}")))?,
    };
    let Value::Object(hook) = hook else {
        return Err(Error::invalid(
            "the hook input on stdin is not a JSON object",
        ));
    };
    let event = hook
        .get("hook_event_name")
        .and_then(Value::as_str)
        .unwrap_or("Stop");
    if !EVENTS.contains(&event) {
        return Err(Error::invalid(format!(
            "hook event '{}' is not one inbox-hook answers ({})",
            crate::names::sanitize(event),
            EVENTS.join(", ")
        )));
    }
    if hook.get("stop_hook_active").and_then(Value::as_bool) == Some(true) {
        return Ok(0);
    }
    let tool = hook.get("tool_name").and_then(Value::as_str).unwrap_or("");
    if tool.ends_with("my_inbox") || tool.ends_with("my_inbox_ack") {
        return Ok(0);
    }
    inst.require()?;
    if !crate::registry::is_agent(&inst, &name)? {
        return Err(Registry::load(&inst)?.no_agent(&inst, &name));
    }
    let (msgs, _) = inbox::unread(&inst, &name)?;
    let (Some(first), Some(last)) = (msgs.first(), msgs.last()) else {
        return Ok(0);
    };
    let mut senders: Vec<&str> = Vec::new();
    for m in &msgs {
        if !senders.contains(&m.entry.from.as_str()) {
            senders.push(&m.entry.from);
        }
    }
    let n = msgs.len();
    let ids = match n {
        1 => format!("#{}", first.entry.id),
        _ => format!("#{} to #{}", first.entry.id, last.entry.id),
    };
    let reason = format!(
        "You have {n} unread message{} on the aw channel ({ids}, from {}). Read them with \
         my_inbox (or aw-peek --inbox {name}@{}), handle them, then acknowledge them with \
         my_inbox_ack.",
        if n == 1 { "" } else { "s" },
        senders.join(", "),
        inst.name()
    );
    out.line(&json!({"decision": "block", "reason": reason}).to_string())?;
    Ok(0)
}
