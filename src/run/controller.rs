//! One agent's controller: wait for new channel activity, read the inbox, build the prompt,
//! run the backend (with retries), acknowledge what the prompt showed, and record a
//! transcript of each attempt. Before each attempt and after each run (and, through
//! [`RunContext::over_budget`], after each model call) the agent's own budget and the
//! workflow's are checked: past one, every controller stops.
//!
//! Controllers share one [`Shared`]: a generation counter that the channel watcher bumps on
//! every change, and each controller's state, under one mutex and condition variable. A
//! controller that has seen the current generation and found nothing to do sleeps on the
//! condition variable: idle costs nothing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::json;

use super::backend::{Backend, Budget, RunContext, RunOutcome, Status, Stop, Usage};
use super::models::Price;
use super::prompt::{self, PromptParts};
use super::serve::{self, ControllerState, Served};
use crate::channel::Channel;
use crate::error::Result;
use crate::fs::atomic_write_private;
use crate::inbox;
use crate::instance::Instance;
use crate::post::{self, PostOptions};

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

/// The loop guard's limit on the runs of one agent that only other agents' messages
/// started: at most `runs` within any `window`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub runs: u32,
    pub window: Duration,
}

impl Rate {
    /// `N/DURATION` (`20/60s`), or `off` (`None`).
    pub fn parse(v: &str) -> std::result::Result<Option<Rate>, String> {
        if v == "off" {
            return Ok(None);
        }
        let (n, d) = v
            .split_once('/')
            .ok_or("expected RUNS/DURATION (such as 20/60s) or off")?;
        let runs: u32 = n
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or("the runs must be a whole number of at least 1")?;
        let window = super::parse_duration(d)?;
        if window.is_zero() {
            return Err("the duration must be above 0".into());
        }
        Ok(Some(Rate { runs, window }))
    }
}

/// The loop guard's rate limit by default: 20 runs per agent within any 60 s, counting
/// only the runs that messages from other agents served by the same aw-run started.
pub const DEFAULT_RATE: Rate = Rate {
    runs: 20,
    window: Duration::from_secs(60),
};

/// The loop guard's limit on the mentions between two agents by default: 10 within any
/// 60 s, both ways together, counting the runs of one of them on the other's messages alone
/// (in keep mode; the count holds across quiet moments).
pub const DEFAULT_PAIR: Rate = Rate {
    runs: 10,
    window: Duration::from_secs(60),
};

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
    /// What the instance's ledger (see [`super::ledger`]) counts besides the runs of this
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
    fn agent(&self, agent: &str) -> AgentGuard<'_> {
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

/// Are `msgs` all from agents served here other than `agent` (a run on them may be a loop)?
fn from_agents(st: &State, agent: &str, msgs: &[inbox::InboxMessage]) -> bool {
    msgs.iter()
        .all(|m| m.entry.from != agent && st.agents.contains_key(&m.entry.from))
}

/// The key of the pair guard's window for two agents: their names in order.
fn pair(a: &str, b: &str) -> (String, String) {
    let (x, y) = if a <= b { (a, b) } else { (b, a) };
    (x.to_string(), y.to_string())
}

/// Take the ledger's figures `l` as what is spent outside this process: the ledger less
/// what this process's runs have spent (they are in it once written).
fn absorb(st: &mut State, l: &super::ledger::Ledger) {
    let mut ours = Usage::default();
    for a in st.agents.values() {
        ours.add(&a.usage);
    }
    st.outside = l.spent.minus(&ours);
    st.outside_agents = l
        .agents
        .iter()
        .map(|(n, u)| {
            let mine = st
                .agents
                .get(n)
                .map(|a| a.usage.clone())
                .unwrap_or_default();
            (n.clone(), u.minus(&mine))
        })
        .collect();
}

/// One agent's state, locked.
struct AgentGuard<'a> {
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

/// Retry policy of failed runs.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Attempts per run, at least 1.
    pub attempts: u32,
    /// Wait before the second attempt; doubled for each further one.
    pub backoff: Duration,
}

/// One controller event, as reported by the runner: an attempt starts, or an attempt
/// ended.
pub struct Event {
    pub agent: String,
    pub instance: String,
    pub run: u64,
    pub attempt: u32,
    /// The attempt starts: only `agent`, `run`, `attempt`, `woken_by` and `transcript` are
    /// meaningful.
    pub start: bool,
    pub status: Status,
    pub duration: Duration,
    pub reason: Option<String>,
    /// The last attempt failed: the messages stay unread.
    pub gave_up: bool,
    /// What woke the agent: the inbox entries its prompt shows, with their senders.
    pub woken_by: Vec<(u64, String)>,
    /// The number of the attempt's transcript (`aw-ctl runs AGENT N`); 0 when none.
    pub transcript: u64,
    /// The last line of the program's stderr that is not blank, when the attempt failed.
    pub stderr_tail: Option<String>,
}

