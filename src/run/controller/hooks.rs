//! Firing the workflow's lifecycle hooks (see [`crate::lifecycle`]) and acting on their
//! answers. A hook whose answer a step waits for runs where the step is: `on_run_end` and
//! `on_card_done` on the run's thread before the agent is given back, `on_quiet` on the
//! runner's, `on_budget` as the run ends. The others (`on_idle`, `on_merge`,
//! `on_approval`) run on a thread of their own, counted in
//! [`HookState::running`](crate::lifecycle::HookState::running) so that
//! the work is not done while one runs. Each is bounded by its timeout.
//!
//! Exit 2 ("not yet"): its stderr is posted in the channel as `system`, addressed to the
//! event's agent (for `on_idle`, `on_run_end`, `on_card_done` and `on_merge`), which wakes it
//! with that message in its prompt; for the others it is posted as it is. A hook that says
//! not yet [`MAX_NOT_YET`] times in a row for one agent is no longer posted (reported
//! instead) until it says something else. Any other answer is a warning on stderr; every
//! answer is a line of the hook log.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use super::attempt::{Controller, Due};
use super::shared::Shared;
use crate::instance::Instance;
use crate::lifecycle::{self, Answer, Event, Kind, Notice, Ran, Record};
use crate::process::{Spawning, Stop};

/// How many "not yet" in a row of one hook for one agent are posted; past it they are
/// reported, not posted, so that a hook cannot keep an agent running for ever.
pub const MAX_NOT_YET: u32 = 10;

/// How aw-run starts a program of its own (a hook, a merge's verify command): the leader
/// of a process group that dies with the thread that started it, watched by the guard (so
/// that it does not outlive aw-run killed with SIGKILL either), killed once `stop`
/// interrupts calls.
pub fn spawning(stop: Option<&Stop>) -> Spawning<'_> {
    Spawning {
        prepare: &prepare,
        watch: &watch,
        release: &release,
        stop,
    }
}

fn prepare(c: &mut Command) -> u64 {
    crate::run::backend::exec::prepare(c, true)
}

fn watch(n: u64, pgid: u32) {
    crate::run::guard::watch(n, pgid);
}

fn release(pgid: u32) {
    crate::run::guard::release(pgid);
}

/// Run the hook named for `ev` now, when there is one and the server is not stopping (a
/// budget's stop aside); whether it said not yet and that was posted.
pub fn fire(inst: &Instance, shared: &Shared, ev: &Event) -> bool {
    let Some(hook) = shared.hooks.get(ev.kind) else {
        return false;
    };
    if ev.kind != Kind::Budget && shared.lock().stopping {
        return false;
    }
    let ran = lifecycle::run(hook, ev, &shared.hooks_dir, &spawning(Some(&shared.stop)));
    act(inst, shared, ev, &hook.run, &ran)
}

/// Run the hook named for `ev` on a thread of its own, counted as running until it has
/// answered (and its "not yet" is posted).
pub fn fire_later(inst: &Instance, shared: &Arc<Shared>, ev: Event) {
    if shared.hooks.get(ev.kind).is_none() {
        return;
    }
    {
        let mut st = shared.lock();
        if st.stopping {
            return;
        }
        st.hooks.running += 1;
    }
    let (inst, shared) = (inst.clone(), shared.clone());
    std::thread::spawn(move || {
        fire(&inst, &shared, &ev);
        let mut st = shared.lock();
        st.hooks.running -= 1;
        st.changes += 1;
        drop(st);
        shared.cv.notify_all();
    });
}

/// Fire `on_approval` and `on_merge` for what the channel told of since the last time.
pub fn fire_notices(inst: &Instance, shared: &Arc<Shared>) {
    let notices = shared.lock().hooks.take_notices();
    for n in notices {
        if let Some(ev) = notice_event(inst, n) {
            fire_later(inst, shared, ev);
        }
    }
}

/// The event of notice `n`, from the record it names: an approval still pending, a merge
/// merged, in conflict or failed.
fn notice_event(inst: &Instance, n: Notice) -> Option<Event> {
    match n {
        Notice::Approval(id) => {
            let r = crate::approval::show(inst, id).ok()?;
            Some(
                Event::new(Kind::Approval, inst.name())
                    .with("approval", r.id)
                    .with("kind", r.kind.name())
                    .with("what", r.what)
                    .with("asked_by", r.asked_by)
                    .with("by", r.by)
                    .with("status", r.state.name())
                    .with("expires", r.expires),
            )
        }
        Notice::Merge(id) => {
            use crate::merge::State;
            let r = crate::merge::show(inst, id).ok()?;
            if !matches!(r.state, State::Merged | State::Conflict | State::Failed) {
                return None;
            }
            Some(
                Event::new(Kind::Merge, inst.name())
                    .with("merge", r.id)
                    .with("agent", r.agent)
                    .with("branch", r.branch)
                    .with("into", r.into)
                    .with("status", r.state.name())
                    .with("reason", r.result.note)
                    .with("commit", r.result.commit)
                    .with("conflicts", r.result.conflicts),
            )
        }
    }
}

