//! `aw-ctl merge`: ask to merge a branch (and serve the queue until it is merged), list,
//! show and cancel requests, serve the queue.

use super::{Call, who};
use crate::cli::Out;
use crate::error::{Error, Result};
use crate::merge::{self, Config, NewRequest, Request, State};

/// `aw-ctl merge request [AGENT] [--branch B] [--into T] [--how rebase|merge] [--verify CMD]
/// [--no-wait] [--as WHO]`: prints the id, then waits until it is served; exit 0 merged, 1
/// conflict, failed or cancelled.
pub(super) fn request(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let by = who(a)?;
    let agent = args.first().map_or_else(|| by.clone(), |s| s.to_string());
    let mut config = Config::load(&inst)?;
    if let Some(t) = a.string("into") {
        config.into = t;
    }
    if let Some(h) = a.string("how") {
        config.how = h.parse()?;
    }
    if let Some(v) = a.string("verify") {
        config.verify = Some(v);
    }
    let repo = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    let r = merge::request(
        &inst,
        NewRequest {
            agent,
            branch: a.string("branch"),
            by,
            repo,
            config,
        },
    )?;
    out.line(&r.id.to_string())?;
    out.flush()?;
    if a.has("no-wait") {
        return Ok(0);
    }
    let r = merge::wait(&inst, r.id)?;
    outcome(&r)
}

/// Exit 0 when `r` merged; a one-line error (exit 1) otherwise.
fn outcome(r: &Request) -> Result<u8> {
    match r.state {
        State::Merged => Ok(0),
        _ => Err(Error::No(format!(
            "merge #{} {}: {}",
            r.id,
            r.state,
            r.result.note.as_deref().unwrap_or_default()
        ))
        .hint(format!("aw-ctl merge show {}", r.id))),
    }
}

/// `aw-ctl merge ls [--json]`: one request per line.
pub(super) fn ls(out: &mut Out, a: &Call, _: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    for r in merge::list(&inst)? {
        if a.has("json") {
            out.line(&r.to_json().to_string())?;
        } else {
            out.line(&r.summary())?;
        }
    }
    Ok(0)
}

/// `aw-ctl merge show ID [--json]`: the request, and the output of its last attempt.
pub(super) fn show(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    let r = merge::show(&inst, merge::parse_id(args[0])?)?;
    if a.has("json") {
        out.line(&r.to_json().to_string())?;
        return Ok(0);
    }
    out.line(&format!(
        "merge #{}: {} into {} ({})",
        r.id, r.branch, r.into, r.how
    ))?;
    out.line(&format!("state: {}", r.state))?;
    out.line(&format!("agent: {}", r.agent))?;
    out.line(&format!("asked: {} by {}", r.asked, r.asked_by))?;
    out.line(&format!("repository: {}", r.repo.display()))?;
    if let Some(v) = &r.verify {
        out.line(&format!("verify: {v} (at most {} s)", r.timeout))?;
    }
    if let Some(h) = &r.holder {
        let gone = match r.state == State::Running && !merge::serving(&inst)? {
            true => " (gone: whoever serves the queue next serves it again)",
            false => "",
        };
        out.line(&format!(
            "served by: pid {} on {} since {}{gone}",
            h.pid, h.host, h.since
        ))?;
    }
    let res = &r.result;
    for (k, v) in [
        ("finished", r.finished.as_deref()),
        ("was", res.old.as_deref()),
        ("now", res.commit.as_deref()),
        ("result", res.note.as_deref()),
    ] {
        if let Some(v) = v {
            out.line(&format!("{k}: {v}"))?;
        }
    }
    if !res.conflicts.is_empty() {
        out.line(&format!("conflicts: {}", res.conflicts.join(" ")))?;
    }
    if r.attempts > 0 {
        let log = r.log(&inst, r.attempts);
        out.line("")?;
        out.line(&format!(
            "output of attempt {} ({}):",
            r.attempts,
            log.display()
        ))?;
        match crate::fs::owned::read(&log) {
            Ok(bytes) => out.raw(&bytes)?,
            Err(e) => out.line(&format!("(not readable: {e})"))?,
        }
    }
    Ok(0)
}

/// `aw-ctl merge cancel ID [--as WHO]`: prints the id; exit 1 when it is no longer queued.
pub(super) fn cancel(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let id = merge::parse_id(args[0])?;
    let by = who(a)?;
    inst.require()?;
    let r = merge::cancel(&inst, id, &by)?;
    out.line(&r.id.to_string())?;
    Ok(0)
}

/// `aw-ctl merge serve`: serve the queue until it is empty (nothing when another process
/// serves it); one line per request served.
pub(super) fn serve(out: &mut Out, a: &Call, _: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    for id in merge::serve(&inst)?.ids {
        out.line(&merge::show(&inst, id)?.summary())?;
    }
    Ok(0)
}