/// How events are shown.
pub type Report = dyn Fn(&Event) + Send + Sync;

/// Everything one controller needs.
pub struct Controller {
    pub inst: Instance,
    pub agent: String,
    pub backend: Box<dyn Backend>,
    pub system: Option<String>,
    /// The entry document; `None` when the workflow has no shared context (`context:
    /// false`): the prompt then shows neither the recent channel nor a document.
    pub document: Option<String>,
    pub root: PathBuf,
    pub mcp_config: PathBuf,
    /// What [`Controller::mcp_config`] holds, written afresh before every attempt: the
    /// agent's own tools may reach the file, and a rewritten one must never take effect.
    pub mcp_text: String,
    pub timeout: Option<Duration>,
    pub max_runs: u64,
    pub reply_fallback: bool,
    pub retry: Retry,
    /// First transcript number to use.
    pub next_transcript: u64,
    /// After a run failed for good, how long before its messages are tried again (unless
    /// something new arrives first).
    pub cooldown: Duration,
    /// What `aw-ctl ps` shows of this controller.
    pub served: Served,
    /// The state and run count last recorded.
    pub published: Option<(ControllerState, u64)>,
    /// Values that transcripts and replies never show (see [`secrets`]).
    pub secrets: Vec<String>,
    /// What this agent's own runs may spend.
    pub budget: Budget,
    /// The prices of the agent's model: they price a run whose backend reports no cost.
    pub price: Option<Price>,
    /// Text added at the end of every prompt, read as each prompt is built: an iterative
    /// run's task and progress (see [`super::iter`]).
    pub task_context: Option<Arc<Mutex<String>>>,
    /// Stops this controller alone (a closed worker); a child of [`Shared::stop`], so
    /// stopping them all stops it too.
    pub stop: Stop,
    /// The agent's serving lock (see [`serve::take`]), let go when the controller ends.
    pub serving_lock: Option<crate::fs::Lock>,
}

pub use super::redact::secrets;
use super::redact::{redact, redact_cut};

