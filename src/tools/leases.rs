//! The lease tools: `lease_take`, `lease_release` and `lease_list`.

use std::time::Duration;

use serde_json::json;

use super::caller::{Caller, Reply};
use super::params;
use crate::error::{Error, Result};
use crate::lease::{self, Lease, Request};

fn lease_json(l: &Lease) -> serde_json::Value {
    serde_json::to_value(l).expect("a lease serializes")
}

pub(super) fn lease_take(s: &Caller, a: params::LeaseTake) -> Result<Reply> {
    let req = Request {
        holder: s.agent.clone(),
        paths: a.paths.0,
        shared: a.shared.is_some_and(|f| f.0),
        ttl: a
            .ttl_seconds
            .map_or(lease::DEFAULT_TTL, |t| Duration::from_secs(t.0)),
        reason: a.reason.unwrap_or_default(),
        card: match crate::board::held_by(&s.inst, &s.agent)?[..] {
            [one] => Some(one),
            _ => None,
        },
    };
    let wait = a.wait_seconds.map_or(0, |w| w.0);
    let taken = match wait {
        0 => lease::take(&s.inst, &req),
        w => lease::take_waiting(&s.inst, &req, Duration::from_secs(w)),
    };
    let l = taken.map_err(|e| match e {
        Error::Busy(m) => Error::Busy(m).hint(
            "edit other files meanwhile, ask the holder in the channel, or call lease_take \
             again with wait_seconds",
        ),
        e => e,
    })?;
    Ok(Reply::with(
        format!(
            "Leased {} to you ({}) as {} until {}; lease_release (or board_done) gives them back.",
            l.paths.join(" "),
            l.mode,
            l.id,
            l.until()
        ),
        lease_json(&l),
    ))
}

pub(super) fn lease_release(s: &Caller, a: params::LeaseRelease) -> Result<Reply> {
    let released = match (a.id, a.paths) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                "lease_release takes an id or paths, not both".to_string(),
            ));
        }
        (Some(id), None) => vec![lease::release(&s.inst, &id, &s.agent)?],
        (None, paths) => {
            lease::release_holder(&s.inst, &s.agent, &paths.map(|p| p.0).unwrap_or_default())?
        }
    };
    let ids: Vec<&str> = released.iter().map(|l| l.id.as_str()).collect();
    let text = match ids.is_empty() {
        true => "You held no such lease.".to_string(),
        false => format!("Released {}.", ids.join(", ")),
    };
    Ok(Reply::with(text, json!({ "released": ids })))
}

pub(super) fn lease_list(s: &Caller) -> Result<Reply> {
    let leases = match s.inst.exists() {
        true => lease::list(&s.inst)?,
        false => Vec::new(),
    };
    let text = match leases.is_empty() {
        true => "No leases.".to_string(),
        false => leases
            .iter()
            .map(Lease::line)
            .collect::<Vec<_>>()
            .join("\n"),
    };
    Ok(Reply::with(
        text,
        json!({ "leases": leases.iter().map(lease_json).collect::<Vec<_>>() }),
    ))
}
