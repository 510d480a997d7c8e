//! `aw-ctl lease`: take leases on paths of the work tree, renew, release and list them, and
//! check whether paths are leased by someone else.

use std::path::PathBuf;

use super::{Call, who};
use crate::board;
use crate::cli::{self, Out};
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::lease::{self, Lease, Request, tree};

/// The paths given, as leases name them: relative to the work tree.
fn paths(a: &Call, args: &[&str]) -> Result<Vec<String>> {
    let root = a.common.root()?;
    let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    let top: PathBuf = tree::work_tree(root.path(), &cwd);
    args.iter()
        .map(|p| tree::normalize(&top, &cwd, p))
        .collect()
}

/// The card `who` works on: `--card`, else the one card it holds (none when it holds
/// none or several).
fn card(inst: &Instance, a: &Call, who: &str) -> Result<Option<u64>> {
    if let Some(id) = a.string("card") {
        return board::parse_id(&id).map(Some);
    }
    Ok(match board::held_by(inst, who)?[..] {
        [one] => Some(one),
        _ => None,
    })
}

/// `aw-ctl lease take PATH|GLOB... [--as AGENT] [--shared] [--ttl DURATION] [--reason TEXT]
/// [--wait DURATION] [--card ID]`: prints the lease id; 75 on a conflict.
pub(super) fn take(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = who(a)?;
    let ttl = match a.string("ttl") {
        Some(t) => cli::parse_duration(&t, "--ttl")?,
        None => lease::DEFAULT_TTL,
    };
    let wait = a
        .string("wait")
        .map(|w| cli::parse_duration(&w, "--wait"))
        .transpose()?;
    let req = Request {
        paths: paths(a, args)?,
        shared: a.has("shared"),
        ttl,
        reason: a.string("reason").unwrap_or_default(),
        card: card(&inst, a, &who)?,
        holder: who,
    };
    let l = match wait {
        Some(w) => lease::take_waiting(&inst, &req, w)?,
        None => lease::take(&inst, &req)?,
    };
    out.line(&l.id)?;
    Ok(0)
}

/// Is `word` a lease id (`L` and a number)?
fn is_id(word: &str) -> bool {
    word.strip_prefix('L')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `aw-ctl lease release (ID | [PATH...]) [--as AGENT]`: one lease by its id, or the
/// agent's leases (those naming one of PATHs when given); prints the ids released.
pub(super) fn release(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = who(a)?;
    inst.require()?;
    let released = match args {
        [id] if is_id(id) => vec![lease::release(&inst, id, &who)?],
        _ => lease::release_holder(&inst, &who, &paths(a, args)?)?,
    };
    if released.is_empty() {
        return Err(Error::No(format!("{who} holds no lease to release")));
    }
    for l in released {
        out.line(&l.id)?;
    }
    Ok(0)
}

/// `aw-ctl lease renew ID [--as AGENT]`: prints when it lapses now.
pub(super) fn renew(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = who(a)?;
    inst.require()?;
    let l = lease::renew(&inst, args[0], &who)?;
    out.line(&format!("{} until {}", l.id, l.until()))?;
    Ok(0)
}

/// `aw-ctl lease ls [--json]`: the live leases, one a line.
pub(super) fn ls(out: &mut Out, a: &Call, _: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    if !inst.exists() {
        return Ok(0);
    }
    for l in lease::list(&inst)? {
        match a.has("json") {
            true => out.line(&l.to_json_line().to_string())?,
            false => out.line(&l.line())?,
        }
    }
    Ok(0)
}

/// `aw-ctl lease check PATH... [--as AGENT]`: exit 1 when a path is leased by someone
/// other than AGENT, printing each such path with the lease that holds it.
pub(super) fn check(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = who(a)?;
    let paths = paths(a, args)?;
    if !inst.exists() {
        return Ok(0);
    }
    let hits: Vec<(String, Lease)> = lease::check(&inst, &paths, Some(&who))?;
    for (path, l) in &hits {
        out.line(&format!("{path}: {}", l.line()))?;
    }
    Ok(u8::from(!hits.is_empty()))
}