impl Controller {
    /// The loop; returns when the runner stops.
    pub fn run(mut self, shared: &Shared, report: &Report) {
        let mut seen = 0;
        let mut recheck = true;
        // A failed run's messages are not retried before a newer message arrives or the
        // cooldown ends.
        let mut failed_upto = 0;
        let mut cooldown_end: Option<Instant> = None;
        // The loop guard paused it (its messages wait for one from outside).
        let mut paused = false;
        shared.agent(&self.agent).cap = self.max_runs;
        loop {
            if !recheck {
                let waiting = if paused {
                    ControllerState::Paused
                } else if failed_upto > 0 {
                    ControllerState::Cooldown
                } else {
                    ControllerState::Idle
                };
                self.publish(waiting);
            }
            {
                let mut st = shared.lock();
                loop {
                    if st.stopping || self.stop.is_set() {
                        if !st.stopping {
                            // Closed alone: the others go on without waiting for it.
                            let a = st.agents.entry(self.agent.clone()).or_default();
                            a.closed = true;
                            shared.cv.notify_all();
                        }
                        drop(st);
                        self.publish(ControllerState::Stopped);
                        return;
                    }
                    if recheck || st.generation != seen {
                        break;
                    }
                    // Tell the runner only when this controller became idle: waking the
                    // others on every wake-up would keep idle controllers waking each other.
                    let a = st.agents.entry(self.agent.clone()).or_default();
                    if a.idle_at != Some(seen) {
                        a.idle_at = Some(seen);
                        st.changes += 1;
                        shared.cv.notify_all();
                    }
                    match cooldown_end {
                        Some(end) => {
                            let left = end.saturating_duration_since(Instant::now());
                            if left.is_zero() {
                                // The cooldown is over: try the failed messages again.
                                failed_upto = 0;
                                cooldown_end = None;
                                break;
                            }
                            st = shared
                                .cv
                                .wait_timeout(st, left)
                                .unwrap_or_else(|e| e.into_inner())
                                .0;
                        }
                        None => st = shared.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
                    }
                }
                seen = st.generation;
                st.agents.entry(self.agent.clone()).or_default().idle_at = None;
            }
            recheck = false;
            // The newest unread in full, the older summarised (acked with them on success).
            let (msgs, older) = match prompt::Inbox::unread(&self.inst, &self.agent) {
                Ok(m) => (m.shown, m.older),
                Err(e) => {
                    // Counted as a failure, so that run mode does not wait for it.
                    shared.agent(&self.agent).failed = true;
                    let mut ev =
                        self.event(0, 1, Status::Failed, Duration::ZERO, Some(e.to_string()));
                    ev.gave_up = true;
                    report(&ev);
                    continue;
                }
            };
            let Some(last) = msgs.last().map(|m| m.entry.id) else {
                continue;
            };
            if last <= failed_upto {
                continue;
            }
            // Agents served elsewhere count as agents too (a worker on a server of its own).
            let registered = shared
                .keep
                .then(|| crate::registry::Registry::load(&self.inst).ok())
                .flatten();
            let run = {
                let mut st = shared.lock();
                let agents_only = match &registered {
                    Some(r) => msgs
                        .iter()
                        .all(|m| m.entry.from != self.agent && r.get(&m.entry.from).is_some()),
                    None => from_agents(&st, &self.agent, &msgs),
                };
                let guarded = if !shared.keep {
                    None
                } else if let Some(why) = self.keep_guard(&mut st, shared, &msgs, agents_only) {
                    Some(why)
                } else if let Some(rate) = shared.rate {
                    self.rate_guard(&mut st, rate, &msgs)
                } else {
                    None
                };
                if let Some(why) = guarded {
                    drop(st);
                    // Its messages wait for a message from outside.
                    failed_upto = last;
                    cooldown_end = None;
                    paused = true;
                    self.publish(ControllerState::Paused);
                    if let Some(why) = why {
                        self.announce_pause(&why);
                    }
                    continue;
                }
                let a = st.agents.entry(self.agent.clone()).or_default();
                if a.runs >= self.max_runs {
                    a.capped = true;
                    continue;
                }
                a.capped = false;
                paused = false;
                a.runs += 1;
                a.total += 1;
                a.total
            };
            self.served.runs = run;
            self.publish(ControllerState::Running);
            let t0 = Instant::now();
            let ok = self.one_run(shared, report, run, &msgs, older);
            let mut st = shared.lock();
            let a = st.agents.entry(self.agent.clone()).or_default();
            a.failed = !ok;
            a.busy += t0.elapsed();
            if ok {
                failed_upto = 0;
                cooldown_end = None;
            } else {
                failed_upto = last;
                cooldown_end = Some(crate::time::deadline(self.cooldown));
            }
            drop(st);
            // Whatever arrived during the run is looked at now.
            recheck = true;
        }
    }

    /// The loop guard in keep mode, before the rate check: a message from outside the
    /// agents of the instance (`agents_only` false: a user, the kickoff) lifts a pause and
    /// starts the run count afresh (steady outside traffic is no loop); on other agents'
    /// messages alone (served here or elsewhere), a paused agent stays paused, and one that
    /// reached its run cap or exchanged too many mentions with one other agent
    /// ([`Shared::pair`]) is paused. `None` when the run may go; `Some` as
    /// [`Controller::rate_guard`] says.
    fn keep_guard(
        &self,
        st: &mut State,
        shared: &Shared,
        msgs: &[inbox::InboxMessage],
        agents_only: bool,
    ) -> Option<Option<String>> {
        if !agents_only {
            let a = st.agents.entry(self.agent.clone()).or_default();
            a.paused = false;
            a.runs = 0;
            return None;
        }
        let senders: std::collections::BTreeSet<&str> =
            msgs.iter().map(|m| m.entry.from.as_str()).collect();
        let a = st.agents.entry(self.agent.clone()).or_default();
        if a.paused {
            return Some(None);
        }
        let pause = |a: &mut AgentState, why: String| {
            a.paused = true;
            a.recent.clear();
            Some(Some(why))
        };
        if a.runs >= self.max_runs {
            return pause(
                a,
                format!(
                    "loop guard: {} reached the run limit ({} runs on other agents' messages \
                     since the workflow was last quiet); paused until a message from someone \
                     else (theirs are left unread)",
                    self.agent, self.max_runs
                ),
            );
        }
        let limit = shared.pair?;
        let now = Instant::now();
        let mut over = None;
        for from in &senders {
            let times = st.pairs.entry(pair(&self.agent, from)).or_default();
            while times
                .front()
                .is_some_and(|t| now.saturating_duration_since(*t) >= limit.window)
            {
                times.pop_front();
            }
            if times.len() >= limit.runs as usize {
                times.clear();
                over.get_or_insert(*from);
            }
        }
        if let Some(other) = over {
            let a = st.agents.entry(self.agent.clone()).or_default();
            return pause(
                a,
                format!(
                    "loop guard: {} and {other} mentioned each other {} times within {} s; {} \
                     paused until a message from someone else (theirs are left unread)",
                    self.agent,
                    limit.runs,
                    limit.window.as_secs_f64(),
                    self.agent
                ),
            );
        }
        for from in senders {
            st.pairs
                .entry(pair(&self.agent, from))
                .or_default()
                .push_back(now);
        }
        None
    }

