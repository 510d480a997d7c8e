//! A workflow run: serving locks, agent registration, setup, kickoff, one controller thread
//! per agent fed by one channel watcher, and in run mode the decision that the work is done.
//! This file holds the two ways in, [`run`] (a workflow file) and [`serve()`] (agents
//! registered with `aw-ctl new`; [`serve_several`] for several instances at once), and the
//! setup tasks; the rest is split by concept, each part using only those below it in this
//! map:
//!
//! | module       | what it holds |
//! |--------------|---------------|
//! | `several`    | one process serving agents of several instances: a serving loop each |
//! | `drive`      | the run loop: threads for signals, stop requests, the channel watcher and the controllers; the kickoff, tasks or iterations; how the run ended |
//! | `quiescence` | the decision that the work is done (or, in keep mode, quiet) |
//! | `merges`     | serving the merge queue (a workflow's `merge:`) on a thread of its own |
//! | `workers`    | serving `spawn_agent` workers: adoption as they are registered, tethers to a spawner served elsewhere |
//! | `serving`    | what a server's controllers share, and building one controller |
//! | `signals`    | the stop signals and stop requests, which stop every serving loop of the process |
//! | `trust`      | what a server trusts of the agents it serves, and the check of a worker against its spawner |
//! | `start`      | what happens before the work is waited for: the cards that seed the board, the document-owner election, the kickoff |
//! | `output`     | events, the channel's new entries and the summary, as lines or JSON Lines |
//! | `preflight`  | what the agents need from this machine, checked before anything is written |
//! | `backends`   | building an agent's backend, from a workflow definition or a registry entry |
//! | `options`    | the options of a run |
//!
//! Who serves which agent is recorded under `_state/serve/` (see [`crate::serve`]).

mod backends;
mod drive;
mod merges;
mod options;
mod output;
mod preflight;
mod quiescence;
mod serving;
mod several;
mod signals;
mod start;
mod trust;
mod workers;

pub use options::Options;
pub use preflight::{environment, environment_warnings, preflight};
pub use start::ELECTION_TIMEOUT;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::backend::{anthropic, openai};
use super::command::shell;
use super::interpolate::Vars;
use super::workflow::{BackendKind, Context, DocumentOwner, Workflow};
use crate::channel::Channel;
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::models::Pricing;
use crate::registry::{self, Agent};
use crate::serve;
use crate::spawn::runnable;
use backends::{backend, exec_argv, share};
use drive::drive;
use serving::Serving;
use start::{Start, start_election};
use trust::{Trusted, check_worker};

/// Run `sh -c` for each setup task, storing outputs in `vars`. Past `timeout` (the
/// workflow's `--timeout`, which counts from here) the running task is killed and setup
/// fails.
pub fn setup(
    wf: &Workflow,
    inst: &Instance,
    vars: &mut Vars,
    timeout: Option<Duration>,
) -> Result<()> {
    let expired = crate::process::Stop::default();
    let done = crate::process::Stop::default();
    std::thread::scope(|s| {
        if let Some(t) = timeout {
            let (expired, done) = (&expired, &done);
            // Far enough to mean never, near enough for `Instant + Duration`.
            let t = t.min(Duration::from_secs(1 << 40));
            s.spawn(move || {
                if done.sleep(t) {
                    expired.set();
                }
            });
        }
        let result = (|| {
            for (i, task) in wf.setup.iter().enumerate() {
                let first = task.shell.value.text().lines().next().unwrap_or("").trim();
                let name = format!("setup task {} ({first})", i + 1);
                if let Some(gate) = &task.needs {
                    let key = format!("setup: setup task {}: {first}", i + 1);
                    match super::pipeline::approved(inst, key, &name, &gate.value, &expired) {
                        Ok(true) => {}
                        Ok(false) => {
                            // Skipped: its output is empty.
                            if let Some(var) = &task.output {
                                vars.set(&var.value, String::new());
                            }
                            continue;
                        }
                        Err(Error::Interrupted) if expired.is_set() => {
                            return Err(Error::No(format!(
                                "{name}: the workflow's --timeout passed while it waited for \
                                 an approval"
                            )));
                        }
                        Err(e) => return Err(e),
                    }
                }
                let out = match shell(&name, &task.shell.value, vars, Some(&expired)) {
                    Err(Error::Interrupted) if expired.is_set() => {
                        return Err(Error::No(format!(
                            "{name}: the workflow's --timeout passed; killed"
                        )));
                    }
                    r => r?,
                };
                if let Some(var) = &task.output {
                    vars.set(&var.value, out);
                }
            }
            Ok(())
        })();
        done.set();
        result
    })
}

