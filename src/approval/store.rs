//! The files of the approvals: one per request, the counter of ids, the lock; asking,
//! deciding, and the lazy expiry of a request whose time ran out.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chrono::Utc;
use serde::{Deserialize, Serialize};

use super::request::{Decision, Kind, Request, State, Then};
use crate::error::{Error, Result};
use crate::fs::records::{self, Record};
use crate::fs::{Lock, atomic_write};
use crate::instance::Instance;

/// The folder of the requests, under the instance.
pub const DIR: &str = "approvals";

/// The counter of ids, under `_state/`.
const COUNTER: &str = "approvals.json";

/// The longest summary (`what`), in bytes.
pub const MAX_WHAT: usize = 200;

/// The longest details, and the longest reason, in bytes.
pub const MAX_DETAILS: usize = 4096;
pub const MAX_REASON: usize = 1000;

/// The longest key, in bytes.
pub const MAX_KEY: usize = 200;

/// The most approvers of one request.
pub const MAX_APPROVERS: usize = 20;

/// Who expires a request and posts for aw.
const SYSTEM: &str = "system";

/// A request to ask.
#[derive(Debug, Clone)]
pub struct NewRequest {
    pub kind: Kind,
    pub what: String,
    pub details: String,
    pub by: Vec<String>,
    /// How long the approvers have; `None`: no limit.
    pub timeout: Option<Duration>,
    pub then: Then,
    /// What asks: asking again with the same key gives the request asked first.
    pub key: Option<String>,
    /// An approver may also answer by a reply in the channel.
    pub replies: bool,
}

/// Approve or reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    Reject,
}

impl Verdict {
    fn state(self) -> State {
        match self {
            Verdict::Approve => State::Approved,
            Verdict::Reject => State::Rejected,
        }
    }
}

/// The counter of ids.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Counter {
    /// The last id given.
    last: u64,
}

/// The folder of the requests of `inst`.
pub fn dir(inst: &Instance) -> PathBuf {
    inst.dir().join(DIR)
}

/// The file of request `id` of `inst`.
pub fn path(inst: &Instance, id: u64) -> PathBuf {
    records::path(&dir(inst), id)
}

/// Take the approvals lock of `inst` (creating the instance and its folder if needed).
fn lock(inst: &Instance) -> Result<Lock> {
    inst.create()?;
    let d = dir(inst);
    crate::fs::owned::folder(&d, true).map_err(|e| Error::create(&d, e))?;
    Lock::exclusive(&inst.state_file("approvals.lock"))
}

impl Record for Request {
    const NOUN: &'static str = "approval";
    const VALID: &'static str = "approval request";
    const EXAMPLE: u64 = 3;

    fn id(&self) -> u64 {
        self.id
    }
}

/// Read an id as a user gives it (`3`, or `#3`).
pub fn parse_id(text: &str) -> Result<u64> {
    records::parse_id::<Request>(text)
}

/// Request `id` of `inst`, as stored.
fn read(inst: &Instance, id: u64) -> Result<Option<Request>> {
    records::read(&dir(inst), id)
}

fn not_found(inst: &Instance, id: u64) -> Error {
    Error::not_found(format!("no approval {id} in instance {}", inst.name()))
}

/// Write a request (the caller holds the lock).
fn store(inst: &Instance, r: &Request) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(r).expect("request serializes");
    bytes.push(b'\n');
    atomic_write(&path(inst, r.id), &bytes)
}

/// Every request of `inst` as stored, by id.
fn read_all(inst: &Instance) -> Result<BTreeMap<u64, Request>> {
    records::read_all(&dir(inst))
}

/// Request `id` of `inst`, expired first when its time ran out.
pub fn show(inst: &Instance, id: u64) -> Result<Request> {
    let r = read(inst, id)?.ok_or_else(|| not_found(inst, id))?;
    match r.is_due() {
        true => expire(inst, id),
        false => Ok(r),
    }
}

/// Every request of `inst` by id, those whose time ran out expired first.
pub fn list(inst: &Instance) -> Result<BTreeMap<u64, Request>> {
    let mut all = read_all(inst)?;
    let due: Vec<u64> = all.values().filter(|r| r.is_due()).map(|r| r.id).collect();
    for id in due {
        let r = expire(inst, id)?;
        if let Some(to) = r.escalated_to
            && let Some(n) = read(inst, to)?
        {
            all.insert(to, n);
        }
        all.insert(id, r);
    }
    Ok(all)
}

