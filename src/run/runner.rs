//! A workflow run: serving locks, agent registration, setup, kickoff, one controller thread
//! per agent fed by one channel watcher, and in run mode the decision that the work is done.
//!
//! Serving locks: `_state/serve/<agent>.lock`, held (flock) for the life of the process, with
//! its pid written inside; a second runner for the same agent of the same instance is refused.

use std::io::{Read, Seek, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use serde_json::json;

use super::backend::exec::Exec;
use super::backend::mock::Mock;
use super::backend::{Backend as RunBackend, sibling};
use super::controller::{Controller, Event, Report, Retry, Shared, next_transcript};
use super::interpolate::Vars;
use super::workflow::{Backend, DocumentOwner, Workflow};
use crate::error::{Error, Result, exit};
use crate::fs::{Lock, atomic_write, watch::FileWaiter};
use crate::instance::Instance;
use crate::post::{self, PostOptions};
use crate::registry::{self, Agent};

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Quiet time required before run mode decides the work is done.
    pub debounce: Duration,
    /// Poll the channel at this interval instead of watching it.
    pub poll: Option<Duration>,
    /// Default cap on runs per agent.
    pub max_runs: u64,
    /// Bound on the whole workflow.
    pub timeout: Option<Duration>,
    pub retry: Retry,
    pub quiet: bool,
    pub json: bool,
}

/// Run `sh -c` for each setup task, storing outputs in `vars`.
pub fn setup(wf: &Workflow, vars: &mut Vars) -> Result<()> {
    for (i, task) in wf.setup.iter().enumerate() {
        let first = task.shell.value.text().lines().next().unwrap_or("").trim();
        let name = format!("setup task {} ({first})", i + 1);
        let cmd = task
            .shell
            .value
            .render_shell(vars)
            .map_err(|e| Error::invalid(format!("{name}: {e}")))?;
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(&cmd.text)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let out = c
            .output()
            .map_err(|e| Error::No(format!("{name}: cannot run sh: {e}")))?;
        if !out.status.success() {
            let how = match out.status.code() {
                Some(c) => format!("exit status {c}"),
                None => "killed by a signal".to_string(),
            };
            return Err(Error::No(format!("{name} failed: {how}")));
        }
        if let Some(var) = &task.output {
            let text = String::from_utf8_lossy(&out.stdout);
            let text = text.strip_suffix('\n').unwrap_or(&text);
            vars.set(&var.value, text);
        }
    }
    Ok(())
}

/// Take `_state/serve/<agent>.lock` for each agent, or say who holds one (exit 75).
pub fn serve_locks(inst: &Instance, agents: &[&str]) -> Result<Vec<Lock>> {
    let dir = inst.state_dir().join("serve");
    std::fs::create_dir_all(&dir).map_err(|e| Error::create(&dir, e))?;
    let mut held = Vec::new();
    for a in agents {
        let path = dir.join(format!("{a}.lock"));
        match Lock::try_exclusive(&path)? {
            Some(lock) => {
                let mut f = lock.file();
                let pid = format!("{}\n", std::process::id());
                f.set_len(0)
                    .and_then(|()| f.rewind())
                    .and_then(|()| f.write_all(pid.as_bytes()))
                    .map_err(|e| Error::io(&path, e))?;
                held.push(lock);
            }
            None => {
                let mut pid = String::new();
                if let Ok(mut f) = std::fs::File::open(&path) {
                    let _ = f.read_to_string(&mut pid);
                }
                let pid = pid.trim();
                let who = if pid.is_empty() { "?" } else { pid };
                return Err(Error::Busy(format!(
                    "{a}@{}: already served by aw-run pid {who}",
                    inst.name()
                )));
            }
        }
    }
    Ok(held)
}

