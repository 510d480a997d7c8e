//! `aw-ctl approvals`, `approve` and `reject`: list, show, ask and wait for approvals, and
//! decide them.

use super::{Call, who};
use crate::approval::{self, Kind, NewRequest, Outcome, Request, Then, Verdict, WaitOptions};
use crate::cli::{self, Out};
use crate::error::{Error, Result};

/// `aw-ctl approvals [--all] [--json]`: the pending requests (`--all`: every one).
pub(super) fn ls(out: &mut Out, a: &Call, _: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    for r in approval::list(&inst)?.values() {
        if !a.has("all") && r.state.is_closed() {
            continue;
        }
        match a.has("json") {
            true => out.line(&r.to_json_line().to_string())?,
            false => out.line(&r.summary())?,
        }
    }
    Ok(0)
}

/// `aw-ctl approvals show ID [--json]`: a request, its details and its decision.
pub(super) fn show(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let id = approval::parse_id(args[0])?;
    inst.require()?;
    let r = approval::show(&inst, id)?;
    if a.has("json") {
        out.line(&serde_json::to_string(&r).expect("request serializes"))?;
        return Ok(0);
    }
    out.line(&format!("approval {}: {}", r.id, r.what))?;
    out.line(&format!("kind: {}", r.kind.name()))?;
    out.line(&format!("state: {}", r.state.name()))?;
    out.line(&format!("asked by: {} at {}", r.asked_by, r.asked))?;
    out.line(&format!("by: {}", r.by.join(", ")))?;
    if let Some(e) = &r.expires {
        out.line(&format!("expires: {e} (then {})", r.then.as_str()))?;
    }
    if let Some(d) = &r.decision {
        let why = d
            .reason
            .as_deref()
            .map_or(String::new(), |x| format!(": {x}"));
        out.line(&format!("decided: by {} at {}{why}", d.by, d.at))?;
    }
    if let Some(from) = r.escalated_from {
        out.line(&format!("escalates: #{from}"))?;
    }
    if let Some(to) = r.escalated_to {
        out.line(&format!("escalated to: #{to}"))?;
    }
    if !r.details.is_empty() {
        out.line("")?;
        out.line(r.details.trim_end())?;
    }
    Ok(0)
}

/// `aw-ctl approvals ask WHAT --by AGENT[,AGENT...] [--kind K] [--details TEXT | -]
/// [--timeout DURATION] [--then fail|skip|AGENT] [--key KEY] [--replies] [--wait]
/// [--as AGENT]`: prints the id; with `--wait`, waits and exits 0 when approved, 1 when
/// rejected, expired or skipped.
pub(super) fn ask(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let asked_by = who(a)?;
    let mut by = Vec::new();
    for list in a.strings("by") {
        by.extend(
            list.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        );
    }
    if by.is_empty() {
        return Err(
            Error::Usage("approvals ask needs --by: who may approve".into())
                .hint("aw-ctl approvals ask WHAT --by user"),
        );
    }
    let kind = match a.string("kind") {
        Some(k) => Kind::from_name(&k).ok_or_else(|| {
            Error::Usage(format!(
                "--kind '{}': expected {}",
                crate::names::sanitize(&k),
                Kind::NAMES.join(", ")
            ))
        })?,
        None => Kind::Task,
    };
    let details = match a.string("details").as_deref() {
        Some("-") => cli::read_stdin("details", approval::MAX_DETAILS, None)?,
        Some(d) => d.to_string(),
        None => String::new(),
    };
    let timeout = a
        .string("timeout")
        .map(|t| cli::parse_duration(&t, "--timeout"))
        .transpose()?;
    let then = match a.string("then") {
        Some(t) => Then::parse(&t).map_err(|e| Error::Usage(format!("--{e}")))?,
        None => Then::Fail,
    };
    if matches!(then, Then::Skip | Then::Escalate(_)) && timeout.is_none() {
        return Err(Error::Usage(
            "--then needs --timeout: it says what happens when it runs out".into(),
        )
        .hint("aw-ctl approvals ask WHAT --by user --timeout 1h --then skip"));
    }
    let new = NewRequest {
        kind,
        what: args[0].to_string(),
        details,
        by,
        timeout,
        then,
        key: a.string("key"),
        replies: a.has("replies"),
    };
    let (r, _) = approval::ask(&inst, &asked_by, new)?;
    match (a.has("wait"), a.has("json")) {
        (false, false) => out.line(&r.id.to_string())?,
        (false, true) => out.line(&r.to_json_line().to_string())?,
        (true, false) => {
            out.line(&r.id.to_string())?;
            out.flush()?;
        }
        (true, true) => {}
    }
    if !a.has("wait") {
        return Ok(0);
    }
    waited(
        out,
        a,
        approval::wait(&inst, r.id, &WaitOptions::default())?,
    )
}

/// `aw-ctl approvals wait ID [--timeout DURATION]`: exit 0 when approved, 1 when rejected,
/// expired, skipped, or still pending after the timeout.
pub(super) fn wait(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let id = approval::parse_id(args[0])?;
    let timeout = a
        .string("timeout")
        .map(|t| cli::parse_duration(&t, "--timeout"))
        .transpose()?;
    inst.require()?;
    let opts = WaitOptions {
        timeout,
        ..WaitOptions::default()
    };
    waited(out, a, approval::wait(&inst, id, &opts)?)
}

/// Print how a wait ended: `approved by user: REASON` (or the request's JSON with its
/// outcome); 0 when approved, else 1.
fn waited(out: &mut Out, a: &Call, (r, o): (Request, Outcome)) -> Result<u8> {
    if a.has("json") {
        let mut v = r.to_json_line();
        v["outcome"] = o.name().into();
        out.line(&v.to_string())?;
    } else {
        let mut line = o.name().to_string();
        if let Some(d) = &r.decision {
            if matches!(o, Outcome::Approved | Outcome::Rejected) {
                line.push_str(&format!(" by {}", d.by));
            }
            if let Some(why) = &d.reason {
                line.push_str(&format!(": {why}"));
            }
        }
        if r.escalated_from.is_some() {
            line.push_str(&format!(" (approval {}, escalated)", r.id));
        }
        out.line(&line)?;
    }
    Ok(match o {
        Outcome::Approved => 0,
        _ => 1,
    })
}

/// `aw-ctl approve ID [--reason TEXT] [--as AGENT]`.
pub(super) fn approve(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    decide(out, a, args, Verdict::Approve)
}

/// `aw-ctl reject ID [--reason TEXT] [--as AGENT]`.
pub(super) fn reject(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    decide(out, a, args, Verdict::Reject)
}

fn decide(out: &mut Out, a: &Call, args: &[&str], verdict: Verdict) -> Result<u8> {
    let inst = a.common.instance()?;
    let id = approval::parse_id(args[0])?;
    let who = who(a)?;
    inst.require()?;
    let r = approval::decide(&inst, id, &who, verdict, a.string("reason").as_deref())?;
    out.line(&format!("approval {} {}", r.id, r.state.name()))?;
    Ok(0)
}
