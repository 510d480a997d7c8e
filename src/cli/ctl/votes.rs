//! `aw-ctl` commands about proposals and votes.

use super::{Call, who};
use crate::cli::Out;
use crate::error::Result;
use crate::proposal::{self, Choice, NewProposal};

/// `aw-ctl proposals [--all] [--json]`.
pub(super) fn proposals(out: &mut Out, a: &Call, _: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    for p in proposal::list(&inst, !a.has("all"))? {
        if a.has("json") {
            out.line(&p.to_json().to_string())?;
        } else {
            out.line(&p.summary())?;
        }
    }
    Ok(0)
}

/// `aw-ctl vote PROPOSAL CHOICE [--as NAME] [--reason R]`.
pub(super) fn vote(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = who(a)?;
    let reason = a.string("reason");
    let p = proposal::vote(&inst, &who, args[0], args[1], reason.as_deref())?;
    print_proposal(out, a, &p)
}

/// `aw-ctl cancel PROPOSAL [--as NAME]`.
pub(super) fn cancel(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = who(a)?;
    let p = proposal::cancel(&inst, &who, args[0])?;
    print_proposal(out, a, &p)
}

fn print_proposal(out: &mut Out, a: &Call, p: &proposal::Proposal) -> Result<u8> {
    if a.has("json") {
        out.line(&p.to_json().to_string())?;
    } else {
        out.line(&p.summary())?;
    }
    Ok(0)
}

/// `aw-ctl propose TYPE TITLE [--option ID[=LABEL]]... [--rule R] [--quorum N]
/// [--tie-breaker T] [--binding] [--timeout SECS] [--description TEXT] [--id ID] [--as NAME]`.
pub(super) fn propose(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let (kind, title) = (args[0], args[1]);
    let inst = a.common.instance()?;
    let who = who(a)?;
    let options = a
        .strings("option")
        .iter()
        .map(|o| match o.split_once('=') {
            Some((id, label)) => Choice {
                id: id.to_string(),
                label: label.to_string(),
            },
            None => Choice {
                id: o.clone(),
                label: o.clone(),
            },
        })
        .collect();
    let new = NewProposal {
        id: a.string("id"),
        kind: kind.to_string(),
        title: title.to_string(),
        description: a.string("description"),
        options,
        rule: a.string("rule"),
        quorum: a.number("quorum")?,
        tie_breaker: a.string("tie-breaker"),
        binding: a.has("binding"),
        timeout_seconds: a.number("timeout")?,
    };
    let p = proposal::create(&inst, &who, new)?;
    if a.has("json") {
        out.line(&p.to_json().to_string())?;
    } else {
        out.line(&p.id)?;
    }
    Ok(0)
}