/// The values of an agent's `env` map, rendered.
fn agent_env(def: &super::workflow::AgentDef, vars: &Vars) -> Result<Vec<(String, String)>> {
    def.env
        .iter()
        .map(|(k, v)| Ok((k.value.clone(), v.value.render(vars)?)))
        .collect()
}

/// The worktree of `def` when it works in one (`isolation: worktree`), made now: in the
/// repository of the current folder.
fn isolate(
    wf: &Workflow,
    def: &super::workflow::AgentDef,
    inst: &Instance,
) -> Result<Option<crate::worktree::Spec>> {
    if wf.isolated(def).is_none() {
        return Ok(None);
    }
    serving::worktree_of(inst, &def.name.value).map(Some)
}

/// The limits of an agent, as the registry records them.
fn limits(
    def: &super::workflow::AgentDef,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut m = std::collections::BTreeMap::new();
    let nums = [
        ("max_tokens", &def.max_tokens),
        ("max_steps", &def.max_steps),
        ("max_runs", &def.max_runs),
    ];
    for (k, v) in nums {
        if let Some(v) = v {
            m.insert(k.to_string(), json!(v.value));
        }
    }
    if let Some(t) = &def.timeout {
        m.insert("timeout_secs".to_string(), json!(t.value.as_secs_f64()));
    }
    m
}

/// Run the workflow on `inst` until the work is done (or, with `keep`, until stopped); the
/// exit code.
pub fn run(wf: Workflow, inst: &Instance, root: &Path, vars: Vars, opts: &Options) -> Result<u8> {
    preflight(&wf, &vars)?;
    crate::warn::noting_created("aw-run", root, || inst.create())?;
    let names: Vec<&str> = wf.agent_names().collect();
    let locks = serve::take(inst, &names)?;
    // Traced once its agents are its own: a runner refused leaves the instance as it was.
    let trace = crate::otel::genai::workflow(inst, &wf.name.value, wf.otel);
    let code = run_served(wf, inst, root, vars, opts, locks);
    crate::otel::genai::end_workflow(trace, code.as_ref().map(|c| *c).map_err(|e| e.to_string()));
    code
}

