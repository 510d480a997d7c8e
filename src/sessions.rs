//! The CLI sessions agents keep across runs (`session: keep` of a `claude` or `codex` agent):
//! `_state/sessions.json`, one record per agent, the session id its CLI reported, changed
//! under the instance's state lock. aw-run reads it before a run and records the id the run
//! reported after it; `aw-ctl session reset` forgets one, so that the next run starts a fresh
//! session.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::instance::Instance;

/// The state file, under `_state/`.
pub const FILE: &str = "sessions.json";

/// Longest session id kept, in bytes.
pub const MAX_ID: usize = 128;

crate::keyword_enum! {
    /// `session:` of an agent: a fresh CLI session for each run, or one kept across runs.
    pub enum Mode {
        Fresh = "fresh",
        Keep = "keep",
    }
}

/// One agent's kept session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    /// The backend whose CLI holds it (`claude` or `codex`): another backend never resumes it.
    pub backend: String,
    /// The id the CLI reported (Claude Code's `session_id`, Codex's `thread_id`).
    pub id: String,
    /// When it was first recorded and last used (RFC 3339).
    pub started: String,
    pub updated: String,
    /// Runs that used it.
    pub runs: u64,
    /// The session's whole usage as the CLI last reported it, for a CLI that reports that
    /// rather than the run's own (Codex, of a resumed thread): what the next run's report
    /// is counted from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<crate::usage::Usage>,
}

/// Kept sessions by agent.
pub type Sessions = BTreeMap<String, Kept>;

/// Every kept session of `inst`.
pub fn load(inst: &Instance) -> Result<Sessions> {
    crate::state::load(&inst.state_file(FILE))
}

/// The session `agent` keeps with `backend`, if any (one kept with another backend is not).
pub fn get(inst: &Instance, agent: &str, backend: &str) -> Result<Option<Kept>> {
    Ok(load(inst)?
        .remove(agent)
        .filter(|k| k.backend == backend && is_id(&k.id)))
}

/// Is `id` a session id a CLI may be given: 1 to [`MAX_ID`] letters, digits, `-` and `_`,
/// not starting with `-` (never read as an option)?
pub fn is_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID
        && !id.starts_with('-')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Record that a run of `agent` used the session `id` of `backend`, whose whole usage the
/// CLI reported as `total` when it reports that (`None` leaves the one recorded): the same
/// session counts a run more, another replaces it. `from` is the session the run started
/// from (`None`: none was kept): when the record changed since (`aw-ctl session reset`
/// while the run ran), it is left as it is, and `false` returned.
pub fn keep(
    inst: &Instance,
    agent: &str,
    from: Option<&str>,
    (backend, id): (&str, &str),
    total: Option<&crate::usage::Usage>,
) -> Result<bool> {
    if !is_id(id) {
        return Err(Error::invalid(format!(
            "{agent}: session id '{}' not kept: expected letters, digits, '-' and '_'",
            crate::names::sanitize(id)
        )));
    }
    let now = crate::time::now();
    crate::state::update(inst, FILE, |all: &mut Sessions| {
        let now_from = all
            .get(agent)
            .filter(|k| k.backend == backend)
            .map(|k| k.id.as_str());
        if all.contains_key(agent) && now_from.is_none() {
            // Kept with another backend: this run was fresh, and replaces it.
        } else if now_from != from {
            return Ok(false);
        }
        match all.get_mut(agent) {
            Some(k) if k.backend == backend && k.id == id => {
                k.runs += 1;
                k.updated = now;
                if total.is_some() {
                    k.total = total.cloned();
                }
            }
            _ => {
                all.insert(
                    agent.to_string(),
                    Kept {
                        backend: backend.to_string(),
                        id: id.to_string(),
                        started: now.clone(),
                        updated: now,
                        runs: 1,
                        total: total.cloned(),
                    },
                );
            }
        }
        Ok(true)
    })
}

/// Forget the session `agent` keeps: what it was, `None` when it kept none.
pub fn forget(inst: &Instance, agent: &str) -> Result<Option<Kept>> {
    crate::state::update(inst, FILE, |all: &mut Sessions| Ok(all.remove(agent)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_ids_are_given_to_a_cli() {
        assert!(is_id("4f1c2a8e-8d3b-4c1e-9a55-0b6c1d2e3f40"));
        assert!(is_id("thread_1"));
        for bad in ["", "-r", "a b", "a;b", "a\nb", &"x".repeat(MAX_ID + 1)] {
            assert!(!is_id(bad), "{bad:?}");
        }
    }
}
