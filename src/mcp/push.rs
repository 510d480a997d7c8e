//! Pushing channel entries into a live Claude Code session (`aw-mcp --channel`): the
//! experimental `claude/channel` capability and its `notifications/claude/channel` events.
//!
//! - Nothing is pushed before the client said `notifications/initialized` and [`SETTLE`] has
//!   passed (a push 1 ms after it was seen lost, 50 ms after it arrive).
//! - Each new entry that mentions the agent (with `--channel-all`, every entry), not written
//!   by the agent, is pushed once: the watch keeps the id of the last entry it read, in
//!   memory. A new session starts from the newest entry when it starts.
//! - Pushes are at least [`GAP`] apart: what arrives meanwhile is folded into the next push,
//!   so that a flood costs a session one short message a second, not one turn an entry.
//! - Texts are cut at [`MAX_PUSH`] bytes, with the id to fetch the rest.
//! - A push is not an acknowledgement: the inbox cursor is never moved. The unread mentions
//!   from before the session started are announced once, as one summary.
//!
//! The watch runs on a thread of its own with the channel's [`FileWaiter`] (inotify, and a
//! poll on a network file system); its pushes go through the server's peer, so they reach
//! standard output through the one writer the answers use.

use std::time::{Duration, Instant};

use rmcp::model::{CustomNotification, ProtocolVersion, ServerNotification};
use rmcp::service::{Peer, RoleServer};
use serde_json::{Map, Value, json};

use crate::channel::{Channel, Entry};
use crate::fs::watch::FileWaiter;
use crate::inbox;
use crate::instance::Instance;
use crate::mention::{self, Priority};

/// The JSON-RPC method of a push.
pub const METHOD: &str = "notifications/claude/channel";

/// The experimental capability that makes Claude Code listen for pushes.
pub const CAPABILITY: &str = "claude/channel";

/// The newest protocol revision answered in channel mode: Claude Code delivers no pushes
/// to a session that negotiated 2026-07-28.
pub const REVISION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// How long after `notifications/initialized` the first push waits.
pub const SETTLE: Duration = Duration::from_millis(100);

/// The least time between two pushes.
pub const GAP: Duration = Duration::from_secs(1);

/// The most bytes of text in one push; the rest is named by id, to fetch.
pub const MAX_PUSH: usize = 2000;

/// Which entries are pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Entries that mention the agent.
    Mentions,
    /// Every entry.
    All,
}

/// Environment variable that turns channel mode on: `mentions` (or `1`), `all`, or `0`.
pub const ENV: &str = "AW_CHANNEL";

/// The scope `AW_CHANNEL` asks for, if any.
pub fn scope_from_env() -> std::result::Result<Option<Scope>, String> {
    let Some(v) = std::env::var_os(ENV) else {
        return Ok(None);
    };
    match v.to_str() {
        Some("" | "0" | "off") => Ok(None),
        Some("1" | "mentions" | "on") => Ok(Some(Scope::Mentions)),
        Some("all") => Ok(Some(Scope::All)),
        _ => Err(format!(
            "{ENV}: '{}' is not one of mentions, all, 0",
            v.to_string_lossy()
        )),
    }
}

/// What the watch of one session knows.
pub struct Watch {
    pub inst: Instance,
    pub agent: String,
    pub scope: Scope,
    /// The newest entry when the server started: what is newer is pushed one by one, what is
    /// older and unread is summarised.
    pub start: u64,
}

impl Watch {
    /// Does `e` get pushed?
    fn wants(&self, e: &Entry) -> bool {
        e.from != self.agent && (self.scope == Scope::All || inbox::is_for(e, &self.agent))
    }

    /// Watch the channel and push, until the client is gone. Runs on its own thread.
    pub fn run(self, peer: Peer<RoleServer>, rt: tokio::runtime::Handle) {
        let send = |params: Value| {
            let n = CustomNotification::new(METHOD, Some(params));
            rt.block_on(peer.send_notification(ServerNotification::CustomNotification(n)))
                .is_ok()
        };
        if let Err(e) = self.serve(send) {
            eprintln!("aw-mcp: channel push stopped: {e}");
        }
    }

