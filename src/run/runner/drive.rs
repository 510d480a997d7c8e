//! The run loop: start the signal thread, the stop-request watch, the channel watcher, the
//! controllers, then the kickoff, tasks or iterations; wait until the work is done; stop
//! everything and say how the run ended.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::options::Options;
use super::output::{Printer, reporter, summary};
use super::quiescence::wait_done;
use super::serving::Serving;
use super::signals::{self, StopSignal};
use super::start::Start;
use super::workers::{Adopter, tether};
use crate::error::{Error, Result, exit};
use crate::fs::watch::{FALLBACK_HINT, FileWaiter, Waker};
use crate::instance::Instance;
use crate::run::controller::{Controller, Mailbox, Shared, dispatch};
use crate::run::pipeline::Outcome;
use crate::serve;

/// Watch for a stop request to this process (`aw-ctl stop`, from any host): on one, finish
/// cleanly as on SIGTERM, with every other serving loop of the process. The thread ends
/// once the server is stopping, woken by the waker.
fn watch_stop_request(
    inst: &Instance,
    opts: &Options,
    shared: &Arc<Shared>,
) -> Result<(Waker, JoinHandle<()>, Option<String>)> {
    let path = serve::my_stop_path(inst);
    let mut asked = FileWaiter::new(&path, opts.poll)?;
    let waker = asked.waker();
    let fallback = asked.fallback().map(str::to_string);
    let shared = shared.clone();
    let thread = std::thread::spawn(move || {
        loop {
            if path.exists() {
                let _ = crate::fs::owned::remove(&path);
                signals::stop_every(StopSignal::Term);
                return;
            }
            if shared.lock().stopping {
                return;
            }
            asked.wait(None);
        }
    });
    Ok((waker, thread, fallback))
}

/// Start the watcher, the signal thread and the controllers; wait for the end. Channel
/// entries after `before` are printed as they arrive.
pub(super) fn drive(
    serving: Arc<Serving>,
    mut controllers: Vec<Controller>,
    before: u64,
    start: Start,
) -> Result<u8> {
    let (inst, opts) = (&serving.inst, &serving.opts);
    // This process's entry in the user's registry of servers (written as the serving locks
    // were taken) goes when the serving ends.
    let _listed = serve::Listed(inst);
    // What aw-run never echoes: the secrets of every agent.
    let secrets = crate::run::redact::union(controllers.iter().map(|c| &c.secrets[..]));
    // Block the stop signals in every thread; one thread of the process waits for them.
    signals::block()?;
    let shared = shared_state(&serving, &mut controllers)?;
    // A signal, or a stop request to any serving loop of this process, stops this one.
    let stop_signal = Arc::new(Mutex::new(StopSignal::None));
    let _registered = signals::register(&shared, &stop_signal);
    let asking = watch_stop_request(inst, opts, &shared)?;
    let waiter = FileWaiter::new(&inst.channel_path(), opts.poll)?;
    warn_polling(opts, waiter.fallback().or(asking.2.as_deref()));
    // Tasks and iterations print their result on stdout.
    let has_tasks = start.tasks.is_some() || start.iter.is_some();
    let live = crate::run::live::Live::new(opts.quiet);
    let report = reporter(opts, has_tasks, live.clone(), shared.clone());
    let mailbox = Arc::new(Mailbox::default());
    let adopter = Arc::new(Mutex::new(Adopter {
        serving: serving.clone(),
        shared: shared.clone(),
        mailbox: mailbox.clone(),
        seen: None,
        workers: BTreeMap::new(),
        trusted: serving.trusted.clone(),
        refused: serving.refused.clone(),
    }));
    let waker = waiter.waker();
    let mut printer = Printer::new(inst, opts, before, has_tasks);
    printer.secrets = secrets.clone();
    printer.live = Some((live.clone(), shared.clone()));
    if start.iter.is_some() {
        printer.channel = None;
    }
    let watching = watch_channel(waiter, printer, &shared, &adopter, inst);
    let boarding = match controllers.iter().any(|c| c.board) {
        true => Some(watch_board(inst, opts, &shared)?),
        false => None,
    };
    let merging = match serving.merges {
        true => Some(super::merges::serve_merges(inst, opts, &shared)?),
        false => None,
    };
    for c in &controllers {
        // A worker served from the start is closed like one taken later.
        adopter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .workers
            .insert(c.agent.clone(), c.stop.clone());
    }
    let dispatching = {
        let (shared, report) = (shared.clone(), report.clone());
        std::thread::spawn(move || dispatch(shared, mailbox, report, controllers))
    };
    // Workers registered before this server started.
    adopter.lock().unwrap_or_else(|e| e.into_inner()).look(true);
    let tethered = tether(&serving, &shared, &adopter);
    let ticking = crate::run::live::ticker(&live, &shared);
    let threads = Threads {
        waker,
        dispatching,
        watching,
        boarding,
        merging,
        asking: (asking.0, asking.1),
        tethered,
        ticking,
    };
    let t0 = Instant::now();
    let (code, reason, outcome) = work(&serving, &shared, &adopter, &start, &secrets, t0);
    threads.stop(&shared, &live);
    budget_hook(inst, &shared);
    summary(&shared, opts, has_tasks, live.on());
    if let Some(ended) = stopped(inst, &shared, &stop_signal) {
        return ended;
    }
    if let Some(r) = reason {
        return Err(Error::No(r));
    }
    if let (Some(o), exit::OK) = (outcome, code) {
        o.redacted(&secrets).print(opts.json, t0.elapsed());
    }
    Ok(code)
}

