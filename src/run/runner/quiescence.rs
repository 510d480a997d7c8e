//! The decision that the work is done: the dispatcher has looked at every change and no run
//! is under way, then under the lock no entry that no wake-up told of, no unread message
//! left and no active proposal; in keep mode, the quiet moment that starts the loop guard's
//! counts afresh. A workflow is not done while a worker of its agents that another server
//! serves is at work: what that worker spends counts against the workflow's budget, however
//! the servers are woken; nor, when it serves the merge queue, while a request of the
//! instance is queued or running (it may yet fail, and wake its agent). The workflow's
//! `on_quiet` hook fires at each quiet moment (once until the next run) before the work is
//! found done.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::options::Options;
use super::workers::Adopter;
use crate::error::exit;
use crate::instance::Instance;
use crate::lifecycle::{Event, Kind};
use crate::run::controller::Shared;
use crate::serve::ControllerState;

/// Wait until the work is done (exit 0), or a reason to stop with 1.
///
/// Done is known, not guessed from a quiet time: the dispatcher has looked at the inbox of
/// every agent that the entries it was told of mention, and every run it started, with the
/// process group of its backend, has ended and been looked after; then, under the lock so
/// that no run starts meanwhile, the channel holds no entry that no wake-up told of, every
/// agent whose last look left messages unread still has them on disk for a reason (failed,
/// paused, capped), and no proposal is active. A message posted since (by a writer outside
/// the attempts) either wakes the agents it mentions through the channel watch before that,
/// or stays unread for the next run.
pub(super) fn wait_done(
    inst: &Instance,
    shared: &Shared,
    opts: &Options,
    adopter: &Mutex<Adopter>,
    merges: bool,
) -> (u8, Option<String>) {
    let deadline = opts.timeout.map(crate::time::deadline);
    let mut st = shared.lock();
    loop {
        if st.stopping {
            return (exit::INTERRUPTED, None);
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) {
            let t = opts.timeout.unwrap_or_default();
            return (
                exit::NO,
                Some(format!(
                    "timeout: the workflow was not done after {} s",
                    t.as_secs_f64()
                )),
            );
        }
        let generation = st.generation;
        if !st.agents.is_empty() && st.closed == st.agents.len() {
            // A server of workers only, all of them closed: nothing is left to serve.
            return (exit::OK, None);
        }
        if !st.quiet() {
            st = wait(shared, st, left);
            continue;
        }
        match verdict(inst, &mut st, opts.keep, merges) {
            Verdict::Done if quiet_hook_due(shared, &st) => {
                // Once per quiet moment: its "not yet" may wake agents, and the work is
                // looked at again after it.
                let runs = st.agents.values().map(|a| a.total).sum::<u64>();
                st.hooks.quiet_at = Some(runs);
                drop(st);
                let ev = Event::new(Kind::Quiet, inst.name()).with("runs", runs);
                crate::run::controller::hooks::fire(inst, shared, &ev);
                st = shared.lock();
            }
            Verdict::Done if opts.keep => {
                // Quiet: the loop guard counts afresh, and nothing happens until the next
                // change.
                for name in std::mem::take(&mut st.ran) {
                    if let Some(a) = st.agents.get_mut(&name) {
                        a.runs = 0;
                    }
                }
                // Until the next change, a controller closed (a worker let go, one whose
                // spawner ended), or the end of --timeout.
                let was_closed = st.closed;
                let idle = |s: &mut crate::run::controller::State| {
                    s.generation == generation && !s.stopping && s.closed == was_closed
                };
                st = match left {
                    Some(l) => {
                        shared
                            .cv
                            .wait_timeout_while(st, l, idle)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                    None => shared
                        .cv
                        .wait_while(st, idle)
                        .unwrap_or_else(|e| e.into_inner()),
                };
            }
            Verdict::Done => {
                // A worker registered just now may not have been taken yet.
                let ours: Vec<String> = st.agents.keys().cloned().collect();
                drop(st);
                let taken = adopter.lock().unwrap_or_else(|e| e.into_inner()).look(true);
                let elsewhere = !taken && worker_at_work_elsewhere(inst, &ours);
                let over = elsewhere
                    && crate::ledger::load(inst)
                        .is_ok_and(|l| shared.budget.exceeded(&l.spent).is_some());
                st = shared.lock();
                if over {
                    // Said (exit 1) as the run ends.
                    return (exit::NO, None);
                }
                if elsewhere {
                    // Its state is in a file, not the channel: looked at again soon.
                    let t = left.map_or(WORKERS_LOOK, |l| l.min(WORKERS_LOOK));
                    st = shared
                        .cv
                        .wait_timeout(st, t)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    continue;
                }
                if !taken {
                    return (exit::OK, None);
                }
            }
            Verdict::Stop(why) => return (exit::NO, Some(why)),
            Verdict::Missed => {
                // Something arrived that no wake-up announced: look again (at every agent,
                // when no entry tells whom it concerns).
                st.generation += 1;
                shared.cv.notify_all();
            }
            Verdict::Wait => {
                // An active proposal (wait for votes, or its expiry), a card held elsewhere
                // or a merge request being served.
                let t = left.map_or(Duration::from_secs(1), |l| l.min(Duration::from_secs(1)));
                let (s, _) = shared
                    .cv
                    .wait_timeout_while(st, t, |s| s.generation == generation && !s.stopping)
                    .unwrap_or_else(|e| e.into_inner());
                st = s;
            }
        }
    }
}

/// Whether the workflow's `on_quiet` hook is to fire: it names one, and it did not fire
/// since the last run.
fn quiet_hook_due(shared: &Shared, st: &crate::run::controller::State) -> bool {
    let runs = st.agents.values().map(|a| a.total).sum::<u64>();
    shared.hooks.get(Kind::Quiet).is_some() && st.hooks.quiet_at != Some(runs)
}

/// How often a workflow that waits for its workers on other servers looks at them.
const WORKERS_LOOK: Duration = Duration::from_millis(200);

/// Whether a worker that `ours` (the agents of this run) spawned, or one of their workers
/// spawned, is served by another server and at work there: running, or idle with messages
/// to read.
fn worker_at_work_elsewhere(inst: &Instance, ours: &[String]) -> bool {
    let Ok(reg) = crate::registry::Registry::load_shared(inst) else {
        return false;
    };
    let mut spawners: std::collections::BTreeSet<&str> = ours.iter().map(String::as_str).collect();
    let mut workers = Vec::new();
    loop {
        let found: Vec<&str> = reg
            .agents
            .iter()
            .filter(|a| !a.closed && !spawners.contains(a.name.as_str()))
            .filter(|a| {
                a.spawned_by
                    .as_deref()
                    .is_some_and(|s| spawners.contains(s))
            })
            .map(|a| a.name.as_str())
            .collect();
        if found.is_empty() {
            break;
        }
        spawners.extend(&found);
        workers.extend(found);
    }
    workers.into_iter().any(|w| {
        crate::serve::record(inst, w).is_some_and(|r| match r.state {
            ControllerState::Running => true,
            ControllerState::Idle => crate::inbox::unread_count(inst, w).is_ok_and(|n| n > 0),
            _ => false,
        })
    })
}

fn wait<'a>(
    shared: &'a Shared,
    st: std::sync::MutexGuard<'a, crate::run::controller::State>,
    left: Option<Duration>,
) -> std::sync::MutexGuard<'a, crate::run::controller::State> {
    match left {
        Some(l) => {
            shared
                .cv
                .wait_timeout(st, l)
                .unwrap_or_else(|e| e.into_inner())
                .0
        }
        None => shared.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
    }
}