/// Build the backend of one agent.
fn backend(wf: &Workflow, name: &str, vars: &Vars) -> Result<Box<dyn RunBackend>> {
    let def = wf.agent(name).expect("agent of the workflow");
    let env = def
        .env
        .iter()
        .map(|(k, v)| Ok((k.value.clone(), v.value.render(vars)?)))
        .collect::<Result<Vec<_>>>()?;
    match def.backend.value {
        Backend::Mock => Ok(Box::new(Mock::new(def.mock.clone().unwrap_or_default()))),
        Backend::Exec => {
            let mut argv = def
                .command
                .iter()
                .flatten()
                .map(|t| t.value.render(vars))
                .collect::<Result<Vec<_>>>()?;
            if argv.is_empty() {
                return Err(Error::invalid(format!("{name}: empty command")));
            }
            if argv[0].contains('/') && !Path::new(&argv[0]).is_absolute() {
                let p = wf.dir.join(&argv[0]);
                argv[0] = std::path::absolute(&p)
                    .unwrap_or(p)
                    .to_string_lossy()
                    .into_owned();
            }
            Ok(Box::new(Exec {
                argv,
                env,
                cwd: def.cwd.as_ref().map(|c| c.value.clone()),
            }))
        }
        other => Err(unavailable(name, other)),
    }
}

