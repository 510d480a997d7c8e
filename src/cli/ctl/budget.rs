//! `aw-ctl budget [reset]`: what an instance has spent across the runs of aw-run, against
//! its workflow budget (`_state/budget.json`, see [`crate::ledger`]), and starting the
//! count again.

use serde_json::json;

use super::Call;
use crate::cli::Out;
use crate::error::Result;
use crate::ledger::{self, Ledger};
use crate::usage::{Budget, Usage};

/// `aw-ctl budget`: spent, limit, and each agent's spending.
pub(super) fn show(out: &mut Out, a: &Call, _: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    let l = ledger::load(&inst)?;
    if a.has("json") {
        out.line(&to_json(&l).to_string())?;
        return Ok(0);
    }
    let since = l
        .since
        .as_deref()
        .map_or(String::new(), |s| format!(" since {s}"));
    out.line(&format!("spent: {}{since}", spent(&l.spent)))?;
    out.line(&format!("limit: {}", limit(l.limit.into())))?;
    if let Some(why) = Budget::from(l.limit).exceeded(&l.spent) {
        out.line(&format!("over: {why}"))?;
    }
    for (name, u) in &l.agents {
        out.line(&format!("  {name}: {}", spent(u)))?;
    }
    Ok(0)
}

/// `aw-ctl budget reset`: start counting from nothing; the limit stays.
pub(super) fn reset(out: &mut Out, a: &Call, _: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    let before = ledger::reset(&inst)?;
    if a.has("json") {
        out.line(&json!({"reset": true, "before": to_json(&before)}).to_string())?;
    } else {
        out.line(&format!(
            "budget of {} reset (it had spent {})",
            inst.name(),
            spent(&before.spent)
        ))?;
    }
    Ok(0)
}

fn to_json(l: &Ledger) -> serde_json::Value {
    let over = Budget::from(l.limit).exceeded(&l.spent);
    json!({
        "spent": {"tokens": l.spent.tokens(), "usage": l.spent},
        "limit": {"tokens": l.limit.tokens, "usd": l.limit.usd},
        "over": over.is_some(),
        "since": l.since,
        "agents": l.agents.iter().map(|(n, u)| (n.clone(), json!({"tokens": u.tokens(), "usage": u}))).collect::<serde_json::Map<_, _>>(),
    })
}

/// `N tokens` and `, $X` when a cost is known.
fn spent(u: &Usage) -> String {
    match u.cost_usd {
        Some(c) => format!("{} tokens, ${c:.4}", u.tokens()),
        None => format!("{} tokens", u.tokens()),
    }
}

fn limit(b: Budget) -> String {
    match (b.tokens, b.usd) {
        (None, None) => "none".into(),
        (Some(t), None) => format!("{t} tokens"),
        (None, Some(u)) => format!("${u}"),
        (Some(t), Some(u)) => format!("{t} tokens, ${u}"),
    }
}
