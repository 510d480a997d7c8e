//! The prompt an agent is shown for one run: its system prompt, its inbox, the recent
//! channel activity, the entry document, and the instructions.

use crate::channel::Entry;
use crate::inbox::InboxMessage;

/// How many recent channel entries a prompt shows.
pub const RECENT: usize = 20;

/// The bounds of what one prompt shows of an inbox in full: the newest unread messages,
/// at most [`MAX_INBOX_MESSAGES`] and [`MAX_INBOX_BYTES`] of text, except that the newest
/// unread message is always shown whole, however long (up to the largest message, 4 MiB);
/// the older unread ones are summarised (see [`Inbox`]).
pub use crate::inbox::{MAX_INBOX_BYTES, MAX_INBOX_MESSAGES};

/// Longest recent channel entry a prompt shows whole, in bytes (4 KiB); a longer one is cut
/// with a note (the inbox shows a message for the agent whole).
pub const MAX_RECENT_ENTRY: usize = 4 << 10;

pub use crate::inbox::Older;

/// What a prompt shows of an agent's unread messages: the newest ones in full, at most
/// [`MAX_INBOX_MESSAGES`] and [`MAX_INBOX_BYTES`] of text (at least the newest, whole), and
/// a summary of the older ones.
#[derive(Debug, Default)]
pub struct Inbox {
    /// Shown in full, oldest first.
    pub shown: Vec<InboxMessage>,
    pub older: Option<Older>,
}

impl Inbox {
    /// Pick from `agent`'s unread messages ([`crate::inbox::unread_tail`]): only those
    /// shown are read and held, whatever the number of unread messages. Reading never
    /// acknowledges.
    pub fn unread(inst: &crate::instance::Instance, agent: &str) -> crate::error::Result<Inbox> {
        let (shown, older) =
            crate::inbox::unread_tail(inst, agent, MAX_INBOX_MESSAGES, MAX_INBOX_BYTES)?;
        Ok(Inbox { shown, older })
    }
}

/// `text`, at most [`MAX_RECENT_ENTRY`] bytes of it, with a note of what was cut.
fn cut_recent(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_RECENT_ENTRY {
        return text.into();
    }
    let mut end = MAX_RECENT_ENTRY;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} [cut: {} more bytes]", &text[..end], text.len() - end).into()
}

/// The line that summarises the unread messages older than those shown, and tells how to
/// read them.
fn older_note(agent: &str, instance: &str, o: Older) -> String {
    let (what, ids) = o.describe("older");
    let since = o.first - 1;
    format!(
        "({what} for you, {ids}, not shown here: acknowledged with those below when this run \
         succeeds, they stay in the channel. Read them with the channel_read tool (since: \
         {since}, at most 500 entries a call; yours mention @{agent}) or with \
         `aw-peek -i {instance} --since {since}`.)\n\n"
    )
}

/// What goes into a prompt.
pub struct PromptParts<'a> {
    pub agent: &'a str,
    pub instance: &'a str,
    pub system: Option<&'a str>,
    pub inbox: &'a [InboxMessage],
    /// The unread messages older than those shown, summarised.
    pub older: Option<Older>,
    /// Recent channel entries; `None` without shared context.
    pub recent: Option<&'a [Entry]>,
    /// The entry document's name and text (`None` when it does not exist); `None` without
    /// shared context.
    pub document: Option<(&'a str, Option<&'a str>)>,
    pub attempt: u32,
}

/// Build the prompt text.
pub fn build(p: &PromptParts) -> String {
    let mut s = String::new();
    if let Some(sys) = p.system.filter(|t| !t.trim().is_empty()) {
        s.push_str(sys.trim_end());
        s.push_str("\n\n");
    }
    s.push_str(&format!(
        "You are @{} in the aw workflow instance '{}'.\n\n",
        p.agent, p.instance
    ));
    inbox_section(p, &mut s);
    if let Some(recent) = p.recent {
        s.push_str("\n## Recent Activity\n\n");
        if recent.is_empty() {
            s.push_str("(none)\n");
        }
        for e in recent {
            s.push_str(&format!(
                "- [{}] @{}: {}\n",
                e.id,
                e.from,
                cut_recent(&e.message)
            ));
        }
    }
    if let Some((name, text)) = p.document {
        s.push_str(&format!("\n## Current Workspace\n\nDocument {name}:\n\n"));
        match text {
            Some(t) if !t.is_empty() => {
                s.push_str(t.trim_end());
                s.push('\n');
            }
            _ => s.push_str("(empty)\n"),
        }
    }
    instructions(p, &mut s);
    s
}

