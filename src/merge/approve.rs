//! The approval a verified result waits for before the target moves (`needs:` of the
//! workflow's `merge:`): asked when the request's result is verified, keyed by the
//! request's id, so that a server killed while it waits, or stopped, and the next one to
//! serve the request (which verifies it again) wait for the same approval; an approval
//! given meanwhile takes effect then.

use super::config::Needs;
use super::request::{self, Request, short};
use crate::approval::{self, Kind, NewRequest, Outcome, WaitOptions};
use crate::error::Result;
use crate::instance::Instance;
use crate::process::Stop;

/// What the approvers said of a verified result.
pub(super) enum Verdict {
    Approved,
    /// Rejected (by whom, and why), or its time ran out with `then: fail`: a sentence.
    Refused {
        rejected: bool,
        note: String,
    },
    /// Its time ran out with `then: skip`: not merged.
    Skipped(String),
}

/// The key of the approval of request `id`.
fn key(id: u64) -> String {
    format!("merge #{id}")
}

/// Ask the approval `needs` describes for merging `r` (its result `old -> new`, verified)
/// and wait for it; `stop` ends the wait (the request is then served again later).
pub(super) fn approve(
    inst: &Instance,
    r: &Request,
    needs: &Needs,
    (old, new): (&str, &str),
    stop: Option<&Stop>,
) -> Result<Verdict> {
    let what = format!("merge #{}: {} into {}", r.id, r.branch, r.into);
    let verified = match &r.verify {
        Some(v) => format!("verified: `{v}` passed"),
        None => "no verify command".to_string(),
    };
    let details = format!(
        "{} {} -> {} ({verified}). Approved, {} moves to {}; see aw-ctl merge show {}.",
        r.into,
        short(old),
        short(new),
        r.into,
        short(new),
        r.id
    );
    let new_request = NewRequest {
        kind: Kind::Merge,
        what,
        details,
        by: needs.by.clone(),
        timeout: needs.timeout.map(std::time::Duration::from_secs),
        then: needs.then.clone(),
        key: Some(key(r.id)),
        replies: needs.replies,
    };
    let (asked, _) = approval::ask(inst, "system", new_request)?;
    if r.approval != Some(asked.id) {
        request::update(inst, r.id, |m| {
            m.approval = Some(asked.id);
            Ok(())
        })?;
    }
    let opts = WaitOptions {
        stop,
        ..WaitOptions::default()
    };
    let (last, outcome) = approval::wait(inst, asked.id, &opts)?;
    let said = last.decision.as_ref().map_or(String::new(), |d| {
        match d
            .reason
            .as_deref()
            .map(|x| x.lines().next().unwrap_or_default())
        {
            Some(why) => format!(" by {}: {why}", d.by),
            None => format!(" by {}", d.by),
        }
    });
    let note = format!("approval #{} {}{said}", last.id, outcome.name());
    Ok(match outcome {
        Outcome::Approved => Verdict::Approved,
        Outcome::Rejected => Verdict::Refused {
            rejected: true,
            note,
        },
        Outcome::Expired => Verdict::Refused {
            rejected: false,
            note,
        },
        Outcome::Skipped => Verdict::Skipped(note),
    })
}

/// Mark the approval of `r`, if any, as acted on.
pub(super) fn settle(inst: &Instance, r: &Request) {
    if let Some(id) = r.approval
        && let Err(e) = approval::settle(inst, id)
    {
        crate::warn::warn("aw", format!("merge #{}: approval #{id}: {e}", r.id));
    }
}