    fn serve(&self, mut send: impl FnMut(Value) -> bool) -> crate::Result<()> {
        std::thread::sleep(SETTLE);
        let ch = Channel::new(&self.inst);
        // Armed before the first read, so that nothing appended in between is missed.
        let mut waiter = FileWaiter::new(ch.log_path(), None)?;
        let mut last_push: Option<Instant> = None;
        if let Some(summary) = self.summary()? {
            if !send(summary) {
                return Ok(());
            }
            last_push = Some(Instant::now());
        }
        let mut after = self.start;
        let mut pending: Vec<Entry> = Vec::new();
        let mut failing = false;
        loop {
            let batch = match ch.read_since(after) {
                Ok(b) => b,
                // A channel that cannot be read now (permissions, a full disk being repaired):
                // said once, tried again on the next change or after a gap.
                Err(e) => {
                    if !std::mem::replace(&mut failing, true) {
                        eprintln!("aw-mcp: channel push: {e}; trying again");
                    }
                    waiter.wait(Some(GAP));
                    continue;
                }
            };
            failing = false;
            if let Some(e) = batch.entries.last() {
                after = e.id;
            }
            pending.extend(batch.entries.into_iter().filter(|e| self.wants(e)));
            let wait = last_push.map_or(Duration::ZERO, |t| GAP.saturating_sub(t.elapsed()));
            if !pending.is_empty() && wait.is_zero() {
                if !send(self.params(&std::mem::take(&mut pending))) {
                    return Ok(());
                }
                last_push = Some(Instant::now());
                continue;
            }
            waiter.wait((!pending.is_empty()).then_some(wait));
        }
    }

    /// The one push announcing the unread mentions from before the session, if any.
    fn summary(&self) -> crate::Result<Option<Value>> {
        let (msgs, _, _) = inbox::unread_with_last(&self.inst, &self.agent)?;
        let old: Vec<&inbox::InboxMessage> =
            msgs.iter().filter(|m| m.entry.id <= self.start).collect();
        let (Some(first), Some(last)) = (old.first(), old.last()) else {
            return Ok(None);
        };
        let mut senders: Vec<(&str, usize)> = Vec::new();
        for m in &old {
            match senders.iter_mut().find(|(s, _)| *s == m.entry.from) {
                Some((_, n)) => *n += 1,
                None => senders.push((&m.entry.from, 1)),
            }
        }
        let from: Vec<String> = senders.iter().map(|(s, n)| format!("{s} ({n})")).collect();
        let n = old.len();
        let content = bounded(format!(
            "{n} unread message{} for you from before this session (#{} to #{}), from {}. \
             Read them with my_inbox; this notice does not mark them read.",
            if n == 1 { "" } else { "s" },
            first.entry.id,
            last.entry.id,
            from.join(", ")
        ));
        let high = old.iter().any(|m| m.priority == Priority::High);
        let names: Vec<&str> = senders.iter().map(|(s, _)| *s).collect();
        let meta = self.meta(&names.join(","), last.entry.id, first.entry.id, n, high);
        Ok(Some(json!({"content": content, "meta": meta})))
    }

    /// The push of `entries` (at least one): the text of one, or a list of several.
    fn params(&self, entries: &[Entry]) -> Value {
        let first = &entries[0];
        let last = &entries[entries.len() - 1];
        let high = entries
            .iter()
            .any(|e| mention::priority(&e.message, e.mentions.len()) == Priority::High);
        if entries.len() == 1 {
            let content = cut(&first.message, first.id);
            let meta = self.meta(&first.from, first.id, first.id, 1, high);
            return json!({"content": content, "meta": meta});
        }
        let mut senders: Vec<&str> = Vec::new();
        for e in entries {
            if !senders.contains(&e.from.as_str()) {
                senders.push(&e.from);
            }
        }
        let content = listed(entries);
        let meta = self.meta(&senders.join(","), last.id, first.id, entries.len(), high);
        json!({"content": content, "meta": meta})
    }