/// The prompt of a run that continues the agent's CLI session (`session: keep`): only what
/// is new since its last run (the inbox) and the instructions; the session holds the rest.
pub fn continued(p: &PromptParts) -> String {
    let mut s = format!(
        "New in the aw workflow instance '{}' since your last run, @{}.\n\n",
        p.instance, p.agent
    );
    inbox_section(p, &mut s);
    instructions(p, &mut s);
    s
}

/// The inbox: its heading, the note on the older messages, each message shown.
fn inbox_section(p: &PromptParts, s: &mut String) {
    s.push_str(&format!(
        "## Inbox ({} message{} for you)\n\n",
        p.inbox.len(),
        if p.inbox.len() == 1 { "" } else { "s" }
    ));
    if let Some(o) = p.older {
        s.push_str(&older_note(p.agent, p.instance, o));
    }
    for m in p.inbox {
        let tag = if m.priority == crate::mention::Priority::High {
            " [HIGH]"
        } else {
            ""
        };
        s.push_str(&format!(
            "- From @{}{tag}: {}\n",
            m.entry.from, m.entry.message
        ));
    }
}

/// The instructions, and which attempt of the run this is.
fn instructions(p: &PromptParts, s: &mut String) {
    s.push_str(
        "\n## Instructions\n\n\
         Handle the inbox messages above. Reply on the channel (mention @name to ask an agent \
         something; mention nobody when you are done). Keep replies short; put long content \
         in a document or a resource.\n",
    );
    if p.attempt > 1 {
        s.push_str(&format!(
            "\nThis is attempt {} of this run: the previous attempt failed.\n",
            p.attempt
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::Entry;
    use crate::mention::Priority;

    fn msg(id: u64, len: usize) -> InboxMessage {
        InboxMessage {
            entry: Entry {
                id,
                from: "amy".into(),
                message: "x".repeat(len),
                timestamp: String::new(),
                mentions: vec!["bob".into()],
            },
            unread: true,
            priority: Priority::Normal,
        }
    }

    fn pick(msgs: impl IntoIterator<Item = InboxMessage>) -> Inbox {
        let mut p = crate::inbox::Tail::new(MAX_INBOX_MESSAGES, MAX_INBOX_BYTES);
        msgs.into_iter().for_each(|m| p.push(m));
        let (shown, older) = p.done();
        Inbox { shown, older }
    }

    fn ids(inbox: &Inbox) -> Vec<u64> {
        inbox.shown.iter().map(|m| m.entry.id).collect()
    }

    #[test]
    fn the_newest_messages_are_shown_and_the_older_summarised() {
        let kb = 1 << 10;
        let empty = pick([]);
        assert!(empty.shown.is_empty() && empty.older.is_none());
        // The newest is shown whole, however long.
        let big = pick([msg(1, 1), msg(2, 4 << 20)]);
        assert_eq!(ids(&big), [2]);
        assert_eq!(
            big.older,
            Some(Older {
                count: 1,
                first: 1,
                last: 1
            })
        );
        // By bytes: 40 + 20 KiB fit, a third message does not.
        let by_bytes = pick([msg(3, 30 * kb), msg(5, 40 * kb), msg(8, 20 * kb)]);
        assert_eq!(ids(&by_bytes), [5, 8]);
        // By count: the newest MAX_INBOX_MESSAGES.
        let n = MAX_INBOX_MESSAGES as u64;
        let by_count = pick((1..=n + 7).map(|i| msg(i * 2, 10)));
        assert_eq!(
            ids(&by_count),
            (8..=n + 7).map(|i| i * 2).collect::<Vec<_>>()
        );
        assert_eq!(
            by_count.older,
            Some(Older {
                count: 7,
                first: 2,
                last: 14
            })
        );
    }

    #[test]
    fn the_summary_names_the_count_the_ids_and_how_to_read_them() {
        let inbox = [msg(7, 3 << 20)];
        let text = build(&PromptParts {
            agent: "bob",
            instance: "w",
            system: None,
            inbox: &inbox,
            older: Some(Older {
                count: 3,
                first: 2,
                last: 6,
            }),
            recent: Some(&[inbox[0].entry.clone()]),
            document: None,
            attempt: 1,
        });
        assert!(text.contains("## Inbox (1 message for you)"));
        assert!(text.contains("(3 older unread messages for you, ids 2 to 6, not shown here"));
        assert!(text.contains("channel_read tool (since: 1,"));
        assert!(text.contains("`aw-peek -i w --since 1`"));
        assert!(text.contains(&format!(
            "[cut: {} more bytes]",
            (3 << 20) - MAX_RECENT_ENTRY
        )));
        assert!(text.len() < (3 << 20) + 8192);
        let one = older_note(
            "bob",
            "w",
            Older {
                count: 1,
                first: 4,
                last: 4,
            },
        );
        assert!(one.starts_with("(1 older unread message for you, id 4, not shown"));
    }
}
