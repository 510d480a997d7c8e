//! Serving the queue: whoever holds its lock serves the requests one at a time, in order of
//! id, those a killed server left `running` included.

use std::path::PathBuf;
use std::time::Duration;

use nix::fcntl::OFlag;

use super::attempt::{Attempt, Outcome};
use super::repo::{kill_left, remove_scratch};
use super::request::{self, Request, State, dir, update};
use crate::error::{Error, Result};
use crate::fs::Lock;
use crate::holder::Holder;
use crate::instance::Instance;
use crate::process::Spawning;

/// The requests one call of [`serve`] served, by id.
#[derive(Debug, Default)]
pub struct Served {
    pub ids: Vec<u64>,
}

/// The queue's lock.
fn queue_lock(inst: &Instance) -> PathBuf {
    dir(inst).join(".lock")
}

/// Serve the queue of `inst` until it is empty, unless another process serves it (then
/// nothing is done here: that one serves them). Requests left `running` by a server that is
/// gone are served again from scratch.
pub fn serve(inst: &Instance) -> Result<Served> {
    serve_with(inst, &Spawning::PLAIN)
}

/// [`serve`], its verify commands started as `how` says (a group that dies with the
/// caller, watched by its guard), until `how.stop` is set: a verify command under way is
/// then killed, and a wait for an approval ends; the request is left to be served again
/// (from scratch, by the next process that serves the queue), and the call ends
/// interrupted.
pub fn serve_until(inst: &Instance, how: &Spawning) -> Result<Served> {
    serve_with(inst, how)
}

fn serve_with(inst: &Instance, how: &Spawning) -> Result<Served> {
    if !dir(inst).is_dir() {
        return Ok(Served::default());
    }
    match Lock::try_exclusive(&queue_lock(inst))? {
        Some(_held) => serve_locked(inst, how),
        None => Ok(Served::default()),
    }
}

/// The requests of `inst` still to be served (queued, or running) that this process's user
/// asked: those a server of this user serves.
pub fn pending(inst: &Instance) -> Result<Vec<Request>> {
    let me = nix::unistd::geteuid().as_raw();
    Ok(request::list(inst)?
        .into_iter()
        .filter(|r| !r.state.is_final() && request::owner(inst, r.id) == Some(me))
        .collect())
}

/// Does a process serve the queue of `inst` now (hold its lock)? A request `running` while
/// none does was left by a server that is gone: the next to serve the queue serves it again.
pub fn serving(inst: &Instance) -> Result<bool> {
    let path = queue_lock(inst);
    let network = crate::fs::netfs::is_network_fs(&dir(inst));
    Ok(crate::fs::lock::held(&path, network)?.unwrap_or(false))
}

/// Wait until the request `id` is served, serving the queue whenever its lock is free; the
/// request then.
pub fn wait(inst: &Instance, id: u64) -> Result<Request> {
    loop {
        let r = request::show(inst, id)?;
        if r.state.is_final() {
            return Ok(r);
        }
        if !mine(inst, &r, &mut vec![r.id]) {
            return Err(Error::denied(format!(
                "merge #{id}: asked by another user; only that user's processes serve it"
            )));
        }
        // Held by another server for as long as it serves: wait for it, however long.
        let _held = Lock::exclusive_timeout(&queue_lock(inst), Duration::from_secs(1 << 40))?;
        serve_locked(inst, &Spawning::PLAIN)?;
    }
}

/// Serve every request waiting, the caller holding the queue's lock.
fn serve_locked(inst: &Instance, how: &Spawning) -> Result<Served> {
    let mut served = Served::default();
    let mut told = Vec::new();
    while let Some(r) = request::list(inst)?
        .into_iter()
        .find(|r| !r.state.is_final() && mine(inst, r, &mut told))
    {
        served.ids.push(r.id);
        serve_one(inst, r.id, how)?;
    }
    Ok(served)
}

/// Is `r` asked by this process's user (its file is this user's)? A request of another user
/// is never served here: its verify command would run as this user. Said once on stderr.
fn mine(inst: &Instance, r: &Request, told: &mut Vec<u64>) -> bool {
    let me = nix::unistd::geteuid().as_raw();
    let Some(uid) = request::owner(inst, r.id) else {
        return false;
    };
    if uid != me && !told.contains(&r.id) {
        told.push(r.id);
        crate::warn::warn(
            "aw",
            format!(
                "merge #{}: asked by another user (uid {uid}); only that user's processes serve it",
                r.id
            ),
        );
    }
    uid == me
}

