//! The merge tool: `merge_request`.

use super::caller::{Caller, Reply};
use super::params;
use crate::error::{Error, Result};
use crate::merge::{self, Config, NewRequest, State};

/// Queue a request to merge the caller's branch (or `branch`) into the instance's target,
/// with the instance's method and verify command; when it waits (`wait`, by default the
/// instance's settings: not when an aw-run serves the queue), serve the queue until it is
/// served, and say what came of it.
pub(super) fn merge_request(s: &Caller, a: params::MergeRequest) -> Result<Reply> {
    let repo = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    let config = Config::load(&s.inst)?;
    let wait = a.wait.map_or(config.wait, |w| w.0);
    let r = merge::request(
        &s.inst,
        NewRequest {
            agent: s.agent.clone(),
            branch: a.branch,
            by: s.agent.clone(),
            repo,
            config,
        },
    )?;
    let head = format!("Merge request #{}: {} into {}", r.id, r.branch, r.into);
    if !wait {
        return Ok(Reply::with(
            format!("{head}: queued. You will be told in the channel when it is served."),
            r.to_json(),
        ));
    }
    let r = merge::wait(&s.inst, r.id)?;
    let res = &r.result;
    let text = match r.state {
        State::Merged => format!("{head}: merged ({}).", res.note.as_deref().unwrap_or("")),
        State::Conflict => format!(
            "{head}: conflict in {}; {} is unchanged. Rebase your branch onto {}, fix them, \
             commit, and ask again.",
            res.conflicts.join(", "),
            r.into,
            r.into
        ),
        _ => {
            let mut t = format!(
                "{head}: {}; {} is unchanged: {}.",
                r.state,
                r.into,
                res.note.as_deref().unwrap_or("")
            );
            if let Some(out) = &res.output {
                t.push_str(&format!("\nThe last lines of the verify output:\n{out}"));
            }
            t
        }
    };
    Ok(Reply::with(text, r.to_json()))
}