/// [`run`] once its agents' serving locks are taken (`claims`), under the run's trace. The
/// agents' definitions are dropped one by one as their controllers are made: a server of
/// many agents never holds both.
fn run_served(
    mut wf: Workflow,
    inst: &Instance,
    root: &Path,
    mut vars: Vars,
    opts: &Options,
    claims: Vec<serve::Claim>,
) -> Result<u8> {
    let names: Vec<String> = wf.agent_names().map(str::to_string).collect();
    let mut locks = claims.into_iter();
    serve::forget_stop(inst);
    // The workflow's merge settings are the instance's, for every way of asking.
    if let Some(m) = &wf.merge {
        m.value.store(inst)?;
    }
    let document = match &wf.context {
        Context::File { config, .. } => config.document.as_ref().map(|d| d.value.clone()),
        _ => None,
    }
    .unwrap_or_else(|| super::workflow::DEFAULT_DOCUMENT.to_string());
    let doc_path = inst.documents_dir().join(&document);
    wf.set_builtins(
        &mut vars,
        inst.name(),
        Some((&inst.channel_path(), &doc_path)),
    );
    setup(&wf, inst, &mut vars, opts.timeout)?;
    // From here the agents are shown as served: a stop signal is held for the signal thread
    // (a clean stop), never the default that kills the process. (Not before: the setup
    // tasks' programs inherit the mask.)
    signals::block()?;
    let mut serving = Serving {
        inst: inst.clone(),
        root: std::path::absolute(root).map_err(|e| Error::io(root, e))?,
        document: (wf.context != Context::Disabled).then_some(document),
        // Canonical, as a newcomer reads it in `aw-ctl ps`: no `..` of a relative path.
        workflow: Some(
            std::fs::canonicalize(&wf.file)
                .or_else(|_| std::path::absolute(&wf.file))
                .unwrap_or_else(|_| wf.file.clone())
                .to_string_lossy()
                .into_owned(),
        ),
        started: crate::time::now(),
        opts: opts.clone(),
        pricing: wf.pricing.clone(),
        trusted: BTreeMap::new(),
        refused: Default::default(),
        tethers: Vec::new(),
        caps: caps(opts),
        common: Default::default(),
        merges: wf.merge.is_some(),
        hooks: wf.lifecycle_hooks(),
        hooks_dir: std::path::absolute(&wf.dir).map_err(|e| Error::io(&wf.dir, e))?,
    };
    // Every agent is registered before any is shown as served, so that a message sent
    // once one is served resolves every mention. Sized once: grown by doubling, these
    // would hold up to twice the room of every agent, and for a moment both the old and the
    // new (see BENCHMARKS.md, "what a served agent costs").
    let defs = std::mem::take(&mut wf.agents);
    // What the iterations need of their agent's definition, kept before it goes.
    let iter_cwd = opts.iter.as_ref().and_then(|plan| {
        let def = defs.iter().find(|d| d.name.value == plan.agent)?;
        Some(def.cwd_written.clone().unwrap_or_default())
    });
    let mut controllers = Vec::with_capacity(defs.len());
    let mut agents = Vec::with_capacity(defs.len());
    // Those of aw-run's environment, read once for every agent.
    let own_secrets = serving.common()?.secrets.clone();
    let mut commands = HashSet::new();
    let no_command: Arc<[String]> = Arc::from(Vec::new());
    for def in defs {
        let def = &def;
        let name = def.name.value.as_str();
        let system = def
            .system_prompt
            .as_ref()
            .map(|s| s.template.value.render(&vars))
            .transpose()?;
        let mut env = agent_env(def, &vars)?;
        let worktree = isolate(&wf, def, inst)?;
        let cwd = match &worktree {
            Some(w) => {
                env.extend(serving::worktree_env(w));
                Some(
                    w.path
                        .join(def.cwd_written.as_deref().unwrap_or(Path::new(""))),
                )
            }
            None => def.cwd.as_ref().map(|c| c.value.clone()),
        };
        let named = &def.secrets;
        let of_env = super::redact::values(&env, named);
        // Shared with the other agents unless the agent has secrets of its own.
        let secrets: Arc<[String]> = match (named.is_empty(), of_env.is_empty()) {
            (true, true) => own_secrets.clone(),
            (true, false) => super::redact::union([&own_secrets[..], &of_env]).into(),
            (false, _) => {
                super::redact::union([&super::controller::secrets(named)[..], &of_env]).into()
            }
        };
        // An exec agent's command, rendered once; the agents that run the same hold it once.
        let command = match def.backend.value {
            BackendKind::Exec => share(&mut commands, exec_argv(&wf, def, &vars)?),
            _ => no_command.clone(),
        };
        let backend = backend(
            def,
            &vars,
            command.clone(),
            env,
            &serving.root,
            inst.name(),
            cwd,
        )?;
        serving.trusted.insert(
            name.to_string(),
            Trusted {
                backend: def.backend.value.name().to_string(),
                command: command.clone(),
                collab: def.collab,
                depth: 0,
                isolated: worktree.is_some(),
            },
        );
        agents.push(Agent {
            name: name.to_string(),
            backend: def.backend.value.name().to_string(),
            model: def.model_name().map(str::to_string),
            system_prompt: system.clone(),
            tools: def.tools.iter().map(|t| t.value.clone()).collect(),
            limits: limits(def),
            // What `aw-run --serve` and an exec agent's workers run; never a secret.
            command: match def.backend.value {
                BackendKind::Exec
                    if !command
                        .iter()
                        .any(|a| secrets.iter().any(|s| a.contains(s.as_str()))) =>
                {
                    command.to_vec()
                }
                _ => Vec::new(),
            },
            created: crate::time::now(),
            collab: def.collab,
            delegate: def.delegate,
            ..Agent::default()
        });
        let tool_args = crate::tools::client_config::tool_args(def.collab, def.delegate);
        let mut c = serving.controller(name, backend, tool_args)?;
        c.system = system;
        c.timeout = def.timeout.as_ref().map(|t| t.value);
        if let Some(m) = &def.max_runs {
            c.max_runs = m.value;
        }
        c.reply_fallback = def.reply_fallback;
        c.board = def.board_next;
        c.needs = def.needs.as_ref().map(|g| Box::new(g.value.clone()));
        c.worktree = worktree.map(Box::new);
        c.session = def.keeps_session().then(|| def.backend.value.name());
        c.serving_lock = locks.next();
        c.secrets = secrets;
        c.budget = def.budget;
        c.price = def.price(&wf.pricing).map(Box::new);
        if let Some(plan) = &opts.iter {
            // The iteration limit bounds the runs.
            c.max_runs = u64::MAX;
            c.task_context = Some(plan.context.clone());
        }
        controllers.push(c);
    }
    // The name index is written meanwhile, in another folder, and finished before the
    // agents are shown served: a send to one then resolves it through the index (see
    // BENCHMARKS.md, "what a served agent costs").
    let (_, indexing) = registry::register_all_aside(inst, agents, true)?;
    start::seed_board(inst, &wf.board)?;
    indexing.finish();
    serving.show_all_served(&mut controllers)?;
    // The agents' definitions are gone: their pages go back before the serving starts.
    crate::process::release_free_memory();
    let before = Channel::new(inst).last_id().unwrap_or(0);
    if let Some(plan) = &opts.iter {
        super::iter::clear_inbox(inst, &plan.agent, before)?;
    }
    let election = match wf.context.document_owner().map(|o| &o.value) {
        Some(DocumentOwner::Agent(a)) => {
            registry::set_document_owner(inst, Some(a))?;
            None
        }
        Some(DocumentOwner::Election) if names.len() == 1 => {
            registry::set_document_owner(inst, Some(&names[0]))?;
            None
        }
        Some(DocumentOwner::Election) => {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            Some(start_election(inst, &names)?)
        }
        None => None,
    };
    let kickoff = wf
        .kickoff
        .as_ref()
        .map(|k| k.value.render(&vars))
        .transpose()?;
    let tasks = (!wf.tasks.is_empty()).then(|| (wf.tasks.clone(), vars));
    let (kickoff, iter) = match (&opts.iter, kickoff) {
        (Some(plan), Some(task)) => {
            let mut plan = plan.clone();
            let worktree = controllers
                .iter()
                .find(|c| c.agent == plan.agent)
                .and_then(|c| c.worktree.as_deref());
            if let (Some(w), Some(written)) = (worktree, &iter_cwd) {
                // Its iterations commit in its worktree, on its branch.
                let cwd = w.path.join(written);
                plan.repo = super::iter::git::Repo::find(&cwd, root);
                if let Some(r) = &plan.repo {
                    r.check_index()?;
                }
            }
            plan.document = serving.document.clone();
            plan.secrets = super::redact::union(controllers.iter().map(|c| &c.secrets[..]));
            (None, Some((plan, task)))
        }
        (_, kickoff) => (kickoff, None),
    };
    let start = Start {
        election,
        kickoff,
        tasks,
        iter,
    };
    drive(Arc::new(serving), controllers, before, start)
}

