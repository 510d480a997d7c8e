//! The agent registry of an instance (`_state/agents.json`) and its name index, the instance
//! configuration (`_state/config.json`), and what an agent's backend may be.
//!
//! | file | what it holds |
//! |------|---------------|
//! | `mod.rs` | registering and unregistering agents, a recipient checked, the configuration |
//! | `agent.rs` | [`Agent`] and [`Registry`]: the records and the file read whole |
//! | `index.rs` | the name index (`_state/agents/`): one agent found without reading them all; every change of the registry |
//! | `bucket.rs` | a file of the name index: the records of the names of one bucket |
//! | `backend.rs` | [`BackendKind`], the backend a model implies, Claude Code's [`PERMISSION_MODES`] |

mod agent;
mod backend;
mod bucket;
mod index;

use serde::{Deserialize, Serialize};

pub use agent::{Agent, Collab, Indexed, Registry};
pub use backend::{BackendKind, PERMISSION_MODES, backend_for_model};
pub use index::{Indexing, find, is_agent, update};

use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::names;
use crate::state;

/// Refuse (exit 66, as for any agent that does not exist) an explicit recipient that is not
/// a registered agent of `inst` (found through the name index), with the near registered
/// name if there is one. An agent an aw-run serves is accepted (it is being registered).
pub fn require_agent(inst: &Instance, name: &str) -> Result<()> {
    if is_agent(inst, name)? || crate::serve::is_served(inst, name) {
        return Ok(());
    }
    // Only to say what there is: the registry whole.
    let known = Registry::load(inst)?.names();
    Err(Error::not_found(format!(
        "no agent '{name}' in instance '{}'{} (registered: {})",
        inst.name(),
        crate::suggest::suggestion(name, known.iter().map(String::as_str)),
        names::listed(&known)
    ))
    .hint("register it with aw-ctl new, or leave out -t and mention it with @name"))
}

/// Register `agent` (replacing an agent of the same name when `replace`). Returns whether it
/// was newly added.
pub fn register(inst: &Instance, agent: Agent, replace: bool) -> Result<bool> {
    Ok(register_all(inst, vec![agent], replace)?[0])
}

/// [`register`] several agents in one update of the registry (one write, one sync); for
/// each, whether it was new. Nothing is written when one name is refused.
pub fn register_all(inst: &Instance, agents: Vec<Agent>, replace: bool) -> Result<Vec<bool>> {
    update(inst, adding(agents, replace)?)
}

/// [`register_all`] with the name index written aside ([`index::update_aside`]): for a
/// server's start, which registers all its agents at once and need not wait for their
/// index files before it shows them served.
pub fn register_all_aside(
    inst: &Instance,
    agents: Vec<Agent>,
    replace: bool,
) -> Result<(Vec<bool>, Indexing)> {
    index::update_aside(inst, adding(agents, replace)?)
}

/// The change of the registry that adds `agents` (or replaces them, when `replace`), once
/// their names are checked.
fn adding(
    agents: Vec<Agent>,
    replace: bool,
) -> Result<impl FnOnce(&mut Registry) -> Result<Vec<bool>>> {
    for agent in &agents {
        names::check_new_agent(&agent.name)?;
        if names::RESERVED_SENDERS.contains(&agent.name.as_str()) {
            return Err(Error::invalid(format!(
                "'{}' is a reserved sender name and cannot be an agent",
                agent.name
            )));
        }
    }
    Ok(move |reg: &mut Registry| {
        // By name: a server of thousands of agents registers them all at once.
        let mut at = agent::by_name(&reg.agents);
        Ok(agents
            .into_iter()
            .map(|agent| match at.get(&agent.name) {
                Some(&i) if replace => {
                    let existing = &mut reg.agents[i];
                    let created = existing.created.clone();
                    *existing = agent;
                    existing.created = created;
                    false
                }
                Some(_) => false,
                None => {
                    at.insert(agent.name.clone(), reg.agents.len());
                    reg.agents.push(agent);
                    true
                }
            })
            .collect())
    })
}

/// Remove an agent; exit 66 when it is not registered.
pub fn unregister(inst: &Instance, name: &str) -> Result<()> {
    names::check_agent(name)?;
    inst.require()?;
    update(inst, |reg| {
        if !reg.agents.iter().any(|a| a.name == name) {
            return Err(reg.no_agent(inst, name));
        }
        reg.agents.retain(|a| a.name != name);
        Ok(())
    })
}

/// Instance configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Config {
    /// Only this agent may write documents, when set.
    #[serde(
        rename = "documentOwner",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub document_owner: Option<String>,
}

impl Config {
    pub fn load(inst: &Instance) -> Result<Config> {
        state::load(&inst.state_file("config.json"))
    }
}

/// Set or clear the document owner.
pub fn set_document_owner(inst: &Instance, owner: Option<&str>) -> Result<()> {
    if let Some(o) = owner {
        names::check_agent(o)?;
    }
    state::update(inst, "config.json", |c: &mut Config| {
        c.document_owner = owner.map(str::to_string);
        Ok(())
    })
}

/// [`set_document_owner`] for a caller that holds the state lock.
pub fn set_document_owner_locked(inst: &Instance, owner: &str) -> Result<()> {
    names::check_agent(owner)?;
    state::update_locked(inst, "config.json", |c: &mut Config| {
        c.document_owner = Some(owner.to_string());
        Ok(())
    })
}
