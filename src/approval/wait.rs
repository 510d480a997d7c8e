//! Waiting for a decision: blocked on an inotify watch of the request's file (no CPU spent
//! while nothing changes), with the polling of a network file system where other hosts
//! write, woken at the request's expiry to expire it, and following an escalation to the
//! request it made. Nothing of the wait is kept in the waiter: a waiter killed and started
//! again finds the request as the files have it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;

use super::answer::answer;
use super::request::{Request, State, Then};
use super::store::{self, decide};
use crate::channel::Channel;
use crate::error::{Error, Result};
use crate::fs::watch::{FileWaiter, Waker};
use crate::instance::Instance;
use crate::process::Stop;

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Approved,
    Rejected,
    /// Its time ran out with `then: fail`.
    Expired,
    /// Its time ran out with `then: skip`.
    Skipped,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Approved => "approved",
            Outcome::Rejected => "rejected",
            Outcome::Expired => "expired",
            Outcome::Skipped => "skipped",
        }
    }

    /// The outcome of a decided request; `None` while it is pending or escalated.
    pub fn of(r: &Request) -> Option<Outcome> {
        match r.state {
            State::Approved => Some(Outcome::Approved),
            State::Rejected => Some(Outcome::Rejected),
            State::Expired if r.then == Then::Skip => Some(Outcome::Skipped),
            State::Expired => Some(Outcome::Expired),
            State::Pending | State::Escalated => None,
        }
    }
}

/// How long to wait, and what may end the wait early.
#[derive(Default)]
pub struct WaitOptions<'a> {
    /// Give up (exit 1) after this long, the request still pending.
    pub timeout: Option<Duration>,
    /// Checked at least every [`STOP_CHECK`]: set, the wait ends interrupted.
    pub stop: Option<&'a Stop>,
    /// Poll at this interval instead of watching (`--poll`).
    pub poll: Option<Duration>,
}

/// How often a wait given a [`Stop`] looks at it.
pub const STOP_CHECK: Duration = Duration::from_millis(250);

/// How often a wait on a network file system reads the request again, beside its watch
/// (which polls the file there): a safety net for a change the watch did not tell.
const NETFS_CHECK: Duration = Duration::from_secs(2);

/// How long after its expiry a request is read again (the clocks of two hosts may differ
/// a little, and a timer may fire a little early).
const EXPIRY_SLACK: Duration = Duration::from_millis(20);

/// Wait until request `id` of `inst` is decided, or its time ran out (and the requests it
/// escalated to are decided, or theirs ran out): the last request of that chain and the
/// outcome. A request that lets replies answer it is decided by an approver's answer in
/// the channel too. Errors: no such request (66), `timeout` passed (1), `stop` set.
pub fn wait(inst: &Instance, id: u64, opts: &WaitOptions<'_>) -> Result<(Request, Outcome)> {
    // Refused (66) before any watch: the folder may not even exist.
    let kind = store::show(inst, id)?.kind;
    let span = crate::otel::work::approval(id, kind.name());
    let done = wait_for(inst, id, opts);
    let ended = match &done {
        Ok((r, o)) => Ok((r.id, o.name(), r.decision.as_ref().map(|d| d.by.as_str()))),
        Err(e) => Err(e.to_string()),
    };
    crate::otel::work::end_approval(span, id, ended);
    done
}

