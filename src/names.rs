//! Names and addresses: instance names, agent names, `agent@instance`, `@instance`.

use crate::error::{Error, Result};

/// Longest name accepted for an agent or an instance.
pub const MAX_NAME: usize = 64;

/// The instance used when none is named.
pub const DEFAULT_INSTANCE: &str = "default";

/// Senders that need no registration.
pub const RESERVED_SENDERS: [&str; 2] = ["user", "system"];

/// The agent named by `AW_AGENT` (`NAME` or `NAME@INSTANCE`, as given), when it is set and
/// not empty.
pub fn agent_from_env() -> Option<String> {
    std::env::var("AW_AGENT").ok().filter(|v| !v.is_empty())
}

/// Who acts when no sender is given: the name part of `AW_AGENT`, else `user`.
pub fn sender_from_env() -> String {
    match agent_from_env() {
        Some(v) => v.split('@').next().unwrap_or("user").to_string(),
        None => "user".to_string(),
    }
}

fn valid(name: &str, digit_first: bool) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let first_ok = first.is_ascii_alphabetic() || (digit_first && first.is_ascii_digit());
    name.len() <= MAX_NAME
        && first_ok
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Is `name` a valid agent name (`[A-Za-z][A-Za-z0-9_-]*`)?
pub fn is_agent_name(name: &str) -> bool {
    valid(name, false)
}

/// Is `name` a valid instance name (an agent name that may also start with a digit)?
pub fn is_instance_name(name: &str) -> bool {
    valid(name, true)
}

/// Make a name safe to echo in an error message: control characters and bidirectional
/// overrides become `?`.
pub fn sanitize(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(80)
        .map(|c| {
            if c.is_control() || crate::term::is_bidi_control(c) {
                '?'
            } else {
                c
            }
        })
        .collect();
    if s.chars().count() > 80 {
        out.push('…');
    }
    out
}

pub fn check_agent(name: &str) -> Result<()> {
    if is_agent_name(name) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "invalid agent name '{}': expected [A-Za-z][A-Za-z0-9_-]*, at most {MAX_NAME} characters",
            sanitize(name)
        )))
    }
}

/// Why a valid agent name cannot be given to a new agent: one that ends in `-` could never
/// be mentioned (in `@bob-` the `-` is punctuation, so it mentions `bob`).
pub fn unmentionable(name: &str) -> Option<String> {
    name.ends_with('-').then(|| {
        format!(
            "invalid agent name '{}': a name ending in '-' could never be mentioned (@{} \
             mentions {})",
            sanitize(name),
            sanitize(name),
            sanitize(name.trim_end_matches('-'))
        )
    })
}

/// [`check_agent`] for a name a new agent is given (`aw-ctl new`, a workflow's agents,
/// `spawn_agent`): a name that ends in `-` is refused too (see [`unmentionable`]).
pub fn check_new_agent(name: &str) -> Result<()> {
    check_agent(name)?;
    match unmentionable(name) {
        Some(why) => Err(Error::invalid(why)),
        None => Ok(()),
    }
}

pub fn check_instance(name: &str) -> Result<()> {
    if is_instance_name(name) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "invalid instance name '{}': expected [A-Za-z0-9][A-Za-z0-9_-]*, at most {MAX_NAME} characters",
            sanitize(name)
        )))
    }
}

/// Most names a message lists (of the registered agents, say) before it gives the count of
/// the others.
pub const LISTED: usize = 10;

/// `names` for a message: joined with `, `, the first [`LISTED`] of them then
/// `… and N more`; `none` when there are none.
pub fn listed(names: &[String]) -> String {
    if names.is_empty() {
        return "none".to_string();
    }
    let shown = names[..names.len().min(LISTED)].join(", ");
    match names.len().saturating_sub(LISTED) {
        0 => shown,
        more => format!("{shown}, … and {more} more"),
    }
}

/// A parsed send target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `agent` or `agent@instance`: mention that agent (instance `None` = the current one).
    Agent {
        name: String,
        instance: Option<String>,
    },
    /// `@instance`: the whole instance, no mention.
    Instance(String),
}

impl Target {
    pub fn parse(s: &str) -> Result<Target> {
        if let Some(inst) = s.strip_prefix('@') {
            check_instance(inst)?;
            return Ok(Target::Instance(inst.to_string()));
        }
        match s.split_once('@') {
            Some((name, inst)) => {
                check_agent(name)?;
                check_instance(inst)?;
                Ok(Target::Agent {
                    name: name.to_string(),
                    instance: Some(inst.to_string()),
                })
            }
            None => {
                check_agent(s)?;
                Ok(Target::Agent {
                    name: s.to_string(),
                    instance: None,
                })
            }
        }
    }

    /// The instance this target names, if it names one.
    pub fn instance(&self) -> Option<&str> {
        match self {
            Target::Agent { instance, .. } => instance.as_deref(),
            Target::Instance(i) => Some(i),
        }
    }
}

/// Split `agent[@instance]` into its parts, validating both.
pub fn parse_agent_address(s: &str) -> Result<(String, Option<String>)> {
    match Target::parse(s)? {
        Target::Agent { name, instance } => Ok((name, instance)),
        Target::Instance(_) => Err(Error::invalid(format!(
            "'{}' names an instance, expected an agent (NAME or NAME@INSTANCE)",
            sanitize(s)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_names() {
        assert!(is_agent_name("alice"));
        assert!(is_agent_name("a-b_c9"));
        assert!(!is_agent_name("9a"));
        assert!(!is_agent_name(""));
        assert!(!is_agent_name("a/b"));
        assert!(!is_agent_name("a.b"));
        assert!(!is_agent_name(&"a".repeat(65)));
        assert!(is_instance_name("9a"));
        assert!(check_new_agent("a-b").is_ok());
        assert_eq!(
            check_new_agent("bob-").unwrap_err().to_string(),
            "invalid agent name 'bob-': a name ending in '-' could never be mentioned (@bob- \
             mentions bob)"
        );
        // Still a name of the channel (an agent registered before may have it).
        assert!(check_agent("bob-").is_ok());
    }

    #[test]
    fn long_lists_of_names_are_cut_with_a_count() {
        let names = |n: usize| (1..=n).map(|i| format!("a{i}")).collect::<Vec<_>>();
        assert_eq!(listed(&[]), "none");
        assert_eq!(listed(&names(2)), "a1, a2");
        assert_eq!(listed(&names(LISTED)).matches(", ").count(), LISTED - 1);
        let many = listed(&names(5000));
        assert!(many.starts_with("a1, a2, "), "{many}");
        assert!(many.ends_with(", a10, … and 4990 more"), "{many}");
    }

    #[test]
    fn targets() {
        assert_eq!(
            Target::parse("bob@x").unwrap(),
            Target::Agent {
                name: "bob".into(),
                instance: Some("x".into())
            }
        );
        assert_eq!(Target::parse("@x").unwrap(), Target::Instance("x".into()));
        assert!(Target::parse("@").is_err());
        assert!(Target::parse("bob@").is_err());
        assert!(Target::parse("b b").is_err());
    }
}
