//! Posting a message: validate the sender, resolve mentions against the registry, append.

use super::mention;
use super::{Channel, Damage, Entry};
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::names;
use crate::registry::Registry;

/// Options of a post.
#[derive(Debug, Clone, Default)]
pub struct PostOptions {
    /// Refuse the message when it mentions an unregistered `@name`.
    pub strict: bool,
    /// fdatasync the log before returning (also set by `AW_SYNC=1`).
    pub sync: bool,
}

/// What a post did.
#[derive(Debug)]
pub struct Posted {
    pub entry: Entry,
    /// `@names` in the text that are not registered agents.
    pub unknown: Vec<String>,
    /// Damage found at the tail of the log and worked around, and an index that could not be
    /// updated (the entry is stored all the same).
    pub damage: Vec<Damage>,
    /// Did this post create the instance?
    pub created: bool,
}

impl Posted {
    /// One warning per unknown `@name`, for a person at a terminal.
    pub fn unknown_warnings(&self, inst: &Instance) -> Result<Vec<String>> {
        if self.unknown.is_empty() {
            return Ok(Vec::new());
        }
        let known = registered(&Registry::load(inst)?);
        Ok(self
            .unknown
            .iter()
            .map(|u| {
                format!(
                    "@{u} is not an agent of instance '{}' (registered: {known}); not a mention",
                    inst.name()
                )
            })
            .collect())
    }

    /// Every unknown `@name` in one sentence, for an agent; `None` when all are known.
    pub fn unknown_summary(&self, inst: &Instance) -> Result<Option<String>> {
        if self.unknown.is_empty() {
            return Ok(None);
        }
        let reg = Registry::load(inst)?;
        Ok(Some(format!(
            "{} not an agent here (agents: {}); nobody was notified for it.",
            at_names(&self.unknown),
            names::listed(&reg.names())
        )))
    }
}

/// `@a, @b`.
/// `text` addressed to `agent`: `@agent ` put in front unless the text mentions it already.
pub fn addressed(text: String, agent: &str) -> String {
    if mention::tokens(&text).contains(&agent) {
        text
    } else {
        format!("@{agent} {text}")
    }
}

pub fn at_names(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("@{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The registered agents, or `none`.
fn registered(reg: &Registry) -> String {
    names::listed(&reg.names())
}

/// Is durability requested through the environment (`AW_SYNC=1`)?
pub fn sync_from_env() -> bool {
    matches!(
        std::env::var("AW_SYNC").as_deref(),
        Ok("1") | Ok("true") | Ok("yes")
    )
}

/// Are changes of `inst`'s state that a crash may lose without losing a message flushed to
/// stable storage? Where the channel's appends are (`AW_SYNC=1`), and on a network file
/// system, whose other clients read the files (there an unflushed file renamed into place
/// may reach them before its content). Elsewhere a crash may lose the last of them, as it
/// may lose the channel's last entries: the moves of the ack cursors (those messages are
/// then unread again, delivered twice rather than lost) and the transcripts of the last
/// attempts.
pub fn durable(inst: &Instance) -> bool {
    sync_from_env() || crate::fs::netfs::is_network_fs(&inst.state_dir())
}

/// Append `text` from `from` to the instance's channel, creating the instance if needed.
pub fn post(inst: &Instance, from: &str, text: &str, opts: &PostOptions) -> Result<Posted> {
    check_sender(from)?;
    crate::channel::validate_message(text)?;
    let (mentions, unknown) = resolve(inst, &mut Known::new(), text, opts)?;
    let created = inst.create_new()?;
    let (entry, damage) =
        Channel::new(inst).append(from, text, mentions, opts.sync || sync_from_env())?;
    Ok(Posted {
        entry,
        unknown,
        damage,
        created,
    })
}

/// What [`post_many`] did.
#[derive(Debug)]
pub struct PostedMany {
    /// One outcome per text, in order: the entry posted, or why the text was refused.
    pub posted: Vec<std::result::Result<Posted, Error>>,
    /// Damage found at the tail of the log, and an index that could not be updated.
    pub damage: Vec<Damage>,
}

/// Post `texts` from `from` with one append: each text is checked and its mentions resolved
/// as [`post`] does; a text refused gets its error, and the others are appended together,
/// with dense ids, in order. The instance is created when a text is posted.
pub fn post_many(
    inst: &Instance,
    from: &str,
    texts: Vec<String>,
    opts: &PostOptions,
) -> Result<PostedMany> {
    check_sender(from)?;
    let mut known = Known::new();
    let mut outcomes = Vec::with_capacity(texts.len());
    let mut accepted = Vec::with_capacity(texts.len());
    for text in texts {
        match crate::channel::validate_message(&text)
            .and_then(|()| resolve(inst, &mut known, &text, opts))
        {
            Ok((mentions, unknown)) => {
                outcomes.push(Ok(unknown));
                accepted.push((text, mentions));
            }
            Err(e) => outcomes.push(Err(e)),
        }
    }
    if !accepted.is_empty() {
        inst.create()?;
    }
    let (entries, damage) =
        Channel::new(inst).append_many(from, accepted, opts.sync || sync_from_env())?;
    let mut entries = entries.into_iter();
    let posted = outcomes
        .into_iter()
        .map(|o| {
            o.map(|unknown| Posted {
                entry: entries.next().expect("one entry per accepted text"),
                unknown,
                damage: Vec::new(),
                created: false,
            })
        })
        .collect();
    Ok(PostedMany { posted, damage })
}

fn check_sender(from: &str) -> Result<()> {
    names::check_agent(from)
        .map_err(|_| Error::invalid(format!("invalid sender name '{}'", names::sanitize(from))))
}

/// The names looked up so far, and whether each is an agent.
type Known = std::collections::HashMap<String, bool>;

/// Resolve the mentions of a valid `text`: the mentions, and the `@names` that are not
/// registered agents (refused with `strict`). Each `@name` is looked up in the registry's
/// name index ([`crate::registry::is_agent`]: one small file, whatever the number of
/// agents), once per post: the answers stay in `known` for the next text. The registry is
/// read whole only to name the agents in the error of `strict`.
fn resolve(
    inst: &Instance,
    known: &mut Known,
    text: &str,
    opts: &PostOptions,
) -> Result<(Vec<String>, Vec<String>)> {
    let tokens = mention::tokens(text);
    for t in tokens {
        if !known.contains_key(t) {
            known.insert(t.to_string(), crate::registry::is_agent(inst, t)?);
        }
    }
    let (mentions, unknown) = mention::resolve(text, |n| known.get(n) == Some(&true));
    if opts.strict && !unknown.is_empty() {
        return Err(Error::invalid(format!(
            "unknown agent{} {} in instance '{}' (registered: {})",
            if unknown.len() > 1 { "s" } else { "" },
            at_names(&unknown),
            inst.name(),
            registered(&Registry::load(inst)?)
        )));
    }
    Ok((mentions, unknown))
}
