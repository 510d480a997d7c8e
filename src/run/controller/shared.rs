//! What the runner and the controllers share: one generation counter that the channel
//! watcher bumps on every change, and each controller's state, under one mutex and
//! condition variable.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::rate::Rate;
use crate::process::Stop;
use crate::usage::{Budget, Usage};

/// What the runner and the controllers share.
#[derive(Default)]
pub struct Shared {
    pub state: Mutex<State>,
    pub cv: Condvar,
    pub stop: Stop,
    /// What the whole workflow may spend.
    pub budget: Budget,
    /// The loop guard's rate limit (keep mode), when on.
    pub rate: Option<Rate>,
    /// The loop guard's limit on the mentions between two agents (keep mode), when on.
    pub pair: Option<Rate>,
    /// Keep mode: a guard pauses an agent, never ends the server.
    pub keep: bool,
}

#[derive(Default)]
pub struct State {
    /// Bumped on every (possible) channel change.
    pub generation: u64,
    /// Bumped on every channel change and every controller becoming idle: what a waiter on
    /// [`Shared::cv`] compares to know whether it missed a wake-up.
    pub changes: u64,
    pub stopping: bool,
    pub agents: BTreeMap<String, AgentState>,
    /// The budget that stopped the run, as a reason.
    pub over_budget: Option<String>,
    /// When the runs of one agent on the other's messages alone started, per pair of
    /// agents (by name, in order): the pair guard's window.
    pub pairs: BTreeMap<(String, String), std::collections::VecDeque<Instant>>,
    /// What the instance's ledger (see [`crate::run::ledger`]) counts besides the runs of this
    /// process: earlier runs, other servers. Refreshed whenever the ledger is read.
    pub outside: Usage,
    /// The same, per agent.
    pub outside_agents: BTreeMap<String, Usage>,
}

/// A controller's state as the runner sees it.
#[derive(Debug, Default, Clone)]
pub struct AgentState {
    /// The generation the controller has handled, while it waits for the next one.
    pub idle_at: Option<u64>,
    /// Runs counted against the cap: all of them in run mode; since the workflow was last
    /// quiet in keep mode.
    pub runs: u64,
    /// Runs since the start.
    pub total: u64,
    pub failures: u64,
    /// Time spent in runs.
    pub busy: Duration,
    /// Tokens and cost of its runs, as the backends reported them (a cost they did not
    /// report priced by the agent's model, when its prices are known).
    pub usage: Usage,
    /// The last attempt of its last run failed; its messages are left unread.
    pub failed: bool,
    /// It reached its run cap with messages still unread.
    pub capped: bool,
    /// Its run cap.
    pub cap: u64,
    /// A worker closed with `close_agent`: its controller has ended.
    pub closed: bool,
    /// What the run under way has spent so far, as its backend last told.
    pub running: Usage,
    /// When its latest runs started on other agents' messages alone (the loop guard's
    /// rate window).
    pub recent: std::collections::VecDeque<Instant>,
    /// The loop guard paused it until a message from outside the agents served here.
    pub paused: bool,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state of `agent`, under the lock.
    pub(super) fn agent(&self, agent: &str) -> AgentGuard<'_> {
        AgentGuard {
            guard: self.lock(),
            agent: agent.to_string(),
        }
    }

    /// Note a (possible) channel change and wake everyone.
    pub fn bump(&self) {
        let mut st = self.lock();
        st.generation += 1;
        st.changes += 1;
        drop(st);
        self.cv.notify_all();
    }

    /// Stop every controller (and their running backends).
    pub fn stop_all(&self) {
        self.stop.set();
        self.lock().stopping = true;
        self.cv.notify_all();
    }

    /// Stop every controller, letting a model call under way end and be counted (a
    /// budget's stop).
    pub fn stop_all_after_calls(&self) {
        self.stop.set_after_calls();
        self.lock().stopping = true;
        self.cv.notify_all();
    }
}

/// One agent's state, locked.
pub(super) struct AgentGuard<'a> {
    guard: MutexGuard<'a, State>,
    agent: String,
}

impl std::ops::Deref for AgentGuard<'_> {
    type Target = AgentState;
    fn deref(&self) -> &AgentState {
        &self.guard.agents[&self.agent]
    }
}

impl std::ops::DerefMut for AgentGuard<'_> {
    fn deref_mut(&mut self) -> &mut AgentState {
        self.guard.agents.entry(self.agent.clone()).or_default()
    }
}
