//! The approval tools: `approve` and `reject`. Every agent has them; a call is refused
//! unless the caller is one of the request's approvers.

use super::caller::{Caller, Reply};
use super::params;
use crate::approval::{self, Verdict};
use crate::error::{Error, Result};

pub(super) fn decide(s: &Caller, a: params::Decide, verdict: Verdict) -> Result<Reply> {
    if a.id.0 == 0 {
        return Err(Error::invalid("'id' must be an approval id, 1 or more"));
    }
    let r = approval::decide(&s.inst, a.id.0, &s.agent, verdict, a.reason.as_deref())?;
    Ok(Reply::with(
        format!(
            "Approval #{} {}: {}. Posted in the channel.",
            r.id,
            r.state.name(),
            r.what
        ),
        r.to_json_line(),
    ))
}