/// Check what a new request says.
fn check(new: &NewRequest) -> Result<()> {
    let what = new.what.trim();
    if what.is_empty() || what.contains(['\n', '\r']) || what.len() > MAX_WHAT {
        return Err(Error::invalid(format!(
            "what is asked: expected one line of 1 to {MAX_WHAT} bytes"
        )));
    }
    if new.details.len() > MAX_DETAILS {
        return Err(Error::invalid(format!(
            "details: over the limit of {MAX_DETAILS} bytes"
        )));
    }
    if new.by.is_empty() {
        return Err(Error::invalid(
            "no approver: name who may approve (an agent, or a person such as user)",
        ));
    }
    for b in &new.by {
        crate::names::check_agent(b)?;
    }
    if new.by.len() > MAX_APPROVERS {
        return Err(Error::invalid(format!(
            "{} approvers: at most {MAX_APPROVERS}",
            new.by.len()
        )));
    }
    if let Some(k) = &new.key
        && (k.is_empty() || k.len() > MAX_KEY || k.contains(['\n', '\r']))
    {
        return Err(Error::invalid(format!(
            "key: expected one line of 1 to {MAX_KEY} bytes"
        )));
    }
    if let Some(t) = new.timeout {
        crate::time::check(t).map_err(|why| Error::invalid(format!("timeout: {why}")))?;
    }
    Ok(())
}

/// Ask `new` as `asked_by`: the request is stored, then posted in the channel as `system`
/// mentioning every approver. With a key already asked, the request asked first instead,
/// and `false`.
pub fn ask(inst: &Instance, asked_by: &str, new: NewRequest) -> Result<(Request, bool)> {
    crate::names::check_agent(asked_by)?;
    check(&new)?;
    let _lock = lock(inst)?;
    let all = read_all(inst)?;
    if let Some(k) = &new.key
        && let Some(r) = all
            .values()
            .find(|r| r.key.as_ref() == Some(k) && r.settled.is_none())
    {
        return Ok((r.clone(), false));
    }
    let id = next_id(inst, &all)?;
    let now = Utc::now();
    let mut by: Vec<String> = Vec::new();
    for b in new.by {
        if !by.contains(&b) {
            by.push(b);
        }
    }
    let r = Request {
        id,
        kind: new.kind,
        what: new.what.trim().to_string(),
        details: new.details,
        asked_by: asked_by.to_string(),
        by,
        state: State::Pending,
        asked: crate::holder::stamp(now),
        expires: new.timeout.map(|t| crate::holder::stamp(now + t)),
        then: new.then,
        key: new.key,
        replies: new.replies,
        since: since(inst),
        decision: None,
        escalated_to: None,
        escalated_from: None,
        settled: None,
    };
    store(inst, &r)?;
    announce(inst, &r, None)?;
    Ok((r, true))
}

/// The next id (the caller holds the lock): past every request there is too, should the
/// counter have been lost.
fn next_id(inst: &Instance, all: &BTreeMap<u64, Request>) -> Result<u64> {
    crate::state::update_locked(inst, COUNTER, |c: &mut Counter| {
        c.last = c.last.max(all.keys().next_back().copied().unwrap_or(0)) + 1;
        Ok(c.last)
    })
}

/// The last entry of the channel: replies that answer a request come after it.
fn since(inst: &Instance) -> u64 {
    crate::channel::Channel::new(inst).last_id().unwrap_or(0)
}

/// How to answer `r`, in the channel.
fn how_to_answer(r: &Request) -> String {
    let mut s = format!(
        "Answer with `aw-ctl approve {id}` or `aw-ctl reject {id} --reason TEXT`",
        id = r.id
    );
    if r.replies {
        s.push_str(&format!(
            ", or reply `approve #{id}` or `reject #{id}: REASON`",
            id = r.id
        ));
    }
    s.push('.');
    if let Some(e) = &r.expires {
        s.push_str(&format!(" Expires {e} (then {}).", r.then.as_str()));
    }
    s
}