fn unavailable(agent: &str, backend: Backend) -> Error {
    Error::Unavailable(format!(
        "{agent}: the {} backend is not available in this version (use exec or mock)",
        backend.name()
    ))
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

/// Print controller events: lines on stderr, or JSON Lines on stdout.
fn reporter(opts: &Options) -> Arc<Report> {
    let (quiet, json) = (opts.quiet, opts.json);
    Arc::new(move |ev: &Event| {
        if json {
            let v = json!({
                "event": "run",
                "agent": ev.agent,
                "run": ev.run,
                "attempt": ev.attempt,
                "status": ev.status.name(),
                "duration_ms": ev.duration.as_millis() as u64,
                "reason": ev.reason,
                "gave_up": ev.gave_up,
            });
            let _ = writeln!(std::io::stdout().lock(), "{v}");
        } else if !quiet {
            let mut line = format!(
                "aw-run: {}: run {} {} {:.2} s",
                ev.agent,
                ev.run,
                ev.status.name(),
                ev.duration.as_secs_f64()
            );
            if ev.attempt > 1 {
                line.push_str(&format!(" (attempt {})", ev.attempt));
            }
            if let Some(r) = &ev.reason {
                line.push_str(&format!(": {r}"));
            }
            if ev.gave_up {
                line.push_str("; messages left unread");
            }
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    })
}

/// Run the workflow on `inst` until the work is done; the exit code.
pub fn run(
    wf: &Workflow,
    inst: &Instance,
    root: &Path,
    mut vars: Vars,
    opts: &Options,
) -> Result<u8> {
    // Refuse what cannot run before anything is written.
    if let Some(def) = wf
        .agents
        .iter()
        .find(|a| !matches!(a.backend.value, Backend::Exec | Backend::Mock))
    {
        return Err(unavailable(&def.name.value, def.backend.value));
    }
    inst.create()?;
    let names: Vec<&str> = wf.agent_names().collect();
    let _locks = serve_locks(inst, &names)?;
    let document = match &wf.context {
        super::workflow::Context::File { config, .. } => {
            config.document.as_ref().map(|d| d.value.clone())
        }
        _ => None,
    }
    .unwrap_or_else(|| super::workflow::DEFAULT_DOCUMENT.to_string());
    let doc_path = inst.documents_dir().join(&document);
    wf.set_builtins(
        &mut vars,
        inst.name(),
        Some((&inst.channel_path(), &doc_path)),
    );
    setup(wf, &mut vars)?;
    let root = std::path::absolute(root).map_err(|e| Error::io(root, e))?;
    let mut controllers = Vec::new();
    for def in &wf.agents {
        let name = def.name.value.as_str();
        let system = def
            .system_prompt
            .as_ref()
            .map(|s| s.template.value.render(&vars))
            .transpose()?;
        let mcp_dir = inst.state_dir().join("mcp");
        std::fs::create_dir_all(&mcp_dir).map_err(|e| Error::create(&mcp_dir, e))?;
        let mcp_path = mcp_dir.join(format!("{name}.json"));
        atomic_write(
            &mcp_path,
            crate::mcp::config::claude_json(
                &sibling("aw-mcp"),
                &root,
                &format!("{name}@{}", inst.name()),
            )
            .as_bytes(),
        )?;
        let backend = backend(wf, name, &vars)?;
        registry::register(
            inst,
            Agent {
                name: name.to_string(),
                backend: def.backend.value.name().to_string(),
                model: def.model_name().map(str::to_string),
                system_prompt: system.clone(),
                tools: def.tools.iter().map(|t| t.value.clone()).collect(),
                limits: limits(def),
                created: crate::channel::now(),
            },
            true,
        )?;
        controllers.push(Controller {
            inst: inst.clone(),
            agent: name.to_string(),
            backend,
            system,
            document: document.clone(),
            root: root.clone(),
            mcp_config: mcp_path,
            timeout: def.timeout.as_ref().map(|t| t.value),
            max_runs: def.max_runs.as_ref().map_or(opts.max_runs, |m| m.value),
            reply_fallback: def.reply_fallback,
            retry: opts.retry,
            next_transcript: next_transcript(inst, name),
        });
    }
    if let Some(owner) = wf.context.document_owner()
        && let DocumentOwner::Agent(a) = &owner.value
    {
        registry::set_document_owner(inst, Some(a))?;
    }
    if let Some(k) = &wf.kickoff {
        let text = k.value.render(&vars)?;
        post::post(inst, "system", &text, &PostOptions::default())?;
    }
    drive(inst, controllers, opts)
}

/// Start the watcher, the signal thread and the controllers; wait for the end.
fn drive(inst: &Instance, controllers: Vec<Controller>, opts: &Options) -> Result<u8> {
    // Block the stop signals in every thread; one thread waits for them.
    let mut sigs = SigSet::empty();
    sigs.add(Signal::SIGINT);
    sigs.add(Signal::SIGTERM);
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&sigs), None)
        .map_err(|e| Error::io("<signals>", e.into()))?;
    let shared = Arc::new(Shared::default());
    {
        let mut st = shared.lock();
        st.generation = 1;
        for c in &controllers {
            st.agents.entry(c.agent.clone()).or_default();
        }
    }
    let signalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let (shared, signalled) = (shared.clone(), signalled.clone());
        std::thread::spawn(move || {
            if sigs.wait().is_ok() {
                signalled.store(true, std::sync::atomic::Ordering::SeqCst);
                shared.stop_all();
            }
        });
    }
    let mut waiter = FileWaiter::new(&inst.channel_path(), opts.poll)?;
    {
        let shared = shared.clone();
        std::thread::spawn(move || {
            loop {
                waiter.wait(None);
                shared.bump();
            }
        });
    }
    let report = reporter(opts);
    let mut handles = Vec::new();
    for c in controllers {
        let (shared, report) = (shared.clone(), report.clone());
        handles.push(std::thread::spawn(move || c.run(&shared, &*report)));
    }
    let (code, reason) = wait_done(inst, &shared, opts);
    shared.stop_all();
    for h in handles {
        let _ = h.join();
    }
    summary(&shared, opts);
    if signalled.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(Error::Interrupted);
    }
    if let Some(r) = reason {
        return Err(Error::No(r));
    }
    Ok(code)
}

