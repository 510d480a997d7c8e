//! `aw-ctl` commands about proposals and votes.

use super::{Args, who};
use crate::cli::Out;
use crate::error::Result;
use crate::proposal::{self, Choice, NewProposal};

/// `aw-ctl proposals [--all] [--json]`.
pub(super) fn proposals(out: &mut Out, a: &Args) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    for p in proposal::list(&inst, !a.all)? {
        if a.json {
            out.line(&p.to_json().to_string())?;
        } else {
            out.line(&p.summary())?;
        }
    }
    Ok(0)
}

/// `aw-ctl vote PROPOSAL CHOICE [--as NAME] [--reason R]`.
pub(super) fn vote(out: &mut Out, a: &Args, id: &str, choice: &str) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = who(a)?;
    let p = proposal::vote(&inst, &who, id, choice, a.reason.as_deref())?;
    print_proposal(out, a, &p)
}

/// `aw-ctl cancel PROPOSAL [--as NAME]`.
pub(super) fn cancel(out: &mut Out, a: &Args, id: &str) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = who(a)?;
    let p = proposal::cancel(&inst, &who, id)?;
    print_proposal(out, a, &p)
}

fn print_proposal(out: &mut Out, a: &Args, p: &proposal::Proposal) -> Result<u8> {
    if a.json {
        out.line(&p.to_json().to_string())?;
    } else {
        out.line(&p.summary())?;
    }
    Ok(0)
}

/// `aw-ctl propose TYPE TITLE [--option ID[=LABEL]]... [--rule R] [--quorum N]
/// [--tie-breaker T] [--binding] [--timeout SECS] [--description TEXT] [--id ID] [--as NAME]`.
pub(super) fn propose(out: &mut Out, a: &Args, kind: &str, title: &str) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = who(a)?;
    let options = a
        .options
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
        id: a.id.clone(),
        kind: kind.to_string(),
        title: title.to_string(),
        description: a.description.clone(),
        options,
        rule: a.rule.clone(),
        quorum: a.quorum,
        tie_breaker: a.tie_breaker.clone(),
        binding: a.binding,
        timeout_seconds: a.timeout,
    };
    let p = proposal::create(&inst, &who, new)?;
    if a.json {
        out.line(&p.to_json().to_string())?;
    } else {
        out.line(&p.id)?;
    }
    Ok(0)
}
