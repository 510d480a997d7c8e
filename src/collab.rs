//! Workers that one agent spawns, talks to, waits for and closes (the collab tools of
//! `aw-mcp --collab`). A worker is an ordinary agent of the instance: registered with the
//! agent that spawned it (`spawned_by`), mentioned in the channel, served by an `aw-run`,
//! its runs in `_state/runs/`.
//!
//! Who serves a new worker: the `aw-run` that serves its spawner, else any `aw-run` that
//! serves an agent of the instance (each notices registered workers as the channel changes;
//! the serving lock decides between two), else a detached `aw-run --serve --keep` started for
//! it, which ends once every agent it serves is closed.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::channel::{Channel, Entry};
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::post::{self, PostOptions};
use crate::process::Stop;
use crate::registry::{self, Agent, BackendKind, Collab, Registry};
use crate::serve::{self, ControllerState};
use crate::{inbox, names};

/// Prefix of the names given to workers spawned without one: `worker-1`, `worker-2`, ...
pub const WORKER_PREFIX: &str = "worker-";

/// How long a running `aw-run` has to take a new worker before one is started for it.
const ADOPT_WAIT: Duration = Duration::from_secs(2);

/// How long `close_agent` waits for the worker's server to let it go.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Longest pause between two looks of [`wait`].
const MAX_PAUSE: Duration = Duration::from_millis(50);

/// What `spawn_agent` asks for.
#[derive(Debug, Default, Clone)]
pub struct SpawnRequest {
    pub prompt: String,
    pub name: Option<String>,
    pub backend: Option<String>,
    pub model: Option<String>,
    pub system_prompt: Option<String>,
}

/// A spawned worker.
#[derive(Debug, Clone, Serialize)]
pub struct Spawned {
    pub name: String,
    pub backend: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The entry that gave it its prompt.
    pub prompt_id: u64,
    /// The pid of the `aw-run` that serves it.
    pub served_by: Option<u32>,
    /// The host of that `aw-run` (its name), when its record tells.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_on: Option<String>,
    /// Whether that `aw-run` was started for it.
    pub started_server: bool,
}

/// The backends a worker may have. `exec` only as a copy of an exec spawner's program.
const WORKER_BACKENDS: [BackendKind; 6] = [
    BackendKind::Claude,
    BackendKind::Codex,
    BackendKind::Anthropic,
    BackendKind::Openai,
    BackendKind::Mock,
    BackendKind::Exec,
];

/// Register a worker for `caller`, post `req.prompt` to it as `caller`, and make sure an
/// `aw-run` serves it.
pub fn spawn(inst: &Instance, caller: &str, limits: Collab, req: SpawnRequest) -> Result<Spawned> {
    if req.prompt.trim().is_empty() {
        return Err(Error::invalid("'prompt' is empty: a worker needs a task"));
    }
    crate::channel::validate_message(&req.prompt)?;
    if let Some(n) = &req.name {
        names::check_new_agent(n)?;
        if names::RESERVED_SENDERS.contains(&n.as_str()) {
            return Err(Error::invalid(format!(
                "'{n}' is a reserved sender name and cannot be an agent"
            )));
        }
    }
    inst.create()?;
    let reg = Registry::load(inst)?;
    let me = reg.get(caller).cloned().unwrap_or_default();
    // Saturating: a registry entry edited by hand may say anything.
    let depth = me.depth.saturating_add(1);
    if depth > limits.max_depth {
        return Err(Error::Denied(format!(
            "spawn depth: {caller} is itself a worker (depth {}) and the spawn depth is {}: \
             workers may not spawn workers",
            me.depth, limits.max_depth
        )));
    }
    let backend = match &req.backend {
        Some(b) => BackendKind::from_name(b)
            .filter(|b| WORKER_BACKENDS.contains(b))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown worker backend '{}' (backends: claude, codex, anthropic, openai, mock)",
                    names::sanitize(b)
                ))
            })?,
        None => BackendKind::from_name(&me.backend)
            .filter(|b| WORKER_BACKENDS.contains(b))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "give 'backend': {caller}'s own backend ({}) cannot run a worker \
                     (backends: claude, codex, anthropic, openai, mock)",
                    if me.backend.is_empty() { "none" } else { &me.backend }
                ))
            })?,
    };
    let command = if backend == BackendKind::Exec {
        if me.backend != BackendKind::Exec.name() || me.command.is_empty() {
            return Err(Error::invalid(
                "an exec worker runs its spawner's program: only an exec agent registered \
                 with its command may spawn one",
            ));
        }
        me.command.clone()
    } else {
        Vec::new()
    };
    let same_backend = me.backend == backend.name();
    let model = req
        .model
        .clone()
        .or_else(|| me.model.clone().filter(|_| same_backend));
    if backend.needs_model() && model.is_none() {
        return Err(Error::invalid(format!(
            "a {} worker needs a 'model'",
            backend.name()
        )));
    }
    let worker_collab = (depth < limits.max_depth).then_some(limits);
    let mut worker = Agent {
        name: req.name.clone().unwrap_or_else(|| "worker".into()),
        backend: backend.name().to_string(),
        model: model.clone(),
        system_prompt: req.system_prompt.clone(),
        command,
        created: crate::time::now(),
        spawned_by: Some(caller.to_string()),
        depth,
        collab: worker_collab,
        ..Agent::default()
    };
    // A worker no aw-run could run is refused before anything is written.
    crate::spawn::runnable(&worker)?;
    let name = registry::update(inst, |reg: &mut Registry| {
        let alive = reg
            .agents
            .iter()
            .filter(|a| a.spawned_by.is_some() && !a.closed)
            .count();
        if alive >= limits.max_workers as usize {
            return Err(Error::Denied(format!(
                "worker limit: {alive} workers alive in instance '{}' (at most {}); close one \
                 with close_agent first",
                inst.name(),
                limits.max_workers
            )));
        }
        let name = match &req.name {
            Some(n) if reg.contains(n) => {
                return Err(Error::Exists(format!(
                    "an agent named '{n}' exists in instance '{}'",
                    inst.name()
                )));
            }
            Some(n) => n.clone(),
            None => next_worker_name(reg),
        };
        worker.name = name.clone();
        reg.agents.push(worker);
        Ok(name)
    })?;
    let text = post::addressed(req.prompt.clone(), &name);
    let served = post::post(inst, caller, &text, &PostOptions::default())
        .and_then(|posted| Ok((posted, ensure_served(inst, caller, &name)?)));
    let (posted, ((served_by, served_on), started_server)) = match served {
        Ok(v) => v,
        Err(e) => {
            // Not left alive to count against the limit.
            let _ = mark_closed(inst, &name);
            return Err(e);
        }
    };
    Ok(Spawned {
        name,
        backend: backend.name().to_string(),
        model,
        prompt_id: posted.entry.id,
        served_by,
        served_on,
        started_server,
    })
}