/// The threads of a serving loop besides the one that drives it, with the wakers of those
/// that wait on a file.
struct Threads {
    /// Wakes the channel watch.
    waker: Waker,
    dispatching: JoinHandle<()>,
    watching: JoinHandle<()>,
    /// The board watch and its waker, when an agent works the board.
    boarding: Option<(Waker, JoinHandle<()>)>,
    /// The merge queue's server and its waker, when the workflow has a `merge:` key.
    merging: Option<(Waker, JoinHandle<()>)>,
    /// The stop-request watch and its waker.
    asking: (Waker, JoinHandle<()>),
    tethered: Option<JoinHandle<()>>,
    ticking: Option<JoinHandle<()>>,
}

impl Threads {
    /// Stop every controller (past a budget, once the model calls under way have answered)
    /// and every thread, and wait for them; the live view ends.
    fn stop(self, shared: &Shared, live: &crate::run::live::Live) {
        if shared.lock().over_budget.is_some() {
            // The answers of model calls under way still come and are counted.
            shared.stop_all_after_calls();
        } else {
            shared.stop_all();
        }
        self.waker.wake();
        let _ = self.dispatching.join();
        let _ = self.watching.join();
        for (waker, thread) in [self.boarding, self.merging].into_iter().flatten() {
            waker.wake();
            let _ = thread.join();
        }
        self.asking.0.wake();
        let _ = self.asking.1.join();
        if let Some(t) = self.tethered {
            let _ = t.join();
        }
        live.finish();
        if let Some(t) = self.ticking {
            let _ = t.join();
        }
    }
}

/// What the runner and the `controllers` share: the instance's budget (this run's,
/// recorded, else the one recorded before), with spending counted from what the instance
/// spent before, the loop guard's limits, and every agent to look at once. Fails when the
/// instance is already over its budget.
fn shared_state(serving: &Serving, controllers: &mut [Controller]) -> Result<Arc<Shared>> {
    let (inst, opts) = (&serving.inst, &serving.opts);
    let (budget, ledger) = crate::ledger::apply(inst, opts.budget)?;
    if let Some(why) = budget.exceeded(&ledger.spent) {
        return Err(Error::No(why).hint(
            "the instance's spending counts across runs: see aw-ctl budget; aw-ctl budget reset \
             starts counting again",
        ));
    }
    let shared = Arc::new(Shared {
        budget,
        rate: opts.rate.filter(|_| opts.keep),
        pair: opts.pair.filter(|_| opts.keep),
        keep: opts.keep,
        hooks: serving.hooks.clone(),
        hooks_dir: serving.hooks_dir.clone(),
        ..Shared::default()
    });
    {
        let mut st = shared.lock();
        st.outside = ledger.spent.clone();
        st.outside_agents = ledger.agents.clone();
        st.generation = 1;
        // Entries from now on wake the agents they mention; every agent looks at its inbox
        // once at the start.
        st.seen_id = crate::channel::Channel::new(inst).last_id().unwrap_or(0);
        st.all_pending = true;
        use crate::lifecycle::Kind;
        st.hooks.watch = [Kind::Merge, Kind::Approval]
            .iter()
            .any(|k| shared.hooks.get(*k).is_some());
        for c in controllers {
            st.agents.entry(c.agent.clone()).or_default();
            c.stop = shared.stop.child();
        }
    }
    Ok(shared)
}

