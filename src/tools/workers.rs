//! The collab tools (`aw-mcp --collab`): `spawn_agent`, `send_input`, `wait` and
//! `close_agent`, over [`crate::collab`].

use std::time::Duration;

use serde_json::{Value, json};

use super::args::{Args, req_str, str_arg, uint_arg};
use super::caller::{Caller, Reply};
use super::catalogue::{DEFAULT_COLLAB_WAIT, MAX_COLLAB_WAIT};
use super::messages::entry_line;
use crate::error::{Error, Result};

pub(super) fn spawn_agent(s: &Caller, a: &Args) -> Result<Reply> {
    let limits = s.tools.collab.unwrap_or_default();
    let req = crate::collab::SpawnRequest {
        prompt: req_str(a, "prompt")?.to_string(),
        name: str_arg(a, "name")?.map(str::to_string),
        backend: str_arg(a, "backend")?.map(str::to_string),
        model: str_arg(a, "model")?.map(str::to_string),
        system_prompt: str_arg(a, "system_prompt")?.map(str::to_string),
    };
    let w = crate::collab::spawn(&s.inst, &s.agent, limits, req)?;
    let mut text = format!(
        "Spawned @{} ({}{}); its task was sent as #{}",
        w.name,
        w.backend,
        w.model
            .as_deref()
            .map(|m| format!(", {m}"))
            .unwrap_or_default(),
        w.prompt_id
    );
    let on = w
        .served_on
        .as_deref()
        .map(|h| format!(" on {h}"))
        .unwrap_or_default();
    match (w.served_by, w.started_server) {
        (Some(pid), true) => text.push_str(&format!("; served by a new aw-run (pid {pid}{on})")),
        (Some(pid), false) => text.push_str(&format!("; served by aw-run pid {pid}{on}")),
        (None, _) => {}
    }
    text.push_str(
        ". Use wait to collect its reply, send_input to follow up, close_agent when done.",
    );
    Ok(Reply::with(text, serde_json::to_value(&w).expect("worker")))
}

pub(super) fn send_input(s: &Caller, a: &Args) -> Result<Reply> {
    let agent = req_str(a, "agent")?;
    let e = crate::collab::send_input(&s.inst, &s.agent, agent, req_str(a, "message")?)?;
    Ok(Reply::with(
        format!("Sent to @{agent} as #{}.", e.id),
        serde_json::to_value(&e).expect("entry"),
    ))
}

pub(super) fn wait(s: &Caller, a: &Args) -> Result<Reply> {
    let agents = match a.get("agents") {
        Some(Value::Array(v)) => v
            .iter()
            .map(|x| match x {
                Value::String(n) => Ok(n.clone()),
                _ => Err(Error::invalid("'agents' must be an array of agent names")),
            })
            .collect::<Result<Vec<_>>>()?,
        Some(Value::String(n)) => vec![n.clone()],
        None | Some(Value::Null) => {
            return Err(Error::invalid("missing required parameter 'agents'"));
        }
        Some(_) => return Err(Error::invalid("'agents' must be an array of agent names")),
    };
    let secs = uint_arg(a, "timeout_seconds")?
        .unwrap_or(DEFAULT_COLLAB_WAIT)
        .clamp(1, MAX_COLLAB_WAIT);
    let (list, done) = crate::collab::wait(
        &s.inst,
        &s.agent,
        &agents,
        Duration::from_secs(secs),
        &s.stop,
    )?;
    let mut text = if done {
        String::from("All done.")
    } else {
        format!("Timed out after {secs} s; not all done.")
    };
    for w in &list {
        text.push_str(&format!("\n@{}: {}", w.agent, w.state));
        if w.unread > 0 {
            text.push_str(&format!(" ({} unread)", w.unread));
        }
        if let Some(st) = &w.status {
            text.push_str(&format!(" [status {st}]"));
        }
        if w.replies.is_empty() {
            text.push_str(" (no reply yet)");
        }
        for e in &w.replies {
            text.push_str(&format!("\n  {}", entry_line(e)));
        }
    }
    Ok(Reply::with(text, json!({"done": done, "agents": list})))
}

pub(super) fn close_agent(s: &Caller, a: &Args) -> Result<Reply> {
    let agent = req_str(a, "agent")?;
    let state = crate::collab::close(&s.inst, &s.agent, agent)?;
    Ok(Reply::with(
        format!("@{agent}: {state}."),
        json!({"agent": agent, "state": state}),
    ))
}
