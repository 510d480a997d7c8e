//! What an instance has spent, kept in `_state/budget.json` across runs and restarts of
//! `aw-run` until `aw-ctl budget reset`: the spending of every agent (tokens, and a cost
//! when known), and the workflow budget that applies to the instance.
//!
//! Every `aw-run` that serves an agent of the instance (a workflow's, a detached worker
//! server, `aw-run --serve`) adds what each run spent, under the instance's state lock, and
//! checks its budgets against the sum. The limit is the one the last `aw-run` that had one
//! was given (`budget:` key, `--budget-usd`, `--budget-tokens`); an `aw-run` given none
//! takes the recorded one, so that a worker served elsewhere stays under the budget of the
//! workflow that spawned it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::instance::Instance;
use crate::usage::{Budget, Usage};

/// The file under `_state/`.
pub const FILE: &str = "budget.json";

/// `_state/budget.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// The workflow budget of the instance, when one was given.
    #[serde(default)]
    pub limit: Limit,
    /// What every agent spent together since `since`.
    #[serde(default)]
    pub spent: Usage,
    /// What each agent spent since `since`.
    #[serde(default)]
    pub agents: BTreeMap<String, Usage>,
    /// When counting started: the first run recorded, or the last reset.
    #[serde(default)]
    pub since: Option<String>,
}

/// A budget as recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    #[serde(default)]
    pub usd: Option<f64>,
    #[serde(default)]
    pub tokens: Option<u64>,
}

impl From<Limit> for Budget {
    fn from(l: Limit) -> Budget {
        Budget {
            usd: l.usd,
            tokens: l.tokens,
        }
    }
}

impl From<Budget> for Limit {
    fn from(b: Budget) -> Limit {
        Limit {
            usd: b.usd,
            tokens: b.tokens,
        }
    }
}

impl Ledger {
    /// What `agent` spent (nothing when it has no record).
    pub fn of(&self, agent: &str) -> Usage {
        self.agents.get(agent).cloned().unwrap_or_default()
    }
}

/// The ledger of `inst` (empty when there is none).
pub fn load(inst: &Instance) -> Result<Ledger> {
    crate::state::load(&inst.state_file(FILE))
}

/// Add what `agent` spent; the ledger after.
pub fn add(inst: &Instance, agent: &str, u: &Usage) -> Result<Ledger> {
    crate::state::update(inst, FILE, |l: &mut Ledger| {
        l.spent.add(u);
        l.agents.entry(agent.to_string()).or_default().add(u);
        l.since.get_or_insert_with(crate::time::now);
        Ok(l.clone())
    })
}

/// Record `budget` as the instance's budget when it has a limit; the budget that applies
/// (`budget`, else the recorded one) and the ledger.
pub fn apply(inst: &Instance, budget: Budget) -> Result<(Budget, Ledger)> {
    crate::state::update(inst, FILE, |l: &mut Ledger| {
        if budget.usd.is_some() || budget.tokens.is_some() {
            l.limit = budget.into();
        }
        Ok((l.limit.into(), l.clone()))
    })
}

/// Start counting again from nothing (the limit stays); the ledger before.
pub fn reset(inst: &Instance) -> Result<Ledger> {
    crate::state::update(inst, FILE, |l: &mut Ledger| {
        let before = l.clone();
        l.spent = Usage::default();
        l.agents.clear();
        l.since = Some(crate::time::now());
        Ok(before)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spending_adds_up_per_agent_and_a_reset_keeps_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let inst = crate::instance::Root::new(dir.path())
            .instance("t")
            .unwrap();
        let u = |n: u64| Usage {
            input_tokens: n,
            ..Usage::default()
        };
        let b = Budget {
            usd: None,
            tokens: Some(100),
        };
        assert_eq!(apply(&inst, b).unwrap().0, b);
        add(&inst, "a", &u(30)).unwrap();
        let l = add(&inst, "b", &u(u64::MAX)).unwrap();
        assert_eq!(l.spent.tokens(), u64::MAX);
        assert_eq!(l.of("a").tokens(), 30);
        // No limit given: the recorded one applies.
        assert_eq!(apply(&inst, Budget::default()).unwrap().0, b);
        let before = reset(&inst).unwrap();
        assert_eq!(before.of("a").tokens(), 30);
        let l = load(&inst).unwrap();
        assert_eq!((l.spent.tokens(), l.agents.len()), (0, 0));
        assert_eq!(Budget::from(l.limit), b);
    }
}
