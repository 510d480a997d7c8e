//! The agent registry of an instance (`_state/agents.json`), the instance configuration
//! (`_state/config.json`), and what an agent's backend may be: [`BackendKind`], the backend a
//! model implies, and Claude Code's [`PERMISSION_MODES`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::names;
use crate::state;

crate::keyword_enum! {
    /// How an agent is run: the one table of backend names.
    pub enum BackendKind {
        /// Claude Code CLI (`claude -p`).
        Claude = "claude",
        /// Codex CLI (`codex exec`).
        Codex = "codex",
        /// Anthropic Messages API.
        Anthropic = "anthropic",
        /// Any OpenAI-compatible Chat Completions endpoint.
        Openai = "openai",
        /// Any executable: prompt on stdin.
        Exec = "exec",
        /// Scripted replies, for tests and dry runs.
        Mock = "mock",
        /// Driven by a person or another program through aw-mcp or aw-send; never run by
        /// aw-run.
        External = "external",
    }
}

impl BackendKind {
    /// The backends a workflow file may name: all but `external`.
    pub const IN_WORKFLOWS: [BackendKind; 6] = [
        BackendKind::Claude,
        BackendKind::Codex,
        BackendKind::Anthropic,
        BackendKind::Openai,
        BackendKind::Exec,
        BackendKind::Mock,
    ];

    /// The model provider this backend serves, whose `PROVIDER/` prefix it takes off a
    /// model name.
    pub fn provider(self) -> Option<&'static str> {
        match self {
            BackendKind::Claude | BackendKind::Anthropic => Some("anthropic"),
            BackendKind::Codex | BackendKind::Openai => Some("openai"),
            BackendKind::Exec | BackendKind::Mock | BackendKind::External => None,
        }
    }

    /// The backend a model's `PROVIDER/` prefix chooses: the one named like the provider.
    pub fn for_provider(provider: &str) -> Option<BackendKind> {
        BackendKind::from_name(provider).filter(|b| b.provider() == Some(provider))
    }

    /// Does this backend need a `model`?
    pub fn needs_model(self) -> bool {
        matches!(self, BackendKind::Anthropic | BackendKind::Openai)
    }
}

/// Claude Code's permission modes (`--permission-mode`), which an agent of backend
/// `claude` may name in a workflow file. Without one, Claude Code's own default applies: in
/// print mode, a tool not allowed by name is denied.
pub const PERMISSION_MODES: [&str; 6] = [
    "default",
    "acceptEdits",
    "plan",
    "bypassPermissions",
    "dontAsk",
    "auto",
];

/// The backend a model implies, by how its name starts: a provider prefix
/// (`anthropic/...`, `openai/...`) or a model family. The first match wins; a model that
/// matches none (or no model) is `external`. A model of the table of known models comes
/// first (see [`backend_for_model`]).
const MODEL_BACKENDS: [(&str, BackendKind); 6] = [
    ("anthropic/", BackendKind::Anthropic),
    ("openai/", BackendKind::Openai),
    ("claude", BackendKind::Claude),
    ("gpt", BackendKind::Openai),
    ("o1", BackendKind::Openai),
    ("o3", BackendKind::Openai),
];

/// The backend a model implies: for a name or alias of the table of known models
/// ([`crate::models`]) without a prefix, `claude` for an Anthropic model (as in a
/// workflow file: Claude Code knows `sonnet`, `opus`, `haiku`) and `openai` for an OpenAI
/// one; else see [`MODEL_BACKENDS`].
pub fn backend_for_model(model: Option<&str>) -> BackendKind {
    let Some(m) = model else {
        return BackendKind::External;
    };
    if let Some(known) = crate::models::find(m) {
        return match known.provider {
            "anthropic" => BackendKind::Claude,
            _ => BackendKind::Openai,
        };
    }
    MODEL_BACKENDS
        .iter()
        .find(|(prefix, _)| m.starts_with(prefix))
        .map_or(BackendKind::External, |(_, backend)| *backend)
}

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
    pub fn load_shared(inst: &Instance) -> Result<std::sync::Arc<Indexed>> {
        /// The registries read last (a process serves a few instances).
        static KEPT: crate::fs::kept::Kept<Indexed, 8> = crate::fs::kept::Kept::new();
        KEPT.load(&inst.state_file("agents.json"))
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
fn by_name(agents: &[Agent]) -> std::collections::HashMap<String, usize> {
    let mut at = std::collections::HashMap::with_capacity(agents.len());
    for (i, a) in agents.iter().enumerate() {
        at.entry(a.name.clone()).or_insert(i);
    }
    at
}

impl std::ops::Deref for Indexed {
    type Target = Registry;

    fn deref(&self) -> &Registry {
        &self.reg
    }
}

/// Refuse (exit 66, as for any agent that does not exist) an explicit recipient that is not a registered agent of `inst`, with the
/// near registered name if there is one. An agent an aw-run serves is accepted (it is
/// being registered).
pub fn require_agent(inst: &Instance, name: &str) -> Result<()> {
    let reg = Registry::load_shared(inst)?;
    if reg.contains(name) || crate::serve::is_served(inst, name) {
        return Ok(());
    }
    let known = reg.names();
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
    for agent in &agents {
        names::check_new_agent(&agent.name)?;
        if names::RESERVED_SENDERS.contains(&agent.name.as_str()) {
            return Err(Error::invalid(format!(
                "'{}' is a reserved sender name and cannot be an agent",
                agent.name
            )));
        }
    }
    state::update(inst, "agents.json", |reg: &mut Registry| {
        // By name: a server of thousands of agents registers them all at once.
        let mut at = by_name(&reg.agents);
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
    state::update(inst, "agents.json", |reg: &mut Registry| {
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