/// [`wait`], without its span.
fn wait_for(inst: &Instance, id: u64, opts: &WaitOptions<'_>) -> Result<(Request, Outcome)> {
    let deadline = opts.timeout.map(crate::time::deadline);
    let mut id = id;
    let mut waiter: Option<(u64, FileWaiter)> = None;
    let mut replies: Option<Replies> = None;
    loop {
        // Watched before it is read, so that no change between the read and the wait is
        // missed.
        let w = match &mut waiter {
            Some((wid, w)) if *wid == id => w,
            _ => {
                let w = FileWaiter::new(&store::path(inst, id), opts.poll)?;
                if let Some(why) = w.fallback() {
                    crate::warn::warn_note("aw", why);
                }
                &mut waiter.insert((id, w)).1
            }
        };
        let r = store::show(inst, id)?;
        if let Some(o) = Outcome::of(&r) {
            return Ok((r, o));
        }
        if let Some(to) = r.escalated_to {
            id = to;
            continue;
        }
        if r.replies {
            let rep = match &mut replies {
                Some(rep) => rep,
                None => replies.insert(Replies::new(inst, r.since)?),
            };
            rep.wake(w.waker());
            if rep.apply(inst, &r)? {
                continue;
            }
        }
        if opts.stop.is_some_and(Stop::is_set) {
            return Err(Error::Interrupted);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let t = opts.timeout.unwrap_or_default().as_secs_f64();
            return Err(Error::No(format!(
                "approval {id} is still pending after {t} s"
            )));
        }
        let mut nap: Option<Duration> = None;
        let mut cap = |d: Duration| nap = Some(nap.map_or(d, |n| n.min(d)));
        if let Some(d) = deadline {
            cap(d.saturating_duration_since(Instant::now()));
        }
        if let Some(e) = r.expires_at() {
            let left = (e - Utc::now()).to_std().unwrap_or_default();
            cap(left + EXPIRY_SLACK);
        }
        if opts.stop.is_some() {
            cap(STOP_CHECK);
        }
        if w.polls_too() {
            cap(NETFS_CHECK);
        }
        w.wait(nap);
    }
}

/// The answers in the channel to the request waited for: read from entry `since` on, and
/// a thread that watches the channel and wakes the waiter when it grows.
struct Replies {
    after: u64,
    watcher: Option<Watcher>,
}

/// A thread blocked on a watch of the channel, that wakes a waiter when it changes.
struct Watcher {
    done: Arc<AtomicBool>,
    own: Waker,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The waiter it wakes now.
    target: Arc<std::sync::Mutex<Option<Waker>>>,
}

impl Replies {
    fn new(inst: &Instance, since: u64) -> Result<Replies> {
        Ok(Replies {
            after: since,
            watcher: Some(Watcher::new(inst)?),
        })
    }

    /// Wake `w` when the channel grows.
    fn wake(&mut self, w: Waker) {
        if let Some(watcher) = &self.watcher {
            *watcher.target.lock().unwrap_or_else(|e| e.into_inner()) = Some(w);
        }
    }

    /// Apply the answers to `r` from its approvers posted since the last look; whether one
    /// decided it.
    fn apply(&mut self, inst: &Instance, r: &Request) -> Result<bool> {
        let batch = Channel::new(inst).read_since(self.after)?;
        let mut decided = false;
        for e in batch.entries {
            self.after = self.after.max(e.id);
            let Some(a) = answer(&e.message) else {
                continue;
            };
            if decided || a.id != r.id || !r.may_decide(&e.from) {
                continue;
            }
            match decide(inst, r.id, &e.from, a.verdict, a.reason.as_deref()) {
                Ok(_) => decided = true,
                // Decided meanwhile by another: the next read of the file tells how.
                Err(Error::Invalid(_) | Error::Denied(_)) => decided = true,
                Err(e) => return Err(e),
            }
        }
        Ok(decided)
    }
}

impl Watcher {
    fn new(inst: &Instance) -> Result<Watcher> {
        let mut w = FileWaiter::new(&inst.channel_path(), None)?;
        let own = w.waker();
        let done = Arc::new(AtomicBool::new(false));
        let target: Arc<std::sync::Mutex<Option<Waker>>> = Arc::default();
        let (d, t) = (done.clone(), target.clone());
        let thread = std::thread::spawn(move || {
            while !d.load(Ordering::SeqCst) {
                if w.wait(None)
                    && let Some(t) = &*t.lock().unwrap_or_else(|e| e.into_inner())
                {
                    t.wake();
                }
            }
        });
        Ok(Watcher {
            done,
            own,
            thread: Some(thread),
            target,
        })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        self.own.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
