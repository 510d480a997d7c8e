//! The proposal tools: `team_proposal_create`, `team_vote`, `team_proposal_status` and
//! `team_proposal_cancel`.

use serde_json::{Value, json};

use super::caller::{Caller, Reply};
use super::params;
use crate::error::Result;
use crate::proposal::{self, NewProposal};

pub(super) fn proposal_create(s: &Caller, a: params::ProposalCreate) -> Result<Reply> {
    let resolution = a.resolution.unwrap_or_default();
    let new = NewProposal {
        id: a.id,
        kind: a.kind,
        title: a.title,
        description: a.description,
        options: a.options.unwrap_or_default().0,
        rule: resolution.rule,
        quorum: params::small(resolution.quorum, "resolution.quorum")?,
        tie_breaker: resolution.tie_breaker,
        binding: a.binding.is_some_and(|b| b.0),
        timeout_seconds: a.timeout_seconds.map(|t| t.0),
    };
    let p = proposal::create(&s.inst, &s.agent, new)?;
    Ok(Reply::with(
        format!(
            "Created {} ({}): options {}. Announced as [PROPOSAL:{}].",
            p.id,
            p.kind,
            p.options
                .iter()
                .map(|o| o.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            p.id
        ),
        p.to_json(),
    ))
}

pub(super) fn vote(s: &Caller, a: params::Vote) -> Result<Reply> {
    let p = proposal::vote(
        &s.inst,
        &s.agent,
        &a.proposal,
        &a.choice,
        a.reason.as_deref(),
    )?;
    let mut text = format!("Voted on {}. {}", p.id, p.summary());
    if !p.is_active() {
        text.push_str(" — closed.");
    }
    Ok(Reply::with(text, p.to_json()))
}

pub(super) fn proposal_status(s: &Caller, a: params::ProposalStatus) -> Result<Reply> {
    match a.proposal {
        Some(id) => {
            let p = proposal::status(&s.inst, &id)?;
            Ok(Reply::with(p.summary(), p.to_json()))
        }
        None => {
            let active = proposal::list(&s.inst, true)?;
            let text = if active.is_empty() {
                "No active proposals.".to_string()
            } else {
                active
                    .iter()
                    .map(|p| p.summary())
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            let list: Vec<Value> = active.iter().map(|p| p.to_json()).collect();
            Ok(Reply::with(text, json!({ "proposals": list })))
        }
    }
}

pub(super) fn proposal_cancel(s: &Caller, a: params::ProposalCancel) -> Result<Reply> {
    let p = proposal::cancel(&s.inst, &s.agent, &a.proposal)?;
    Ok(Reply::with(format!("Cancelled {}.", p.id), p.to_json()))
}
