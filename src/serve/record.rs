//! The record of one agent's controller, `<agent>.json`, as its server sees it, and the
//! caps a server serves under.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::claim::{is_served, served};
use super::paths::{dir, state_name, state_path};
use super::server::Dead;
use crate::error::{Error, Result};
use crate::fs::{Dir, atomic_write_unsynced, create_or_replace_in, owned};
use crate::instance::Instance;

crate::keyword_enum! {
    /// The state of one agent's controller.
    pub enum ControllerState {
        /// Waiting for a mention.
        Idle = "idle",
        /// Its backend is running.
        Running = "running",
        /// Its last run failed for good; it waits for new activity or the end of the cooldown.
        Cooldown = "cooldown",
        /// The loop guard paused it: it ran too often on other agents' messages, and waits
        /// for a message from outside them.
        Paused = "paused",
        /// Its server is finishing.
        Stopped = "stopped",
    }
}

/// `_state/serve/<agent>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Served {
    pub instance: String,
    pub agent: String,
    pub pid: u32,
    /// The server's host name; `None` in a record of a version that knew no hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The server's host id ([`crate::host`]); `None` as for `host` (then: this host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_id: Option<String>,
    pub state: ControllerState,
    /// Runs started since the server started (retries are attempts of the same run).
    pub runs: u64,
    /// The workflow file, absolute; `null` for `aw-run --serve`.
    pub workflow: Option<String>,
    /// When the server started.
    pub started: String,
    /// The caps of the server, handed on to a detached server started for a worker this
    /// agent spawns (absent in records of older servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caps: Option<Caps>,
}

/// The caps an `aw-run` serves its agents under, as a detached worker server is given them
/// (`aw-run --serve --keep`, started by `spawn_agent`): the workflow's budget is shared
/// through the instance's ledger, these through the command line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Caps {
    /// `--max-runs`.
    pub max_runs: u64,
    /// `--max-rate` as `N/SECSs`; `None`: off.
    pub max_rate: Option<String>,
    /// `--max-pair`, the same way.
    #[serde(default)]
    pub max_pair: Option<String>,
    /// When the server's `--timeout` ends, in milliseconds since the Unix epoch.
    pub timeout_at: Option<u64>,
    /// `--retries`.
    pub retries: u32,
    /// `--backoff` and `--cooldown`, in seconds.
    pub backoff: f64,
    pub cooldown: f64,
}

/// A duration as `aw-run` reads one (`1.5s`), never zero.
fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64().max(0.001))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Caps {
    /// The caps of a server started now with these limits.
    pub fn new(
        max_runs: u64,
        rate: Option<(u32, Duration)>,
        pair: Option<(u32, Duration)>,
        timeout: Option<Duration>,
        retries: u32,
        backoff: Duration,
        cooldown: Duration,
    ) -> Caps {
        Caps {
            max_runs,
            max_rate: rate.map(|(n, w)| format!("{n}/{}", secs(w))),
            max_pair: pair.map(|(n, w)| format!("{n}/{}", secs(w))),
            timeout_at: timeout
                .map(|t| now_ms().saturating_add(u64::try_from(t.as_millis()).unwrap_or(u64::MAX))),
            retries,
            backoff: backoff.as_secs_f64(),
            cooldown: cooldown.as_secs_f64(),
        }
    }

    /// The options of `aw-run` that give a server these caps; its `--timeout` is what is
    /// left of this one's.
    pub fn args(&self) -> Vec<String> {
        let mut v = vec![
            "--max-runs".to_string(),
            self.max_runs.max(1).to_string(),
            "--max-rate".to_string(),
            self.max_rate.clone().unwrap_or_else(|| "off".into()),
            "--max-pair".to_string(),
            self.max_pair.clone().unwrap_or_else(|| "off".into()),
            "--retries".to_string(),
            self.retries.max(1).to_string(),
            "--backoff".to_string(),
            secs(Duration::try_from_secs_f64(self.backoff).unwrap_or_default()),
            "--cooldown".to_string(),
            secs(Duration::try_from_secs_f64(self.cooldown).unwrap_or_default()),
        ];
        if let Some(at) = self.timeout_at {
            let left = Duration::from_millis(at.saturating_sub(now_ms()));
            v.extend(["--timeout".to_string(), secs(left)]);
        }
        v
    }
}

/// Record the state of one controller.
pub fn write(inst: &Instance, s: &Served) -> Result<()> {
    atomic_write_unsynced(&state_path(inst, &s.agent), &encode(s))
}

/// A record as its file holds it.
fn encode(s: &Served) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(s).expect("state serializes");
    bytes.push(b'\n');
    bytes
}

/// The records of a server's agents as it starts, written in a row through one descriptor
/// of their folder: a record not there yet (its agent's last server removed it) is made
/// with its content at once, without a temp name and a rename (see
/// [`crate::fs::create_or_replace_in`]: a reader takes one not yet written for none).
pub struct Records(Dir);

impl Records {
    /// Open the folder of `inst`'s records, made when missing, and sweep it now (as the first
    /// replacement of a record would, in an agent's first run: a listing of every claim
    /// and record).
    pub fn open(inst: &Instance) -> Result<Records> {
        let d = dir(inst);
        let folder = owned::folder(&d, true).map_err(|e| Error::create(&d, e))?;
        crate::fs::sweep_once(&folder);
        Ok(Records(folder))
    }

    /// Record the state of one controller, as [`write`] does.
    pub fn write(&self, s: &Served) -> Result<()> {
        let name = state_name(&s.agent);
        create_or_replace_in(&self.0, name.as_ref(), &encode(s))
    }
}

/// The record of `agent` when a running process serves it: what [`list`] has of it, at
/// the cost of that agent's files alone.
pub fn record(inst: &Instance, agent: &str) -> Option<Served> {
    if !is_served(inst, agent) {
        return None;
    }
    let bytes = owned::read(&state_path(inst, agent)).ok()?;
    serde_json::from_slice::<Served>(&bytes)
        .ok()
        .filter(|s| s.agent == agent)
}

/// The served agents of `inst`, by name (stale records left out).
pub fn list(inst: &Instance) -> Vec<Served> {
    let Ok(rd) = std::fs::read_dir(dir(inst)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            Some(name.strip_suffix(".json")?.to_string())
        })
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    let mut dead = Dead::new();
    names
        .into_iter()
        .filter(|n| served(inst, n, &mut dead))
        .filter_map(|n| {
            let bytes = owned::read(&state_path(inst, &n)).ok()?;
            serde_json::from_slice::<Served>(&bytes).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_match_their_json() {
        for s in ControllerState::ALL {
            let json = serde_json::to_string(s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.name()));
            assert_eq!(serde_json::from_str::<ControllerState>(&json).unwrap(), *s);
        }
    }
}