/// Post request `r` in the channel, mentioning its approvers.
fn announce(inst: &Instance, r: &Request, escalates: Option<&Request>) -> Result<()> {
    let at = crate::post::at_names(&r.by).replace(',', "");
    let head = match escalates {
        Some(old) => format!(
            "{at} [APPROVAL #{}] {} (asked by {}; escalated from #{}, unanswered by {})",
            r.id,
            r.what,
            r.asked_by,
            old.id,
            old.by.join(", ")
        ),
        None => format!(
            "{at} [APPROVAL #{}] {} ({}, asked by {})",
            r.id,
            r.what,
            r.kind.name(),
            r.asked_by
        ),
    };
    let mut text = format!("{head}\n{}", how_to_answer(r));
    if !r.details.is_empty() {
        text.push_str("\n\n");
        text.push_str(r.details.trim_end());
    }
    post(inst, &text)
}

/// The mention of the asker that a post about `r` begins with: none when aw asked.
fn to(r: &Request) -> String {
    match r.asked_by == SYSTEM {
        true => String::new(),
        false => format!("@{} ", r.asked_by),
    }
}

fn post(inst: &Instance, text: &str) -> Result<()> {
    crate::post::post(inst, SYSTEM, text, &Default::default()).map(|_| ())
}

/// Expire request `id` if its time ran out (under the lock, by whoever comes first): with
/// `then: fail` or `skip` it is expired; with `then: AGENT` it is asked again of that agent
/// (a new request, with the same time) and escalated. Either is posted in the channel.
fn expire(inst: &Instance, id: u64) -> Result<Request> {
    let _lock = lock(inst)?;
    let mut r = read(inst, id)?.ok_or_else(|| not_found(inst, id))?;
    if !r.is_due() {
        return Ok(r);
    }
    let until = r.expires.clone().unwrap_or_default();
    let note = format!("no answer by {until}");
    let escalated = match r.then.clone() {
        Then::Escalate(to) => Some(escalate(inst, &r, &to)?),
        Then::Fail | Then::Skip => None,
    };
    r.state = match escalated {
        Some(_) => State::Escalated,
        None => State::Expired,
    };
    r.escalated_to = escalated.as_ref().map(|n| n.id);
    r.decision = Some(Decision {
        by: "aw".into(),
        at: crate::time::now(),
        reason: Some(format!("{note}; then {}", r.then.as_str())),
    });
    store(inst, &r)?;
    match &escalated {
        Some(n) => announce(inst, n, Some(&r))?,
        None => post(
            inst,
            &format!(
                "{}[APPROVAL #{}] expired: {} ({note}; then {})",
                to(&r),
                r.id,
                r.what,
                r.then.as_str()
            ),
        )?,
    }
    Ok(r)
}

/// The request that escalates `old` to `to` (the caller holds the lock): the one made
/// before, should a process have been killed between making it and marking `old`.
fn escalate(inst: &Instance, old: &Request, to: &str) -> Result<Request> {
    let all = read_all(inst)?;
    if let Some(n) = all.values().find(|n| n.escalated_from == Some(old.id)) {
        return Ok(n.clone());
    }
    let now = Utc::now();
    let time = old
        .expires_at()
        .zip(chrono::DateTime::parse_from_rfc3339(&old.asked).ok())
        .map(|(e, a)| e.signed_duration_since(a))
        .unwrap_or_default();
    let n = Request {
        id: next_id(inst, &all)?,
        by: vec![to.to_string()],
        state: State::Pending,
        asked: crate::holder::stamp(now),
        expires: Some(crate::holder::stamp(now + time)),
        then: Then::Fail,
        key: None,
        since: since(inst),
        decision: None,
        escalated_to: None,
        escalated_from: Some(old.id),
        settled: None,
        ..old.clone()
    };
    store(inst, &n)?;
    Ok(n)
}

/// Record that the step request `id` held acted on its outcome (decided): asking again
/// with its key asks anew. Marked before the step runs, so that a step is never run twice
/// for one approval, even when its runner is killed while it runs.
pub fn settle(inst: &Instance, id: u64) -> Result<Request> {
    let _lock = lock(inst)?;
    let mut r = read(inst, id)?.ok_or_else(|| not_found(inst, id))?;
    if r.settled.is_none() {
        r.settled = Some(crate::time::now());
        store(inst, &r)?;
    }
    Ok(r)
}