enum Verdict {
    Done,
    Stop(String),
    Missed,
    Wait,
}

/// With the dispatcher quiet: is the work done? In keep mode an agent that failed for good
/// does not end the run (it cools down).
///
/// Only the agents whose last look left messages unread are read from disk: every other
/// agent was looked at after the last entry that mentions it, and its run (if any) acked
/// what it was shown.
fn verdict(
    inst: &Instance,
    st: &mut crate::run::controller::State,
    keep: bool,
    merges: bool,
) -> Verdict {
    if st.note_new_entries(inst) || st.all_pending {
        // Entries that no wake-up told of yet: their agents are looked at first.
        return Verdict::Missed;
    }
    let mut failed = Vec::new();
    let mut capped = Vec::new();
    let mut missed = false;
    for name in &st.unread {
        let Some(a) = st.agents.get(name).filter(|a| !a.closed) else {
            continue;
        };
        let unread = crate::inbox::unread_count(inst, name).unwrap_or(1);
        if unread == 0 {
            continue;
        }
        if a.capped {
            capped.push(name.as_str());
        } else if a.failed || a.paused {
            failed.push(name.as_str());
        } else {
            missed = true;
        }
    }
    if missed {
        st.all_pending = true;
        return Verdict::Missed;
    }
    if !capped.is_empty() {
        // Every agent that used up its runs took part in the loop.
        let all: Vec<&str> = st
            .agents
            .iter()
            .filter(|(_, a)| a.capped || a.runs >= a.cap)
            .map(|(n, _)| n.as_str())
            .collect();
        return Verdict::Stop(format!(
            "loop guard: {} reached the run limit with messages still unread",
            all.join(", ")
        ));
    }
    if !failed.is_empty() && !keep {
        return Verdict::Stop(format!(
            "{} failed; their messages were left unread",
            failed.join(", ")
        ));
    }
    if let Some(v) = board_verdict(inst, st) {
        return v;
    }
    if merges && super::merges::merging(inst) {
        // Its server says what came of it (and wakes it) when it is served.
        return Verdict::Wait;
    }
    match crate::proposal::list(inst, true) {
        Ok(p) if !p.is_empty() => Verdict::Wait,
        _ => Verdict::Done,
    }
}

/// With agents that work the board: the work is not done while a card is ready for one of
/// them (meant for it or for no one) that can still run, nor while a card is held by
/// someone who is not an agent of this server (it may be finished, and unblock others).
/// Cards that wait for cards that will never be done do not keep it going.
fn board_verdict(inst: &Instance, st: &mut crate::run::controller::State) -> Option<Verdict> {
    use crate::run::controller::cards::ready_for;
    let ours = st.board_agents();
    if ours.is_empty() {
        return None;
    }
    let cards = crate::board::list(inst).ok()?;
    let mut stuck = Vec::new();
    let mut due = Vec::new();
    for name in ours {
        let a = &st.agents[&name];
        if !ready_for(&cards, &name) || a.paused {
            continue;
        }
        match a.runs >= a.cap || a.failed {
            true => stuck.push(name),
            false => due.push(name),
        }
    }
    if !due.is_empty() {
        st.pending.extend(due);
        return Some(Verdict::Missed);
    }
    if !stuck.is_empty() {
        return Some(Verdict::Stop(format!(
            "{} reached the run limit or failed with cards still ready on the board",
            stuck.join(", ")
        )));
    }
    let held_elsewhere = cards.values().any(|c| {
        c.holder
            .as_ref()
            .is_some_and(|h| !st.agents.contains_key(&h.agent))
    });
    held_elsewhere.then_some(Verdict::Wait)
}
