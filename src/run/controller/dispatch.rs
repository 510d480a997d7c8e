//! The dispatcher: one thread looks after every controller of a server, whatever their
//! number. A new channel entry concerns only the agents it mentions: the channel watcher
//! reads what is new ([`Shared::note_new_entries`]) and names them in [`State::pending`];
//! the dispatcher looks at those inboxes alone and starts each run that is due on a
//! thread of its own (one a run before left waiting, see [`super::spare`]), which gives the
//! controller back when the run ends. Idle agents cost no thread, no descriptor and no
//! work per message; threads grow with the runs under way (and the few kept for the next),
//! not with the agents.
//!
//! The dispatcher tells the runner where it is: [`State::handled`] is the generation it
//! has looked at everything up to, and [`State::in_flight`] counts the runs it has started
//! and not yet looked after again (see [`State::quiet`]).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::attempt::Controller;
use super::event::Report;
use super::look::{Look, Round, Waiting};
use super::loop_guard::{note_served, note_unserved};
use super::shared::{Shared, State};
use super::spare::Spares;
use crate::lifecycle::Kind;
use crate::registry::Registry;
use crate::serve::ControllerState;

/// What the dispatcher is told.
pub enum Mail {
    /// Serve this controller from now on (a worker taken).
    Add(Box<Controller>),
    /// A run ended; the controller is given back.
    Finished {
        ctl: Box<Controller>,
        ok: bool,
        /// The newest message the run was on.
        last: u64,
        busy: Duration,
    },
}

/// The dispatcher's mail. A letter is posted and taken under the lock of [`Shared::state`],
/// which counts the letters not yet taken ([`State::mail`]): the dispatcher waits on its
/// condition variable, and the runner tells by it whether anything is left to do.
#[derive(Default)]
pub struct Mailbox(Mutex<Vec<Mail>>);

impl Mailbox {
    fn letters(&self) -> MutexGuard<'_, Vec<Mail>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Post `m` to the dispatcher and wake it.
    pub fn send(&self, shared: &Shared, m: Mail) {
        let mut st = shared.lock();
        self.letters().push(m);
        st.mail += 1;
        drop(st);
        shared.cv.notify_all();
    }

    /// Take every letter, with `st` the state under its lock.
    fn take(&self, st: &mut State) -> Vec<Mail> {
        st.mail = 0;
        std::mem::take(&mut *self.letters())
    }
}

/// A controller while the dispatcher holds it; `None` while its run is under way.
struct Slot {
    ctl: Option<Box<Controller>>,
    waiting: Waiting,
    /// Its last run ended (its number, and whether it succeeded) and it was not looked at
    /// since: found idle then, `on_idle` fires.
    ended: Option<(u64, bool)>,
}

