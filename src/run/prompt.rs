//! The prompt an agent is shown for one run: its system prompt, its inbox, the recent
//! channel activity, the entry document, and the instructions.

use crate::channel::Entry;
use crate::inbox::InboxMessage;

/// How many recent channel entries a prompt shows.
pub const RECENT: usize = 20;

/// Most bytes of inbox messages one prompt shows (4 MiB, the largest message): the oldest
/// unread messages that fit, at least one; the newer ones stay unread, left for the next
/// run (see [`fit`]).
pub const MAX_INBOX_BYTES: usize = crate::channel::MAX_MESSAGE;

/// Longest recent channel entry a prompt shows whole, in bytes (4 KiB); a longer one is cut
/// with a note (the inbox shows a message for the agent whole).
pub const MAX_RECENT_ENTRY: usize = 4 << 10;

/// How many of the oldest `inbox` messages one prompt shows: as many as fit in
/// [`MAX_INBOX_BYTES`], at least one.
pub fn fit(inbox: &[InboxMessage]) -> usize {
    let mut total = 0usize;
    for (i, m) in inbox.iter().enumerate() {
        total = total.saturating_add(m.entry.message.len());
        if total > MAX_INBOX_BYTES && i > 0 {
            return i;
        }
    }
    inbox.len()
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

/// What goes into a prompt.
pub struct PromptParts<'a> {
    pub agent: &'a str,
    pub instance: &'a str,
    pub system: Option<&'a str>,
    pub inbox: &'a [InboxMessage],
    /// Unread messages newer than the inbox shown, left for the next run.
    pub left: usize,
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
    s.push_str(&format!(
        "## Inbox ({} message{} for you)\n\n",
        p.inbox.len(),
        if p.inbox.len() == 1 { "" } else { "s" }
    ));
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
    if p.left > 0 {
        s.push_str(&format!(
            "\n({} newer unread message{} for you did not fit in this prompt: they come in your next run.)\n",
            p.left,
            if p.left == 1 { "" } else { "s" }
        ));
    }
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
    s
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

    #[test]
    fn the_oldest_messages_that_fit_are_shown() {
        let mb = 1 << 20;
        assert_eq!(fit(&[]), 0);
        assert_eq!(fit(&[msg(1, 4 * mb)]), 1);
        assert_eq!(fit(&[msg(1, 4 * mb), msg(2, 1)]), 1);
        assert_eq!(fit(&[msg(1, mb), msg(2, mb), msg(3, 2 * mb), msg(4, 1)]), 3);
        let inbox = [msg(1, 3 * mb), msg(2, 3 * mb)];
        let text = build(&PromptParts {
            agent: "bob",
            instance: "w",
            system: None,
            inbox: &inbox[..1],
            left: 1,
            recent: Some(&[inbox[1].entry.clone()]),
            document: None,
            attempt: 1,
        });
        assert!(text.contains("## Inbox (1 message for you)"));
        assert!(text.contains("(1 newer unread message for you did not fit"));
        assert!(text.contains(&format!("[cut: {} more bytes]", 3 * mb - MAX_RECENT_ENTRY)));
        assert!(text.len() < 3 * mb + 8192);
    }
}
