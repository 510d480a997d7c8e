//! The prompt an agent is shown for one run: its system prompt, its inbox, the recent
//! channel activity, the entry document, and the instructions.

use crate::channel::Entry;
use crate::inbox::InboxMessage;

/// How many recent channel entries a prompt shows.
pub const RECENT: usize = 20;

/// What goes into a prompt.
pub struct PromptParts<'a> {
    pub agent: &'a str,
    pub instance: &'a str,
    pub system: Option<&'a str>,
    pub inbox: &'a [InboxMessage],
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
    if let Some(recent) = p.recent {
        s.push_str("\n## Recent Activity\n\n");
        if recent.is_empty() {
            s.push_str("(none)\n");
        }
        for e in recent {
            s.push_str(&format!("- [{}] @{}: {}\n", e.id, e.from, e.message));
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