/// Say why changes are polled for, not watched (`why`), when they are.
fn warn_polling(opts: &Options, why: Option<&str>) {
    let Some(why) = why else {
        return;
    };
    let mut line = format!("{why} ({FALLBACK_HINT}, or set --poll)").replace('\n', " ");
    if let Some(i) = &opts.label {
        // One process serving several instances: which one polls.
        line = format!("instance {i}: {line}");
    }
    crate::warn::warn("aw-run", &line);
    // Detached, stderr is the log: the starting process prints the line too.
    if let Some(ready) = &opts.ready {
        let _ = (&**ready).write_all(format!("!aw-run: warning: {line}\n").as_bytes());
    }
}

/// Watch the board folder of `inst` on a thread of its own, for the agents that work the
/// board: on each change (a card added, claimed, released, finished), and at least every
/// [`BOARD_LOOK`] (a claim that ran out lapses without a write), they are looked at; their
/// claims held through this server are renewed. Ends once the server is stopping.
fn watch_board(
    inst: &Instance,
    opts: &Options,
    shared: &Arc<Shared>,
) -> Result<(Waker, JoinHandle<()>)> {
    let dir = crate::board::dir(inst);
    crate::fs::owned::folder(&dir, true).map_err(|e| Error::create(&dir, e))?;
    let mut waiter = FileWaiter::folder(&dir, opts.poll)?;
    warn_polling(opts, waiter.fallback());
    let waker = waiter.waker();
    let (shared, inst) = (shared.clone(), inst.clone());
    let thread = std::thread::spawn(move || {
        loop {
            let ours = shared.lock().board_agents();
            crate::run::controller::cards::renew_held(&inst, &ours);
            // Claims whose time ran out or whose server is gone lapse, and are announced,
            // though no one else looks at the board.
            if let Err(e) = crate::board::sweep(&inst) {
                crate::warn::warn("aw-run", format!("the board was not swept: {e}"));
            }
            if shared.lock().stopping {
                return;
            }
            shared.bump_board();
            waiter.wait(Some(BOARD_LOOK));
        }
    });
    Ok((waker, thread))
}

/// How often the agents that work the board are looked at although the board folder did
/// not change: a claim that runs out lapses without a write.
const BOARD_LOOK: Duration = Duration::from_secs(5);

/// Watch the channel of `watched` (through `waiter`) on a thread of its own: on each change,
/// take new workers, tell the dispatcher, and print what is new; once the server is
/// stopping, print what came last and end.
fn watch_channel(
    mut waiter: FileWaiter,
    mut printer: Printer,
    shared: &Arc<Shared>,
    adopter: &Arc<Mutex<Adopter>>,
    watched: &Instance,
) -> JoinHandle<()> {
    let (shared, adopter, watched) = (shared.clone(), adopter.clone(), watched.clone());
    printer.print();
    std::thread::spawn(move || {
        loop {
            waiter.wait(None);
            if shared.lock().stopping {
                // What came since the last wake-up (the work may be done before the
                // watch told of its last entry) is printed too. The waiter is dropped
                // here: its watch is removed before the exit.
                printer.print();
                return;
            }
            // New workers are taken before anyone is told of the change.
            adopter
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .look(false);
            shared.bump(&watched);
            crate::run::controller::hooks::fire_notices(&watched, &shared);
            printer.print();
        }
    })
}

