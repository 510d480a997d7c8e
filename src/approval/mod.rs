//! Approval gates: a step, a run, a merge or a tool call that waits until an approver says
//! yes or no, or its time runs out.
//!
//! Each request is one JSON file, `approvals/<id>.json` under the instance, readable
//! without aw (see aw-workflow(5)). Every change is made under the approvals lock
//! (`_state/approvals.lock`): read the request, write it atomically. Ids come from a
//! counter in `_state/approvals.json` that only grows, so an id is never given twice.
//!
//! A request is posted in the channel as `system`, mentioning its approvers; they decide
//! with `aw-ctl approve|reject`, the `approve` and `reject` tools, or (when the request lets
//! them) a reply in the channel ([`answer`]). A request whose time ran out is expired by
//! whoever reads it first: failed, skipped, or asked again of someone else. A waiter
//! ([`wait`]) keeps nothing of its own: killed and started again, it finds the request
//! still pending, or decided while no one waited.

mod answer;
mod request;
mod store;
mod wait;

pub use answer::{Answer, answer};
pub use request::{Decision, Kind, Request, State, Then};
pub use store::{
    DIR, MAX_APPROVERS, MAX_DETAILS, MAX_KEY, MAX_REASON, MAX_WHAT, NewRequest, Verdict, ask,
    decide, dir, list, parse_id, path, settle, show,
};
pub use wait::{Outcome, STOP_CHECK, WaitOptions, wait};
