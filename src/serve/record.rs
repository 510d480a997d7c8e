//! The record of one agent's controller, `<agent>.json`, as its server sees it, and the
//! caps a server serves under.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::claim::served_by;
use super::paths::{dir, state_path};
use super::server::{Dead, names, own_server, record_name};
use crate::error::{Error, Result};
use crate::fs::{atomic_write_unsynced, owned};
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
    /// The name of its server's file (`<host_id>.<pid>.<stamp>.server`), which a record
    /// must name to be taken for the agent's while the agent's claim names that server;
    /// absent in records of older servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
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

/// Record the state of one controller, naming this process's server in the instance.
pub fn write(inst: &Instance, s: &Served) -> Result<()> {
    let named;
    let s = match s.server {
        Some(_) => s,
        None => {
            named = Served {
                server: own_server(&dir(inst)),
                ..s.clone()
            };
            &named
        }
    };
    let mut bytes = serde_json::to_vec(s).expect("state serializes");
    bytes.push(b'\n');
    atomic_write_unsynced(&state_path(inst, &s.agent), &bytes)
}

/// Show every agent this process serves in `inst` as served, idle, with no run yet: as
/// `record` says (its agent left empty), until each writes a record of its own. Once every
/// agent it starts with is registered: a message sent once one is shown resolves every
/// mention. The folder is swept now (as the first replacement of a record would, in an
/// agent's first run: a listing of every claim and record).
pub fn show_served(inst: &Instance, record: &Served) -> Result<()> {
    let d = dir(inst);
    let folder = owned::folder(&d, true).map_err(|e| Error::create(&d, e))?;
    crate::fs::sweep_once(&folder);
    show_all(&d, record)
}

/// Write, beside this process's server file in `d`, the record of every agent it serves
/// that has none of its own: `record`, idle, no run, its agent left empty. Until then its
/// agents are served but have no record ([`served_as`]).
fn show_all(d: &Path, record: &Served) -> Result<()> {
    let Some(name) = own_server(d) else {
        return Err(Error::NotFound(format!(
            "{}: this process serves nothing there",
            d.display()
        )));
    };
    let record = Served {
        agent: String::new(),
        state: ControllerState::Idle,
        runs: 0,
        server: Some(name.clone()),
        ..record.clone()
    };
    let mut json = serde_json::to_vec(&record).expect("a record serializes");
    json.push(b'\n');
    crate::fs::atomic_write_unsynced(&d.join(record_name(&name)), &json)
}

/// The record of the agents without their own that the server of the file `name` in `d`
/// wrote ([`show_all`]); `None` when there is none (an earlier version, which wrote a
/// record for each agent as it started; or one that starts and has not yet registered
/// them), it cannot be read, or it names another server.
fn served_as(d: &Path, name: &str) -> Option<Served> {
    let text = owned::read(&d.join(record_name(name))).ok()?;
    let s: Served = serde_json::from_slice(&text).ok()?;
    (s.server.as_deref() == Some(name) && names(name, s.pid, s.host_id.as_deref())).then_some(s)
}

/// The server files read so far by one caller, by name, with the record each holds for
/// its agents.
type Held = HashMap<String, Option<Served>>;

/// The record of `agent` when a running process serves it: what [`list`] has of it, at
/// the cost of that agent's files alone.
pub fn record(inst: &Instance, agent: &str) -> Option<Served> {
    let server = served_by(inst, agent, &mut Dead::new())?;
    of_server(inst, agent, server.as_deref(), &mut Held::new())
}

/// The record of `agent`, served by the server file `server` (`None`: one that cannot be
/// told, which is taken to have written a record of its own): its own when it names that
/// server; else the one the server wrote for its agents without one, under the agent's
/// name. A record that names no server is of an earlier version, which wrote one for each
/// agent as it started: taken when its pid and host are the server's. None while the
/// server starts.
fn of_server(
    inst: &Instance,
    agent: &str,
    server: Option<&str>,
    held: &mut Held,
) -> Option<Served> {
    let own = owned::read(&state_path(inst, agent))
        .ok()
        .and_then(|b| serde_json::from_slice::<Served>(&b).ok())
        .filter(|s| s.agent == agent);
    let Some(server) = server else {
        return own;
    };
    match own {
        Some(s) if s.server.as_deref() == Some(server) => return Some(s),
        Some(s) if s.server.is_none() && names(server, s.pid, s.host_id.as_deref()) => {
            return Some(s);
        }
        _ => {}
    }
    let all = held
        .entry(server.to_string())
        .or_insert_with(|| served_as(&dir(inst), server));
    all.as_ref().map(|s| Served {
        agent: agent.to_string(),
        ..s.clone()
    })
}

/// The served agents of `inst`, by name (stale records left out): one for each claim that
/// a running process holds.
pub fn list(inst: &Instance) -> Vec<Served> {
    let Ok(rd) = std::fs::read_dir(dir(inst)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            Some(name.strip_suffix(".lock")?.to_string())
        })
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    let (mut dead, mut held) = (Dead::new(), Held::new());
    names
        .into_iter()
        .filter_map(|n| {
            let server = served_by(inst, &n, &mut dead)?;
            of_server(inst, &n, server.as_deref(), &mut held)
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
