//! Per-agent status (`_state/status.json`): state (`idle`, `running` or `done`), current
//! task and free-form metadata, set by the agent itself.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::inbox;
use crate::instance::Instance;
use crate::names;
use crate::registry::{Agent, Registry};
use crate::state;

/// The file of the agents' own states under `_state/`.
pub const FILE: &str = "status.json";

crate::keyword_enum! {
    /// What an agent says it is doing.
    #[derive(Default)]
    pub enum State {
        /// Waiting for work (also the state of an agent that never set one).
        #[default]
        Idle = "idle",
        Running = "running",
        /// Its task is complete: an iterative run (`aw-run --iter`) stops after the
        /// iteration in which the agent set it.
        Done = "done",
    }
}

impl FromStr for State {
    type Err = Error;
    fn from_str(s: &str) -> Result<State> {
        State::from_name(s).ok_or_else(|| {
            Error::invalid(format!(
                "invalid state '{}' (valid: {})",
                names::sanitize(s),
                State::names()
            ))
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct AgentStatus {
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    pub updated: String,
}

pub type Statuses = BTreeMap<String, AgentStatus>;

/// A registered agent as the team sees it: who it is, its status (`idle` when it never set
/// one) and its inbox.
#[derive(Debug, Clone)]
pub struct Member {
    pub agent: Agent,
    pub state: State,
    pub task: Option<String>,
    pub metadata: Option<serde_json::Value>,
    pub updated: Option<String>,
    /// Unread inbox messages.
    pub unread: usize,
    /// The inbox ack cursor.
    pub cursor: u64,
}

/// Every registered agent (or only `only`), in registration order, with its status and
/// inbox counts.
pub fn members(inst: &Instance, reg: &Registry, only: Option<&str>) -> Result<Vec<Member>> {
    let statuses = all(inst)?;
    let mut list = Vec::new();
    for ag in reg
        .agents
        .iter()
        .filter(|ag| only.is_none_or(|n| n == ag.name))
    {
        let st = statuses.get(&ag.name);
        let unread = inbox::unread_count(inst, &ag.name)?;
        list.push(Member {
            agent: ag.clone(),
            state: st.map_or(State::Idle, |s| s.state),
            task: st.and_then(|s| s.task.clone()),
            metadata: st.and_then(|s| s.metadata.clone()),
            updated: st.map(|s| s.updated.clone()),
            unread,
            cursor: inbox::cursor(inst, &ag.name)?,
        });
    }
    Ok(list)
}

/// Every agent's status.
pub fn all(inst: &Instance) -> Result<Statuses> {
    state::load(&inst.state_file(FILE))
}

/// Update `agent`'s status: only the fields given change (an empty task clears it).
pub fn set(
    inst: &Instance,
    agent: &str,
    new_state: Option<&str>,
    task: Option<&str>,
    metadata: Option<serde_json::Value>,
) -> Result<AgentStatus> {
    names::check_agent(agent)?;
    let new_state: Option<State> = new_state.map(str::parse).transpose()?;
    if let Some(m) = &metadata
        && !m.is_object()
    {
        return Err(Error::invalid("metadata must be a JSON object"));
    }
    if task.is_some_and(|t| t.len() > 4096) {
        return Err(Error::invalid("task is over 4096 bytes"));
    }
    state::update(inst, FILE, |all: &mut Statuses| {
        let st = all.entry(agent.to_string()).or_default();
        if let Some(s) = new_state {
            st.state = s;
        }
        if let Some(t) = task {
            st.task = (!t.is_empty()).then(|| t.to_string());
        }
        if let Some(m) = metadata {
            st.metadata = Some(m);
        }
        st.updated = crate::time::now();
        Ok(st.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_through_json() {
        crate::keyword::assert_round_trips(State::ALL, |s| s.name(), State::from_name);
        assert_eq!(State::NAMES, ["idle", "running", "done"]);
        assert_eq!(AgentStatus::default().state, State::Idle);
    }

    #[test]
    fn a_bad_state_is_named_with_the_valid_ones() {
        let e = "sleeping\n".parse::<State>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid state 'sleeping?' (valid: idle, running, done)"
        );
        assert_eq!("running".parse::<State>().unwrap(), State::Running);
    }

    #[test]
    fn a_stored_status_loads_and_saves_the_same() {
        let text = r#"{"alice":{"state":"running","task":"t","updated":"2026-01-01T00:00:00Z"},"bob":{"state":"idle","updated":"x"}}"#;
        let all: Statuses = serde_json::from_str(text).unwrap();
        assert_eq!(all["alice"].state, State::Running);
        assert_eq!(all["bob"].state, State::Idle);
        assert_eq!(serde_json::to_string(&all).unwrap(), text);
    }
}