/// `worker-N`, N one more than the highest of the registered `worker-` names; when that
/// highest is `u64::MAX` (a name given by hand), the smallest N from 1 not registered. A
/// name in use is never given again.
fn next_worker_name(reg: &Registry) -> String {
    let used: std::collections::BTreeSet<u64> = reg
        .agents
        .iter()
        .filter_map(|a| a.name.strip_prefix(WORKER_PREFIX)?.parse::<u64>().ok())
        .collect();
    let next = used.last().map_or(Some(1), |n| n.checked_add(1));
    // Fewer names are registered than there are numbers: a gap exists.
    let n = next.unwrap_or_else(|| (1..).find(|n| !used.contains(n)).unwrap_or(1));
    // Registered as written only if its number is in `used`: never.
    format!("{WORKER_PREFIX}{n}")
}

/// The pid and host serving `agent`, when one does.
fn server_of(inst: &Instance, agent: &str) -> Option<(u32, Option<String>)> {
    serve::record(inst, agent).map(|s| (s.pid, s.host))
}

/// Who serves a worker: pid and host, when known.
type ServedBy = (Option<u32>, Option<String>);

/// Wait for a running `aw-run` to take `worker`; start one when none runs (or none took it).
fn ensure_served(inst: &Instance, caller: &str, worker: &str) -> Result<(ServedBy, bool)> {
    let running = serve::list(inst);
    if !running.is_empty() || serve::is_served(inst, caller) {
        let end = crate::time::deadline(ADOPT_WAIT);
        let mut pause = Duration::from_millis(1);
        while Instant::now() < end {
            // The server records the worker's state just after taking its lock.
            if let Some((pid, host)) = server_of(inst, worker) {
                return Ok(((Some(pid), host), false));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }
    let pid = start_server(inst, caller, worker)?;
    let by = match pid {
        // Started here, on this host.
        Some(pid) => (Some(pid), Some(crate::host::this().name.clone())),
        None => server_of(inst, worker).map_or((None, None), |(p, h)| (Some(p), h)),
    };
    Ok((by, pid.is_some()))
}

/// Start `aw-run --serve --keep --detach WORKER`, with the caps of the `aw-run` that serves
/// `caller` (its budget is the instance's, kept in the ledger); its pid (`None` when another
/// server took the worker first).
fn start_server(inst: &Instance, caller: &str, worker: &str) -> Result<Option<u32>> {
    let caps = serve::record(inst, caller)
        .and_then(|s| s.caps)
        .map(|c| c.args())
        .unwrap_or_default();
    let root = inst
        .dir()
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let root = std::path::absolute(&root).map_err(|e| Error::io(&root, e))?;
    let exe = crate::process::sibling("aw-run");
    let out = Command::new(&exe)
        .arg("--root")
        .arg(&root)
        .args(["-i", inst.name(), "--serve", "--keep", "--detach"])
        .args(&caps)
        .arg(worker)
        .env_remove(crate::spawn::READY_FD)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| Error::Unavailable(format!("cannot start {}: {e}", exe.display())))?;
    if out.status.success() {
        let pid = String::from_utf8_lossy(&out.stdout).trim().parse().ok();
        return Ok(pid);
    }
    // Another server took it in between: it is served all the same.
    if out.status.code() == Some(i32::from(crate::error::exit::TEMPFAIL))
        && serve::is_served(inst, worker)
    {
        return Ok(None);
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let said = said.lines().next().unwrap_or("").trim();
    Err(Error::Unavailable(format!(
        "{worker} is registered but no aw-run serves it: aw-run --serve failed ({}){}",
        out.status,
        if said.is_empty() {
            String::new()
        } else {
            format!(": {said}")
        }
    )))
}

/// A registered agent other than `caller`, not closed.
fn open_agent(inst: &Instance, caller: &str, agent: &str) -> Result<Agent> {
    names::check_agent(agent)?;
    if agent == caller {
        return Err(Error::invalid(format!("'{agent}' is yourself")));
    }
    let reg = Registry::load(inst)?;
    let a = reg.get(agent).cloned().ok_or_else(|| {
        Error::not_found(format!("no agent '{agent}' in instance '{}'", inst.name()))
    })?;
    Ok(a)
}

/// The text `close_agent` posts when it closes `agent`.
fn closed_text(agent: &str) -> String {
    format!("Closed worker {agent}.")
}

/// Whether `e` only talks to `workers` (a lead's workers): it mentions some of them and
/// nobody else, or it is the note `close_agent` posts for one of them.
pub fn to_workers(e: &Entry, workers: &[String]) -> bool {
    let mentions_only_workers =
        !e.mentions.is_empty() && e.mentions.iter().all(|m| workers.contains(m));
    mentions_only_workers
        || workers
            .iter()
            .any(|w| e.message.trim_end() == closed_text(w))
}

/// `send_input`: post `message` as `caller`, mentioning `agent`.
pub fn send_input(inst: &Instance, caller: &str, agent: &str, message: &str) -> Result<Entry> {
    let a = open_agent(inst, caller, agent)?;
    if a.closed {
        return Err(Error::invalid(format!(
            "{agent} is closed: it no longer runs (spawn a new worker)"
        )));
    }
    let text = post::addressed(message.to_string(), agent);
    Ok(post::post(inst, caller, &text, &PostOptions::default())?.entry)
}

/// One agent as [`wait`] reports it.
#[derive(Debug, Clone, Serialize)]
pub struct Waited {
    pub agent: String,
    /// `idle` (done with everything sent to it), `running`, `pending` (messages not taken
    /// yet), `failed` (its last run failed for good, messages left unread), `closed`, or
    /// `unserved` (no aw-run serves it).
    pub state: &'static str,
    pub unread: usize,
    /// Its own status (`my_status_set`), when it set one: `idle`, `running` or `done`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// What it wrote after the caller's last message to it.
    pub replies: Vec<Entry>,
}

impl Waited {
    /// Nothing more will happen without something new from outside.
    pub fn is_final(&self) -> bool {
        !matches!(self.state, "running" | "pending")
    }
}

/// The state of `agent` now (replies not filled in).
fn look(inst: &Instance, agent: &str) -> Result<Waited> {
    let reg = Registry::load(inst)?;
    let closed = reg.get(agent).is_some_and(|a| a.closed);
    let unread = inbox::unread_count(inst, agent)?;
    let served = serve::record(inst, agent);
    let state = match (&served, closed) {
        (_, true) if served.is_none() => "closed",
        (None, _) => "unserved",
        (Some(s), _) => match s.state {
            ControllerState::Running => "running",
            ControllerState::Cooldown if unread > 0 => "failed",
            ControllerState::Stopped => "closed",
            _ if unread > 0 => "pending",
            _ => "idle",
        },
    };
    let status = crate::status::all(inst)?
        .get(agent)
        .map(|s| s.state.to_string());
    Ok(Waited {
        agent: agent.to_string(),
        state,
        unread,
        status,
        replies: Vec::new(),
    })
}

/// `wait`: until every agent of `agents` is in a final state (idle with nothing unread,
/// failed, closed or unserved) or `timeout` passes; each one's state and what it wrote
/// after `caller`'s last message to it. The second value says whether all were final.
pub fn wait(
    inst: &Instance,
    caller: &str,
    agents: &[String],
    timeout: Duration,
    stop: &Stop,
) -> Result<(Vec<Waited>, bool)> {
    if agents.is_empty() {
        return Err(Error::invalid(
            "'agents' is empty: name the agents to wait for",
        ));
    }
    for a in agents {
        open_agent(inst, caller, a)?;
    }
    let end = crate::time::deadline(timeout);
    let mut pause = Duration::from_millis(2);
    let (mut now, done) = loop {
        let now = agents
            .iter()
            .map(|a| look(inst, a))
            .collect::<Result<Vec<_>>>()?;
        let done = now.iter().all(Waited::is_final);
        if done || Instant::now() >= end {
            break (now, done);
        }
        if stop.is_set() {
            return Err(Error::Interrupted);
        }
        std::thread::sleep(pause.min(end.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(MAX_PAUSE);
    };
    let entries = Channel::new(inst).read_all()?.entries;
    for w in &mut now {
        w.replies = replies_since_last_ask(&entries, caller, &w.agent);
    }
    Ok((now, done))
}

/// What `agent` wrote after `caller`'s last entry that mentions it.
fn replies_since_last_ask(entries: &[Entry], caller: &str, agent: &str) -> Vec<Entry> {
    let from = entries
        .iter()
        .rposition(|e| e.from == caller && e.mentions.iter().any(|m| m == agent))
        .map_or(0, |i| i + 1);
    entries[from..]
        .iter()
        .filter(|e| e.from == agent)
        .cloned()
        .collect()
}

/// `close_agent`: stop serving a worker `caller` spawned; its history stays. The state it
/// was left in.
pub fn close(inst: &Instance, caller: &str, agent: &str) -> Result<&'static str> {
    let a = open_agent(inst, caller, agent)?;
    match &a.spawned_by {
        None => {
            return Err(Error::Denied(format!(
                "{agent} is not a spawned worker: only workers are closed with close_agent"
            )));
        }
        Some(by) if by != caller => {
            return Err(Error::Denied(format!(
                "{agent} was spawned by {by}: only {by} may close it"
            )));
        }
        Some(_) => {}
    }
    if a.closed {
        return Ok("already closed");
    }
    mark_closed(inst, agent)?;
    // Seen by the servers as the channel changes; no mention, so nobody is woken to work.
    post::post(inst, caller, &closed_text(agent), &PostOptions::default())?;
    if serve::wait_unserved(inst, agent, CLOSE_WAIT) {
        Ok("closed")
    } else {
        Ok("closing")
    }
}

/// Mark `agent` closed in the registry.
fn mark_closed(inst: &Instance, agent: &str) -> Result<()> {
    registry::update(inst, |reg: &mut Registry| {
        if let Some(w) = reg.agents.iter_mut().find(|w| w.name == agent) {
            w.closed = true;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, from: &str, mentions: &[&str]) -> Entry {
        Entry {
            id,
            timestamp: String::new(),
            from: from.to_string(),
            message: format!("m{id}"),
            mentions: mentions.iter().map(|m| m.to_string()).collect(),
        }
    }

    #[test]
    fn replies_are_those_after_the_last_ask() {
        let e = vec![
            entry(1, "lead", &["w"]),
            entry(2, "w", &["lead"]),
            entry(3, "lead", &["w"]),
            entry(4, "x", &[]),
            entry(5, "w", &[]),
            entry(6, "w", &["lead"]),
        ];
        let ids: Vec<u64> = replies_since_last_ask(&e, "lead", "w")
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, [5, 6]);
        // Never asked: everything it wrote.
        let ids: Vec<u64> = replies_since_last_ask(&e, "other", "w")
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, [2, 5, 6]);
    }

    #[test]
    fn worker_names_count_up_from_the_highest() {
        let mut reg = Registry::default();
        assert_eq!(next_worker_name(&reg), "worker-1");
        for n in ["worker-2", "worker-x", "lead", "worker-10"] {
            reg.agents.push(Agent {
                name: n.into(),
                ..Agent::default()
            });
        }
        assert_eq!(next_worker_name(&reg), "worker-11");
    }

    #[test]
    fn worker_names_never_repeat_past_the_largest_number() {
        let mut reg = Registry::default();
        let add = |reg: &mut Registry, n: String| {
            reg.agents.push(Agent {
                name: n,
                ..Agent::default()
            })
        };
        add(&mut reg, format!("worker-{}", u64::MAX));
        add(&mut reg, "worker-1".into());
        let mut given = Vec::new();
        for _ in 0..3 {
            let n = next_worker_name(&reg);
            assert!(!reg.contains(&n), "{n} given again");
            given.push(n.clone());
            add(&mut reg, n);
        }
        assert_eq!(given, ["worker-2", "worker-3", "worker-4"]);
    }
}
