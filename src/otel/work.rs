//! The spans of aw's own work around the agents: an approval waited for, a merge request
//! served. They are not GenAI operations, so their names and attributes are aw's (`aw.*`);
//! like the others they say ids, names and outcomes, never what a request or a command says.

use super::{Kind, Span, Status};

/// The span of a wait for approval request `id` of kind `kind` (`task`, `run`, `merge`,
/// `tool`), a child of this thread's current span.
pub fn approval(id: u64, kind: &str) -> Span {
    let mut s = Span::start(format!("approval {kind}"), Kind::Internal, super::current());
    s.set("aw.approval.id", id);
    s.set("aw.approval.kind", kind);
    s
}

/// End the span of the wait for request `id`: the request that decided it (the last of an
/// escalation), its outcome (`approved`, `rejected`, `expired`, `skipped`) and who
/// decided; or why the wait ended without one.
pub fn end_approval(mut s: Span, id: u64, ended: Result<(u64, &str, Option<&str>), String>) {
    match ended {
        Ok((last, outcome, by)) => {
            s.set("aw.approval.outcome", outcome);
            if last != id {
                s.set("aw.approval.escalated_to", last);
            }
            if let Some(by) = by {
                s.set("aw.approval.decided_by", by);
            }
            s.status = match outcome {
                "approved" | "skipped" => Status::Ok,
                o => {
                    s.set("error.type", o);
                    Status::Error(format!("approval {o}"))
                }
            };
        }
        Err(why) => s.status = Status::Error(why),
    }
    s.end();
}

/// What a merge request is: its id, the agent and branch, the target, how (`rebase`,
/// `merge`), and the attempt being served.
pub struct Merge<'a> {
    pub id: u64,
    pub agent: &'a str,
    pub branch: &'a str,
    pub into: &'a str,
    pub how: &'a str,
    pub attempt: u32,
}

/// The span of an attempt at merge request `m`, a child of this thread's current span.
pub fn merge(m: &Merge) -> Span {
    let mut s = Span::start(
        format!("merge {}", m.agent),
        Kind::Internal,
        super::current(),
    );
    s.set("aw.merge.id", m.id);
    s.set("gen_ai.agent.name", m.agent);
    s.set("aw.merge.branch", m.branch);
    s.set("aw.merge.into", m.into);
    s.set("aw.merge.how", m.how);
    s.set("aw.merge.attempt", m.attempt);
    s
}

/// End a merge's span with the state the request was left in (`merged`, `conflict`,
/// `failed`, `rejected`, `cancelled`; `running` when the server was stopped) and the
/// number of paths in conflict.
pub fn end_merge(mut s: Span, state: &str, conflicts: usize) {
    s.set("aw.merge.outcome", state);
    if conflicts > 0 {
        s.set("aw.merge.conflicts", conflicts as u64);
    }
    s.status = match state {
        "merged" => Status::Ok,
        "cancelled" | "running" => Status::Unset,
        o => {
            s.set("error.type", o);
            Status::Error(format!("merge {o}"))
        }
    };
    s.end();
}
