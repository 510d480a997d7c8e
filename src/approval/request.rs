//! A request for approval, as its file holds it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

crate::keyword_enum! {
    /// What is asked to go ahead.
    pub enum Kind {
        /// A step of a pipeline: a setup or shell task.
        Task = "task",
        /// An agent's run.
        Run = "run",
        /// A merge into a branch.
        Merge = "merge",
        /// A tool call.
        Tool = "tool",
    }
}

crate::keyword_enum! {
    /// Where a request is in its life.
    pub enum State {
        /// Waiting for an approver.
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
        /// Its time ran out with `then: fail` or `then: skip`.
        Expired = "expired",
        /// Its time ran out and it was asked again of someone else (`escalated_to`).
        Escalated = "escalated",
    }
}

impl State {
    /// Decided: nothing more happens to the request.
    pub fn is_closed(self) -> bool {
        self != State::Pending
    }
}

/// What happens when a request's time runs out: it fails, the step is skipped, or it is
/// asked again of an agent or a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Then {
    Fail,
    Skip,
    Escalate(String),
}

impl Then {
    /// `fail`, `skip`, or an agent name.
    pub fn parse(text: &str) -> crate::Result<Then> {
        match text.trim() {
            "fail" => Ok(Then::Fail),
            "skip" => Ok(Then::Skip),
            name => match crate::names::is_agent_name(name) {
                true => Ok(Then::Escalate(name.to_string())),
                false => Err(crate::Error::invalid(format!(
                    "then '{}': expected fail, skip or the agent to escalate to",
                    crate::names::sanitize(text)
                ))),
            },
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Then::Fail => "fail",
            Then::Skip => "skip",
            Then::Escalate(a) => a,
        }
    }
}

impl From<Then> for String {
    fn from(t: Then) -> String {
        t.as_str().to_string()
    }
}

impl TryFrom<String> for Then {
    type Error = crate::Error;
    fn try_from(s: String) -> crate::Result<Then> {
        Then::parse(&s)
    }
}

/// Who decided, when, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The approver, or `aw` when the time ran out.
    pub by: String,
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A request for approval, as its file `approvals/<id>.json` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    pub kind: Kind,
    /// What is asked, in one line.
    pub what: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
    pub asked_by: String,
    /// Who may approve or reject it.
    pub by: Vec<String>,
    pub state: State,
    pub asked: String,
    /// When its time runs out; never without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    pub then: Then,
    /// What asked it, so that the same asker asking again finds it (a pipeline step after a
    /// restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// An approver may also answer by a reply in the channel, after entry `since`.
    #[serde(default)]
    pub replies: bool,
    #[serde(default)]
    pub since: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// The request it was escalated to, once its time ran out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_to: Option<u64>,
    /// The request it escalates, when it was asked because that one's time ran out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_from: Option<u64>,
    /// When the step it held acted on its outcome: asking again with its key then asks
    /// anew (the next run of the step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<String>,
}

impl Request {
    /// When its time runs out, if it has a time.
    pub fn expires_at(&self) -> Option<DateTime<Utc>> {
        let e = self.expires.as_deref()?;
        DateTime::parse_from_rfc3339(e)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    /// Pending, and its time ran out.
    pub fn is_due(&self) -> bool {
        self.state == State::Pending && self.expires_at().is_some_and(|t| t <= Utc::now())
    }

    /// May `who` decide it?
    pub fn may_decide(&self, who: &str) -> bool {
        self.by.iter().any(|b| b == who)
    }

    /// The line `aw-ctl approvals` prints.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{:>4}  {:<9}  {:<5}  {}  [asked by {}; by {}]",
            self.id,
            self.state.name(),
            self.kind.name(),
            self.what,
            self.asked_by,
            self.by.join(",")
        );
        match (&self.decision, self.state) {
            (Some(d), _) => {
                s.push_str(&format!("  [{} by {}", self.state.name(), d.by));
                if let Some(r) = &d.reason {
                    let first = r.lines().next().unwrap_or_default();
                    let more = if r.contains('\n') { " ..." } else { "" };
                    s.push_str(&format!(": {first}{more}"));
                }
                s.push(']');
            }
            (None, State::Pending) => {
                if let Some(e) = &self.expires {
                    s.push_str(&format!("  [expires {e}, then {}]", self.then.as_str()));
                }
            }
            (None, _) => {}
        }
        if let Some(to) = self.escalated_to {
            s.push_str(&format!("  [escalated to #{to}]"));
        }
        s
    }

    /// One line of `aw-ctl approvals --json`.
    pub fn to_json_line(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "kind": self.kind,
            "what": self.what,
            "asked_by": self.asked_by,
            "by": self.by,
            "state": self.state,
            "asked": self.asked,
            "expires": self.expires,
            "then": self.then,
            "decision": self.decision,
            "escalated_to": self.escalated_to,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn then_is_fail_skip_or_an_agent() {
        assert_eq!(Then::parse("fail").unwrap(), Then::Fail);
        assert_eq!(Then::parse("skip").unwrap(), Then::Skip);
        assert_eq!(Then::parse("lead").unwrap(), Then::Escalate("lead".into()));
        assert_eq!(Then::parse("no way").unwrap_err().exit_code(), 65);
        let json = serde_json::to_string(&Then::Escalate("lead".into())).unwrap();
        assert_eq!(json, "\"lead\"");
    }
}