/// Serve `controllers` (and those mailed later, [`Mail::Add`]) until the runner stops; each
/// publishes `stopped` as it ends.
pub fn dispatch(
    shared: Arc<Shared>,
    mailbox: Arc<Mailbox>,
    report: Arc<Report>,
    controllers: Vec<Controller>,
) {
    let mut slots: BTreeMap<String, Slot> = BTreeMap::new();
    for c in controllers {
        add(&shared, &mut slots, Box::new(c));
    }
    // Cooldowns, soonest first (an entry whose slot moved on is skipped when it comes up).
    let mut timers: BinaryHeap<Reverse<(Instant, String)>> = BinaryHeap::new();
    // Where runs start: on a thread a run before left waiting, or on a new one.
    let spares = Arc::new(Spares::default());
    loop {
        let mut st = shared.lock();
        loop {
            if st.stopping {
                drop(st);
                return shut_down(&shared, &mailbox, slots);
            }
            let due = timers.peek().map(|Reverse((t, _))| *t);
            if st.mail > 0
                || !st.pending.is_empty()
                || st.all_pending
                || st.handled != st.generation
                || due.is_some_and(|t| t <= Instant::now())
            {
                break;
            }
            st = match due {
                Some(t) => {
                    let left = t.saturating_duration_since(Instant::now());
                    shared
                        .cv
                        .wait_timeout(st, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => shared.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
            };
        }
        let generation = st.generation;
        let mail = mailbox.take(&mut st);
        let mut look: Vec<String> = std::mem::take(&mut st.pending).into_iter().collect();
        if std::mem::take(&mut st.all_pending) {
            look = slots.keys().cloned().collect();
        }
        drop(st);
        let mut finished = 0;
        for m in mail {
            match m {
                Mail::Add(c) => {
                    look.push(c.agent.clone());
                    add(&shared, &mut slots, c);
                }
                Mail::Finished {
                    ctl,
                    ok,
                    last,
                    busy,
                } => {
                    finished += 1;
                    let name = ctl.agent.clone();
                    if let Some(slot) = slots.get_mut(&name) {
                        slot.waiting.finished(&ctl, &shared, ok, last, busy);
                        slot.ended = Some((ctl.runs, ok));
                        if let Some(end) = slot.waiting.cooldown_end {
                            timers.push(Reverse((end, name.clone())));
                        }
                        slot.ctl = Some(ctl);
                        // Whatever arrived during the run is looked at now.
                        look.push(name);
                    }
                }
            }
        }
        let now = Instant::now();
        while let Some(Reverse((t, _))) = timers.peek()
            && *t <= now
        {
            let Reverse((_, name)) = timers.pop().expect("peeked");
            look.push(name);
        }
        look.sort_unstable();
        look.dedup();
        // A round of one (a mention's wake) reads its inbox at once; a round of many (the
        // start, a message to all) skips those with nothing past their cursor.
        let mut round = (look.len() > 1).then(Round::default);
        for name in look {
            let Some(slot) = slots.get_mut(&name) else {
                // Mentioned but not served here.
                continue;
            };
            let Some(ctl) = slot.ctl.as_mut() else {
                // Its run is under way: looked at again when it ends.
                continue;
            };
            if ctl.stop.is_set() {
                // Closed alone (a worker let go): the others go on without waiting for it.
                let mut ctl = slots.remove(&name).and_then(|s| s.ctl).expect("held");
                close(&shared, &mut ctl);
                continue;
            }
            let unread = !round
                .as_mut()
                .is_some_and(|r| r.nothing_unread(&ctl.inst, &ctl.agent));
            // Keep mode: the loop guard tells agents from outsiders with it.
            let reg = match (&mut round, shared.keep) {
                (_, false) => None,
                (Some(r), true) => r.registry(&ctl.inst),
                (None, true) => Registry::load_shared(&ctl.inst).ok(),
            };
            match slot
                .waiting
                .look(ctl, &shared, &*report, reg.as_deref(), unread)
            {
                Look::Wait => {
                    let state = slot.waiting.state();
                    ctl.publish(state);
                    if let (Some((run, ok)), ControllerState::Idle) = (slot.ended.take(), state) {
                        let ev = crate::lifecycle::Event::new(Kind::Idle, ctl.inst.name())
                            .with("agent", name.as_str())
                            .with("run", run)
                            .with("status", if ok { "ok" } else { "failed" });
                        super::hooks::fire_later(&ctl.inst, &shared, ev);
                    }
                    if let Some(end) = slot.waiting.cooldown_end {
                        timers.push(Reverse((end, name.clone())));
                    }
                }
                Look::Run(due) => {
                    slot.ended = None;
                    let mut ctl = slot.ctl.take().expect("held");
                    // Written by the run once it is under way, off the path from the
                    // mention to its program's start.
                    let record = ctl.note(ControllerState::Running);
                    let (shared, mailbox, report) =
                        (shared.clone(), mailbox.clone(), report.clone());
                    let last = due.last();
                    shared.lock().in_flight += 1;
                    spares.run(Box::new(move || {
                        let t0 = Instant::now();
                        let ok = ctl.one_run(&shared, &*report, &due, record);
                        let busy = t0.elapsed();
                        // Its hooks answer before the agent is given back.
                        let kept = super::hooks::after_run(&ctl, &shared, &due, ok, busy);
                        if let Some(c) = due.card.as_ref().filter(|_| !kept) {
                            super::cards::give_back(&ctl.inst, &ctl.agent, c.id);
                        }
                        let ended = Mail::Finished {
                            ctl,
                            ok,
                            last,
                            busy,
                        };
                        mailbox.send(&shared, ended);
                    }));
                }
            }
        }
        let mut st = shared.lock();
        st.in_flight -= finished;
        st.handled = generation;
        st.changes += 1;
        drop(st);
        shared.cv.notify_all();
    }
}

/// Take `c` into `slots`, known to the runner.
fn add(shared: &Shared, slots: &mut BTreeMap<String, Slot>, c: Box<Controller>) {
    {
        let mut st = shared.lock();
        let a = st.agents.entry(c.agent.clone()).or_default();
        a.cap = c.max_runs;
        a.board = c.board;
    }
    note_served(&c.agent);
    crate::process::open_files_for(slots.len() + 1);
    slots.insert(
        c.agent.clone(),
        Slot {
            ctl: Some(c),
            waiting: Waiting::default(),
            ended: None,
        },
    );
}

/// A controller closed alone: the runner stops waiting for it.
fn close(shared: &Shared, ctl: &mut Controller) {
    note_unserved(&ctl.agent);
    {
        let mut st = shared.lock();
        if !st.stopping {
            let a = st.agents.entry(ctl.agent.clone()).or_default();
            if !a.closed {
                a.closed = true;
                st.closed += 1;
            }
            st.changes += 1;
        }
    }
    shared.cv.notify_all();
    ctl.publish(ControllerState::Stopped);
}

/// The runner stops: every controller publishes `stopped`, those running once their run
/// ended (their backends are stopped with the runner).
fn shut_down(shared: &Shared, mailbox: &Mailbox, slots: BTreeMap<String, Slot>) {
    let mut running = 0;
    for (name, slot) in slots {
        note_unserved(&name);
        match slot.ctl {
            Some(mut ctl) => ctl.publish(ControllerState::Stopped),
            None => running += 1,
        }
    }
    let mut st = shared.lock();
    while running > 0 {
        for m in mailbox.take(&mut st) {
            match m {
                Mail::Finished { mut ctl, .. } => {
                    running -= 1;
                    st.in_flight -= 1;
                    drop(st);
                    ctl.publish(ControllerState::Stopped);
                    st = shared.lock();
                }
                Mail::Add(mut ctl) => {
                    drop(st);
                    ctl.publish(ControllerState::Stopped);
                    st = shared.lock();
                }
            }
        }
        if running > 0 {
            st = shared
                .cv
                .wait_timeout(st, Duration::from_secs(1))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