/// After the run `due` of `ctl`, `ok` or not, `took` long: `on_card_done` when its card is
/// done (a "not yet" opens the card again and gives it back to the agent), then
/// `on_run_end`. Whether the card was given back to the agent (it is not to be released).
pub(super) fn after_run(
    ctl: &Controller,
    shared: &Shared,
    due: &Due,
    ok: bool,
    took: Duration,
) -> bool {
    if shared.hooks.is_empty() {
        return false;
    }
    let (inst, agent) = (&ctl.inst, ctl.agent.as_str());
    let mut kept = false;
    if let Some(c) = &due.card
        && shared.hooks.get(Kind::CardDone).is_some()
        && let Ok(now) = crate::board::show(inst, c.id)
        && now.state == crate::board::State::Done
    {
        let ev = Event::new(Kind::CardDone, inst.name())
            .with("agent", agent)
            .with("run", due.run)
            .with("card", c.id)
            .with("title", now.title.clone())
            .with("note", now.note.clone());
        if fire(inst, shared, &ev) {
            let why = "a hook said it is not done yet";
            match crate::board::reopen(inst, c.id, agent, super::cards::CARD_TTL, why) {
                Ok(_) => kept = true,
                Err(e) => crate::warn::warn(
                    "aw-run",
                    format!("{agent}: card {} not opened again: {e}", c.id),
                ),
            }
        }
    }
    let status = match (ok, ctl.stop.is_set()) {
        (true, _) => "ok",
        (false, true) => "stopped",
        (false, false) => "failed",
    };
    let ev = Event::new(Kind::RunEnd, inst.name())
        .with("agent", agent)
        .with("run", due.run)
        .with("status", status)
        .with("duration", took.as_secs_f64())
        .with("card", due.card.as_ref().map(|c| c.id))
        .with(
            "messages",
            due.msgs.iter().map(|m| m.entry.id).collect::<Vec<_>>(),
        );
    fire(inst, shared, &ev);
    kept
}

/// Act on what the hook `run` answered for `ev`: post a "not yet", report a failure, and
/// log it; whether a "not yet" was posted.
fn act(inst: &Instance, shared: &Shared, ev: &Event, run: &str, ran: &Ran) -> bool {
    let agent = ev.agent().filter(|_| ev.kind.for_an_agent());
    let key = agent.unwrap_or_default();
    let whose = agent.map_or(String::new(), |a| format!(" for {a}"));
    let mut why = None;
    let mut posted = false;
    let outcome = match &ran.answer {
        Answer::Go => {
            shared.lock().hooks.answered(ev.kind, key);
            "ok"
        }
        Answer::NotYet(text) => {
            let n = shared.lock().hooks.not_yet(ev.kind, key);
            if n > MAX_NOT_YET {
                let w = format!(
                    "said not yet {n} times in a row: no longer posted (at most {MAX_NOT_YET})"
                );
                crate::warn::warn("aw-run", format!("hook {}{whose}: {w}", ev.kind));
                why = Some(w);
                "not yet (not posted)"
            } else {
                match post(inst, ev, agent, text) {
                    Ok(()) => posted = true,
                    Err(e) => {
                        let w = format!("its message was not posted: {e}");
                        crate::warn::warn("aw-run", format!("hook {}{whose}: {w}", ev.kind));
                        why = Some(w);
                    }
                }
                "not yet"
            }
        }
        Answer::Failed(w) => {
            let said = last_line(&ran.stderr).map_or(String::new(), |l| format!(" ({l})"));
            crate::warn::warn(
                "aw-run",
                format!("hook {}{whose}: {run}: {w}{said}", ev.kind),
            );
            why = Some(w.clone());
            "failed"
        }
    };
    let record = Record {
        at: crate::time::now(),
        event: ev.kind.name().to_string(),
        agent: ev.agent().map(str::to_string),
        run: run.to_string(),
        outcome: outcome.to_string(),
        exit: ran.code,
        why,
        secs: ran.duration.as_secs_f64(),
        stderr: tail(&ran.stderr),
    };
    if let Err(e) = lifecycle::append(inst, &record) {
        crate::warn::warn("aw-run", format!("hook {}: not logged: {e}", ev.kind));
    }
    posted
}

/// Post the "not yet" `text` of the hook for `ev` as `system`, addressed to `agent`.
fn post(inst: &Instance, ev: &Event, agent: Option<&str>, text: &str) -> crate::Result<()> {
    let body: String = match text.is_empty() {
        true => "(it said nothing on stderr)".to_string(),
        false => text
            .chars()
            .map(|c| match c {
                '\n' | '\t' => c,
                c if c.is_control() => '?',
                c => c,
            })
            .collect(),
    };
    let head = match agent {
        Some(a) => format!("@{a} hook {} says not yet:", ev.kind),
        None => format!("hook {} says not yet:", ev.kind),
    };
    let opts = crate::post::PostOptions::default();
    crate::post::post(inst, "system", &format!("{head}\n{body}"), &opts).map(drop)
}

/// Lines of a hook's stderr kept in its log.
const LOG_LINES: usize = 20;

/// The last [`LOG_LINES`] lines of `text`.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(LOG_LINES)..].join("\n")
}

/// The last line of `text` that says something.
fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}
