//! Gathering a report: the attempts and runs, the channel, the board, approvals and
//! merges of an instance, read as stored.

use std::collections::BTreeMap;

use super::data::{
    AgentSummary, ApprovalRow, Attempt, CardRow, MAX_TEXT, MergeRow, Message, Report, Totals, Wake,
    millis, rfc3339,
};
use super::runs;
use crate::channel::Channel;
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::usage::Usage;

/// Is `ts` within `[start, end]` (both in ms)? A time that does not read is not.
fn within(ts: &str, window: (i64, i64)) -> bool {
    millis(ts).is_some_and(|t| t >= window.0 && t <= window.1)
}

/// Gather the report of `inst`, or of its run `run` (an unknown run is refused, 65).
pub fn gather(inst: &Instance, run: Option<u64>) -> Result<Report> {
    inst.require()?;
    let mut problems = Vec::new();
    let registry = crate::registry::Registry::load(inst)?;
    let all = runs::attempts(inst, &mut problems)?;
    let list = runs::runs(&all);
    let attempts: Vec<Attempt> = match run {
        Some(n) => {
            if n == 0 || n as usize > list.len() {
                let has = match list.len() {
                    0 => "it has none".to_string(),
                    1 => "it has run 1".to_string(),
                    k => format!("it has runs 1 to {k}"),
                };
                return Err(Error::invalid(format!(
                    "no run {n} in instance '{}' ({has})",
                    inst.name()
                ))
                .hint("aw-ctl report --json lists them under \"runs\""));
            }
            all.into_iter().filter(|a| a.server_run == n).collect()
        }
        None => all,
    };
    let batch = Channel::new(inst).read_all()?;
    problems.extend(batch.damage.iter().map(|d| d.to_string()));
    let entries = batch.entries;
    let time_of: BTreeMap<u64, i64> = entries
        .iter()
        .filter_map(|e| Some((e.id, millis(&e.timestamp)?)))
        .collect();
    // The window: a run's from the first entry that woke it to the end of its last attempt
    // (or the last entry it wrote); the instance's from its first entry or attempt to its
    // last.
    let mut window: Option<(i64, i64)> = None;
    let mut widen = |t: i64| {
        window = Some(window.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
    };
    for a in &attempts {
        widen(a.start_ms);
        widen(a.start_ms + a.duration_ms as i64);
        // What it wrote counts too: aw-run posts a reply on its behalf as it ends.
        for id in a.inbox.iter().chain(&a.reply) {
            if let Some(&t) = time_of.get(id) {
                widen(t);
            }
        }
    }
    if run.is_none() {
        for t in time_of.values() {
            widen(*t);
        }
    }
    let in_window = |ts: &str| run.is_none() || window.is_some_and(|w| within(ts, w));
    let messages: Vec<Message> = entries
        .iter()
        .filter(|e| in_window(&e.timestamp))
        .map(|e| {
            let cut = e.message.chars().count() > MAX_TEXT;
            Message {
                id: e.id,
                at: e.timestamp.clone(),
                from: e.from.clone(),
                mentions: e.mentions.clone(),
                text: e.message.chars().take(MAX_TEXT).collect(),
                len: e.message.len(),
                cut,
            }
        })
        .collect();
    let from_of: BTreeMap<u64, &str> = entries.iter().map(|e| (e.id, e.from.as_str())).collect();
    let wakes: Vec<Wake> = attempts
        .iter()
        .flat_map(|a| {
            a.inbox.iter().map(|id| Wake {
                entry: *id,
                from: from_of.get(id).unwrap_or(&"?").to_string(),
                to: a.agent.clone(),
                attempt: a.n,
            })
        })
        .collect();
    let agents = summaries(&registry, &attempts, &messages);
    let totals = totals(&agents, &messages, &wakes);
    let (cards, approvals, merges) = records(inst, run.and(window), &mut problems);
    let ledger = match run {
        None if inst.state_file(crate::ledger::FILE).exists() => Some(crate::ledger::load(inst)?),
        _ => None,
    };
    Ok(Report {
        instance: inst.name().to_string(),
        generated: crate::time::now(),
        run,
        start: window.map(|w| rfc3339(w.0)),
        end: window.map(|w| rfc3339(w.1)),
        runs: list,
        agents,
        totals,
        attempts,
        wakes,
        messages,
        cards,
        approvals,
        merges,
        ledger,
        problems,
    })
}

/// Per agent: the registered ones in their order, then those with attempts, then the other
/// senders of messages.
fn summaries(
    registry: &crate::registry::Registry,
    attempts: &[Attempt],
    messages: &[Message],
) -> Vec<AgentSummary> {
    let mut out: Vec<AgentSummary> = Vec::new();
    let mut at: BTreeMap<String, usize> = BTreeMap::new();
    fn slot(out: &mut Vec<AgentSummary>, at: &mut BTreeMap<String, usize>, name: &str) -> usize {
        *at.entry(name.to_string()).or_insert_with(|| {
            out.push(AgentSummary {
                name: name.to_string(),
                ..AgentSummary::default()
            });
            out.len() - 1
        })
    }
    for a in &registry.agents {
        let i = slot(&mut out, &mut at, &a.name);
        out[i].backend = Some(a.backend.clone());
    }
    for a in attempts {
        let i = slot(&mut out, &mut at, &a.agent);
        let s = &mut out[i];
        s.attempts += 1;
        match a.status.as_str() {
            "ok" => s.ok += 1,
            _ => s.failed += 1,
        }
        s.busy_ms = s.busy_ms.saturating_add(a.duration_ms);
        if let Some(u) = &a.usage {
            s.usage.get_or_insert_with(Usage::default).add(u);
        }
    }
    for m in messages {
        let i = slot(&mut out, &mut at, &m.from);
        out[i].sent += 1;
        for name in &m.mentions {
            if let Some(&i) = at.get(name) {
                out[i].mentioned += 1;
            }
        }
    }
    out
}

/// The sums over `agents`.
fn totals(agents: &[AgentSummary], messages: &[Message], wakes: &[Wake]) -> Totals {
    let mut t = Totals {
        messages: messages.len() as u64,
        wakes: wakes.len() as u64,
        ..Totals::default()
    };
    for a in agents {
        t.attempts += a.attempts;
        t.ok += a.ok;
        t.failed += a.failed;
        t.busy_ms = t.busy_ms.saturating_add(a.busy_ms);
        if let Some(u) = &a.usage {
            t.usage.get_or_insert_with(Usage::default).add(u);
        }
    }
    t
}

/// The cards, approval requests and merge requests, as stored: all of them, or (with a
/// window) those that something happened to in it. A folder that cannot be read is a
/// problem of the report, not a failure.
fn records(
    inst: &Instance,
    window: Option<(i64, i64)>,
    problems: &mut Vec<String>,
) -> (Vec<CardRow>, Vec<ApprovalRow>, Vec<MergeRow>) {
    let seen = |times: &[Option<&str>]| {
        window.is_none_or(|w| times.iter().flatten().any(|t| within(t, w)))
    };
    fn read<T: crate::fs::records::Record>(
        folder: &std::path::Path,
        problems: &mut Vec<String>,
    ) -> BTreeMap<u64, T> {
        crate::fs::records::read_all(folder).unwrap_or_else(|e| {
            problems.push(format!("{}s left out: {e}", T::NOUN));
            BTreeMap::new()
        })
    }
    let cards: BTreeMap<u64, crate::board::Card> = read(&crate::board::dir(inst), problems);
    let cards = cards
        .into_values()
        .filter(|c| {
            let mut times: Vec<Option<&str>> = vec![Some(&c.created), Some(&c.updated)];
            times.extend(c.history.iter().map(|e| Some(e.at.as_str())));
            seen(&times)
        })
        .map(|c| CardRow {
            id: c.id,
            title: c.title,
            state: c.state.as_str().to_string(),
            holder: c.holder.map(|h| h.agent),
            assignee: c.assignee,
            created: c.created,
            updated: c.updated,
            note: c.note,
        })
        .collect();
    let approvals: BTreeMap<u64, crate::approval::Request> =
        read(&crate::approval::dir(inst), problems);
    let approvals = approvals
        .into_values()
        .filter(|r| {
            let decided = r.decision.as_ref().map(|d| d.at.as_str());
            seen(&[Some(&r.asked), decided])
        })
        .map(|r| ApprovalRow {
            id: r.id,
            kind: r.kind.name().to_string(),
            what: r.what,
            asked_by: r.asked_by,
            by: r.by,
            state: r.state.name().to_string(),
            asked: r.asked,
            decided_by: r.decision.as_ref().map(|d| d.by.clone()),
            decided: r.decision.as_ref().map(|d| d.at.clone()),
            reason: r.decision.and_then(|d| d.reason),
        })
        .collect();
    let merges: BTreeMap<u64, crate::merge::Request> =
        read(&inst.dir().join(crate::merge::DIR), problems);
    let merges = merges
        .into_values()
        .filter(|r| seen(&[Some(&r.asked), r.started.as_deref(), r.finished.as_deref()]))
        .map(|r| MergeRow {
            outcome: r.outcome(),
            id: r.id,
            agent: r.agent,
            branch: r.branch,
            into: r.into,
            state: r.state.name().to_string(),
            asked: r.asked,
            finished: r.finished,
        })
        .collect();
    (cards, approvals, merges)
}
