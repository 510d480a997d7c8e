//! Tool calls of `aw-mcp`, run on a blocking thread. Every failure is an [`Error`] that the
//! server turns into a tool error result.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::tools::{DEFAULT_REPLY_WAIT, MAX_REPLY_WAIT, MAX_WAIT_SECONDS, Tool};
use super::{Reply, Server};
use crate::channel::{Channel, Entry};
use crate::document::{self, DEFAULT_DOCUMENT};
use crate::error::{Error, Result};
use crate::fs::watch::{FALLBACK_HINT, FileWaiter};
use crate::inbox::{self, InboxMessage};
use crate::mention::Priority;
use crate::post::{self, PostOptions};
use crate::proposal::{self, Choice, NewProposal};
use crate::registry::{Config, Registry};
use crate::{resource, status};

type Args = Map<String, Value>;

/// Dispatch one tool call.
pub fn call(s: &Server, name: &str, a: &Args) -> Result<Reply> {
    let tool: Tool = name.parse()?;
    if !s.tools.has(tool) {
        return Err(Error::not_found(format!(
            "tool '{name}' is not given to {}{}",
            s.agent,
            if tool.is_collab() {
                " (the collab tools need aw-mcp --collab)"
            } else {
                " (it only coordinates: delegate mode)"
            }
        )));
    }
    // Apply proposal expiry on every call: whoever looks next resolves what timed out.
    proposal::refresh(&s.inst)?;
    match tool {
        Tool::ChannelSend => channel_send(s, a),
        Tool::ChannelRead => channel_read(s, a),
        Tool::MyInbox => my_inbox(s, a),
        Tool::MyInboxAck => my_inbox_ack(s, a),
        Tool::MyStatusSet => my_status_set(s, a),
        Tool::TeamMembers => team_members(s, a),
        Tool::TeamDocRead => doc_read(s, a),
        Tool::TeamDocWrite => doc_write(s, a, false),
        Tool::TeamDocAppend => doc_write(s, a, true),
        Tool::TeamDocList => doc_list(s),
        Tool::TeamDocCreate => doc_create(s, a),
        Tool::DocumentSuggest => document_suggest(s, a),
        Tool::TeamProposalCreate => proposal_create(s, a),
        Tool::TeamVote => vote(s, a),
        Tool::TeamProposalStatus => proposal_status(s, a),
        Tool::TeamProposalCancel => proposal_cancel(s, a),
        Tool::ResourceCreate => resource_create(s, a),
        Tool::ResourceRead => resource_read(s, a),
        Tool::SpawnAgent => spawn_agent(s, a),
        Tool::SendInput => send_input(s, a),
        Tool::Wait => wait(s, a),
        Tool::CloseAgent => close_agent(s, a),
    }
}

pub(crate) fn str_arg<'a>(a: &'a Args, key: &str) -> Result<Option<&'a str>> {
    match a.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::invalid(format!("'{key}' must be a string"))),
    }
}

pub(crate) fn req_str<'a>(a: &'a Args, key: &str) -> Result<&'a str> {
    str_arg(a, key)?.ok_or_else(|| Error::invalid(format!("missing required parameter '{key}'")))
}

pub(crate) fn bool_arg(a: &Args, key: &str) -> Result<Option<bool>> {
    match a.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
        Some(_) => Err(Error::invalid(format!("'{key}' must be true or false"))),
    }
}

/// A non-negative integer, given as a JSON number or a string of digits.
fn uint_arg(a: &Args, key: &str) -> Result<Option<u64>> {
    match a.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| Error::invalid(format!("'{key}' must be a non-negative integer"))),
        Some(Value::String(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s
            .parse()
            .map(Some)
            .map_err(|_| Error::invalid(format!("'{key}' is out of range"))),
        Some(_) => Err(Error::invalid(format!(
            "'{key}' must be a non-negative integer (an entry id)"
        ))),
    }
}

fn entry_line(e: &Entry) -> String {
    crate::channel::human_entry(e, None)
}

