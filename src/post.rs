//! Posting a message: validate the sender, resolve mentions against the registry, append.

use crate::channel::{Channel, Damage, Entry};
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::mention;
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
}

/// Is durability requested through the environment (`AW_SYNC=1`)?
pub fn sync_from_env() -> bool {
    matches!(
        std::env::var("AW_SYNC").as_deref(),
        Ok("1") | Ok("true") | Ok("yes")
    )
}

/// Append `text` from `from` to the instance's channel, creating the instance if needed.
pub fn post(inst: &Instance, from: &str, text: &str, opts: &PostOptions) -> Result<Posted> {
    names::check_agent(from)
        .map_err(|_| Error::invalid(format!("invalid sender name '{}'", names::sanitize(from))))?;
    crate::channel::validate_message(text)?;
    let registry = Registry::load(inst)?;
    let (mentions, unknown) = mention::resolve(text, |n| registry.contains(n));
    if opts.strict && !unknown.is_empty() {
        return Err(Error::invalid(format!(
            "unknown agent{} {} in instance '{}' (registered: {})",
            if unknown.len() > 1 { "s" } else { "" },
            unknown
                .iter()
                .map(|u| format!("@{u}"))
                .collect::<Vec<_>>()
                .join(", "),
            inst.name(),
            if registry.agents.is_empty() {
                "none".to_string()
            } else {
                registry.names().join(", ")
            }
        )));
    }
    inst.create()?;
    let (entry, damage) =
        Channel::new(inst).append(from, text, mentions, opts.sync || sync_from_env())?;
    Ok(Posted {
        entry,
        unknown,
        damage,
    })
}
