//! The proposal tools: `team_proposal_create`, `team_vote`, `team_proposal_status` and
//! `team_proposal_cancel`.

use serde_json::{Value, json};

use super::args::{Args, bool_arg, req_str, str_arg, uint_arg};
use super::caller::{Caller, Reply};
use crate::error::{Error, Result};
use crate::proposal::{self, Choice, NewProposal};

pub(super) fn proposal_create(s: &Caller, a: &Args) -> Result<Reply> {
    let kind = req_str(a, "type")?.to_string();
    let title = req_str(a, "title")?.to_string();
    let options = match a.get("options") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|it| match it {
                Value::String(id) => Ok(Choice {
                    id: id.clone(),
                    label: id.clone(),
                }),
                Value::Object(o) => {
                    let id = match o.get("id") {
                        Some(Value::String(id)) => id.clone(),
                        _ => return Err(Error::invalid("every option needs a string 'id'")),
                    };
                    let label = match o.get("label") {
                        Some(Value::String(l)) => l.clone(),
                        _ => id.clone(),
                    };
                    Ok(Choice { id, label })
                }
                _ => Err(Error::invalid("options must be {id, label} objects")),
            })
            .collect::<Result<Vec<_>>>()?,
        Some(_) => return Err(Error::invalid("'options' must be an array of {id, label}")),
    };
    let (rule, quorum, tie_breaker) = match a.get("resolution") {
        None | Some(Value::Null) => (None, None, None),
        Some(Value::Object(r)) => {
            let get = |k: &str| -> Result<Option<String>> {
                match r.get(k) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(_) => Err(Error::invalid(format!("resolution.{k} must be a string"))),
                }
            };
            let quorum = match r.get("quorum") {
                None | Some(Value::Null) => None,
                Some(Value::Number(n)) => Some(
                    n.as_u64()
                        .filter(|&q| q <= u32::MAX as u64)
                        .ok_or_else(|| {
                            Error::invalid("resolution.quorum must be a positive integer")
                        })? as u32,
                ),
                Some(_) => {
                    return Err(Error::invalid(
                        "resolution.quorum must be a positive integer",
                    ));
                }
            };
            (get("type")?, quorum, get("tieBreaker")?)
        }
        Some(_) => {
            return Err(Error::invalid(
                "'resolution' must be an object {type, quorum, tieBreaker}",
            ));
        }
    };
    let new = NewProposal {
        id: str_arg(a, "id")?.map(str::to_string),
        kind,
        title,
        description: str_arg(a, "description")?.map(str::to_string),
        options,
        rule,
        quorum,
        tie_breaker,
        binding: bool_arg(a, "binding")?.unwrap_or(false),
        timeout_seconds: uint_arg(a, "timeoutSeconds")?,
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

pub(super) fn vote(s: &Caller, a: &Args) -> Result<Reply> {
    let id = req_str(a, "proposal")?;
    let choice = req_str(a, "choice")?;
    let p = proposal::vote(&s.inst, &s.agent, id, choice, str_arg(a, "reason")?)?;
    let mut text = format!("Voted on {}. {}", p.id, p.summary());
    if !p.is_active() {
        text.push_str(" — closed.");
    }
    Ok(Reply::with(text, p.to_json()))
}

pub(super) fn proposal_status(s: &Caller, a: &Args) -> Result<Reply> {
    match str_arg(a, "proposal")? {
        Some(id) => {
            let p = proposal::status(&s.inst, id)?;
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

pub(super) fn proposal_cancel(s: &Caller, a: &Args) -> Result<Reply> {
    let p = proposal::cancel(&s.inst, &s.agent, req_str(a, "proposal")?)?;
    Ok(Reply::with(format!("Cancelled {}.", p.id), p.to_json()))
}
