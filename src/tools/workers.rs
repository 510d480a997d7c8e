//! The collab tools (`aw-mcp --collab`): `spawn_agent`, `send_input`, `wait` and
//! `close_agent`, over [`crate::collab`].

use std::time::Duration;

use serde_json::json;

use super::caller::{Caller, Reply};
use super::messages::entry_line;
use super::params::{self, DEFAULT_COLLAB_WAIT, MAX_COLLAB_WAIT};
use crate::error::Result;

pub(super) fn spawn_agent(s: &Caller, a: params::SpawnAgent) -> Result<Reply> {
    let limits = s.tools.collab.unwrap_or_default();
    let req = crate::collab::SpawnRequest {
        prompt: a.prompt,
        name: a.name,
        backend: a.backend,
        model: a.model,
        system_prompt: a.system_prompt,
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

pub(super) fn send_input(s: &Caller, a: params::SendInput) -> Result<Reply> {
    let agent = &a.agent;
    let e = crate::collab::send_input(&s.inst, &s.agent, agent, &a.message)?;
    Ok(Reply::with(
        format!("Sent to @{agent} as #{}.", e.id),
        serde_json::to_value(&e).expect("entry"),
    ))
}

pub(super) fn wait(s: &Caller, a: params::Wait) -> Result<Reply> {
    let agents = a.agents.0;
    let secs = a
        .timeout_seconds
        .map_or(DEFAULT_COLLAB_WAIT, |t| t.0)
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

pub(super) fn close_agent(s: &Caller, a: params::CloseAgent) -> Result<Reply> {
    let agent = &a.agent;
    let state = crate::collab::close(&s.inst, &s.agent, agent)?;
    Ok(Reply::with(
        format!("@{agent}: {state}."),
        json!({"agent": agent, "state": state}),
    ))
}
