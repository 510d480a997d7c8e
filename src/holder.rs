//! Who holds a claim on a card or a lease on paths: an agent, the process that holds it for
//! the agent (its server, when one serves it), that process's host, and until when. A hold
//! lapses when its time runs out without renewal, or when the server that held it for its
//! agent serves it no more — gone, even killed -9, on whatever host.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::instance::Instance;

/// Who holds a claim or a lease, and until when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    pub agent: String,
    /// The process that holds it: the agent's server when one serves it, else the process
    /// that claimed it.
    pub pid: u32,
    /// That process's host name, and its host id (see `aw-ctl ps`).
    pub host: String,
    pub host_id: String,
    /// Is `pid` the agent's server?
    pub served: bool,
    /// When it was taken.
    pub since: String,
    /// When it lapses unless renewed.
    pub until: String,
    /// How long a renewal extends it, in seconds.
    pub ttl: u64,
}

impl Holder {
    /// `agent`'s hold from now for `ttl`.
    pub fn new(inst: &Instance, agent: &str, ttl: Duration) -> Holder {
        let here = crate::host::this();
        let (pid, host, host_id, served) = match crate::serve::record(inst, agent) {
            Some(s) => (
                s.pid,
                s.host.unwrap_or_else(|| here.name.clone()),
                s.host_id.unwrap_or_else(|| here.id.clone()),
                true,
            ),
            None => (
                std::process::id(),
                here.name.clone(),
                here.id.clone(),
                false,
            ),
        };
        Holder {
            agent: agent.to_string(),
            pid,
            host,
            host_id,
            served,
            since: crate::time::now(),
            until: stamp(Utc::now() + ttl),
            ttl: ttl.as_secs(),
        }
    }

    /// Why the claim lapsed, if it did: its time ran out, or the server that held it for
    /// its agent serves it no more (gone, on whatever host, or replaced by another).
    pub fn lapsed(&self, inst: &Instance) -> Option<String> {
        if DateTime::parse_from_rfc3339(&self.until).map_or(true, |t| t < Utc::now()) {
            return Some(format!(
                "the hold of {} ran out at {}",
                self.agent, self.until
            ));
        }
        let here = &crate::host::this().id;
        let serves = |s: crate::serve::Served| {
            s.pid == self.pid && s.host_id.as_ref().unwrap_or(here) == &self.host_id
        };
        let gone = self.served && !crate::serve::record(inst, &self.agent).is_some_and(serves);
        gone.then(|| {
            format!(
                "the server of {} (pid {} on {}) that held it is gone",
                self.agent, self.pid, self.host
            )
        })
    }

    /// Extend the hold by its time to live from now.
    pub fn renew(&mut self) {
        self.until = stamp(Utc::now() + Duration::from_secs(self.ttl));
    }
}

/// A time as holds write it: UTC to the millisecond.
pub fn stamp(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}
