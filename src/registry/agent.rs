//! A registered agent ([`Agent`]) and the registry file that lists them ([`Registry`]):
//! read whole, or kept by a process that reads it again and again ([`Indexed`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fs::kept::Kept;
use crate::instance::Instance;
use crate::state;

/// One registered agent. Fields later parts fill (tools, limits) are kept as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Agent {
    pub name: String,
    /// `claude`, `codex`, `anthropic`, `openai`, `exec`, `mock`, or `external` (driven by a
    /// person or another program through aw-mcp / aw-send).
    pub backend: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, serde_json::Value>,
    /// The argument vector of an `exec` agent (program first), for `aw-run --serve`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    pub created: String,
    /// The agent that spawned this worker (`spawn_agent`); `None` for any other agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<String>,
    /// How many spawns lead to this agent: 0 for an agent nobody spawned.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub depth: u32,
    /// A worker closed with `close_agent`: no longer served, its history kept.
    #[serde(default, skip_serializing_if = "is_false")]
    pub closed: bool,
    /// The agent gets the collab tools, with these limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collab: Option<Collab>,
    /// The agent only coordinates: no document-writing tools, no file tools.
    #[serde(default, skip_serializing_if = "is_false")]
    pub delegate: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What an agent with the collab tools may spawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collab {
    /// Most workers alive (spawned and not closed) in the instance at once.
    pub max_workers: u32,
    /// How deep spawning may go: with 1, workers cannot spawn workers.
    pub max_depth: u32,
}

impl Default for Collab {
    fn default() -> Collab {
        Collab {
            max_workers: Collab::MAX_WORKERS,
            max_depth: Collab::MAX_DEPTH,
        }
    }
}

impl Collab {
    /// Default most workers alive per instance.
    pub const MAX_WORKERS: u32 = 8;
    /// Default spawn depth: a lead's workers cannot spawn.
    pub const MAX_DEPTH: u32 = 1;
}

/// The registry file: agents in registration order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Registry {
    pub agents: Vec<Agent>,
}

impl Registry {
    /// The error for an agent `name` that `inst` does not have (exit 66), with the
    /// registered name nearest to it when one is near.
    pub fn no_agent(&self, inst: &Instance, name: &str) -> Error {
        Error::not_found(format!(
            "no agent '{name}' in instance '{}'{}",
            inst.name(),
            crate::suggest::suggestion(name, self.agents.iter().map(|a| a.name.as_str()))
        ))
    }

    pub fn load(inst: &Instance) -> Result<Registry> {
        state::load(&inst.state_file("agents.json"))
    }

    /// [`Registry::load`] for a process that reads the registry again and again (a server
    /// resolving the mentions of every reply): the registry read last is given again while
    /// `agents.json` is still that file, unchanged, so that a read costs a `stat`, not a
    /// parse of every agent (see [`crate::fs::kept`]).
    pub fn load_shared(inst: &Instance) -> Result<Arc<Indexed>> {
        KEPT.load(&inst.state_file("agents.json"))
    }

    /// The registry [`Registry::load_shared`] remembers for `inst`, when `agents.json` is
    /// still that file, unchanged; at no cost when it remembers none.
    pub fn remembered(inst: &Instance) -> Option<Arc<Indexed>> {
        KEPT.remembered(&inst.state_file("agents.json"))
    }

    pub fn get(&self, name: &str) -> Option<&Agent> {
        self.agents.iter().find(|a| a.name == name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn names(&self) -> Vec<String> {
        self.agents.iter().map(|a| a.name.clone()).collect()
    }
}

/// A registry as read, with its agents found by name at once (a server of thousands of
/// agents asks of each message's sender whether it is an agent).
#[derive(Debug, Default, Deserialize)]
#[serde(from = "Registry")]
pub struct Indexed {
    reg: Registry,
    at: std::collections::HashMap<String, usize>,
}

impl From<Registry> for Indexed {
    fn from(reg: Registry) -> Indexed {
        let at = by_name(&reg.agents);
        Indexed { reg, at }
    }
}

impl Indexed {
    pub fn get(&self, name: &str) -> Option<&Agent> {
        self.at.get(name).map(|&i| &self.reg.agents[i])
    }

    pub fn contains(&self, name: &str) -> bool {
        self.at.contains_key(name)
    }
}

/// Where each name is in `agents`: the first of a name, as a search from the start finds
/// it (a registry edited by hand may hold one twice).
pub(super) fn by_name(agents: &[Agent]) -> std::collections::HashMap<String, usize> {
    let mut at = std::collections::HashMap::with_capacity(agents.len());
    for (i, a) in agents.iter().enumerate() {
        at.entry(a.name.clone()).or_insert(i);
    }
    at
}

/// The registries read last (a process serves a few instances).
static KEPT: Kept<Indexed, 8> = Kept::new();

impl std::ops::Deref for Indexed {
    type Target = Registry;

    fn deref(&self) -> &Registry {
        &self.reg
    }
}