    /// The loop guard's rate check before a run on `msgs`: `None` when the run may go;
    /// `Some` when the agent is paused, with the reason when it was paused just now.
    ///
    /// Only runs that messages from other agents served here started count: a message
    /// from anyone else (a user, the kickoff) is no loop, and it ends a pause.
    fn rate_guard(
        &self,
        st: &mut State,
        rate: Rate,
        msgs: &[inbox::InboxMessage],
    ) -> Option<Option<String>> {
        let from_agents = from_agents(st, &self.agent, msgs);
        let a = st.agents.entry(self.agent.clone()).or_default();
        if !from_agents {
            a.paused = false;
            return None;
        }
        if a.paused {
            return Some(None);
        }
        let now = Instant::now();
        while a
            .recent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= rate.window)
        {
            a.recent.pop_front();
        }
        if a.recent.len() < rate.runs as usize {
            a.recent.push_back(now);
            return None;
        }
        a.paused = true;
        a.recent.clear();
        Some(Some(format!(
            "loop guard: {} ran {} times within {} s on other agents' messages alone; \
             paused until a message from someone else (theirs are left unread)",
            self.agent,
            rate.runs,
            rate.window.as_secs_f64()
        )))
    }

    /// Say on stderr and on the channel that the loop guard paused this agent.
    fn announce_pause(&self, why: &str) {
        use std::io::Write;
        let _ = writeln!(std::io::stderr().lock(), "aw-run: {why}");
        if let Err(e) = post::post(&self.inst, "system", why, &PostOptions::default()) {
            crate::cli::warn("aw-run", format!("cannot post the pause: {e}"));
        }
    }

    /// Count what a run spent (in the instance's ledger too), then check the budgets.
    fn spend(&self, shared: &Shared, u: &Usage) {
        {
            // Under the lock, so that the ledger and this process's figures agree.
            let mut st = shared.lock();
            let written = super::ledger::add(&self.inst, &self.agent, u);
            let a = st.agents.entry(self.agent.clone()).or_default();
            a.usage.add(u);
            a.running = Usage::default();
            match written {
                Ok(l) => absorb(&mut st, &l),
                Err(e) => crate::cli::warn(
                    "aw-run",
                    format!("{}: spending not recorded in the instance: {e}", self.agent),
                ),
            }
        }
        self.check_budgets(shared);
    }

    /// Past a budget (this agent's own or the workflow's), say so on the channel (once) and
    /// stop every controller (a running backend is killed; its messages stay unread). `true`
    /// when a budget stopped the run.
    fn check_budgets(&self, shared: &Shared) -> bool {
        // What other servers of the instance spent meanwhile.
        let ledger = super::ledger::load(&self.inst).ok();
        let mut st = shared.lock();
        if st.over_budget.is_some() {
            return true;
        }
        if let Some(l) = &ledger {
            absorb(&mut st, l);
        }
        let Some(why) = exceeded(&st, shared, &self.agent, &self.budget, &Usage::default()) else {
            return false;
        };
        st.over_budget = Some(why.clone());
        drop(st);
        let text = format!("{why}; aw-run stops every agent.");
        if let Err(e) = post::post(&self.inst, "system", &text, &PostOptions::default()) {
            crate::cli::warn("aw-run", format!("cannot post the budget stop: {e}"));
        }
        // The answers of the calls under way still come, and are counted.
        shared.stop_all_after_calls();
        true
    }

    /// Record the controller's state for `aw-ctl ps`, when it changed.
    fn publish(&mut self, state: ControllerState) {
        if self.published == Some((state, self.served.runs)) {
            return;
        }
        self.served.state = state;
        self.published = Some((state, self.served.runs));
        if let Err(e) = serve::write(&self.inst, &self.served) {
            crate::cli::warn("aw-run", format!("{}: state not recorded: {e}", self.agent));
        }
    }

    fn event(
        &self,
        run: u64,
        attempt: u32,
        status: Status,
        duration: Duration,
        reason: Option<String>,
    ) -> Event {
        Event {
            agent: self.agent.clone(),
            instance: self.inst.name().to_string(),
            run,
            attempt,
            start: false,
            status,
            duration,
            reason,
            gave_up: false,
            woken_by: Vec::new(),
            transcript: 0,
            stderr_tail: None,
        }
    }

    /// One run with its retries; `true` when an attempt succeeded (and the inbox was acked).
    fn one_run(
        &mut self,
        shared: &Shared,
        report: &Report,
        run: u64,
        msgs: &[inbox::InboxMessage],
        older: Option<prompt::Older>,
    ) -> bool {
        let channel = Channel::new(&self.inst);
        let last = msgs.last().map_or(0, |m| m.entry.id);
        let mut wait = self.retry.backoff;
        for attempt in 1..=self.retry.attempts.max(1) {
            if attempt > 1 {
                if !self.stop.sleep(wait) {
                    return false;
                }
                wait = wait.saturating_mul(2);
            }
            if self.stop.is_set() || self.check_budgets(shared) {
                return false;
            }
            let shared_context = self.document.as_deref().map(|name| {
                let recent = channel
                    .tail(prompt::RECENT)
                    .map(|b| b.entries)
                    .unwrap_or_default();
                (recent, name, crate::document::read(&self.inst, name).ok())
            });
            let text = prompt::build(&PromptParts {
                agent: &self.agent,
                instance: self.inst.name(),
                system: self
                    .system
                    .as_deref()
                    .filter(|_| !self.backend.takes_system_prompt()),
                inbox: msgs,
                older,
                recent: shared_context.as_ref().map(|c| c.0.as_slice()),
                document: shared_context.as_ref().map(|c| (c.1, c.2.as_deref())),
                attempt,
            });
            let text = match &self.task_context {
                Some(c) => text + &c.lock().unwrap_or_else(|e| e.into_inner()),
                None => text,
            };
            let before = channel.last_id().unwrap_or(0);
            let started = crate::channel::now();
            let mut ev = self.event(run, attempt, Status::Ok, Duration::ZERO, None);
            ev.start = true;
            ev.transcript = self.next_transcript;
            ev.woken_by = msgs
                .iter()
                .map(|m| (m.entry.id, m.entry.from.clone()))
                .collect();
            report(&ev);
            let t0 = Instant::now();
            let (agent, own, price) = (self.agent.as_str(), &self.budget, self.price.as_ref());
            let over_budget = |partial: &Usage| over_budget(shared, agent, own, price, partial);
            let ctx = RunContext {
                inst: &self.inst,
                agent: &self.agent,
                run,
                attempt,
                prompt: &text,
                prompt_messages: msgs.len(),
                root: &self.root,
                mcp_config: &self.mcp_config,
                timeout: self.timeout,
                stop: &self.stop,
                over_budget: &over_budget,
                remaining_usd: remaining_usd(&shared.lock(), shared, agent, own),
                log: self.attempt_log(),
            };
            let mut out =
                match crate::fs::atomic_write_private(&self.mcp_config, self.mcp_text.as_bytes()) {
                    Ok(()) => self.backend.run(&ctx),
                    Err(e) => {
                        let mut out = RunOutcome::new(Status::Failed);
                        out.reason = Some(format!("cannot write its MCP configuration: {e}"));
                        out
                    }
                };
            // A reason may quote what a service sent back, a key among it.
            out.reason = out.reason.map(|r| redact(&r, &self.secrets));
            if let Some(why) = out.usage.as_ref().and_then(Usage::implausible) {
                // Not believed: the answer fails, its counts taken at the ceiling.
                out.status = Status::Failed;
                out.reason = Some(why);
                out.usage = out.usage.map(|u| u.believed());
            }
            out.usage = out.usage.map(|u| priced(&u, price));
            let mut replies: Vec<u64> = channel
                .read_since(before)
                .map(|b| {
                    b.entries
                        .iter()
                        .filter(|e| e.from == self.agent)
                        .map(|e| e.id)
                        .collect()
                })
                .unwrap_or_default();
            if out.status == Status::Ok {
                if self.reply_fallback
                    && !out.final_text.is_empty()
                    && !self.answered(&channel, before, &replies)
                {
                    // What the agent printed may hold a secret of its environment.
                    let reply = redact(&out.final_text, &self.secrets);
                    match post::post(&self.inst, &self.agent, &reply, &PostOptions::default()) {
                        Ok(p) => replies.push(p.entry.id),
                        Err(e) => {
                            out.status = Status::Failed;
                            out.reason = Some(format!("cannot post the reply: {e}"));
                        }
                    }
                }
                if out.status == Status::Ok
                    && let Err(e) = inbox::ack(&self.inst, &self.agent, Some(last))
                {
                    out.status = Status::Failed;
                    out.reason = Some(format!("cannot acknowledge: {e}"));
                }
            }
            let duration = t0.elapsed();
            let transcript = self.next_transcript;
            self.transcript(
                run, attempt, &out, &started, duration, msgs, &replies, &text,
            );
            let ok = out.status == Status::Ok;
            if !ok {
                shared.agent(&self.agent).failures += 1;
            }
            match &out.usage {
                Some(u) => self.spend(shared, u),
                None => shared.agent(&self.agent).running = Usage::default(),
            }
            let mut ev = self.event(run, attempt, out.status, duration, out.reason.clone());
            ev.transcript = transcript;
            if !ok {
                ev.stderr_tail = last_line(&redact(&out.stderr.text, &self.secrets));
            }
            ev.gave_up = !ok
                && (attempt == self.retry.attempts.max(1) || self.stop.is_set() || out.permanent);
            report(&ev);
            if ok {
                return true;
            }
            if out.status == Status::Killed || out.permanent {
                return false;
            }
        }
        false
    }

    /// Whether the entries `replies` the agent wrote in a run (after entry `before`) answer
    /// anyone: an entry counts unless it only talks to the agent's own workers (the
    /// `spawn_agent`, `send_input` and `close_agent` messages of a lead).
    fn answered(&self, channel: &Channel, before: u64, replies: &[u64]) -> bool {
        if replies.is_empty() {
            return false;
        }
        let workers: Vec<String> = crate::registry::Registry::load(&self.inst)
            .map(|r| {
                r.agents
                    .into_iter()
                    .filter(|a| a.spawned_by.as_deref() == Some(self.agent.as_str()))
                    .map(|a| a.name)
                    .collect()
            })
            .unwrap_or_default();
        if workers.is_empty() {
            return true;
        }
        let Ok(batch) = channel.read_since(before) else {
            return true;
        };
        batch
            .entries
            .iter()
            .filter(|e| replies.contains(&e.id))
            .any(|e| !crate::collab::to_workers(e, &workers))
    }

    /// The log of the attempt about to start (`_state/runs/<agent>/<n>.log`, `n` its
    /// transcript's number), when it can be created.
    fn attempt_log(&self) -> Option<Arc<super::attempt_log::AttemptLog>> {
        let dir = transcript_dir(&self.inst, &self.agent);
        if let Err(e) = crate::fs::private_dir(&dir) {
            crate::cli::warn("aw-run", format!("{}: output not logged: {e}", self.agent));
            return None;
        }
        let path = super::attempt_log::log_path(&dir, self.next_transcript);
        super::attempt_log::AttemptLog::create(&path, &self.secrets).map(Arc::new)
    }

    /// Write `_state/runs/<agent>/<n>.json` for one attempt, with secrets redacted.
    #[allow(clippy::too_many_arguments)]
    fn transcript(
        &mut self,
        run: u64,
        attempt: u32,
        out: &RunOutcome,
        started: &str,
        duration: Duration,
        msgs: &[inbox::InboxMessage],
        replies: &[u64],
        prompt: &str,
    ) {
        let n = self.next_transcript;
        self.next_transcript += 1;
        // Redacted before what was cut is told: no head of a secret is kept at a cut.
        let stdout = redact_cut(&out.stdout, &self.secrets);
        let stderr = redact_cut(&out.stderr, &self.secrets);
        let doc = json!({
            "agent": self.agent,
            "run": run,
            "attempt": attempt,
            "status": out.status.name(),
            "reason": out.reason,
            "exit_code": out.exit_code,
            "started": started,
            "duration_ms": duration.as_millis() as u64,
            "inbox": msgs.iter().map(|m| m.entry.id).collect::<Vec<_>>(),
            "reply": replies,
            "usage": out.usage,
            "command": out.command.iter().map(|a| redact(a, &self.secrets)).collect::<Vec<_>>(),
            "stdout": stdout.text,
            "stdout_cut": stdout.cut,
            "stderr": stderr.text,
            "stderr_cut": stderr.cut,
            "prompt": redact(prompt, &self.secrets),
            "server": {
                "host": crate::host::this().name,
                "host_id": crate::host::this().id,
                "pid": std::process::id(),
            },
        });
        let path = transcript_dir(&self.inst, &self.agent).join(format!("{n}.json"));
        let write = || -> Result<()> {
            // Private from its first byte: a transcript holds prompts and outputs.
            crate::fs::private_dir(&transcript_dir(&self.inst, &self.agent))?;
            let text = serde_json::to_string_pretty(&doc).expect("json");
            atomic_write_private(&path, text.as_bytes())
        };
        if let Err(e) = write() {
            crate::cli::warn(
                "aw-run",
                format!("{}: transcript not written: {e}", self.agent),
            );
        }
    }
}