/// The work of the run, from the election and the kickoff (`start`) to its end: the tasks,
/// the iterations, or the agents alone until they are done. The exit code, the reason of a
/// failure, and the tasks' outcome when it is printed at the end.
fn work(
    serving: &Serving,
    shared: &Shared,
    adopter: &Mutex<Adopter>,
    start: &Start,
    secrets: &[String],
    t0: Instant,
) -> (u8, Option<String>, Option<Outcome>) {
    let (inst, opts) = (&serving.inst, &serving.opts);
    if let Err(e) = start.begin(inst, shared) {
        return (e.exit_code(), Some(e.to_string()), None);
    }
    if opts.ready.is_some() || opts.keep {
        // Ready once every inbox was looked at: what the server does from then on is what
        // new entries ask of it.
        let st = shared.lock();
        drop(
            shared
                .cv
                .wait_while(st, |s| s.handled == 0 && !s.stopping)
                .unwrap_or_else(|e| e.into_inner()),
        );
        if opts.keep {
            // What the start read and built and no longer needs goes back to the system
            // before a server that stays up waits (see BENCHMARKS.md, "what a served agent
            // costs").
            crate::process::release_free_memory();
        }
        if let Some(ready) = &opts.ready {
            let _ = (&**ready).write_all(b"1");
        }
    }
    let mut outcome = None;
    let done = match (&start.tasks, &start.iter) {
        (Some((tasks, vars)), _) => {
            let mut vars = vars.clone();
            let nap = nap(shared);
            crate::run::pipeline::run_tasks(inst, tasks, &mut vars, &shared.stop, &nap).map(|o| {
                if opts.keep {
                    // Staying up: the result is printed now, not at the stop.
                    o.redacted(secrets).print(opts.json, t0.elapsed());
                } else {
                    outcome = Some(o);
                }
            })
        }
        (None, Some((plan, task))) => crate::run::iter::run(inst, plan, task, shared),
        (None, None) => Ok(()),
    };
    let (code, reason) = match done {
        Ok(()) => {
            let done = wait_done(inst, shared, opts, adopter, serving.merges);
            // No run is under way: a worktree whose work was merged meanwhile goes.
            super::merges::tidy_worktrees(inst);
            done
        }
        Err(Error::Interrupted) => (exit::INTERRUPTED, None),
        Err(e) => (e.exit_code(), Some(e.to_string())),
    };
    (code, reason, outcome)
}

/// How the tasks wait between two looks at their agents, at most the time they give: woken
/// as soon as a controller changes state, not at the next look; a change since the last
/// nap ends the next one at once.
fn nap(shared: &Shared) -> impl Fn(Duration) + '_ {
    let seen = std::sync::atomic::AtomicU64::new(0);
    move |d: Duration| {
        use std::sync::atomic::Ordering::Relaxed;
        let st = shared.lock();
        let before = seen.load(Relaxed);
        let st = if st.changes == before && !st.stopping {
            shared
                .cv
                .wait_timeout_while(st, d, |s| s.changes == before && !s.stopping)
                .unwrap_or_else(|e| e.into_inner())
                .0
        } else {
            st
        };
        seen.store(st.changes, Relaxed);
    }
}

/// Fire the workflow's `on_budget` hook when a budget stopped the run.
fn budget_hook(inst: &Instance, shared: &Shared) {
    use crate::lifecycle::{Event, Kind};
    if shared.hooks.get(Kind::Budget).is_none() {
        return;
    }
    let Some(why) = shared.lock().over_budget.clone() else {
        return;
    };
    let ev = Event::new(Kind::Budget, inst.name()).with("reason", why);
    crate::run::controller::hooks::fire(inst, shared, &ev);
}

/// How the run ends when something stopped it: a budget (this server's, or what other
/// servers of the instance spent too), or a signal; `None` when nothing did.
fn stopped(
    inst: &Instance,
    shared: &Shared,
    stop_signal: &Mutex<StopSignal>,
) -> Option<Result<u8>> {
    if let Some(why) = shared.lock().over_budget.clone() {
        return Some(Err(Error::No(why)));
    }
    // What other servers of the instance (a worker's) spent counts too.
    if let Some(why) = crate::ledger::load(inst)
        .ok()
        .and_then(|l| shared.budget.exceeded(&l.spent))
    {
        return Some(Err(Error::No(why)));
    }
    match *stop_signal.lock().unwrap_or_else(|e| e.into_inner()) {
        StopSignal::Term => Some(Ok(exit::OK)),
        StopSignal::Int => Some(Err(Error::Interrupted)),
        StopSignal::None => None,
    }
}
