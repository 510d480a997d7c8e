//! What the runner, the dispatcher and the runs share: one generation counter that the
//! channel watcher bumps on every change, the agents its new entries concern, the
//! dispatcher's progress, and each controller's state, under one mutex and condition
//! variable.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::rate::Rate;
use crate::channel::{Channel, SCAN_CHUNK};
use crate::instance::Instance;
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
    /// The workflow's lifecycle hooks (none when serving registered agents).
    pub hooks: crate::lifecycle::Hooks,
    /// Where they run: the workflow file's directory.
    pub hooks_dir: std::path::PathBuf,
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
    /// How many of [`State::agents`] are closed.
    pub closed: usize,
    /// The agents whose last look found unread messages (and left them, unless a run was
    /// started): the only ones the verdict of done reads from disk.
    pub unread: BTreeSet<String>,
    /// The agents that ran since the last quiet moment (keep mode: their loop guard counts
    /// start afresh then), so that the reset costs what ran, not every agent.
    pub ran: BTreeSet<String>,
    /// The id of the newest entry whose mentions were noted in [`State::pending`].
    pub seen_id: u64,
    /// Agents whose inbox the dispatcher should look at: mentioned since it last looked, or
    /// closed.
    pub pending: BTreeSet<String>,
    /// The dispatcher should look at every agent (at the start; after something arrived
    /// that no entry told of).
    pub all_pending: bool,
    /// The generation up to which the dispatcher has looked at every agent concerned.
    pub handled: u64,
    /// Runs started and not yet looked after by the dispatcher again.
    pub in_flight: usize,
    /// Letters in the dispatcher's [`Mailbox`](super::Mailbox) not yet taken: posted and
    /// taken under this lock.
    pub mail: usize,
    /// The budget that stopped the run, as a reason.
    pub over_budget: Option<String>,
    /// When the runs of one agent on the other's messages alone started, per pair of
    /// agents (by name, in order): the pair guard's window.
    pub pairs: BTreeMap<(String, String), std::collections::VecDeque<Instant>>,
    /// What the runs of this process spent: the sum of [`AgentState::usage`] over the
    /// agents, kept as they spend.
    pub spent_here: Usage,
    /// What the instance's ledger (see [`crate::ledger`]) counts besides the runs of this
    /// process: earlier runs, other servers. Refreshed whenever the ledger is read.
    pub outside: Usage,
    /// The same, per agent.
    pub outside_agents: BTreeMap<String, Usage>,
    /// What the lifecycle hooks keep: those running, what the channel told of.
    pub hooks: crate::lifecycle::HookState,
}

impl State {
    /// Has the dispatcher looked at everything there is, with no run under way? (The
    /// runner then checks on disk, under the lock, that nothing is left: see
    /// `quiescence`.)
    pub fn quiet(&self) -> bool {
        self.handled == self.generation
            && self.pending.is_empty()
            && !self.all_pending
            && self.mail == 0
            && self.in_flight == 0
            && self.hooks.running == 0
            && self.hooks.notices.is_empty()
    }

    /// The agents that work the board (`board: next`), not closed.
    pub fn board_agents(&self) -> Vec<String> {
        self.agents
            .iter()
            .filter(|(_, a)| a.board && !a.closed)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Read the entries appended since the last look and name the agents they mention in
    /// [`State::pending`]: the cost is that of what is new. Whether there were any; when
    /// the channel cannot be read, every agent is looked at.
    pub fn note_new_entries(&mut self, inst: &Instance) -> bool {
        let mut last = self.seen_id;
        let (pending, hooks) = (&mut self.pending, &mut self.hooks);
        let read = Channel::new(inst).scan_since(self.seen_id, SCAN_CHUNK, |e| {
            hooks.note(&e);
            for m in &e.mentions {
                if *m != e.from && !pending.contains(m) {
                    pending.insert(m.clone());
                }
            }
            last = e.id;
            true
        });
        if read.is_err() {
            self.all_pending = true;
        }
        let new = last != self.seen_id;
        self.seen_id = last;
        new
    }
}

/// A controller's state as the runner sees it.
#[derive(Debug, Default, Clone)]
pub struct AgentState {
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
    /// It works the board (`board: next`): each run starts from a card.
    pub board: bool,
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

    /// Note a (possible) channel change: the agents that new entries mention are to be
    /// looked at; wake the dispatcher and every waiter.
    pub fn bump(&self, inst: &Instance) {
        let mut st = self.lock();
        st.note_new_entries(inst);
        st.generation += 1;
        st.changes += 1;
        drop(st);
        self.cv.notify_all();
    }

    /// Note a (possible) change of the board: the agents that work it are looked at.
    pub fn bump_board(&self) {
        let mut st = self.lock();
        let agents = st.board_agents();
        if agents.is_empty() {
            return;
        }
        st.pending.extend(agents);
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