fn channel_send(s: &Server, a: &Args) -> Result<Reply> {
    let message = req_str(a, "message")?;
    let wait_for = str_arg(a, "wait_for")?;
    let wait = uint_arg(a, "wait_seconds")?;
    let message = match wait_for {
        None if wait.is_some() => {
            return Err(Error::invalid("'wait_seconds' goes with 'wait_for'"));
        }
        None => message.to_string(),
        Some(agent) if agent == s.agent => {
            return Err(Error::invalid(
                "'wait_for' names yourself: you cannot wait for your own reply",
            ));
        }
        Some(agent) => {
            // Checked before anything is sent: waiting for nobody is a trap.
            crate::names::check_agent(agent)?;
            crate::reply::check_served(&s.inst, agent)?;
            post::addressed(message.to_string(), agent)
        }
    };
    let posted = post::post(&s.inst, &s.agent, &message, &PostOptions::default())?;
    let mut text = format!("Sent as #{}", posted.entry.id);
    if !posted.entry.mentions.is_empty() {
        text.push_str(&format!(
            " (mentions: {})",
            post::at_names(&posted.entry.mentions)
        ));
    }
    text.push('.');
    let mut structured = serde_json::to_value(&posted.entry).expect("entry");
    if let Some(warning) = posted.unknown_summary(&s.inst)? {
        text.push_str(&format!(" Warning: {warning}"));
        // Claude Code and Codex show the model the structured content instead of the text:
        // the warning must be there too.
        structured["warning"] = json!(warning);
    }
    if let Some(agent) = wait_for {
        let secs = wait.unwrap_or(DEFAULT_REPLY_WAIT).clamp(1, MAX_REPLY_WAIT);
        let id = posted.entry.id;
        let timeout = Some(Duration::from_secs(secs));
        let reply =
            crate::reply::wait_reply(&s.inst, agent, id, timeout, &s.stop).map_err(|e| {
                Error::No(format!(
                    "sent as #{id}, but {}; a later reply still reaches the channel",
                    e.to_string().trim_end_matches('.')
                ))
            })?;
        text.push_str(&format!("\nReply from @{agent}:"));
        if reply.is_empty() {
            text.push_str(" (none: it handled the message without writing to the channel)");
        }
        for e in &reply {
            text.push_str(&format!("\n{}", entry_line(e)));
        }
        structured["reply"] = serde_json::to_value(&reply).expect("entries");
    }
    Ok(Reply::with(text, structured))
}

fn channel_read(s: &Server, a: &Args) -> Result<Reply> {
    let limit = uint_arg(a, "limit")?.unwrap_or(50).clamp(1, 500) as usize;
    let ch = Channel::new(&s.inst);
    let since = match a.get("since") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) if t.contains('T') || t.contains(':') => {
            // A timestamp: entries strictly after it.
            let t = t.trim().to_string();
            if chrono::DateTime::parse_from_rfc3339(&t).is_err() {
                return Err(Error::invalid(format!(
                    "'since' is neither an entry id nor an ISO 8601 timestamp: {}",
                    crate::names::sanitize(&t)
                )));
            }
            let all = ch.read_all()?;
            let after = all
                .entries
                .iter()
                .take_while(|e| timestamp_le(&e.timestamp, &t))
                .last()
                .map_or(0, |e| e.id);
            Some(after)
        }
        Some(_) => uint_arg(a, "since")?,
    };
    let mut entries = match since {
        Some(id) => {
            let mut v = ch.read_since(id)?.entries;
            v.truncate(limit);
            v
        }
        None => ch.tail(limit)?.entries,
    };
    entries.shrink_to_fit();
    let text = if entries.is_empty() {
        "No entries.".to_string()
    } else {
        entries
            .iter()
            .map(entry_line)
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(Reply::with(text, json!({ "entries": entries })))
}

/// Compare two RFC 3339 timestamps: is `a` at or before `b`?
fn timestamp_le(a: &str, b: &str) -> bool {
    match (
        chrono::DateTime::parse_from_rfc3339(a),
        chrono::DateTime::parse_from_rfc3339(b),
    ) {
        (Ok(x), Ok(y)) => x <= y,
        _ => a <= b,
    }
}

fn inbox_text(msgs: &[InboxMessage]) -> String {
    if msgs.is_empty() {
        return "Inbox empty.".to_string();
    }
    let mut t = format!(
        "## Inbox ({} message{} for you)\n",
        msgs.len(),
        if msgs.len() == 1 { "" } else { "s" }
    );
    for m in msgs {
        let tag = (m.priority == Priority::High).then_some("HIGH");
        t.push_str("- ");
        t.push_str(&crate::channel::human_entry(&m.entry, tag));
        t.push('\n');
    }
    t.push_str(&format!(
        "When handled, call my_inbox_ack {{\"until\": {}}}.",
        msgs.last().map_or(0, |m| m.entry.id)
    ));
    t
}

