//! Approval of a class of an API agent's tool calls (`approve_tools:` of the workflow): a
//! `write_file` call, every one or those to a path outside some globs, waits for an
//! approval before it runs; rejected (or its time run out), the model gets an error that
//! says who rejected it and why, and the file is not written.
//!
//! The request is keyed by the agent, the path and a checksum of the content: a run started
//! again after aw-run was killed, that makes the same call, finds the same request (and an
//! approval given meanwhile); it is settled once acted on, so the next such call asks anew.

use crate::approval::{Kind, Outcome};
use crate::error::Error;
use crate::lease::glob::Glob;
use crate::run::workflow::{ToolGate, Writes};
use crate::tools::Caller;
use crate::tools::files::{FileTool, Sandbox};

/// How much of the content an approval request shows, in bytes.
const SHOWN: usize = 2000;

/// Whether the call of `tool` with `args` may run under `gate`: `Ok` at once when it is not
/// of the class, else once approved; `Err` (the text for the model) when it was rejected,
/// its time ran out, or the wait was stopped.
pub fn allow(
    gate: &ToolGate,
    tool: FileTool,
    sandbox: &Sandbox,
    caller: &Caller,
    args: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    if tool != FileTool::WriteFile {
        return Ok(());
    }
    let text = |k: &str| args.get(k).and_then(|v| v.as_str());
    // Bad arguments are the tool's to refuse.
    let (Some(given), Some(content)) = (text("path"), text("content")) else {
        return Ok(());
    };
    let Ok(path) = sandbox.tree_path(given) else {
        return Ok(());
    };
    if let Writes::Outside(globs) = &gate.writes
        && globs
            .iter()
            .any(|g| Glob::parse(g).is_ok_and(|g| g.matches(&path)))
    {
        return Ok(());
    }
    let name = format!(
        "{}: write_file {path} ({} bytes)",
        caller.agent,
        content.len()
    );
    let sum = crate::hash::fnv1a(content.as_bytes());
    let key = format!("tool: {} write_file {path} {sum:016x}", caller.agent);
    let mut end = content.len().min(SHOWN);
    while !content.is_char_boundary(end) {
        end -= 1;
    }
    let mut shown = content[..end].to_string();
    if end < content.len() {
        shown.push_str("\n[...]");
    }
    let details = format!("```\n{}\n```", shown.replace("```", "'''"));
    let asked = crate::run::pipeline::ask_and_wait_with(
        &caller.inst,
        Kind::Tool,
        key,
        &name,
        details,
        &gate.gate,
        &caller.stop,
    );
    let (last, outcome) = match asked {
        Ok(done) => done,
        Err(Error::Interrupted) => {
            return Err(format!(
                "write_file {path}: not written: the run was stopped while it waited for \
                     an approval"
            ));
        }
        Err(e) => return Err(format!("write_file {path}: not written: {e}")),
    };
    if outcome == Outcome::Approved {
        return Ok(());
    }
    let why = last.decision.as_ref().map_or(String::new(), |d| {
        let reason = d
            .reason
            .as_deref()
            .map_or(String::new(), |r| format!(": {r}"));
        format!(" by {}{reason}", d.by)
    });
    Err(format!(
        "write_file {path}: not written: approval #{} {}{why}. Do not write it again as \
             it is; change what you do, or ask in the channel.",
        last.id,
        outcome.name()
    ))
}
