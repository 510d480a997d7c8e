//! What the runs spend and the budgets that bound it: each run's usage counted in this
//! process and the instance's ledger, priced by the model when the backend reports no cost,
//! and checked against the agent's own budget and the workflow's.

use super::shared::{Shared, State};
use crate::instance::Instance;
use crate::models::Price;
use crate::post::{self, PostOptions};
use crate::usage::{Budget, Usage};

/// Take the ledger's figures `l` as what is spent outside this process: the ledger less
/// what this process's runs have spent (they are in it once written).
fn absorb(st: &mut State, l: &crate::ledger::Ledger) {
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

/// What one agent's runs spend, counted in this process and the instance's ledger, and
/// checked against the agent's own budget and the workflow's.
pub(super) struct Account<'a> {
    pub inst: &'a Instance,
    pub agent: &'a str,
    /// What the agent's own runs may spend.
    pub budget: &'a Budget,
}

impl Account<'_> {
    /// Count what a run spent (in the instance's ledger too); [`Account::check_budgets`]
    /// says whether that went over a budget.
    pub(super) fn spend(&self, shared: &Shared, u: &Usage) {
        {
            // Under the lock, so that the ledger and this process's figures agree.
            let mut st = shared.lock();
            let written = crate::ledger::add(self.inst, self.agent, u);
            let a = st.agents.entry(self.agent.to_string()).or_default();
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
    }

    /// Past a budget (this agent's own or the workflow's), say so on the channel (once) and
    /// stop every controller (a running backend is killed; its messages stay unread). `true`
    /// when a budget stopped the run.
    pub(super) fn check_budgets(&self, shared: &Shared) -> bool {
        if self.budget.is_unlimited() && shared.budget.is_unlimited() {
            // No budget to be over: the ledger is not read on the way to every start.
            return shared.lock().over_budget.is_some();
        }
        // What other servers of the instance spent meanwhile.
        let ledger = crate::ledger::load(self.inst).ok();
        let mut st = shared.lock();
        if st.over_budget.is_some() {
            return true;
        }
        if let Some(l) = &ledger {
            absorb(&mut st, l);
        }
        let Some(why) = exceeded(&st, shared, self.agent, self.budget, &Usage::default()) else {
            return false;
        };
        st.over_budget = Some(why.clone());
        drop(st);
        let text = format!("{why}; aw-run stops every agent.");
        if let Err(e) = post::post(self.inst, "system", &text, &PostOptions::default()) {
            crate::warn::warn("aw-run", format!("cannot post the budget stop: {e}"));
        }
        // The answers of the calls under way still come, and are counted.
        shared.stop_all_after_calls();
        true
    }
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