/// Approve or reject request `id` as `who`, with a reason: refused with 77 when `who` is
/// not one of its approvers, 65 when it is decided already (or expired, or escalated), 66
/// when there is no such request. The decision is posted in the channel, mentioning the
/// asker.
pub fn decide(
    inst: &Instance,
    id: u64,
    who: &str,
    verdict: Verdict,
    reason: Option<&str>,
) -> Result<Request> {
    crate::names::check_agent(who)?;
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    if reason.is_some_and(|r| r.len() > MAX_REASON) {
        return Err(Error::invalid(format!(
            "reason: over the limit of {MAX_REASON} bytes"
        )));
    }
    if read(inst, id)?.is_none() {
        return Err(not_found(inst, id));
    }
    let mut r = show(inst, id)?;
    let _lock = lock(inst)?;
    // Read again under the lock: another decider may have come first.
    r = read(inst, id)?.unwrap_or(r);
    if let Some(to) = r.escalated_to {
        return Err(Error::invalid(format!(
            "approval {id} was escalated to #{to}: decide that one"
        )));
    }
    if r.is_due() {
        return Err(Error::invalid(format!(
            "approval {id} expired at {}",
            r.expires.as_deref().unwrap_or_default()
        )));
    }
    if !r.may_decide(who) {
        return Err(Error::Denied(format!(
            "{who} may not decide approval {id}: only {} may",
            r.by.join(", ")
        )));
    }
    if let Some(d) = r.decision.as_ref().filter(|_| r.state.is_closed()) {
        return Err(Error::invalid(format!(
            "approval {id} is {} already (by {} at {})",
            r.state.name(),
            d.by,
            d.at
        )));
    }
    r.state = verdict.state();
    r.decision = Some(Decision {
        by: who.to_string(),
        at: crate::time::now(),
        reason: reason.map(str::to_string),
    });
    store(inst, &r)?;
    let why = reason.map_or(String::new(), |x| format!(": {x}"));
    post(
        inst,
        &format!(
            "{}[APPROVAL #{id}] {} by {who}{why} ({})",
            to(&r),
            r.state.name(),
            r.what
        ),
    )?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst() -> (tempfile::TempDir, Instance) {
        let dir = tempfile::tempdir().unwrap();
        let inst = crate::instance::Root::new(dir.path())
            .instance("t")
            .unwrap();
        (dir, inst)
    }

    fn new(what: &str, key: Option<&str>) -> NewRequest {
        NewRequest {
            kind: Kind::Task,
            what: what.into(),
            details: String::new(),
            by: vec!["user".into()],
            timeout: None,
            then: Then::Fail,
            key: key.map(str::to_string),
            replies: false,
        }
    }

    #[test]
    fn ids_grow_are_never_given_again_and_a_key_is_asked_once() {
        let (_d, inst) = inst();
        assert_eq!(ask(&inst, "bot", new("a", None)).unwrap().0.id, 1);
        assert_eq!(ask(&inst, "bot", new("b", Some("k"))).unwrap().0.id, 2);
        crate::fs::owned::remove(&path(&inst, 1)).unwrap();
        let (again, asked) = ask(&inst, "bot", new("b", Some("k"))).unwrap();
        assert_eq!((again.id, asked), (2, false));
        assert_eq!(ask(&inst, "bot", new("c", None)).unwrap().0.id, 3);
    }

    #[test]
    fn a_decision_is_final_and_only_an_approver_decides() {
        let (_d, inst) = inst();
        ask(&inst, "bot", new("a", None)).unwrap();
        let e = decide(&inst, 1, "bot", Verdict::Approve, None).unwrap_err();
        assert_eq!(e.exit_code(), 77, "{e}");
        let r = decide(&inst, 1, "user", Verdict::Reject, Some("no")).unwrap();
        assert_eq!(r.state, State::Rejected);
        let e = decide(&inst, 1, "user", Verdict::Approve, None).unwrap_err();
        assert_eq!(e.exit_code(), 65, "{e}");
        assert_eq!(show(&inst, 1).unwrap().state, State::Rejected);
        let e = decide(&inst, 9, "user", Verdict::Approve, None).unwrap_err();
        assert_eq!(e.exit_code(), 66, "{e}");
    }
}