fn my_inbox(s: &Server, a: &Args) -> Result<Reply> {
    let wait = uint_arg(a, "wait_seconds")?
        .unwrap_or(0)
        .min(MAX_WAIT_SECONDS);
    let (mut msgs, _) = inbox::unread(&s.inst, &s.agent)?;
    if msgs.is_empty() && wait > 0 {
        let deadline = crate::time::deadline(Duration::from_secs(wait));
        let mut waiter = FileWaiter::new(&s.inst.channel_path(), None)?;
        if let Some(why) = waiter.fallback() {
            eprintln!("aw-mcp: warning: {why}");
            eprintln!("hint: {FALLBACK_HINT}");
        }
        loop {
            // Re-read after arming the watch, so a mention in between is not missed.
            (msgs, _) = inbox::unread(&s.inst, &s.agent)?;
            let left = deadline.saturating_duration_since(Instant::now());
            if !msgs.is_empty() || left.is_zero() {
                break;
            }
            waiter.wait(Some(left));
        }
    }
    let text = inbox_text(&msgs);
    let count = msgs.len();
    Ok(Reply::with(
        text,
        json!({ "messages": msgs, "count": count }),
    ))
}

fn my_inbox_ack(s: &Server, a: &Args) -> Result<Reply> {
    let until = uint_arg(a, "until")?
        .ok_or_else(|| Error::invalid("missing required parameter 'until' (an entry id)"))?;
    let cursor = inbox::ack(&s.inst, &s.agent, Some(until))?;
    let (left, _) = inbox::unread(&s.inst, &s.agent)?;
    Ok(Reply::with(
        format!("Acknowledged up to #{cursor}; {} unread left.", left.len()),
        json!({ "cursor": cursor, "unread": left.len() }),
    ))
}

fn my_status_set(s: &Server, a: &Args) -> Result<Reply> {
    let metadata = match a.get("metadata") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.clone()),
    };
    let st = status::set(
        &s.inst,
        &s.agent,
        str_arg(a, "state")?,
        str_arg(a, "task")?,
        metadata,
    )?;
    Ok(Reply::with(
        format!(
            "Status: {}{}",
            st.state,
            st.task
                .as_deref()
                .map(|t| format!(" — {t}"))
                .unwrap_or_default()
        ),
        serde_json::to_value(&st).expect("status"),
    ))
}

fn team_members(s: &Server, a: &Args) -> Result<Reply> {
    let with_status = bool_arg(a, "includeStatus")?.unwrap_or(false);
    let reg = Registry::load(&s.inst)?;
    let members = if with_status {
        status::members(&s.inst, &reg, None)?
    } else {
        Vec::new()
    };
    let owner = Config::load(&s.inst)?.document_owner;
    let mut lines = Vec::new();
    let mut list = Vec::new();
    for (i, ag) in reg.agents.iter().enumerate() {
        let mut v = json!({"name": ag.name, "backend": ag.backend});
        if let Some(m) = &ag.model {
            v["model"] = json!(m);
        }
        let mut line = format!("@{}", ag.name);
        if ag.name == s.agent {
            line.push_str(" (you)");
        }
        if owner.as_deref() == Some(ag.name.as_str()) {
            line.push_str(" (document owner)");
        }
        if let Some(m) = members.get(i) {
            line.push_str(&format!(" [{}] {} unread", m.state, m.unread));
            if let Some(t) = &m.task {
                line.push_str(&format!(" — {t}"));
            }
            v["state"] = json!(m.state);
            v["task"] = json!(m.task);
            v["metadata"] = json!(m.metadata);
            v["unread"] = json!(m.unread);
        }
        lines.push(line);
        list.push(v);
    }
    Ok(Reply::with(
        lines.join("\n"),
        json!({ "agents": list, "you": s.agent, "documentOwner": owner }),
    ))
}

fn file_arg(a: &Args) -> Result<String> {
    Ok(str_arg(a, "file")?.unwrap_or(DEFAULT_DOCUMENT).to_string())
}

fn doc_read(s: &Server, a: &Args) -> Result<Reply> {
    let file = file_arg(a)?;
    let text = document::read(&s.inst, &file)?;
    Ok(Reply::text(text))
}

fn doc_write(s: &Server, a: &Args, append: bool) -> Result<Reply> {
    let file = file_arg(a)?;
    let content = req_str(a, "content")?;
    if append {
        document::append(&s.inst, &file, content, &s.agent)?;
        Ok(Reply::text(format!(
            "Appended {} bytes to {file}.",
            content.len()
        )))
    } else {
        document::write(&s.inst, &file, content, &s.agent)?;
        Ok(Reply::text(format!(
            "Wrote {file} ({} bytes).",
            content.len()
        )))
    }
}