/// Serve the request `id`: mark it running (this process its holder), attempt it, record
/// and announce what came of it. Stopped, it is left running, to be served again.
fn serve_one(inst: &Instance, id: u64, how: &Spawning) -> Result<()> {
    let scratch = dir(inst).join("work").join(id.to_string());
    let mut left: Option<(Option<Holder>, Option<PathBuf>)> = None;
    let r = update(inst, id, |r| {
        if r.state.is_final() {
            return Ok(());
        }
        if r.state == State::Running {
            // Its server is gone: the queue's lock was free.
            left = Some((r.holder.take(), r.scratch.take()));
        }
        r.state = State::Running;
        r.attempts += 1;
        r.started = Some(crate::time::now());
        r.holder = Some(holder(r));
        r.scratch = Some(scratch.clone());
        Ok(())
    })?;
    if r.state != State::Running {
        return Ok(());
    }
    if let Some((h, Some(p))) = &left
        && request::is_scratch(inst, p)
    {
        if h.as_ref()
            .is_some_and(|h| h.host_id == crate::host::this().id)
        {
            kill_left(p);
        }
        remove_scratch(&r.repo, p);
    }
    let span = crate::otel::work::merge(&crate::otel::work::Merge {
        id,
        agent: &r.agent,
        branch: &r.branch,
        into: &r.into,
        how: r.how.name(),
        attempt: r.attempts,
    });
    let entered = span.enter();
    let log_path = r.log(inst, r.attempts);
    let flags = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_TRUNC | OFlag::O_APPEND;
    let outcome = crate::fs::owned::open(&log_path, flags, crate::fs::owned::CREATE)
        .map_err(|e| Error::create(&log_path, e))
        .and_then(|log| {
            let mut a = Attempt {
                inst,
                how,
                r: &r,
                scratch,
                log,
                ident: false,
                drivers: Vec::new(),
            };
            if let Some((h, _)) = &left {
                let _ = std::io::Write::write_all(&mut a.log, resumed(h.as_ref()).as_bytes());
            }
            a.run()
        });
    drop(entered);
    let outcome = match outcome {
        Err(Error::Interrupted) => {
            crate::otel::work::end_merge(span, State::Running.name(), 0);
            return Err(Error::Interrupted);
        }
        Err(e) => Outcome::Failed {
            old: None,
            note: e.to_string(),
        },
        Ok(o) => o,
    };
    let done = update(inst, id, |r| {
        record(r, outcome);
        Ok(())
    })?;
    crate::otel::work::end_merge(span, done.state.name(), done.result.conflicts.len());
    super::approve::settle(inst, &done);
    announce(inst, &done);
    Ok(())
}

/// What the log of an attempt that serves a request again says first.
fn resumed(h: Option<&Holder>) -> String {
    match h {
        Some(h) => format!(
            "# served again: the server that had it (pid {} on {}) is gone\n",
            h.pid, h.host
        ),
        None => "# served again: the server that had it is gone\n".to_string(),
    }
}

/// This process as the holder of `r` while it serves it.
fn holder(r: &Request) -> Holder {
    let here = crate::host::this();
    let ttl = Duration::from_secs(r.timeout.saturating_add(3600));
    Holder {
        agent: r.agent.clone(),
        pid: std::process::id(),
        host: here.name.clone(),
        host_id: here.id.clone(),
        served: false,
        since: crate::time::now(),
        until: crate::holder::stamp(chrono::Utc::now() + ttl),
        ttl: ttl.as_secs(),
    }
}

/// Record `o` in `r`: its state, result and end.
fn record(r: &mut Request, o: Outcome) {
    let res = &mut r.result;
    *res = Default::default();
    r.state = match o {
        Outcome::Merged { old, new, note } => {
            res.old = Some(old);
            res.commit = Some(new);
            res.note = Some(note);
            State::Merged
        }
        Outcome::Conflict { old, paths } => {
            res.note = Some(format!("conflicts in {}", paths.join(", ")));
            res.old = Some(old);
            res.conflicts = paths;
            State::Conflict
        }
        Outcome::Verify { old, tail, why } => {
            res.old = Some(old);
            res.note = Some(format!("verify failed: {why}"));
            res.output = Some(tail);
            State::Failed
        }
        Outcome::Rejected { old, note } => {
            res.old = Some(old);
            res.note = Some(note);
            State::Rejected
        }
        Outcome::Skipped { old, note } => {
            res.old = Some(old);
            res.note = Some(format!("{note}: not merged"));
            State::Cancelled
        }
        Outcome::Failed { old, note } => {
            res.old = old;
            res.note = Some(note);
            State::Failed
        }
    };
    r.finished = Some(crate::time::now());
    r.holder = None;
    r.scratch = None;
}

/// Post what came of `r` in the channel as `system`: a conflict or a failure mentioning its
/// agent, so that it wakes to fix it; a merge naming it without a mention (nothing is left
/// for it to do). A failure to post is a warning (the request is recorded).
fn announce(inst: &Instance, r: &Request) {
    let head = format!("@{} merge #{}: {} into {}", r.agent, r.id, r.branch, r.into);
    let res = &r.result;
    let text = match r.state {
        State::Merged => format!(
            "merge #{} of {}: {} into {}: merged ({}).",
            r.id,
            r.agent,
            r.branch,
            r.into,
            res.note.as_deref().unwrap_or_default()
        ),
        State::Conflict => format!(
            "{head}: conflict in {}. {} is unchanged: bring your branch up to date with {} \
             (git rebase {}), fix them, and ask again.",
            res.conflicts.join(", "),
            r.into,
            r.into,
            r.into
        ),
        State::Rejected | State::Cancelled => format!(
            "{head}: {}, {} is unchanged: {}.",
            r.state,
            r.into,
            res.note.as_deref().unwrap_or_default()
        ),
        _ => {
            let mut t = format!(
                "{head}: failed, {} is unchanged: {}.",
                r.into,
                res.note.as_deref().unwrap_or_default()
            );
            if let Some(out) = res.output.as_deref().filter(|o| !o.trim().is_empty()) {
                t.push_str(&format!(
                    " The last lines of its output (all of it: aw-ctl merge show {}):\n```\n{}\n```",
                    r.id,
                    out.replace("```", "'''")
                ));
            }
            t
        }
    };
    let opts = crate::post::PostOptions::default();
    if let Err(e) = crate::post::post(inst, "system", &text, &opts) {
        crate::warn::warn("aw", format!("merge #{}: not posted: {e}", r.id));
    }
}
