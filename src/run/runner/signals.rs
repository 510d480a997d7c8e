//! How a serving process is asked to stop, for every serving loop it runs at once: one
//! thread waits for SIGINT and SIGTERM (blocked in every other thread), and a signal, or a
//! stop request seen by any loop (`aw-ctl stop`), stops all of them.

use std::sync::{Arc, Mutex, MutexGuard, Once};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};

use crate::error::{Error, Result};
use crate::run::controller::Shared;

/// How the serving process was asked to stop.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum StopSignal {
    None,
    /// SIGTERM (`aw-ctl stop`, a service manager): finish cleanly, exit 0.
    Term,
    /// SIGINT: exit 130.
    Int,
}

/// A serving loop of this process, as a stop reaches it.
struct Loop {
    id: u64,
    shared: Arc<Shared>,
    signal: Arc<Mutex<StopSignal>>,
}

/// The loops of this process, and how it was asked to stop (before a loop registered,
/// it stops as soon as it does).
struct Loops {
    next: u64,
    running: Vec<Loop>,
    asked: StopSignal,
}

static LOOPS: Mutex<Loops> = Mutex::new(Loops {
    next: 0,
    running: Vec::new(),
    asked: StopSignal::None,
});

fn loops() -> MutexGuard<'static, Loops> {
    LOOPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// SIGINT and SIGTERM.
fn stop_signals() -> SigSet {
    let mut sigs = SigSet::empty();
    sigs.add(Signal::SIGINT);
    sigs.add(Signal::SIGTERM);
    sigs
}

/// Block the stop signals in this thread and in the threads it starts after: only the
/// thread of [`register`] takes them. Called before any thread of a serving loop starts.
pub(super) fn block() -> Result<()> {
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&stop_signals()), None)
        .map_err(|e| Error::io("<signals>", e.into()))
}

/// Record `signal` (the first one asked wins) for every loop, and stop them all.
pub(super) fn stop_every(signal: StopSignal) {
    let mut all = loops();
    if all.asked == StopSignal::None {
        all.asked = signal;
    }
    for l in &all.running {
        stop(l, signal);
    }
}

fn stop(l: &Loop, signal: StopSignal) {
    let mut sig = l.signal.lock().unwrap_or_else(|e| e.into_inner());
    if *sig == StopSignal::None {
        *sig = signal;
    }
    drop(sig);
    l.shared.stop_all();
}

/// A serving loop registered: stopped with every other one, until dropped.
pub(super) struct Registered(u64);

impl Drop for Registered {
    fn drop(&mut self) {
        loops().running.retain(|l| l.id != self.0);
    }
}

/// Register a serving loop (its controllers' `shared` state, and where it learns how it
/// was stopped); start the process's signal thread with the first one. The stop signals
/// must be blocked ([`block`]).
pub(super) fn register(shared: &Arc<Shared>, signal: &Arc<Mutex<StopSignal>>) -> Registered {
    static THREAD: Once = Once::new();
    THREAD.call_once(|| {
        std::thread::spawn(|| {
            if let Ok(sig) = stop_signals().wait() {
                stop_every(match sig {
                    Signal::SIGTERM => StopSignal::Term,
                    _ => StopSignal::Int,
                });
            }
        });
    });
    let mut all = loops();
    let l = Loop {
        id: all.next,
        shared: shared.clone(),
        signal: signal.clone(),
    };
    all.next += 1;
    if all.asked != StopSignal::None {
        stop(&l, all.asked);
    }
    let id = l.id;
    all.running.push(l);
    Registered(id)
}