fn doc_list(s: &Server) -> Result<Reply> {
    let docs = if s.inst.exists() {
        document::list(&s.inst)?
    } else {
        Vec::new()
    };
    let text = if docs.is_empty() {
        "No documents.".to_string()
    } else {
        docs.join("\n")
    };
    Ok(Reply::with(text, json!({ "files": docs })))
}

fn doc_create(s: &Server, a: &Args) -> Result<Reply> {
    let file = req_str(a, "file")?;
    let content = req_str(a, "content")?;
    document::create(&s.inst, file, content, &s.agent)?;
    Ok(Reply::text(format!("Created {file}.")))
}

fn document_suggest(s: &Server, a: &Args) -> Result<Reply> {
    let suggestion = req_str(a, "suggestion")?;
    let file = str_arg(a, "file")?;
    if let Some(f) = file {
        document::resolve(&s.inst, f)?;
    }
    let reason = str_arg(a, "reason")?;
    let owner = Config::load(&s.inst)?.document_owner;
    let mut text = match &owner {
        Some(o) => format!("@{o} [DOC_SUGGEST]"),
        None => "[DOC_SUGGEST]".to_string(),
    };
    if let Some(f) = file {
        text.push_str(&format!(" in {f}"));
    }
    text.push('\n');
    text.push_str(suggestion);
    if let Some(r) = reason.filter(|r| !r.trim().is_empty()) {
        text.push_str("\nReason: ");
        text.push_str(r);
    }
    let posted = post::post(&s.inst, &s.agent, &text, &PostOptions::default())?;
    let reply = match &owner {
        Some(o) => format!("Suggestion sent to @{o} as #{}.", posted.entry.id),
        None => format!(
            "Suggestion posted as #{} (no document owner is set: you may also write documents directly).",
            posted.entry.id
        ),
    };
    Ok(Reply::with(
        reply,
        json!({"id": posted.entry.id, "owner": owner}),
    ))
}

fn proposal_create(s: &Server, a: &Args) -> Result<Reply> {
    let kind = req_str(a, "type")?.to_string();
    let title = req_str(a, "title")?.to_string();
    let options = match a.get("options") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|it| match it {
                Value::String(id) => Ok(Choice {
                    id: id.clone(),
                    label: id.clone(),
                }),
                Value::Object(o) => {
                    let id = match o.get("id") {
                        Some(Value::String(id)) => id.clone(),
                        _ => return Err(Error::invalid("every option needs a string 'id'")),
                    };
                    let label = match o.get("label") {
                        Some(Value::String(l)) => l.clone(),
                        _ => id.clone(),
                    };
                    Ok(Choice { id, label })
                }
                _ => Err(Error::invalid("options must be {id, label} objects")),
            })
            .collect::<Result<Vec<_>>>()?,
        Some(_) => return Err(Error::invalid("'options' must be an array of {id, label}")),
    };
    let (rule, quorum, tie_breaker) = match a.get("resolution") {
        None | Some(Value::Null) => (None, None, None),
        Some(Value::Object(r)) => {
            let get = |k: &str| -> Result<Option<String>> {
                match r.get(k) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(_) => Err(Error::invalid(format!("resolution.{k} must be a string"))),
                }
            };
            let quorum = match r.get("quorum") {
                None | Some(Value::Null) => None,
                Some(Value::Number(n)) => Some(
                    n.as_u64()
                        .filter(|&q| q <= u32::MAX as u64)
                        .ok_or_else(|| {
                            Error::invalid("resolution.quorum must be a positive integer")
                        })? as u32,
                ),
                Some(_) => {
                    return Err(Error::invalid(
                        "resolution.quorum must be a positive integer",
                    ));
                }
            };
            (get("type")?, quorum, get("tieBreaker")?)
        }
        Some(_) => {
            return Err(Error::invalid(
                "'resolution' must be an object {type, quorum, tieBreaker}",
            ));
        }
    };
    let new = NewProposal {
        id: str_arg(a, "id")?.map(str::to_string),
        kind,
        title,
        description: str_arg(a, "description")?.map(str::to_string),
        options,
        rule,
        quorum,
        tie_breaker,
        binding: bool_arg(a, "binding")?.unwrap_or(false),
        timeout_seconds: uint_arg(a, "timeoutSeconds")?,
    };
    let p = proposal::create(&s.inst, &s.agent, new)?;
    Ok(Reply::with(
        format!(
            "Created {} ({}): options {}. Announced as [PROPOSAL:{}].",
            p.id,
            p.kind,
            p.options
                .iter()
                .map(|o| o.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            p.id
        ),
        p.to_json(),
    ))
}