    /// The `meta` of a push: plain identifier keys, string values.
    fn meta(&self, from: &str, id: u64, first: u64, count: usize, high: bool) -> Value {
        let mut m = Map::new();
        m.insert("from".into(), from.into());
        m.insert("id".into(), id.to_string().into());
        m.insert("instance".into(), self.inst.name().into());
        if count > 1 {
            m.insert("first".into(), first.to_string().into());
            m.insert("count".into(), count.to_string().into());
        }
        if high {
            m.insert("priority".into(), "high".into());
        }
        Value::Object(m)
    }
}

/// How to fetch entry `id` whole.
fn fetch_hint(id: u64) -> String {
    format!(
        "read it whole with my_inbox, or channel_read with since {}",
        id - 1
    )
}

/// The text of entry `id`, cut at [`MAX_PUSH`] bytes with how to fetch the rest.
fn cut(text: &str, id: u64) -> String {
    if text.len() <= MAX_PUSH {
        return text.to_string();
    }
    let note = format!(
        "\n[message #{id} cut at {} of {} bytes: {}]",
        MAX_PUSH - 200,
        text.len(),
        fetch_hint(id)
    );
    format!("{}{note}", prefix(text, MAX_PUSH - 200))
}

/// Several entries as a list, one line each, within [`MAX_PUSH`] bytes; entries that do not
/// fit are named by id.
fn listed(entries: &[Entry]) -> String {
    const LINE: usize = 160;
    let mut s = format!("{} new messages:", entries.len());
    let mut shown = 0;
    for e in entries {
        let one: String = e
            .message
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let text = prefix(&one, LINE);
        let more = if text.len() < one.len() { "..." } else { "" };
        let line = format!("\n#{} {}: {text}{more}", e.id, e.from);
        if s.len() + line.len() > MAX_PUSH - 300 {
            break;
        }
        s.push_str(&line);
        shown += 1;
    }
    let rest = &entries[shown..];
    if let (Some(a), Some(b)) = (rest.first(), rest.last()) {
        let ids = if rest.len() <= 20 {
            let ids: Vec<String> = rest.iter().map(|e| format!("#{}", e.id)).collect();
            ids.join(" ")
        } else {
            format!("#{} to #{}", a.id, b.id)
        };
        s.push_str(&format!(
            "\n... and {} more ({ids}): read them with my_inbox or channel_read with since {}",
            rest.len(),
            a.id - 1
        ));
    } else if entries.iter().any(|e| e.message.chars().count() > LINE) {
        s.push_str("\n(lines cut: read the messages whole with my_inbox)");
    }
    bounded(s)
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` cut to [`MAX_PUSH`] bytes.
fn bounded(s: String) -> String {
    match prefix(&s, MAX_PUSH).len() {
        n if n == s.len() => s,
        n => s[..n].to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, text: &str) -> Entry {
        Entry {
            id,
            timestamp: String::new(),
            from: "amy".into(),
            message: text.into(),
            mentions: vec!["bob".into()],
        }
    }

    #[test]
    fn a_long_text_is_cut_within_the_bound_with_its_id() {
        let t = "é".repeat(3000);
        let c = cut(&t, 7);
        assert!(c.len() <= MAX_PUSH, "{}", c.len());
        assert!(c.contains("message #7 cut"), "{c}");
        assert_eq!(cut("short", 7), "short");
    }

    #[test]
    fn a_list_stays_within_the_bound_and_names_every_id() {
        let es: Vec<Entry> = (1..=500).map(|i| entry(i, &"x".repeat(300))).collect();
        let s = listed(&es);
        assert!(s.len() <= MAX_PUSH, "{}", s.len());
        assert!(s.starts_with("500 new messages:"));
        assert!(s.contains("#1 amy: "), "{s}");
        assert!(s.contains("to #500"), "{s}");
    }
}