/// Most characters of a failed attempt's stderr line that its event shows.
pub const STDERR_TAIL_CHARS: usize = 200;

/// The last line of `text` that is not blank, trimmed, with control characters shown as
/// `?`, cut at [`STDERR_TAIL_CHARS`] (with `...`); `None` when there is none.
fn last_line(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    let mut shown: String = line
        .chars()
        .take(STDERR_TAIL_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if line.chars().count() > STDERR_TAIL_CHARS {
        shown.push_str("...");
    }
    Some(shown)
}

/// `usage`, with its cost from `price` when the backend reported none (and `price` knows
/// every price it needs).
fn priced(usage: &Usage, price: Option<&Price>) -> Usage {
    let mut u = usage.clone();
    if u.cost_usd.is_none() {
        u.cost_usd = price.and_then(|p| p.cost(&u));
    }
    u
}

/// What `agent` and what everyone has spent, with `partial` (a running run's usage so far)
/// added to both: the runs of this process, those under way of the other agents, and what
/// the instance's ledger counts besides.
fn spent(st: &State, agent: &str, partial: &Usage) -> (Usage, Usage) {
    let mut own = partial.clone();
    if let Some(a) = st.agents.get(agent) {
        own.add(&a.usage);
    }
    if let Some(u) = st.outside_agents.get(agent) {
        own.add(u);
    }
    let mut all = partial.clone();
    all.add(&st.outside);
    for (name, a) in &st.agents {
        all.add(&a.usage);
        if name != agent {
            all.add(&a.running);
        }
    }
    (own, all)
}

/// Why a run of `agent` that has spent `partial` so far is over a budget: `agent`'s own
/// (`budget`), else the workflow's.
fn exceeded(
    st: &State,
    shared: &Shared,
    agent: &str,
    budget: &Budget,
    partial: &Usage,
) -> Option<String> {
    let (own, all) = spent(st, agent, partial);
    budget
        .exceeded_by(agent, &own)
        .or_else(|| shared.budget.exceeded(&all))
}

/// The reason a run of `agent` that has spent `partial` so far (priced with `price` when
/// it has no cost) must stop: a budget stopped the run, or this spending is over one.
fn over_budget(
    shared: &Shared,
    agent: &str,
    budget: &Budget,
    price: Option<&Price>,
    partial: &Usage,
) -> Option<String> {
    let mut st = shared.lock();
    let partial = priced(partial, price);
    // Seen by the other agents' checks while the run goes on.
    st.agents.entry(agent.to_string()).or_default().running = partial.clone();
    if let Some(why) = &st.over_budget {
        return Some(why.clone());
    }
    exceeded(&st, shared, agent, budget, &partial)
}

/// What the USD budgets leave for a run of `agent`: the smaller of what the workflow's and
/// `agent`'s own (`budget`) leave, when either has one.
fn remaining_usd(st: &State, shared: &Shared, agent: &str, budget: &Budget) -> Option<f64> {
    let (own, all) = spent(st, agent, &Usage::default());
    match (shared.budget.usd_left(&all), budget.usd_left(&own)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `_state/runs/<agent>`.
pub fn transcript_dir(inst: &Instance, agent: &str) -> PathBuf {
    inst.state_dir().join("runs").join(agent)
}

/// What `agent`'s runs spent, summed over its transcripts; `None` when no transcript
/// reports usage.
pub fn usage_of(inst: &Instance, agent: &str) -> Option<Usage> {
    let rd = std::fs::read_dir(transcript_dir(inst, agent)).ok()?;
    let mut total: Option<Usage> = None;
    for e in rd.flatten() {
        let Ok(bytes) = std::fs::read(e.path()) else {
            continue;
        };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            continue;
        };
        if let Ok(u) = serde_json::from_value::<Usage>(v["usage"].clone()) {
            total.get_or_insert_with(Usage::default).add(&u);
        }
    }
    total
}

/// The next free transcript number of `agent` (1 when none exists).
pub fn next_transcript(inst: &Instance, agent: &str) -> u64 {
    let Ok(rd) = std::fs::read_dir(transcript_dir(inst, agent)) else {
        return 1;
    };
    rd.filter_map(|e| {
        let name = e.ok()?.file_name().into_string().ok()?;
        name.strip_suffix(".json")?.parse::<u64>().ok()
    })
    .max()
    .map_or(1, |m| m + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, cost: Option<f64>) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cost_usd: cost,
            ..Usage::default()
        }
    }

    /// Shared state where `alice` spent $0.02 and `bob` $0.05, under a workflow budget of
    /// $0.10.
    fn shared() -> Shared {
        let shared = Shared {
            budget: Budget {
                usd: Some(0.10),
                tokens: None,
            },
            ..Shared::default()
        };
        {
            let mut st = shared.lock();
            st.agents.entry("alice".into()).or_default().usage = usage(10, 10, Some(0.02));
            st.agents.entry("bob".into()).or_default().usage = usage(10, 10, Some(0.05));
        }
        shared
    }

    #[test]
    fn a_partial_run_is_priced_and_checked_against_both_budgets() {
        let shared = shared();
        let own = Budget {
            usd: Some(0.03),
            tokens: None,
        };
        // $1 per million input tokens: 20,000 tokens cost $0.02.
        let price = Price {
            input: Some(1.0),
            output: Some(1.0),
            ..Price::default()
        };
        let partial = usage(20_000, 0, None);
        // Alice's own budget: $0.02 + $0.02 is over $0.03; bob's spending is not hers.
        assert_eq!(
            over_budget(&shared, "alice", &own, Some(&price), &partial).as_deref(),
            Some("budget: agent alice spent $0.0400, over its $0.03 budget")
        );
        // Unpriced, the partial run costs nothing known: under both budgets.
        assert_eq!(over_budget(&shared, "alice", &own, None, &partial), None);
        // Without an own budget, the workflow's counts everyone: $0.02 + $0.05 + $0.04.
        let big = usage(40_000, 0, None);
        assert_eq!(
            over_budget(&shared, "alice", &Budget::default(), Some(&price), &big).as_deref(),
            Some("budget: $0.1100 spent, over the $0.1 budget")
        );
        // A CLI's own figure is kept.
        let reported = usage(40_000, 0, Some(0.001));
        assert_eq!(
            over_budget(&shared, "alice", &own, Some(&price), &reported),
            None
        );
        // Once a budget stopped the run, every run is told so.
        shared.lock().over_budget = Some("budget: stopped".into());
        assert_eq!(
            over_budget(&shared, "bob", &Budget::default(), None, &usage(0, 0, None)).as_deref(),
            Some("budget: stopped")
        );
    }

    #[test]
    fn the_stderr_tail_is_the_last_line_that_says_something_cut_to_a_line() {
        assert_eq!(
            last_line("a\nfatal: x\n\n  \n").as_deref(),
            Some("fatal: x")
        );
        assert_eq!(last_line("\n \n"), None);
        assert_eq!(last_line("bell\u{7} here").as_deref(), Some("bell? here"));
        let long = last_line(&"y".repeat(500)).unwrap();
        assert_eq!(long.len(), STDERR_TAIL_CHARS + 3);
        assert!(long.ends_with("y..."));
    }

    #[test]
    fn rates_parse_or_say_what_is_wrong() {
        assert_eq!(
            Rate::parse("20/60s"),
            Ok(Some(Rate {
                runs: 20,
                window: Duration::from_secs(60)
            }))
        );
        assert_eq!(Rate::parse("off"), Ok(None));
        for bad in ["20", "0/60s", "x/60s", "5/0s", "5/soon"] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_usd_left_is_the_smaller_of_the_two_budgets() {
        let shared = shared();
        let st = shared.lock();
        let left = |b: Budget| remaining_usd(&st, &shared, "alice", &b);
        let own = |usd: f64| Budget {
            usd: Some(usd),
            tokens: None,
        };
        // The workflow leaves $0.03 ($0.10 - $0.07).
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
        assert!(close(left(Budget::default()), 0.03));
        assert!(close(left(own(0.025)), 0.005));
        assert!(close(left(own(1.0)), 0.03));
        assert!(close(left(own(0.01)), 0.0));
        drop(st);
        let free = Shared::default();
        let st = free.lock();
        assert_eq!(remaining_usd(&st, &free, "alice", &Budget::default()), None);
        assert!(close(remaining_usd(&st, &free, "alice", &own(0.5)), 0.5));
    }
}