/// Wait until the work is done (exit 0), or a reason to stop with 1.
fn wait_done(inst: &Instance, shared: &Shared, opts: &Options) -> (u8, Option<String>) {
    let deadline = opts.timeout.map(|t| Instant::now() + t);
    let mut st = shared.lock();
    loop {
        if st.stopping {
            return (exit::INTERRUPTED, None);
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) {
            let t = opts.timeout.unwrap_or_default();
            return (
                exit::NO,
                Some(format!(
                    "timeout: the workflow was not done after {} s",
                    t.as_secs_f64()
                )),
            );
        }
        let generation = st.generation;
        let quiet = st.agents.values().all(|a| a.idle_at == Some(generation));
        if !quiet {
            st = wait(shared, st, left);
            continue;
        }
        // Debounce: the quiet must last.
        let d = left.map_or(opts.debounce, |l| l.min(opts.debounce));
        let (s, _) = shared
            .cv
            .wait_timeout_while(st, d, |s| s.generation == generation && !s.stopping)
            .unwrap_or_else(|e| e.into_inner());
        st = s;
        if st.generation != generation || st.stopping {
            continue;
        }
        match verdict(inst, &st) {
            Verdict::Done => return (exit::OK, None),
            Verdict::Stop(why) => return (exit::NO, Some(why)),
            Verdict::Missed => {
                // Something arrived that no wake-up announced: look again.
                st.generation += 1;
                shared.cv.notify_all();
            }
            Verdict::Wait => {
                // An active proposal: wait for votes (or its expiry).
                let t = left.map_or(Duration::from_secs(1), |l| l.min(Duration::from_secs(1)));
                let (s, _) = shared
                    .cv
                    .wait_timeout_while(st, t, |s| s.generation == generation && !s.stopping)
                    .unwrap_or_else(|e| e.into_inner());
                st = s;
            }
        }
    }
}

fn wait<'a>(
    shared: &'a Shared,
    st: std::sync::MutexGuard<'a, super::controller::State>,
    left: Option<Duration>,
) -> std::sync::MutexGuard<'a, super::controller::State> {
    match left {
        Some(l) => {
            shared
                .cv
                .wait_timeout(st, l)
                .unwrap_or_else(|e| e.into_inner())
                .0
        }
        None => shared.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
    }
}

enum Verdict {
    Done,
    Stop(String),
    Missed,
    Wait,
}

/// With every controller quiet: is the work done?
fn verdict(inst: &Instance, st: &super::controller::State) -> Verdict {
    let mut failed = Vec::new();
    let mut capped = Vec::new();
    for (name, a) in &st.agents {
        let unread = crate::inbox::unread(inst, name).map_or(1, |(m, _)| m.len());
        if unread == 0 {
            continue;
        }
        if a.capped {
            capped.push(name.as_str());
        } else if a.failed {
            failed.push(name.as_str());
        } else {
            return Verdict::Missed;
        }
    }
    if !capped.is_empty() {
        // Every agent that used up its runs took part in the loop.
        let all: Vec<&str> = st
            .agents
            .iter()
            .filter(|(_, a)| a.capped || a.runs >= a.cap)
            .map(|(n, _)| n.as_str())
            .collect();
        return Verdict::Stop(format!(
            "loop guard: {} reached the run limit with messages still unread",
            all.join(", ")
        ));
    }
    if !failed.is_empty() {
        return Verdict::Stop(format!(
            "{} failed; their messages were left unread",
            failed.join(", ")
        ));
    }
    match crate::proposal::list(inst, true) {
        Ok(p) if !p.is_empty() => Verdict::Wait,
        _ => Verdict::Done,
    }
}

/// Print runs and failures per agent.
fn summary(shared: &Shared, opts: &Options) {
    let st = shared.lock();
    if opts.json {
        let agents: serde_json::Map<String, serde_json::Value> = st
            .agents
            .iter()
            .map(|(n, a)| (n.clone(), json!({"runs": a.runs, "failures": a.failures})))
            .collect();
        let _ = writeln!(
            std::io::stdout().lock(),
            "{}",
            json!({"event": "summary", "agents": agents})
        );
    } else if !opts.quiet {
        let parts: Vec<String> = st
            .agents
            .iter()
            .map(|(n, a)| format!("{n} {} run(s) {} failure(s)", a.runs, a.failures))
            .collect();
        let _ = writeln!(
            std::io::stderr().lock(),
            "aw-run: summary: {}",
            parts.join(", ")
        );
    }
}