/// Serve agents registered with `aw-ctl new` (all the runnable ones when `agents` is
/// empty): no workflow file, no setup, no kickoff.
pub fn serve(inst: &Instance, root: &Path, agents: &[String], opts: &Options) -> Result<u8> {
    match prepare_serve(inst, root, agents, opts)? {
        Ok(p) => {
            let trace = crate::otel::genai::workflow(inst, "serve", true);
            let code = drive(
                Arc::new(p.serving),
                p.controllers,
                p.before,
                Start::default(),
            );
            let end = code.as_ref().map(|c| *c).map_err(|e| e.to_string());
            crate::otel::genai::end_workflow(trace, end);
            code
        }
        Err(code) => Ok(code),
    }
}

/// Serve the agents of each instance of `groups` (all its runnable ones when its list is
/// empty) in this one process, a serving loop each (see `several`). Everything is
/// checked, and every serving lock taken, before any loop starts: a refusal serves
/// nothing. The exit code is the highest of the loops'.
pub fn serve_several(
    root: &Path,
    groups: &[(Instance, Vec<String>)],
    opts: &Options,
) -> Result<u8> {
    let mut prepared = Vec::new();
    for (inst, agents) in groups {
        match prepare_serve(inst, root, agents, opts)? {
            Ok(p) => prepared.push((p.serving, p.controllers, p.before)),
            Err(code) => return Ok(code),
        }
    }
    several::drive_all(prepared, opts.ready.clone())
}

