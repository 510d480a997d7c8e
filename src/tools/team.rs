//! The team tools: `my_status_set` and `team_members`.

use serde_json::json;

use super::caller::{Caller, Reply};
use super::params;
use crate::error::Result;
use crate::registry::{Config, Registry};
use crate::status;

pub(super) fn my_status_set(s: &Caller, a: params::MyStatusSet) -> Result<Reply> {
    let st = status::set(
        &s.inst,
        &s.agent,
        a.state.as_deref(),
        a.task.as_deref(),
        a.metadata,
    )?;
    Ok(Reply::with(
        format!(
            "Status: {}{}",
            st.state,
            st.task
                .as_deref()
                .map(|t| format!(" — {t}"))
                .unwrap_or_default()
        ),
        serde_json::to_value(&st).expect("status"),
    ))
}

pub(super) fn team_members(s: &Caller, a: params::TeamMembers) -> Result<Reply> {
    let with_status = a.include_status.is_some_and(|f| f.0);
    let reg = Registry::load(&s.inst)?;
    let members = if with_status {
        status::members(&s.inst, &reg, None)?
    } else {
        Vec::new()
    };
    let owner = Config::load(&s.inst)?.document_owner;
    let mut lines = Vec::new();
    let mut list = Vec::new();
    for (i, ag) in reg.agents.iter().enumerate() {
        let mut v = json!({"name": ag.name, "backend": ag.backend});
        if let Some(m) = &ag.model {
            v["model"] = json!(m);
        }
        let mut line = format!("@{}", ag.name);
        if ag.name == s.agent {
            line.push_str(" (you)");
        }
        if owner.as_deref() == Some(ag.name.as_str()) {
            line.push_str(" (document owner)");
        }
        if let Some(m) = members.get(i) {
            line.push_str(&format!(" [{}] {} unread", m.state, m.unread));
            if let Some(t) = &m.task {
                line.push_str(&format!(" — {t}"));
            }
            v["state"] = json!(m.state);
            v["task"] = json!(m.task);
            v["metadata"] = json!(m.metadata);
            v["unread"] = json!(m.unread);
        }
        lines.push(line);
        list.push(v);
    }
    Ok(Reply::with(
        lines.join("\n"),
        json!({ "agents": list, "you": s.agent, "documentOwner": owner }),
    ))
}