fn vote(s: &Server, a: &Args) -> Result<Reply> {
    let id = req_str(a, "proposal")?;
    let choice = req_str(a, "choice")?;
    let p = proposal::vote(&s.inst, &s.agent, id, choice, str_arg(a, "reason")?)?;
    let mut text = format!("Voted on {}. {}", p.id, p.summary());
    if !p.is_active() {
        text.push_str(" — closed.");
    }
    Ok(Reply::with(text, p.to_json()))
}

fn proposal_status(s: &Server, a: &Args) -> Result<Reply> {
    match str_arg(a, "proposal")? {
        Some(id) => {
            let p = proposal::status(&s.inst, id)?;
            Ok(Reply::with(p.summary(), p.to_json()))
        }
        None => {
            let active = proposal::list(&s.inst, true)?;
            let text = if active.is_empty() {
                "No active proposals.".to_string()
            } else {
                active
                    .iter()
                    .map(|p| p.summary())
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            let list: Vec<Value> = active.iter().map(|p| p.to_json()).collect();
            Ok(Reply::with(text, json!({ "proposals": list })))
        }
    }
}

fn proposal_cancel(s: &Server, a: &Args) -> Result<Reply> {
    let p = proposal::cancel(&s.inst, &s.agent, req_str(a, "proposal")?)?;
    Ok(Reply::with(format!("Cancelled {}.", p.id), p.to_json()))
}

fn resource_create(s: &Server, a: &Args) -> Result<Reply> {
    let content = req_str(a, "content")?;
    let kind = str_arg(a, "type")?;
    let id = resource::create(&s.inst, content, kind)?;
    let kind = kind.unwrap_or("markdown");
    Ok(Reply::with(
        format!(
            "Created resource {id} ({kind}, {} bytes); refer to it by its id.",
            content.len()
        ),
        json!({"id": id, "type": kind, "bytes": content.len()}),
    ))
}

fn resource_read(s: &Server, a: &Args) -> Result<Reply> {
    let (content, _kind) = resource::read(&s.inst, req_str(a, "id")?)?;
    Ok(Reply::text(content))
}

fn spawn_agent(s: &Server, a: &Args) -> Result<Reply> {
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

fn send_input(s: &Server, a: &Args) -> Result<Reply> {
    let agent = req_str(a, "agent")?;
    let e = crate::collab::send_input(&s.inst, &s.agent, agent, req_str(a, "message")?)?;
    Ok(Reply::with(
        format!("Sent to @{agent} as #{}.", e.id),
        serde_json::to_value(&e).expect("entry"),
    ))
}

fn wait(s: &Server, a: &Args) -> Result<Reply> {
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
        .unwrap_or(super::tools::DEFAULT_COLLAB_WAIT)
        .clamp(1, super::tools::MAX_COLLAB_WAIT);
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

fn close_agent(s: &Server, a: &Args) -> Result<Reply> {
    let agent = req_str(a, "agent")?;
    let state = crate::collab::close(&s.inst, &s.agent, agent)?;
    Ok(Reply::with(
        format!("@{agent}: {state}."),
        json!({"agent": agent, "state": state}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::Root;

    #[test]
    fn channel_send_warning_is_in_the_structured_content() {
        let d = tempfile::tempdir().unwrap();
        let inst = Root::new(d.path()).instance("t").unwrap();
        let s = Server::new(inst, "alice");
        let mut a = Args::new();
        a.insert("message".into(), json!("@nobody hello"));
        let r = call(&s, "channel_send", &a).unwrap();
        assert!(
            r.text.contains("Warning: @nobody not an agent here"),
            "{}",
            r.text
        );
        let st = r.structured.unwrap();
        assert_eq!(st["from"], "alice");
        let w = st["warning"].as_str().unwrap();
        assert!(w.starts_with("@nobody not an agent here"), "{w}");

        a.insert("message".into(), json!("no mention"));
        let st = call(&s, "channel_send", &a).unwrap().structured.unwrap();
        assert!(st.get("warning").is_none(), "{st}");
    }
}
