//! What the runs spend and the budgets that bound it: each run's usage counted in this
//! process and the instance's ledger, priced by the model when the backend reports no cost,
//! and checked against the agent's own budget and the workflow's.

use super::config::Controller;
use super::shared::{Shared, State};
use crate::models::Price;
use crate::post::{self, PostOptions};
use crate::usage::{Budget, Usage};

/// Take the ledger's figures `l` as what is spent outside this process: the ledger less
/// what this process's runs have spent (they are in it once written).
fn absorb(st: &mut State, l: &crate::run::ledger::Ledger) {
    st.outside = l.spent.minus(&st.spent_here);
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

/// `usage`, with its cost from `price` when the backend reported none (and `price` knows
/// every price it needs).
pub(super) fn priced(usage: &Usage, price: Option<&Price>) -> Usage {
    let mut u = usage.clone();
    if u.cost_usd.is_none() {
        u.cost_usd = price.and_then(|p| p.cost(&u));
    }
    u
}

/// What `agent` and what everyone has spent, with `partial` (a running run's usage so far)
/// added to both: the runs of this process, those under way of the other agents, and what
/// the instance's ledger counts besides.
///
/// What everyone spent is summed only when `all_too` (a workflow budget will be checked):
/// it costs a look at every agent.
fn spent(st: &State, agent: &str, partial: &Usage, all_too: bool) -> (Usage, Usage) {
    let mut own = partial.clone();
    if let Some(a) = st.agents.get(agent) {
        own.add(&a.usage);
    }
    if let Some(u) = st.outside_agents.get(agent) {
        own.add(u);
    }
    let mut all = partial.clone();
    if !all_too {
        return (own, all);
    }
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
    let (own, all) = spent(st, agent, partial, !shared.budget.is_unlimited());
    budget
        .exceeded_by(agent, &own)
        .or_else(|| shared.budget.exceeded(&all))
}

/// The reason a run of `agent` that has spent `partial` so far (priced with `price` when
/// it has no cost) must stop: a budget stopped the run, or this spending is over one.
pub(super) fn over_budget(
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
pub(super) fn remaining_usd(
    st: &State,
    shared: &Shared,
    agent: &str,
    budget: &Budget,
) -> Option<f64> {
    let (own, all) = spent(st, agent, &Usage::default(), shared.budget.usd.is_some());
    match (shared.budget.usd_left(&all), budget.usd_left(&own)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Controller {
    /// Count what a run spent (in the instance's ledger too), then check the budgets.
    pub(super) fn spend(&self, shared: &Shared, u: &Usage) {
        {
            // Under the lock, so that the ledger and this process's figures agree.
            let mut st = shared.lock();
            let written = crate::run::ledger::add(&self.inst, &self.agent, u);
            let a = st.agents.entry(self.agent.clone()).or_default();
            a.usage.add(u);
            a.running = Usage::default();
            st.spent_here.add(u);
            match written {
                Ok(l) => absorb(&mut st, &l),
                Err(e) => crate::warn::warn(
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
    pub(super) fn check_budgets(&self, shared: &Shared) -> bool {
        // What other servers of the instance spent meanwhile.
        let ledger = crate::run::ledger::load(&self.inst).ok();
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
            crate::warn::warn("aw-run", format!("cannot post the budget stop: {e}"));
        }
        // The answers of the calls under way still come, and are counted.
        shared.stop_all_after_calls();
        true
    }
}
