//! The loop guard: a run cap per agent, a rate limit on the runs that only other agents'
//! messages started, and in keep mode a limit on the mentions between two agents; a guard
//! pauses an agent until a message from someone else arrives.
//!
//! An agent this process serves is an agent in every instance it serves: two agents of
//! `aw-run --serve a@one b@two` that answer each other in the other's instance are a loop
//! like two agents of one instance, though neither instance registers the other's agent.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

use super::rate::Rate;
use super::shared::{AgentState, Shared, State};
use crate::inbox;
use crate::instance::Instance;
use crate::post::{self, PostOptions};

/// The agents this process serves, in any of its instances, each with the number of
/// instances it is served in.
static SERVED: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());

fn served() -> std::sync::MutexGuard<'static, BTreeMap<String, usize>> {
    SERVED.lock().unwrap_or_else(|e| e.into_inner())
}

/// `agent` is served by this process (in one more instance).
pub(super) fn note_served(agent: &str) {
    *served().entry(agent.to_string()).or_default() += 1;
}

/// `agent` is no longer served in one of the instances of this process.
pub(super) fn note_unserved(agent: &str) {
    let mut s = served();
    if let Some(n) = s.get_mut(agent) {
        *n -= 1;
        if *n == 0 {
            s.remove(agent);
        }
    }
}

/// Does this process serve `agent`, in any of its instances?
pub(super) fn served_here(agent: &str) -> bool {
    served().contains_key(agent)
}

/// Are `msgs` all from agents other than `agent` that this process serves, in this
/// instance or another (a run on them may be a loop)?
pub(super) fn from_agents(st: &State, agent: &str, msgs: &[inbox::InboxMessage]) -> bool {
    msgs.iter().all(|m| {
        m.entry.from != agent
            && (st.agents.contains_key(&m.entry.from) || served_here(&m.entry.from))
    })
}

/// The key of the pair guard's window for two agents: their names in order.
fn pair(a: &str, b: &str) -> (String, String) {
    let (x, y) = if a <= b { (a, b) } else { (b, a) };
    (x.to_string(), y.to_string())
}

/// The loop guard in keep mode before a run of `agent` on `msgs`, ahead of the rate check:
/// a message from outside the agents (`agents_only` false: a user, the kickoff) lifts a
/// pause and starts the run count afresh (steady outside traffic is no loop); on other
/// agents' messages alone (served here or elsewhere), a paused agent stays paused, and one
/// that reached its run cap (`max_runs`) or exchanged too many mentions with one other
/// agent ([`Shared::pair`]) is paused. `None` when the run may go; `Some` as [`rate_guard`]
/// says.
pub(super) fn keep_guard(
    st: &mut State,
    shared: &Shared,
    agent: &str,
    max_runs: u64,
    msgs: &[inbox::InboxMessage],
    agents_only: bool,
) -> Option<Option<String>> {
    if !agents_only {
        let a = st.agents.entry(agent.to_string()).or_default();
        a.paused = false;
        a.runs = 0;
        return None;
    }
    let senders: std::collections::BTreeSet<&str> =
        msgs.iter().map(|m| m.entry.from.as_str()).collect();
    let a = st.agents.entry(agent.to_string()).or_default();
    if a.paused {
        return Some(None);
    }
    let pause = |a: &mut AgentState, why: String| {
        a.paused = true;
        a.recent.clear();
        Some(Some(why))
    };
    if a.runs >= max_runs {
        return pause(
            a,
            format!(
                "loop guard: {} reached the run limit ({} runs on other agents' messages \
                     since the workflow was last quiet); paused until a message from someone \
                     else (theirs are left unread)",
                agent, max_runs
            ),
        );
    }
    let limit = shared.pair?;
    let now = Instant::now();
    let mut over = None;
    for from in &senders {
        let times = st.pairs.entry(pair(agent, from)).or_default();
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
        let a = st.agents.entry(agent.to_string()).or_default();
        return pause(
            a,
            format!(
                "loop guard: {} and {other} mentioned each other {} times within {} s; {} \
                     paused until a message from someone else (theirs are left unread)",
                agent,
                limit.runs,
                limit.window.as_secs_f64(),
                agent
            ),
        );
    }
    for from in senders {
        st.pairs
            .entry(pair(agent, from))
            .or_default()
            .push_back(now);
    }
    None
}

/// The loop guard's rate check before a run of `agent` on `msgs`: `None` when the run may go;
/// `Some` when the agent is paused, with the reason when it was paused just now.
///
/// Only runs that messages from other agents served by this process (in any of its
/// instances) started count: a message from anyone else (a user, the kickoff) is no
/// loop, and it ends a pause.
pub(super) fn rate_guard(
    st: &mut State,
    rate: Rate,
    agent: &str,
    msgs: &[inbox::InboxMessage],
) -> Option<Option<String>> {
    let from_agents = from_agents(st, agent, msgs);
    let a = st.agents.entry(agent.to_string()).or_default();
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
        agent,
        rate.runs,
        rate.window.as_secs_f64()
    )))
}

/// Say on stderr and on the channel of `inst` that the loop guard paused an agent.
pub(super) fn announce_pause(inst: &Instance, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "aw-run: {why}");
    if let Err(e) = post::post(inst, "system", why, &PostOptions::default()) {
        crate::warn::warn("aw-run", format!("cannot post the pause: {e}"));
    }
}
