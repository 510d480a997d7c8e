//! Waiting for an agent's reply to one channel entry: the entry is handled once the agent's
//! inbox is acknowledged past it by a run that succeeded; the reply is what the agent wrote
//! to the channel in the run(s) whose transcript lists the entry in its `inbox` with status
//! `ok` (their `reply` ids, in order).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::channel::{Channel, Entry};
use crate::error::{Error, Remedy, Result};
use crate::instance::Instance;
use crate::process::Stop;
use crate::serve::{self, ControllerState};
use crate::transcript::transcript_dir;

/// The first pause between two looks at the state on disk; it doubles while nothing
/// changes.
const POLL: Duration = Duration::from_millis(2);
/// The longest pause between two looks: a long run is watched some 20 times a second, not
/// 500.
const MAX_POLL: Duration = Duration::from_millis(50);

/// How long a served agent may take to appear in the registry: an aw-run takes the serving
/// locks before it registers its agents.
const REGISTER_WAIT: Duration = Duration::from_secs(5);

/// Make sure an aw-run serves `agent` and has registered it, so that a message mentioning it
/// now reaches it; otherwise an "unavailable" error (exit 69), nothing waited for.
pub fn check_served(inst: &Instance, agent: &str) -> Result<()> {
    let unserved = || {
        Error::Unavailable(format!("no aw-run serves {agent}@{}", inst.name()))
            .remedy(Remedy::ServeAgent)
    };
    if !serve::is_served(inst, agent) {
        return Err(unserved());
    }
    let end = crate::time::deadline(REGISTER_WAIT);
    let mut pause = POLL;
    loop {
        if crate::registry::is_agent(inst, agent)? {
            return Ok(());
        }
        if Instant::now() >= end || !serve::is_served(inst, agent) {
            return Err(unserved());
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_POLL);
    }
}

/// What one transcript says about the entries it handled.
#[derive(Debug, Clone, Default)]
struct Run {
    ok: bool,
    inbox: Vec<u64>,
    reply: Vec<u64>,
    reason: Option<String>,
}

fn read_run(path: &std::path::Path) -> Option<Run> {
    let v: serde_json::Value = serde_json::from_slice(&crate::fs::owned::read(path).ok()?).ok()?;
    let ids = |k: &str| -> Vec<u64> {
        v[k].as_array()
            .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
            .unwrap_or_default()
    };
    Some(Run {
        ok: v["status"] == "ok",
        inbox: ids("inbox"),
        reply: ids("reply"),
        reason: v["reason"].as_str().map(str::to_string),
    })
}

/// Wait until `agent` has handled entry `entry_id` and return the entries it wrote in reply
/// (possibly none). Errors: the agent's server gave up on the entry (its runs failed and it
/// cools down) or serves it no more (exit 1), `timeout` passed (exit 1), `stop` was set
/// (interrupted).
pub fn wait_reply(
    inst: &Instance,
    agent: &str,
    entry_id: u64,
    timeout: Option<Duration>,
    stop: &Stop,
) -> Result<Vec<Entry>> {
    wait_reply_with(inst, agent, entry_id, timeout, stop, &std::thread::sleep)
}

/// [`wait_reply`], pausing between two looks with `nap(pause)`: inside aw-run, a wait on
/// its controllers' condition variable, which ends early when one of them changes state.
pub fn wait_reply_with(
    inst: &Instance,
    agent: &str,
    entry_id: u64,
    timeout: Option<Duration>,
    stop: &Stop,
    nap: &Nap<'_>,
) -> Result<Vec<Entry>> {
    let deadline = timeout.map(crate::time::deadline);
    let dir = transcript_dir(inst, agent);
    let mut runs: BTreeMap<String, Run> = BTreeMap::new();
    let mut pause = POLL;
    loop {
        if stop.is_set() {
            return Err(Error::Interrupted);
        }
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(".json")
                    && !runs.contains_key(&name)
                    && let Some(run) = read_run(&e.path())
                {
                    runs.insert(name, run);
                    // Something happened: look again soon.
                    pause = POLL;
                }
            }
        }
        let mine: Vec<&Run> = runs
            .values()
            .filter(|r| r.inbox.contains(&entry_id))
            .collect();
        let handled = crate::inbox::cursor(inst, agent).is_ok_and(|c| c >= entry_id);
        if handled && mine.iter().any(|r| r.ok) {
            let mut ids: Vec<u64> = mine
                .iter()
                .filter(|r| r.ok)
                .flat_map(|r| r.reply.clone())
                .collect();
            ids.sort_unstable();
            ids.dedup();
            return entries(inst, &ids);
        }
        let state = serve::record(inst, agent).map(|s| s.state);
        if let Some(failed) = mine.iter().rev().find(|r| !r.ok)
            && matches!(state, Some(ControllerState::Cooldown))
        {
            let why = failed.reason.as_deref().unwrap_or("its run failed");
            return Err(Error::No(format!("{agent} failed: {why}")));
        }
        if !handled && !serve::is_served(inst, agent) {
            return Err(Error::No(format!("{agent} is not served any more")));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let t = timeout.unwrap_or_default().as_secs_f64();
            return Err(Error::No(format!("no reply from {agent} after {t} s")));
        }
        nap(pause);
        pause = (pause * 2).min(MAX_POLL);
    }
}

/// A pause of at most the given time (it may end early).
pub type Nap<'a> = dyn Fn(Duration) + Sync + 'a;

/// The channel entries with these ids, in order.
fn entries(inst: &Instance, ids: &[u64]) -> Result<Vec<Entry>> {
    let Some(&first) = ids.first() else {
        return Ok(Vec::new());
    };
    let batch = Channel::new(inst).read_since(first - 1)?;
    Ok(batch
        .entries
        .into_iter()
        .filter(|e| ids.contains(&e.id))
        .collect())
}

/// The text of a reply: the entries' messages joined by a blank line.
pub fn reply_text(entries: &[Entry]) -> String {
    let texts: Vec<&str> = entries.iter().map(|e| e.message.as_str()).collect();
    texts.join("\n\n")
}
