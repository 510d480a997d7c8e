//! The message tools: `channel_send` (with its wait for a reply), `channel_read`, `my_inbox`
//! and `my_inbox_ack`.

use std::time::{Duration, Instant};

use serde_json::json;

use super::caller::{Caller, Reply};
use super::params::{self, DEFAULT_REPLY_WAIT, MAX_REPLY_WAIT, MAX_WAIT_SECONDS, Since};
use crate::channel::{Channel, Entry};
use crate::error::{Error, Result};
use crate::fs::watch::{FALLBACK_HINT, FileWaiter};
use crate::inbox::{self, InboxMessage};
use crate::mention::Priority;
use crate::post::{self, PostOptions};

pub(super) fn entry_line(e: &Entry) -> String {
    crate::channel::human_entry(e, None)
}

pub(super) fn channel_send(s: &Caller, a: params::ChannelSend) -> Result<Reply> {
    let message = a.message.as_str();
    let wait_for = a.wait_for.as_deref();
    let wait = a.wait_seconds.map(|w| w.0);
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

pub(super) fn channel_read(s: &Caller, a: params::ChannelRead) -> Result<Reply> {
    let limit = a.limit.map_or(50, |l| l.0).clamp(1, 500) as usize;
    let ch = Channel::new(&s.inst);
    let since = match a.since {
        None => None,
        Some(Since::Time(t)) => {
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
        Some(Since::Id(id)) => Some(id),
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

/// What `my_inbox` answers: the oldest unread messages (see [`inbox::unread_head`]), and
/// a note of the newer ones it leaves for the next call.
fn inbox_text(agent: &str, msgs: &[InboxMessage], newer: Option<inbox::Older>) -> String {
    if msgs.is_empty() {
        return "Inbox empty.".to_string();
    }
    let total = msgs.len() as u64 + newer.map_or(0, |n| n.count);
    let mut t = match newer {
        None => format!(
            "## Inbox ({} message{} for you)\n",
            msgs.len(),
            if msgs.len() == 1 { "" } else { "s" }
        ),
        Some(_) => format!(
            "## Inbox (the oldest {} of {total} unread messages for you)\n",
            msgs.len()
        ),
    };
    for m in msgs {
        let tag = (m.priority == Priority::High).then_some("HIGH");
        t.push_str("- ");
        t.push_str(&crate::channel::human_entry(&m.entry, tag));
        t.push('\n');
    }
    let until = msgs.last().map_or(0, |m| m.entry.id);
    t.push_str(&format!(
        "When handled, call my_inbox_ack {{\"until\": {until}}}."
    ));
    if let Some(n) = newer {
        let (what, ids) = n.describe("newer");
        t.push_str(&format!(
            "\n({what} for you, {ids}, not shown here and not acknowledged by that call: \
             call my_inbox again after my_inbox_ack for the next ones, or read them with \
             channel_read (since: {until}, at most 500 entries a call; yours mention @{agent}).)"
        ));
    }
    t
}

/// At most [`inbox::MAX_INBOX_MESSAGES`] of the oldest unread messages and
/// [`inbox::MAX_INBOX_BYTES`] of their text (at least one, whole); the newer ones are
/// counted, for the next call.
fn inbox_head(s: &Caller) -> Result<(Vec<InboxMessage>, Option<inbox::Older>)> {
    inbox::unread_head(
        &s.inst,
        &s.agent,
        inbox::MAX_INBOX_MESSAGES,
        inbox::MAX_INBOX_BYTES,
    )
}

pub(super) fn my_inbox(s: &Caller, a: params::MyInbox) -> Result<Reply> {
    let wait = a.wait_seconds.map_or(0, |w| w.0).min(MAX_WAIT_SECONDS);
    let (mut msgs, mut newer) = inbox_head(s)?;
    if msgs.is_empty() && wait > 0 {
        let deadline = crate::time::deadline(Duration::from_secs(wait));
        let mut waiter = FileWaiter::new(&s.inst.channel_path(), None)?;
        if let Some(why) = waiter.fallback() {
            eprintln!("aw-mcp: warning: {why}");
            eprintln!("hint: {FALLBACK_HINT}");
        }
        loop {
            // Re-read after arming the watch, so a mention in between is not missed.
            (msgs, newer) = inbox_head(s)?;
            let left = deadline.saturating_duration_since(Instant::now());
            if !msgs.is_empty() || left.is_zero() {
                break;
            }
            waiter.wait(Some(left));
        }
    }
    let text = inbox_text(&s.agent, &msgs, newer);
    let count = msgs.len();
    let mut data = json!({
        "messages": msgs,
        "count": count,
        "unread": count as u64 + newer.map_or(0, |n| n.count),
    });
    if let Some(n) = newer {
        data["more"] = json!({"count": n.count, "first": n.first, "last": n.last});
    }
    Ok(Reply::with(text, data))
}

pub(super) fn my_inbox_ack(s: &Caller, a: params::MyInboxAck) -> Result<Reply> {
    let until = a.until.0;
    let cursor = inbox::ack(&s.inst, &s.agent, Some(until))?;
    // Counted, not read: the unread left may be many.
    let left = inbox::unread_count(&s.inst, &s.agent)?;
    Ok(Reply::with(
        format!("Acknowledged up to #{cursor}; {left} unread left."),
        json!({ "cursor": cursor, "unread": left }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::Root;
    use crate::tools::args::Args;
    use crate::tools::call;

    #[test]
    fn channel_send_warning_is_in_the_structured_content() {
        let d = tempfile::tempdir().unwrap();
        let inst = Root::new(d.path()).instance("t").unwrap();
        let s = Caller::new(inst, "alice");
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