/// What `aw-run --serve` serves of one instance, its serving locks taken, ready to be
/// driven.
struct Prepared {
    serving: Serving,
    controllers: Vec<super::controller::Controller>,
    /// The newest entry when it started: entries after it are printed.
    before: u64,
}

/// Choose the agents of [`serve`], take their serving locks and build their controllers;
/// `Err(code)` once the named agents that cannot be served were reported.
fn prepare_serve(
    inst: &Instance,
    root: &Path,
    agents: &[String],
    opts: &Options,
) -> Result<std::result::Result<Prepared, u8>> {
    check_serve_instance(inst)?;
    let reg = registry::Registry::load(inst)?;
    let chosen: Vec<&Agent> = if agents.is_empty() {
        let mut all = Vec::new();
        for a in reg.agents.iter().filter(|a| !a.closed) {
            match servable(a) {
                Ok(()) => all.push(a),
                // Driven from outside by design: not a problem to report.
                Err(_) if a.backend == "external" => {}
                Err(e) => {
                    let why = e.to_string();
                    let why = why.strip_prefix(&format!("{}: ", a.name)).unwrap_or(&why);
                    crate::warn::warn("aw-run", format!("{}: not served: {why}", a.name));
                }
            }
        }
        if all.is_empty() {
            return Err(Error::NotFound(format!(
                "instance '{}' has no agent aw-run can serve",
                inst.name()
            )));
        }
        all
    } else {
        // Every named agent that cannot be served is named, then nothing is served.
        let mut v = Vec::new();
        let mut problems = Vec::new();
        for name in agents {
            let Some(a) = reg.get(name) else {
                problems.push(Error::NotFound(format!(
                    "no agent '{name}' in instance '{}' (register it with aw-ctl new)",
                    inst.name()
                )));
                continue;
            };
            let why = if a.closed {
                Err(Error::invalid(format!(
                    "{name}: a closed worker is not served again"
                )))
            } else {
                servable(a)
            };
            match why {
                Ok(()) => v.push(a),
                Err(e) => problems.push(e),
            }
        }
        if let Some(first) = problems.first() {
            for e in &problems {
                crate::warn::report("aw-run", e);
            }
            return Ok(Err(first.exit_code()));
        }
        v
    };
    // The registry as read now is the user's choice (`aw-ctl new`); a worker among the
    // agents is checked against its spawner's entry all the same.
    let mut trusted = BTreeMap::new();
    let mut refused = std::collections::BTreeSet::new();
    let mut kept = Vec::new();
    for a in chosen {
        if a.spawned_by.is_some() {
            let spawner = a.spawned_by.as_deref().and_then(|s| reg.get(s));
            match check_worker(a, spawner.map(Trusted::of).as_ref(), false) {
                Ok(t) => {
                    trusted.insert(a.name.clone(), t);
                }
                Err(e) if agents.is_empty() => {
                    crate::warn::warn("aw-run", format!("{}: not served: {e}", a.name));
                    refused.insert(a.name.clone());
                    continue;
                }
                Err(e) => return Err(Error::Denied(format!("{}: not served: {e}", a.name))),
            }
        } else {
            trusted.insert(a.name.clone(), Trusted::of(a));
        }
        kept.push(a);
    }
    let chosen = kept;
    if chosen.is_empty() {
        return Err(Error::NotFound(format!(
            "instance '{}' has no agent aw-run can serve",
            inst.name()
        )));
    }
    let names: Vec<&str> = chosen.iter().map(|a| a.name.as_str()).collect();
    // From here the agents are shown as served: a stop signal is held for the signal thread
    // (a clean stop), never the default that kills the process.
    signals::block()?;
    let locks = serve::take(inst, &names)?;
    serve::forget_stop(inst);
    // A worker whose workflow serves its spawner elsewhere ends with that workflow.
    let tethers = chosen
        .iter()
        .filter_map(|a| Some((a.name.clone(), a.spawned_by.clone()?)))
        .filter(|(_, spawner)| {
            !names.contains(&spawner.as_str()) && serve::is_served(inst, spawner)
        })
        .collect();
    let serving = Serving {
        inst: inst.clone(),
        root: std::path::absolute(root).map_err(|e| Error::io(root, e))?,
        document: Some(super::workflow::DEFAULT_DOCUMENT.to_string()),
        workflow: None,
        started: crate::time::now(),
        opts: opts.clone(),
        pricing: Pricing::default(),
        trusted,
        refused,
        tethers,
        caps: caps(opts),
        common: Default::default(),
        merges: false,
        hooks: Default::default(),
        hooks_dir: PathBuf::new(),
    };
    let controllers = chosen
        .into_iter()
        .zip(locks)
        .map(|(a, lock)| {
            let mut c = serving.registered(a, None)?;
            c.serving_lock = Some(lock);
            Ok(c)
        })
        .collect::<Result<Vec<_>>>()?;
    let before = Channel::new(inst).last_id().unwrap_or(0);
    Ok(Ok(Prepared {
        serving,
        controllers,
        before,
    }))
}

/// The caps of a server run with `opts`, from now.
fn caps(opts: &Options) -> serve::Caps {
    serve::Caps::new(
        opts.max_runs,
        opts.rate.map(|r| (r.runs, r.window)),
        opts.pair.map(|r| (r.runs, r.window)),
        opts.timeout,
        opts.retry.attempts,
        opts.retry.backoff,
        opts.cooldown,
    )
}

/// `aw-run --serve` needs an instance with registered agents.
pub fn check_serve_instance(inst: &Instance) -> Result<()> {
    if inst.exists() {
        return Ok(());
    }
    Err(Error::NotFound(format!(
        "no instance '{}' (register agents with aw-ctl new first)",
        inst.name()
    )))
}

/// Can `aw-run --serve` run this registered agent now: [`runnable`], and an API backend
/// finds its key in the environment.
fn servable(a: &Agent) -> Result<()> {
    runnable(a)?;
    let key = match a.backend.as_str() {
        "anthropic" => anthropic::credentials(&[]).map(drop),
        "openai" => openai::credentials(&[]).map(drop),
        _ => Ok(()),
    };
    key.map_err(|why| Error::Unavailable(format!("{}: {why}", a.name)))
}
