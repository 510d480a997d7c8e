//! A workflow run: serving locks, agent registration, setup, kickoff, one controller thread
//! per agent fed by one channel watcher, and in run mode the decision that the work is done.
//!
//! Who serves which agent is recorded under `_state/serve/` (see [`super::serve`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use serde_json::json;

use super::backend::claude::Claude;
use super::backend::codex::Codex;
use super::backend::exec::{CLI_IDLE_TIMEOUT, Exec};
use super::backend::files::FileTool;
use super::backend::mock::Mock;
use super::backend::{Backend as RunBackend, sibling};
use super::backend::{anthropic, openai};
use super::controller::{Controller, Event, Report, Retry, Shared, next_transcript};
use super::interpolate::Vars;
use super::models::Pricing;
use super::serve::{self, ControllerState, Served};
use super::workflow::{Backend, Context, DocumentOwner, Workflow};
use crate::channel::Channel;
use crate::error::{Error, Result, exit};
use crate::fs::atomic_write_private;
use crate::fs::watch::{FALLBACK_HINT, FileWaiter};
use crate::instance::Instance;
use crate::post::{self, PostOptions};
use crate::registry::{self, Agent};

/// The environment variable that hands a detached server the pipe it reports readiness on
/// (`aw-run --detach`); never passed on to setup commands or backends. On it the server
/// writes `!` and a line for each warning its starter must print, then `1` once ready.
pub const READY_FD: &str = "AW_RUN_READY_FD";

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Poll the channel at this interval instead of watching it.
    pub poll: Option<Duration>,
    /// Default cap on runs per agent (in keep mode: since the workflow was last quiet).
    pub max_runs: u64,
    /// Bound on the whole workflow.
    pub timeout: Option<Duration>,
    pub retry: Retry,
    /// After a run failed for good, how long before its messages are tried again.
    pub cooldown: Duration,
    /// Stay until stopped instead of ending when the work is done.
    pub keep: bool,
    pub quiet: bool,
    pub json: bool,
    /// What the whole workflow may spend (else the instance's recorded budget, see
    /// [`super::ledger`]).
    pub budget: super::backend::Budget,
    /// The loop guard's rate limit in keep mode (`None`: off).
    pub rate: Option<super::controller::Rate>,
    /// The loop guard's limit on the mentions between two agents in keep mode (`None`: off).
    pub pair: Option<super::controller::Rate>,
    /// Told (one byte) once the agents are served and the kickoff posted.
    pub ready: Option<Arc<std::fs::File>>,
    /// Run the workflow's one agent on its kickoff over many iterations (`--iter`).
    pub iter: Option<super::iter::Plan>,
}

/// Run `sh -c` for each setup task, storing outputs in `vars`. Past `timeout` (the
/// workflow's `--timeout`, which counts from here) the running task is killed and setup
/// fails.
pub fn setup(wf: &Workflow, vars: &mut Vars, timeout: Option<Duration>) -> Result<()> {
    let expired = super::backend::Stop::default();
    let done = super::backend::Stop::default();
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

/// Most of its stdout a setup or shell task may print (16 MiB): past it the task is killed
/// and fails.
pub const MAX_SHELL_OUTPUT: usize = 16 << 20;

/// Run `template` with `sh -c`, values passed through the environment; its stdout without
/// one trailing newline. A failure is an error naming `name`.
///
/// Like a backend, the shell runs in its own process group that dies with aw-run, the
/// guard told of it (so a `kill -9` of aw-run takes what it started too), and with `stop`
/// set (a stopped pipeline) its group is killed. What it leaves running in the background
/// once it has exited is its own, but its stdout is closed [`GRACE`] after the shell's
/// exit (a job that kept it open does not hold the run).
///
/// [`GRACE`]: super::backend::exec::GRACE
pub(super) fn shell(
    name: &str,
    template: &super::Template,
    vars: &Vars,
    stop: Option<&super::backend::Stop>,
) -> Result<String> {
    let cmd = template
        .render_shell(vars)
        .map_err(|e| Error::invalid(format!("{name}: {e}")))?;
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(&cmd.text)
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    super::backend::exec::prepare(&mut c, true);
    let mut child = c
        .spawn()
        .map_err(|e| Error::No(format!("{name}: cannot run sh: {e}")))?;
    let pgid = child.id();
    super::guard::watch(pgid);
    let ended = super::backend::exec::collect(&mut child, stop, MAX_SHELL_OUTPUT);
    super::guard::release(pgid);
    use super::backend::exec::Ended;
    let (status, out) = match ended {
        Err(e) => return Err(Error::No(format!("{name}: cannot wait for sh: {e}"))),
        Ok((Ended::Stopped, _)) => return Err(Error::Interrupted),
        Ok((Ended::TooLong, _)) => {
            return Err(Error::No(format!(
                "{name} printed more than {} MiB (write a large output to a file)",
                MAX_SHELL_OUTPUT >> 20
            )));
        }
        Ok((Ended::Exited(status), out)) => (status, out),
    };
    if !status.success() {
        let how = match status.code() {
            Some(c) => format!("exit status {c}"),
            None => "killed by a signal".to_string(),
        };
        return Err(Error::No(format!("{name} failed: {how}")));
    }
    let text = String::from_utf8_lossy(&out);
    Ok(text.strip_suffix('\n').unwrap_or(&text).to_string())
}

/// The values of an agent's `env` map, rendered.
fn agent_env(wf: &Workflow, name: &str, vars: &Vars) -> Result<Vec<(String, String)>> {
    let def = wf.agent(name).expect("agent of the workflow");
    def.env
        .iter()
        .map(|(k, v)| Ok((k.value.clone(), v.value.render(vars)?)))
        .collect()
}

/// Build the backend of one agent.
fn backend(
    wf: &Workflow,
    name: &str,
    vars: &Vars,
    env: Vec<(String, String)>,
    root: &Path,
    instance: &str,
) -> Result<Box<dyn RunBackend>> {
    let def = wf.agent(name).expect("agent of the workflow");
    let idle = def.idle_timeout.as_ref().map(|t| t.value);
    match def.backend.value {
        Backend::Mock => Ok(Box::new(Mock::new(def.mock.clone().unwrap_or_default()))),
        Backend::Exec => {
            let argv = exec_argv(wf, def, vars)?;
            Ok(Box::new(Exec {
                argv,
                env,
                cwd: def.cwd.as_ref().map(|c| c.value.clone()),
                idle_timeout: idle,
            }))
        }
        Backend::Claude => Ok(Box::new(Claude {
            program: CLAUDE.to_string(),
            model: def.model_name().map(str::to_string),
            system: def
                .system_prompt
                .as_ref()
                .map(|s| s.template.value.render(vars))
                .transpose()?,
            tools: def.tools.iter().map(|t| t.value.clone()).collect(),
            max_turns: def.max_steps.as_ref().map(|m| m.value),
            permission_mode: def.permission_mode.as_ref().map(|m| m.value.clone()),
            idle_timeout: idle.unwrap_or(CLI_IDLE_TIMEOUT),
            env,
            cwd: def.cwd.as_ref().map(|c| c.value.clone()),
            delegate: def.delegate,
        })),
        Backend::Codex => Ok(Box::new(Codex {
            program: CODEX.to_string(),
            model: def.model_name().map(str::to_string),
            mcp_keys: crate::mcp::config::codex_keys(
                &sibling("aw-mcp"),
                root,
                &format!("{name}@{instance}"),
                &crate::mcp::config::tool_args(def.collab, def.delegate),
            ),
            idle_timeout: idle.unwrap_or(CLI_IDLE_TIMEOUT),
            env,
            cwd: def.cwd.as_ref().map(|c| c.value.clone()),
            delegate: def.delegate,
        })),
        Backend::Anthropic | Backend::Openai => {
            let settings = super::backend::api::Settings {
                model: def.model_name().unwrap_or_default().to_string(),
                system: def
                    .system_prompt
                    .as_ref()
                    .map(|s| s.template.value.render(vars))
                    .transpose()?,
                max_tokens: def.max_tokens.as_ref().map(|m| m.value),
                max_steps: def.max_steps.as_ref().map(|m| m.value),
                env: &env,
                read_timeout: idle.unwrap_or(super::backend::api::DEFAULT_READ_TIMEOUT),
                files: def
                    .tools
                    .iter()
                    .filter_map(|t| FileTool::from_name(&t.value))
                    .collect(),
                cwd: match &def.cwd {
                    Some(c) => c.value.clone(),
                    None => std::env::current_dir().map_err(|e| Error::io(Path::new("."), e))?,
                },
                aw_root: root.to_path_buf(),
                instance_dir: root.join(instance),
                toolset: crate::mcp::tools::Toolset {
                    collab: def.collab,
                    delegate: def.delegate,
                },
            };
            let built: std::result::Result<Box<dyn RunBackend>, String> =
                if def.backend.value == Backend::Anthropic {
                    anthropic::backend(settings).map(|b| Box::new(b) as Box<dyn RunBackend>)
                } else {
                    openai::backend(settings).map(|b| Box::new(b) as Box<dyn RunBackend>)
                };
            built.map_err(|why| Error::Unavailable(format!("{name}: {why}")))
        }
        other => Err(unavailable(name, other)),
    }
}

/// The argument vector of an exec agent, rendered, a relative program path resolved against
/// the workflow's folder.
fn exec_argv(wf: &Workflow, def: &super::workflow::AgentDef, vars: &Vars) -> Result<Vec<String>> {
    let mut argv = def
        .command
        .iter()
        .flatten()
        .map(|t| t.value.render(vars))
        .collect::<Result<Vec<_>>>()?;
    if argv.is_empty() {
        return Err(Error::invalid(format!("{}: empty command", def.name.value)));
    }
    if argv[0].contains('/') && !Path::new(&argv[0]).is_absolute() {
        let p = wf.dir.join(&argv[0]);
        argv[0] = std::path::absolute(&p)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned();
    }
    Ok(argv)
}

/// The Claude Code program, looked up in `PATH`.
const CLAUDE: &str = "claude";
/// The Codex program, looked up in `PATH`.
const CODEX: &str = "codex";

/// The program a CLI backend runs.
fn program_of(b: Backend) -> &'static str {
    match b {
        Backend::Codex => CODEX,
        _ => CLAUDE,
    }
}

fn missing_program(agent: &str, b: Backend) -> Error {
    Error::Unavailable(format!(
        "{agent}: the {} backend needs its CLI: no '{}' in PATH",
        b.name(),
        program_of(b)
    ))
}

/// `name` found in `PATH`, as an executable file.
fn find_program(name: &str) -> Option<PathBuf> {
    find_in(name, &std::env::var_os("PATH")?)
}

/// `name` found in the directories of `path` (a `PATH` value), as an executable file.
fn find_in(name: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| is_executable(&m)))
}

/// A file someone may execute.
fn is_executable(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    m.is_file() && m.permissions().mode() & 0o111 != 0
}

fn unavailable(agent: &str, backend: Backend) -> Error {
    Error::Unavailable(format!(
        "{agent}: the {} backend is not available in this version (use claude, codex, exec or mock)",
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
/// With tasks, stdout is their result: the events go to stderr as lines.
/// `-q` silences the lines, not the JSON Lines: those are the run's result.
fn reporter(
    opts: &Options,
    has_tasks: bool,
    live: Arc<super::live::Live>,
    shared: Arc<Shared>,
) -> Arc<Report> {
    let json = opts.json && !has_tasks;
    let quiet = opts.quiet && !json;
    // Iterations have lines of their own: only what went wrong is told.
    let only_failures = opts.iter.is_some();
    Arc::new(move |ev: &Event| {
        live.attempt(&ev.agent, ev.start);
        if quiet || (only_failures && (ev.start || ev.status == super::backend::Status::Ok)) {
            return live.refresh(&shared);
        }
        if json {
            let v = if ev.start {
                json!({
                    "event": "start",
                    "agent": ev.agent,
                    "run": ev.run,
                    "attempt": ev.attempt,
                    "transcript": ev.transcript,
                    "woken_by": ev.woken_by.iter().map(|(id, from)| json!({"id": id, "from": from}))
                        .collect::<Vec<_>>(),
                })
            } else {
                json!({
                    "event": "run",
                    "agent": ev.agent,
                    "run": ev.run,
                    "attempt": ev.attempt,
                    "status": ev.status.name(),
                    "duration_ms": ev.duration.as_millis() as u64,
                    "reason": ev.reason,
                    "gave_up": ev.gave_up,
                    "transcript": ev.transcript,
                    "stderr_tail": ev.stderr_tail,
                })
            };
            live.around(&shared, || {
                let _ = writeln!(std::io::stdout().lock(), "{v}");
            });
        } else {
            let line = event_line(ev);
            live.around(&shared, || {
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            });
        }
    })
}

/// Most senders named in an attempt's start line; the rest are counted.
const WOKEN_BY_SHOWN: usize = 3;

/// An event as a line for people.
fn event_line(ev: &Event) -> String {
    if ev.start {
        let mut line = format!("aw-run: {}: run {}", ev.agent, ev.run);
        if ev.attempt > 1 {
            line.push_str(&format!(" attempt {}", ev.attempt));
        }
        line.push_str(" started");
        if !ev.woken_by.is_empty() {
            let shown: Vec<String> = ev
                .woken_by
                .iter()
                .take(WOKEN_BY_SHOWN)
                .map(|(id, from)| format!("#{id} from {from}"))
                .collect();
            line.push_str(&format!(" (woken by {}", shown.join(", ")));
            if ev.woken_by.len() > WOKEN_BY_SHOWN {
                line.push_str(&format!(" and {} more", ev.woken_by.len() - WOKEN_BY_SHOWN));
            }
            line.push(')');
        }
        return line;
    }
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
    if let Some(t) = &ev.stderr_tail {
        line.push_str(&format!("; stderr: {t}"));
    }
    if ev.gave_up {
        line.push_str("; messages left unread");
    }
    if ev.status != super::backend::Status::Ok && ev.transcript > 0 {
        line.push_str(&format!(
            "; see aw-ctl -i {} runs {} {}",
            ev.instance, ev.agent, ev.transcript
        ));
    }
    line
}

/// What the controllers of one server have in common.
struct Serving {
    inst: Instance,
    root: PathBuf,
    document: Option<String>,
    workflow: Option<String>,
    started: String,
    opts: Options,
    /// Prices of models: the workflow's `pricing:` over the built-in table.
    pricing: Pricing,
    /// The agents served from the start, as a trusted source defines them.
    trusted: BTreeMap<String, Trusted>,
    /// Workers refused at the start (and said so).
    refused: std::collections::BTreeSet<String>,
    /// Workers served here whose spawner another aw-run served when this one started,
    /// with that spawner: each is served only as long as its spawner is.
    tethers: Vec<(String, String)>,
    /// The caps a detached server started for a worker is given.
    caps: serve::Caps,
}

/// What a server knows of an agent it serves from a trusted source, never from the registry
/// as it may be later: the workflow file, the registry as the user's `aw-run --serve` read
/// it at its start (`aw-ctl new`), or a worker checked against its spawner. Exec workers
/// are checked against it ([`check_worker`]).
#[derive(Debug, Clone)]
struct Trusted {
    backend: String,
    /// An exec agent's argument vector.
    command: Vec<String>,
    /// What it may spawn, when it has the collab tools.
    collab: Option<registry::Collab>,
    depth: u32,
}

impl Trusted {
    /// A registry entry as it stands (`aw-run --serve` of agents the user registered).
    fn of(a: &Agent) -> Trusted {
        Trusted {
            backend: a.backend.clone(),
            command: a.command.clone(),
            collab: a.collab,
            depth: a.depth,
        }
    }
}

/// May aw-run serve the worker `w` (an agent with `spawned_by`) whose spawner is, as a
/// trusted source defines it, `spawner` (`None`: not one this server knows)? The worker's
/// own trusted definition when so. `collab_known`: whether `spawner` says truly which
/// collab tools it has (not so of a registry entry: an interactive session's aw-mcp may be
/// given them on its command line).
///
/// `spawn_agent` gives a worker no tools of its own, and an exec worker nothing but its
/// spawner's command: a registry entry that says otherwise was not written by it, and is
/// refused. A spawner that is known must have the collab tools and a spawn depth that
/// allows the worker's. An exec worker is served only when its spawner is known (served
/// here), is an exec agent, and the worker's command is exactly the spawner's.
fn check_worker(w: &Agent, spawner: Option<&Trusted>, collab_known: bool) -> Result<Trusted> {
    let by = w.spawned_by.as_deref().unwrap_or("?");
    let refuse = |why: String| Err(Error::Denied(format!("spawned by {by}: {why}")));
    if !w.tools.is_empty() {
        return refuse("a worker has no tools of its own, and this entry lists some".into());
    }
    let exec = w.backend == Backend::Exec.name();
    if exec && spawner.is_none() {
        return refuse(format!(
            "an exec worker is served only by the aw-run that serves {by}"
        ));
    }
    // A spawner of unknown definition (served by nobody: an interactive session) is
    // taken at its word for any other backend.
    if let Some(sp) = spawner {
        if exec && sp.backend != Backend::Exec.name() {
            return refuse(format!(
                "{by} is not an exec agent: only an exec agent spawns exec workers"
            ));
        }
        match sp.collab {
            _ if !collab_known => {}
            Some(c) if sp.depth.checked_add(1) == Some(w.depth) && w.depth <= c.max_depth => {}
            _ => {
                return refuse(format!(
                    "{by} may not spawn workers at depth {} (no collab tools, or too deep)",
                    w.depth
                ));
            }
        }
        if exec && w.command != sp.command {
            return refuse(format!(
                "its command is not {by}'s as the workflow file or aw-ctl new gave it"
            ));
        }
    }
    // The collab tools it gets: as spawn_agent gives them, from a spawner whose own are
    // known; else as registered.
    let collab = match spawner {
        Some(sp) if collab_known => sp.collab.filter(|c| w.depth < c.max_depth),
        _ => w.collab,
    };
    Ok(Trusted {
        backend: w.backend.clone(),
        command: w.command.clone(),
        collab,
        depth: w.depth,
    })
}

impl Serving {
    /// Write the agent's MCP configuration (`aw-mcp --agent NAME@INSTANCE` and `tool_args`)
    /// and build its controller, with the server's defaults.
    fn controller(
        &self,
        name: &str,
        backend: Box<dyn RunBackend>,
        tool_args: &[String],
    ) -> Result<Controller> {
        let inst = &self.inst;
        // Absolute: an exec agent with its own cwd gets it in AW_MCP_CONFIG.
        let mcp_dir = std::path::absolute(inst.state_dir().join("mcp"))
            .map_err(|e| Error::io(inst.state_dir(), e))?;
        // Private, whatever the umask: a configuration may hold what an agent's tools need.
        crate::fs::private_dir(&mcp_dir)?;
        let mcp_path = mcp_dir.join(format!("{name}.json"));
        let mcp_text = crate::mcp::config::claude_json(
            &sibling("aw-mcp"),
            &self.root,
            &format!("{name}@{}", inst.name()),
            tool_args,
        );
        atomic_write_private(&mcp_path, mcp_text.as_bytes())?;
        let served = Served {
            instance: inst.name().to_string(),
            agent: name.to_string(),
            pid: std::process::id(),
            host: Some(crate::host::this().name.clone()),
            host_id: Some(crate::host::this().id.clone()),
            state: ControllerState::Idle,
            runs: 0,
            workflow: self.workflow.clone(),
            started: self.started.clone(),
            caps: Some(self.caps.clone()),
        };
        serve::write(inst, &served)?;
        Ok(Controller {
            inst: inst.clone(),
            agent: name.to_string(),
            backend,
            system: None,
            document: self.document.clone(),
            root: self.root.clone(),
            mcp_config: mcp_path,
            mcp_text,
            timeout: None,
            max_runs: self.opts.max_runs,
            reply_fallback: true,
            retry: self.opts.retry,
            next_transcript: next_transcript(inst, name),
            cooldown: self.opts.cooldown,
            served,
            published: Some((ControllerState::Idle, 0)),
            secrets: super::controller::secrets(&[]),
            budget: Default::default(),
            price: None,
            task_context: None,
            stop: Default::default(),
            serving_lock: None,
        })
    }

    /// The controller of an agent of the registry (`aw-ctl new`, or a worker).
    fn registered(&self, a: &Agent) -> Result<Controller> {
        let backend = registered_backend(a, &self.root, self.inst.name())?;
        let tool_args = crate::mcp::config::tool_args(a.collab, a.delegate);
        let mut c = self.controller(&a.name, backend, &tool_args)?;
        c.system = a.system_prompt.clone();
        // The registry may have been edited by hand: a bad value is refused, not a panic.
        c.timeout = match a.limits.get("timeout_secs") {
            None => None,
            Some(v) => Some(
                v.as_f64()
                    .and_then(|s| Duration::try_from_secs_f64(s).ok())
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "{}: limits.timeout_secs is not a number of seconds: {v}",
                            a.name
                        ))
                    })?,
            ),
        };
        if let Some(m) = a.limits.get("max_runs").and_then(|v| v.as_u64()) {
            c.max_runs = m;
        }
        c.price = a.model.as_deref().and_then(|m| self.pricing.price(m));
        Ok(c)
    }
}

/// The backend of a registered agent: what its registry entry says, with the defaults of
/// a workflow file for the rest (credentials from the environment).
fn registered_backend(a: &Agent, root: &Path, instance: &str) -> Result<Box<dyn RunBackend>> {
    runnable(a)?;
    let toolset = crate::mcp::tools::Toolset {
        collab: a.collab,
        delegate: a.delegate,
    };
    let max_steps = a.limits.get("max_steps").and_then(|v| v.as_u64());
    let backend: Box<dyn RunBackend> = match a.backend.as_str() {
        "mock" => Box::new(Mock::new(Default::default())),
        "claude" => Box::new(Claude {
            program: CLAUDE.to_string(),
            model: a
                .model
                .as_ref()
                .map(|m| m.strip_prefix("anthropic/").unwrap_or(m).to_string()),
            system: a.system_prompt.clone(),
            tools: a.tools.clone(),
            max_turns: max_steps,
            permission_mode: None,
            idle_timeout: CLI_IDLE_TIMEOUT,
            env: Vec::new(),
            cwd: None,
            delegate: a.delegate,
        }),
        "codex" => Box::new(Codex {
            program: CODEX.to_string(),
            model: a
                .model
                .as_ref()
                .map(|m| m.strip_prefix("openai/").unwrap_or(m).to_string()),
            mcp_keys: crate::mcp::config::codex_keys(
                &sibling("aw-mcp"),
                root,
                &format!("{}@{instance}", a.name),
                &crate::mcp::config::tool_args(a.collab, a.delegate),
            ),
            idle_timeout: CLI_IDLE_TIMEOUT,
            env: Vec::new(),
            cwd: None,
            delegate: a.delegate,
        }),
        kind @ ("anthropic" | "openai") => {
            let model = a.model.clone().unwrap_or_default();
            let prefix = format!("{kind}/");
            let model = model.strip_prefix(&prefix).unwrap_or(&model);
            let model = super::models::find(model).map_or(model.to_string(), |m| m.id.to_string());
            let settings = super::backend::api::Settings {
                model,
                system: a.system_prompt.clone(),
                max_tokens: a.limits.get("max_tokens").and_then(|v| v.as_u64()),
                max_steps,
                env: &[],
                read_timeout: super::backend::api::DEFAULT_READ_TIMEOUT,
                files: Vec::new(),
                cwd: std::env::current_dir().map_err(|e| Error::io(Path::new("."), e))?,
                aw_root: root.to_path_buf(),
                instance_dir: root.join(instance),
                toolset,
            };
            let built: std::result::Result<Box<dyn RunBackend>, String> = if kind == "anthropic" {
                anthropic::backend(settings).map(|b| Box::new(b) as Box<dyn RunBackend>)
            } else {
                openai::backend(settings).map(|b| Box::new(b) as Box<dyn RunBackend>)
            };
            built.map_err(|why| Error::Unavailable(format!("{}: {why}", a.name)))?
        }
        _ => Box::new(Exec {
            argv: a.command.clone(),
            env: Vec::new(),
            cwd: None,
            idle_timeout: None,
        }),
    };
    Ok(backend)
}

/// Refuse what cannot run, before anything is written: the first of [`environment`]'s
/// problems.
pub fn preflight(wf: &Workflow, vars: &Vars) -> Result<()> {
    match environment(wf, vars).into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Every problem of what the agents of `wf` need from this machine, in file order, each at
/// the text that asks for it: a CLI backend whose program is not in `PATH` and an API
/// backend without its key (exit 69), an exec agent's program that is not there or cannot
/// be run (69; not when the workflow has setup or shell tasks, which may make it), file
/// tools in a `cwd` that does not exist (66). What depends on a setup output is checked
/// once it is known.
pub fn environment(wf: &Workflow, vars: &Vars) -> Vec<(super::workflow::Pos, Error)> {
    let mut found = Vec::new();
    for def in &wf.agents {
        let name = &def.name.value;
        let at = def.backend.pos;
        match def.backend.value {
            Backend::Mock => {}
            // A setup or shell task may make the program: then it is checked when it runs.
            Backend::Exec if makes_files(wf) => {}
            Backend::Exec => {
                if let Some(e) = exec_program(wf, def, vars) {
                    let pos = def
                        .command
                        .as_ref()
                        .and_then(|c| c.first())
                        .map_or(at, |c| c.pos);
                    found.push((pos, e));
                }
            }
            Backend::Claude | Backend::Codex => {
                let program = program_of(def.backend.value);
                if find_program(program).is_none() {
                    found.push((at, missing_program(name, def.backend.value)));
                }
            }
            Backend::Anthropic | Backend::Openai => {
                let mut env = Vec::new();
                let mut later = false;
                for (k, v) in &def.env {
                    match v.value.render(vars) {
                        Ok(v) => env.push((k.value.clone(), v)),
                        // A value that needs a setup output is not known yet: the key may
                        // be in it, and is checked once it is.
                        Err(_) => later = true,
                    }
                }
                let key = if def.backend.value == Backend::Anthropic {
                    anthropic::credentials(&env).map(drop)
                } else {
                    openai::credentials(&env).map(drop)
                };
                if let (Err(why), false) = (key, later) {
                    let pos = def.model.as_ref().map_or(at, |m| m.pos);
                    found.push((pos, Error::Unavailable(format!("{name}: {why}"))));
                }
                if def
                    .tools
                    .iter()
                    .any(|t| FileTool::from_name(&t.value).is_some())
                {
                    let cwd = def
                        .cwd
                        .as_ref()
                        .map_or(Path::new("."), |c| c.value.as_path());
                    if !cwd.is_dir() {
                        let pos = def.cwd.as_ref().map_or(at, |c| c.pos);
                        found.push((
                            pos,
                            Error::NotFound(format!(
                                "{name}: cwd {}: no such folder (the file tools work in it)",
                                cwd.display()
                            )),
                        ));
                    }
                }
            }
            other => found.push((at, unavailable(name, other))),
        }
    }
    found
}

/// Does the workflow run commands of its own (setup, shell tasks) before or beside its
/// agents, which may make or remove an exec agent's program?
fn makes_files(wf: &Workflow) -> bool {
    fn shell(t: &super::workflow::Task) -> bool {
        match &t.kind {
            super::workflow::TaskKind::Shell(_) => true,
            super::workflow::TaskKind::Parallel(ts) => ts.iter().any(shell),
            super::workflow::TaskKind::Send { .. } => false,
        }
    }
    !wf.setup.is_empty() || wf.tasks.iter().any(shell)
}

/// Why an exec agent's program cannot be started, if it cannot: a path (relative to the
/// workflow's directory) that is not an executable file, or a bare name not found in `PATH`
/// (the agent's own `PATH` when its `env` sets one). `None` too when it depends on a setup
/// output.
fn exec_program(wf: &Workflow, def: &super::workflow::AgentDef, vars: &Vars) -> Option<Error> {
    let argv = exec_argv(wf, def, vars).ok()?;
    let program = &argv[0];
    let name = &def.name.value;
    if program.contains('/') {
        return match std::fs::metadata(program) {
            Err(_) => Some(Error::Unavailable(format!(
                "{name}: command '{program}': no such program"
            ))),
            Ok(m) if !is_executable(&m) => Some(Error::Unavailable(format!(
                "{name}: command '{program}': not an executable file"
            ))),
            Ok(_) => None,
        };
    }
    let path = match def.env.iter().find(|(k, _)| k.value == "PATH") {
        Some((_, v)) => v.value.render(vars).ok()?.into(),
        None => std::env::var_os("PATH").unwrap_or_default(),
    };
    match find_in(program, &path) {
        Some(_) => None,
        None => Some(Error::Unavailable(format!(
            "{name}: command '{program}': no such program in PATH"
        ))),
    }
}

/// Run the workflow on `inst` until the work is done (or, with `keep`, until stopped); the
/// exit code.
pub fn run(
    wf: &Workflow,
    inst: &Instance,
    root: &Path,
    mut vars: Vars,
    opts: &Options,
) -> Result<u8> {
    preflight(wf, &vars)?;
    inst.create()?;
    let names: Vec<&str> = wf.agent_names().collect();
    let mut locks = serve::take(inst, &names)?.into_iter();
    serve::forget_stop(inst);
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
    setup(wf, &mut vars, opts.timeout)?;
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
        started: crate::channel::now(),
        opts: opts.clone(),
        pricing: wf.pricing.clone(),
        trusted: BTreeMap::new(),
        refused: Default::default(),
        tethers: Vec::new(),
        caps: caps(opts),
    };
    // Every agent is registered before any is shown as served, so that a message sent
    // once one is served resolves every mention.
    let mut built = Vec::new();
    let mut agents = Vec::new();
    for def in &wf.agents {
        let name = def.name.value.as_str();
        let system = def
            .system_prompt
            .as_ref()
            .map(|s| s.template.value.render(&vars))
            .transpose()?;
        let env = agent_env(wf, name, &vars)?;
        let secrets = super::controller::secrets(&env);
        let backend = backend(wf, name, &vars, env, &serving.root, inst.name())?;
        serving.trusted.insert(
            name.to_string(),
            Trusted {
                backend: def.backend.value.name().to_string(),
                command: match def.backend.value {
                    Backend::Exec => exec_argv(wf, def, &vars)?,
                    _ => Vec::new(),
                },
                collab: def.collab,
                depth: 0,
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
                Backend::Exec => Some(exec_argv(wf, def, &vars)?)
                    .filter(|argv| {
                        !argv
                            .iter()
                            .any(|a| secrets.iter().any(|s| a.contains(s.as_str())))
                    })
                    .unwrap_or_default(),
                _ => Vec::new(),
            },
            created: crate::channel::now(),
            collab: def.collab,
            delegate: def.delegate,
            ..Agent::default()
        });
        built.push((def, system, secrets, backend));
    }
    registry::register_all(inst, agents, true)?;
    let mut controllers = Vec::new();
    for (def, system, secrets, backend) in built {
        let tool_args = crate::mcp::config::tool_args(def.collab, def.delegate);
        let mut c = serving.controller(&def.name.value, backend, &tool_args)?;
        c.system = system;
        c.timeout = def.timeout.as_ref().map(|t| t.value);
        if let Some(m) = &def.max_runs {
            c.max_runs = m.value;
        }
        c.reply_fallback = def.reply_fallback;
        c.serving_lock = locks.next();
        c.secrets = secrets;
        c.budget = def.budget;
        c.price = def.price(&wf.pricing);
        if let Some(plan) = &opts.iter {
            // The iteration limit bounds the runs.
            c.max_runs = u64::MAX;
            c.task_context = Some(plan.context.clone());
        }
        controllers.push(c);
    }
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
            registry::set_document_owner(inst, Some(names[0]))?;
            None
        }
        Some(DocumentOwner::Election) => Some(start_election(inst, &names)?),
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
            plan.document = serving.document.clone();
            plan.secrets = super::redact::union(controllers.iter().map(|c| c.secrets.as_slice()));
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

/// How long the agents have to elect a document owner.
pub const ELECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// Start the binding document-owner election among `agents` (announced with a mention of
/// each); its id.
fn start_election(inst: &Instance, agents: &[&str]) -> Result<String> {
    let id = format!(
        "{}-{}",
        crate::proposal::OWNER_PREFIX,
        chrono::Utc::now().timestamp_millis()
    );
    let new = crate::proposal::NewProposal {
        id: Some(id.clone()),
        kind: "election".to_string(),
        title: "Document owner election".to_string(),
        description: Some(
            "Elect the agent that maintains the workflow's documents: the winner alone may \
             write them. Vote with the vote tool."
                .to_string(),
        ),
        options: agents
            .iter()
            .map(|a| crate::proposal::Choice {
                id: a.to_string(),
                label: format!("@{a}"),
            })
            .collect(),
        rule: None,
        quorum: None,
        tie_breaker: None,
        binding: true,
        timeout_seconds: Some(ELECTION_TIMEOUT.as_secs()),
    };
    crate::proposal::create(inst, "system", new)?;
    Ok(id)
}

/// What happens once the controllers run: the document-owner election is waited for, then
/// the kickoff is posted.
#[derive(Default)]
struct Start {
    election: Option<String>,
    kickoff: Option<String>,
    /// The tasks and the variables they start from.
    tasks: Option<(Vec<super::workflow::Task>, Vars)>,
    /// The iterations (`--iter`) and their task, instead of the kickoff.
    iter: Option<(super::iter::Plan, String)>,
}

impl Start {
    fn begin(&self, inst: &Instance, shared: &Shared) -> Result<()> {
        if let Some(id) = &self.election {
            wait_election(inst, shared, id);
        }
        if let Some(text) = &self.kickoff {
            post::post(inst, "system", text, &PostOptions::default())?;
        }
        Ok(())
    }
}

/// Wait until the election `id` is over (or the run stops).
fn wait_election(inst: &Instance, shared: &Shared, id: &str) {
    loop {
        let active = crate::proposal::status(inst, id).is_ok_and(|p| p.is_active());
        let st = shared.lock();
        if !active || st.stopping {
            return;
        }
        let generation = st.generation;
        // A vote changes the channel; the expiry is checked at least once a second.
        let _ = shared
            .cv
            .wait_timeout_while(st, Duration::from_secs(1), |s| {
                s.generation == generation && !s.stopping
            });
    }
}

/// Serve agents registered with `aw-ctl new` (all the runnable ones when `agents` is
/// empty): no workflow file, no setup, no kickoff.
pub fn serve(inst: &Instance, root: &Path, agents: &[String], opts: &Options) -> Result<u8> {
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
                    crate::cli::warn("aw-run", format!("{}: not served: {why}", a.name));
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
                crate::cli::report("aw-run", e);
            }
            return Ok(first.exit_code());
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
                    crate::cli::warn("aw-run", format!("{}: not served: {e}", a.name));
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
        started: crate::channel::now(),
        opts: opts.clone(),
        pricing: Pricing::default(),
        trusted,
        refused,
        tethers,
        caps: caps(opts),
    };
    let controllers = chosen
        .into_iter()
        .zip(locks)
        .map(|(a, lock)| {
            let mut c = serving.registered(a)?;
            c.serving_lock = Some(lock);
            Ok(c)
        })
        .collect::<Result<Vec<_>>>()?;
    let before = Channel::new(inst).last_id().unwrap_or(0);
    drive(Arc::new(serving), controllers, before, Start::default())
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

/// Can `aw-run --serve` run this registered agent?
pub(crate) fn runnable(a: &Agent) -> Result<()> {
    match a.backend.as_str() {
        "mock" => Ok(()),
        "claude" if find_program(CLAUDE).is_some() => Ok(()),
        "claude" => Err(missing_program(&a.name, Backend::Claude)),
        "codex" if find_program(CODEX).is_some() => Ok(()),
        "codex" => Err(missing_program(&a.name, Backend::Codex)),
        "anthropic" | "openai" if a.model.is_none() => Err(Error::invalid(format!(
            "{}: the {} backend needs a model",
            a.name, a.backend
        ))),
        "anthropic" | "openai" => Ok(()),
        "exec" if !a.command.is_empty() => Ok(()),
        "exec" => Err(Error::invalid(format!(
            "{}: an exec agent needs a command (aw-ctl new {} --backend exec -- PROGRAM [ARG...])",
            a.name, a.name
        ))),
        "external" => Err(Error::Unavailable(format!(
            "{}: an external agent is driven from outside, not by aw-run",
            a.name
        ))),
        other => Err(Error::Unavailable(format!(
            "{}: unknown backend '{other}'",
            a.name
        ))),
    }
}

/// Takes the workers (`spawn_agent`) this server should serve as they are registered, and
/// stops the controllers of those closed. A worker is taken when its spawner is served here,
/// or by no process at all; its serving lock settles a race with another server.
struct Adopter {
    serving: Arc<Serving>,
    shared: Arc<Shared>,
    report: Arc<Report>,
    /// The registry file as last read: length, modification time, inode.
    seen: Option<(u64, i64, i64, u64)>,
    /// The agents served, with their controllers' own stop flags.
    workers: BTreeMap<String, super::backend::Stop>,
    handles: Vec<std::thread::JoinHandle<()>>,
    /// The agents served, as a trusted source defines them: those served from the start,
    /// and the workers taken since.
    trusted: BTreeMap<String, Trusted>,
    /// Workers refused (and said so once).
    refused: std::collections::BTreeSet<String>,
}

impl Adopter {
    /// Look at the registry (with `force`, even when it seems unchanged); whether a worker
    /// was taken.
    fn look(&mut self, force: bool) -> bool {
        use std::os::unix::fs::MetadataExt;
        let serving = self.serving.clone();
        let inst = &serving.inst;
        let key = std::fs::metadata(inst.state_file("agents.json"))
            .ok()
            .map(|m| (m.len(), m.mtime(), m.mtime_nsec(), m.ino()));
        if key.is_none() || (!force && key == self.seen) {
            return false;
        }
        self.seen = key;
        let Ok(reg) = registry::Registry::load(inst) else {
            return false;
        };
        let ours: Vec<String> = {
            let st = self.shared.lock();
            if st.stopping {
                return false;
            }
            st.agents
                .iter()
                .filter(|(_, a)| !a.closed)
                .map(|(n, _)| n.clone())
                .collect()
        };
        let mut taken = false;
        for a in &reg.agents {
            let Some(spawner) = &a.spawned_by else {
                continue;
            };
            if a.closed {
                if let Some(stop) = self.workers.get(&a.name) {
                    stop.set();
                    self.shared.cv.notify_all();
                }
                continue;
            }
            let mine = ours.contains(spawner) || !serve::is_served(inst, spawner);
            if !mine
                || ours.contains(&a.name)
                || self.refused.contains(&a.name)
                || serve::is_served(inst, &a.name)
            {
                continue;
            }
            let checked = match check_worker(a, self.trusted.get(spawner), true) {
                Ok(t) => t,
                Err(e) => {
                    crate::cli::warn("aw-run", format!("{}: not served: {e}", a.name));
                    self.refused.insert(a.name.clone());
                    continue;
                }
            };
            match self.take(a, checked) {
                Ok(()) => taken = true,
                // Another server took it first.
                Err(Error::Busy(_)) => {}
                Err(e) => crate::cli::warn("aw-run", format!("{}: not served: {e}", a.name)),
            }
        }
        taken
    }

    /// Serve the worker `a` from now on.
    fn take(&mut self, a: &Agent, trusted: Trusted) -> Result<()> {
        let inst = &self.serving.inst;
        let lock = serve::take(inst, &[a.name.as_str()])?.pop();
        let a = &Agent {
            collab: trusted.collab,
            ..a.clone()
        };
        let mut c = self.serving.registered(a)?;
        self.trusted.insert(a.name.clone(), trusted);
        c.serving_lock = lock;
        c.stop = self.shared.stop.child();
        self.shared.lock().agents.entry(a.name.clone()).or_default();
        if !self.serving.opts.quiet {
            let _ = writeln!(
                std::io::stderr().lock(),
                "aw-run: serving {} ({}), spawned by {}",
                a.name,
                a.backend,
                a.spawned_by.as_deref().unwrap_or("?")
            );
        }
        self.workers.insert(a.name.clone(), c.stop.clone());
        let (shared, report) = (self.shared.clone(), self.report.clone());
        self.handles
            .push(std::thread::spawn(move || c.run(&shared, &*report)));
        Ok(())
    }
}

/// How the serving process was asked to stop.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StopSignal {
    None,
    /// SIGTERM (`aw-ctl stop`, a service manager): finish cleanly, exit 0.
    Term,
    /// SIGINT: exit 130.
    Int,
}

/// Watch for a stop request to this process (`aw-ctl stop`, from any host): on one, finish
/// cleanly as on SIGTERM. The thread ends once the server is stopping, woken by the waker.
fn watch_stop_request(
    inst: &Instance,
    opts: &Options,
    shared: &Arc<Shared>,
    stop_signal: &Arc<Mutex<StopSignal>>,
) -> Result<(
    crate::fs::watch::Waker,
    std::thread::JoinHandle<()>,
    Option<String>,
)> {
    let path = serve::my_stop_path(inst);
    let mut asked = FileWaiter::new(&path, opts.poll)?;
    let waker = asked.waker();
    let fallback = asked.fallback().map(str::to_string);
    let (shared, stop_signal) = (shared.clone(), stop_signal.clone());
    let thread = std::thread::spawn(move || {
        loop {
            if path.exists() {
                let _ = std::fs::remove_file(&path);
                let mut sig = stop_signal.lock().unwrap_or_else(|e| e.into_inner());
                if *sig == StopSignal::None {
                    *sig = StopSignal::Term;
                }
                drop(sig);
                shared.stop_all();
                return;
            }
            if shared.lock().stopping {
                return;
            }
            asked.wait(None);
        }
    });
    Ok((waker, thread, fallback))
}

/// Start the watcher, the signal thread and the controllers; wait for the end. Channel
/// entries after `before` are printed as they arrive.
fn drive(
    serving: Arc<Serving>,
    mut controllers: Vec<Controller>,
    before: u64,
    start: Start,
) -> Result<u8> {
    let (inst, opts) = (&serving.inst, &serving.opts);
    // What aw-run never echoes: the secrets of every agent.
    let secrets = super::redact::union(controllers.iter().map(|c| c.secrets.as_slice()));
    // Block the stop signals in every thread; one thread waits for them.
    let mut sigs = SigSet::empty();
    sigs.add(Signal::SIGINT);
    sigs.add(Signal::SIGTERM);
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&sigs), None)
        .map_err(|e| Error::io("<signals>", e.into()))?;
    // The instance's budget: this run's, recorded, else the one recorded before; spending
    // counts from what the instance spent before.
    let (budget, ledger) = super::ledger::apply(inst, opts.budget)?;
    if let Some(why) = budget.exceeded(&ledger.spent) {
        return Err(Error::No(why).hint(
            "the instance's spending counts across runs: see aw-ctl budget; aw-ctl budget reset \
             starts counting again",
        ));
    }
    let shared = Arc::new(Shared {
        budget,
        rate: opts.rate.filter(|_| opts.keep),
        pair: opts.pair.filter(|_| opts.keep),
        keep: opts.keep,
        ..Shared::default()
    });
    {
        let mut st = shared.lock();
        st.outside = ledger.spent.clone();
        st.outside_agents = ledger.agents.clone();
        st.generation = 1;
        for c in &mut controllers {
            st.agents.entry(c.agent.clone()).or_default();
            c.stop = shared.stop.child();
        }
    }
    let stop_signal = Arc::new(Mutex::new(StopSignal::None));
    {
        let (shared, stop_signal) = (shared.clone(), stop_signal.clone());
        std::thread::spawn(move || {
            if let Ok(sig) = sigs.wait() {
                *stop_signal.lock().unwrap_or_else(|e| e.into_inner()) = match sig {
                    Signal::SIGTERM => StopSignal::Term,
                    _ => StopSignal::Int,
                };
                shared.stop_all();
            }
        });
    }
    let asking = watch_stop_request(inst, opts, &shared, &stop_signal)?;
    let mut waiter = FileWaiter::new(&inst.channel_path(), opts.poll)?;
    // Tasks and iterations print their result on stdout.
    let has_tasks = start.tasks.is_some() || start.iter.is_some();
    if let Some(why) = waiter.fallback().or(asking.2.as_deref()) {
        let line = format!("{why} ({FALLBACK_HINT}, or set --poll)").replace('\n', " ");
        crate::cli::warn("aw-run", &line);
        // Detached, stderr is the log: the starting process prints the line too.
        if let Some(ready) = &opts.ready {
            let _ = (&**ready).write_all(format!("!aw-run: warning: {line}\n").as_bytes());
        }
    }
    let live = super::live::Live::new(opts.quiet);
    let report = reporter(opts, has_tasks, live.clone(), shared.clone());
    let adopter = Arc::new(Mutex::new(Adopter {
        serving: serving.clone(),
        shared: shared.clone(),
        report: report.clone(),
        seen: None,
        workers: BTreeMap::new(),
        handles: Vec::new(),
        trusted: serving.trusted.clone(),
        refused: serving.refused.clone(),
    }));
    let waker = waiter.waker();
    let watching = {
        let (shared, adopter) = (shared.clone(), adopter.clone());
        let mut printer = Printer::new(inst, opts, before, has_tasks);
        printer.secrets = secrets.clone();
        printer.live = Some((live.clone(), shared.clone()));
        if start.iter.is_some() {
            printer.channel = None;
        }
        printer.print();
        std::thread::spawn(move || {
            loop {
                waiter.wait(None);
                if shared.lock().stopping {
                    // What came since the last wake-up (the work may be done before the
                    // watch told of its last entry) is printed too. The waiter is dropped
                    // here: its watch is removed before the exit.
                    printer.print();
                    return;
                }
                // New workers are taken before anyone is told of the change.
                adopter
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .look(false);
                shared.bump();
                printer.print();
            }
        })
    };
    let mut handles = Vec::new();
    for c in controllers {
        // A worker served from the start is closed like one taken later.
        adopter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .workers
            .insert(c.agent.clone(), c.stop.clone());
        let (shared, report) = (shared.clone(), report.clone());
        handles.push(std::thread::spawn(move || c.run(&shared, &*report)));
    }
    // Workers registered before this server started.
    adopter.lock().unwrap_or_else(|e| e.into_inner()).look(true);
    let tethered = tether(&serving, &shared, &adopter);
    let ticking = super::live::ticker(&live, &shared);
    let t0 = Instant::now();
    let mut outcome = None;
    let (code, reason) = match start.begin(inst, &shared) {
        Ok(()) => {
            if let Some(ready) = &opts.ready {
                let _ = (&**ready).write_all(b"1");
            }
            let done = match (&start.tasks, &start.iter) {
                (Some((tasks, vars)), _) => {
                    let mut vars = vars.clone();
                    // Woken as soon as a controller changes state, not at the next look;
                    // a change since the last nap ends the next one at once.
                    let seen = std::sync::atomic::AtomicU64::new(0);
                    let nap = |d: Duration| {
                        use std::sync::atomic::Ordering::Relaxed;
                        let st = shared.lock();
                        let before = seen.load(Relaxed);
                        let st = if st.changes == before && !st.stopping {
                            shared
                                .cv
                                .wait_timeout_while(st, d, |s| s.changes == before && !s.stopping)
                                .unwrap_or_else(|e| e.into_inner())
                                .0
                        } else {
                            st
                        };
                        seen.store(st.changes, Relaxed);
                    };
                    super::pipeline::run_tasks(inst, tasks, &mut vars, &shared.stop, &nap).map(
                        |o| {
                            if opts.keep {
                                // Staying up: the result is printed now, not at the stop.
                                o.redacted(&secrets).print(opts.json, t0.elapsed());
                            } else {
                                outcome = Some(o);
                            }
                        },
                    )
                }
                (None, Some((plan, task))) => super::iter::run(inst, plan, task, &shared),
                (None, None) => Ok(()),
            };
            match done {
                Ok(()) => wait_done(inst, &shared, opts, &adopter),
                Err(Error::Interrupted) => (exit::INTERRUPTED, None),
                Err(e) => (e.exit_code(), Some(e.to_string())),
            }
        }
        Err(e) => (e.exit_code(), Some(e.to_string())),
    };
    if shared.lock().over_budget.is_some() {
        // The answers of model calls under way still come and are counted.
        shared.stop_all_after_calls();
    } else {
        shared.stop_all();
    }
    waker.wake();
    let adopted = std::mem::take(&mut adopter.lock().unwrap_or_else(|e| e.into_inner()).handles);
    for h in handles.into_iter().chain(adopted) {
        let _ = h.join();
    }
    let _ = watching.join();
    asking.0.wake();
    let _ = asking.1.join();
    if let Some(t) = tethered {
        let _ = t.join();
    }
    live.finish();
    if let Some(t) = ticking {
        let _ = t.join();
    }
    summary(&shared, opts, has_tasks, live.on());
    if let Some(why) = shared.lock().over_budget.clone() {
        return Err(Error::No(why));
    }
    // What other servers of the instance (a worker's) spent counts too.
    if let Some(why) = super::ledger::load(inst)
        .ok()
        .and_then(|l| shared.budget.exceeded(&l.spent))
    {
        return Err(Error::No(why));
    }
    match *stop_signal.lock().unwrap_or_else(|e| e.into_inner()) {
        StopSignal::Term => return Ok(exit::OK),
        StopSignal::Int => return Err(Error::Interrupted),
        StopSignal::None => {}
    }
    if let Some(r) = reason {
        return Err(Error::No(r));
    }
    if let (Some(o), exit::OK) = (outcome, code) {
        o.redacted(&secrets).print(opts.json, t0.elapsed());
    }
    Ok(code)
}

/// How often a server of tethered workers looks whether their spawners are still served.
const TETHER_LOOK: Duration = Duration::from_millis(200);

/// Stop serving each tethered worker (see [`Serving::tethers`]) once its spawner is no
/// longer served: the thread that watches, when there are any.
fn tether(
    serving: &Arc<Serving>,
    shared: &Arc<Shared>,
    adopter: &Arc<Mutex<Adopter>>,
) -> Option<std::thread::JoinHandle<()>> {
    if serving.tethers.is_empty() {
        return None;
    }
    let (serving, shared, adopter) = (serving.clone(), shared.clone(), adopter.clone());
    Some(std::thread::spawn(move || {
        let mut left = serving.tethers.clone();
        while !left.is_empty() {
            {
                let st = shared.lock();
                if st.stopping {
                    return;
                }
                let _ = shared.cv.wait_timeout(st, TETHER_LOOK);
            }
            left.retain(|(worker, spawner)| {
                if serve::is_served(&serving.inst, spawner) {
                    return true;
                }
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "aw-run: {worker}: {spawner}, its spawner, is no longer served; so \
                     neither is {worker}"
                );
                let ad = adopter.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(stop) = ad.workers.get(worker) {
                    stop.set();
                }
                shared.cv.notify_all();
                false
            });
        }
    }))
}

/// Prints the channel's new entries: lines on stdout, or JSON Lines with `--json`.
struct Printer {
    channel: Option<Channel>,
    json: bool,
    after: u64,
    /// Print on stderr, as human lines (stdout is the tasks' result).
    stderr: bool,
    /// What is never echoed (an agent may post a secret itself).
    secrets: Vec<String>,
    /// The status line kept below what is printed.
    live: Option<(Arc<super::live::Live>, Arc<Shared>)>,
}

impl Printer {
    fn new(inst: &Instance, opts: &Options, after: u64, stderr: bool) -> Printer {
        Printer {
            channel: (!opts.quiet).then(|| Channel::new(inst)),
            json: opts.json && !stderr,
            after,
            stderr,
            secrets: Vec::new(),
            live: None,
        }
    }

    fn print(&mut self) {
        let Some(ch) = &self.channel else { return };
        let Ok(batch) = ch.read_since(self.after) else {
            return;
        };
        if batch.entries.is_empty() {
            return;
        }
        match self.live.clone() {
            Some((live, shared)) => live.around(&shared, || self.write(batch.entries)),
            None => self.write(batch.entries),
        }
    }

    fn write(&mut self, entries: Vec<crate::channel::Entry>) {
        let mut out: Box<dyn Write> = if self.stderr {
            Box::new(std::io::stderr().lock())
        } else {
            Box::new(std::io::stdout().lock())
        };
        for e in &entries {
            let e = &crate::channel::Entry {
                message: super::redact::redact(&e.message, &self.secrets),
                ..e.clone()
            };
            let line = if self.json {
                let mut v: serde_json::Value =
                    serde_json::from_str(&e.to_json()).unwrap_or_default();
                if let Some(m) = v.as_object_mut() {
                    m.insert("event".into(), json!("entry"));
                }
                v.to_string()
            } else {
                crate::channel::human_entry(e, None)
            };
            let _ = writeln!(out, "{line}");
            self.after = e.id;
        }
        let _ = out.flush();
    }
}

/// Wait until the work is done (exit 0), or a reason to stop with 1.
///
/// Done is known, not guessed from a quiet time: every controller is idle at the current
/// generation (it read its inbox after the last change it was told of, and its run, with
/// the process group of its backend, has ended), and, under the controllers' lock so that
/// none of them starts meanwhile, no agent has unread messages on disk and no proposal is
/// active. A message posted since (by a writer outside the attempts) either wakes everyone
/// through the channel watch before that, or stays unread for the next run.
fn wait_done(
    inst: &Instance,
    shared: &Shared,
    opts: &Options,
    adopter: &Mutex<Adopter>,
) -> (u8, Option<String>) {
    let deadline = opts.timeout.map(crate::time::deadline);
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
        if !st.agents.is_empty() && st.agents.values().all(|a| a.closed) {
            // A server of workers only, all of them closed: nothing is left to serve.
            return (exit::OK, None);
        }
        let quiet = st
            .agents
            .values()
            .all(|a| a.closed || a.idle_at == Some(generation));
        if !quiet {
            st = wait(shared, st, left);
            continue;
        }
        match verdict(inst, &st, opts.keep) {
            Verdict::Done if opts.keep => {
                // Quiet: the loop guard counts afresh, and nothing happens until the next
                // change.
                for a in st.agents.values_mut() {
                    a.runs = 0;
                }
                // Until the next change, a controller closed (a worker let go, one whose
                // spawner ended), or the end of --timeout.
                let closed =
                    |s: &super::controller::State| s.agents.values().filter(|a| a.closed).count();
                let was_closed = closed(&st);
                let idle = |s: &mut super::controller::State| {
                    s.generation == generation && !s.stopping && closed(s) == was_closed
                };
                st = match left {
                    Some(l) => {
                        shared
                            .cv
                            .wait_timeout_while(st, l, idle)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                    None => shared
                        .cv
                        .wait_while(st, idle)
                        .unwrap_or_else(|e| e.into_inner()),
                };
            }
            Verdict::Done => {
                // A worker registered just now may not have been taken yet.
                drop(st);
                let taken = adopter.lock().unwrap_or_else(|e| e.into_inner()).look(true);
                st = shared.lock();
                if !taken {
                    return (exit::OK, None);
                }
            }
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

/// With every controller quiet: is the work done? In keep mode an agent that failed for
/// good does not end the run (it cools down).
fn verdict(inst: &Instance, st: &super::controller::State, keep: bool) -> Verdict {
    let mut failed = Vec::new();
    let mut capped = Vec::new();
    for (name, a) in st.agents.iter().filter(|(_, a)| !a.closed) {
        let unread = crate::inbox::unread(inst, name).map_or(1, |(m, _)| m.len());
        if unread == 0 {
            continue;
        }
        if a.capped {
            capped.push(name.as_str());
        } else if a.failed || a.paused {
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
    if !failed.is_empty() && !keep {
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

/// Print runs and failures per agent: a line on stderr (not with `-q`), an aligned table
/// when stderr is a terminal (`table`), or with `--json` an object on stdout (with `-q`
/// too: it is the run's result).
fn summary(shared: &Shared, opts: &Options, has_tasks: bool, table: bool) {
    let st = shared.lock();
    let json = opts.json && !has_tasks;
    if opts.quiet && !json {
        return;
    }
    let mut total = super::backend::Usage::default();
    for a in st.agents.values() {
        total.add(&a.usage);
    }
    if json {
        let agents: serde_json::Map<String, serde_json::Value> = st
            .agents
            .iter()
            .map(|(n, a)| {
                let ms = a.busy.as_millis() as u64;
                let v = json!({"runs": a.total, "failures": a.failures, "duration_ms": ms,
                    "usage": a.usage});
                (n.clone(), v)
            })
            .collect();
        let _ = writeln!(
            std::io::stdout().lock(),
            "{}",
            json!({"event": "summary", "agents": agents, "usage": total})
        );
    } else if table {
        let rows: Vec<super::live::Row<'_>> = st
            .agents
            .iter()
            .map(|(n, a)| super::live::Row {
                agent: n,
                runs: a.total,
                failures: a.failures,
                busy: a.busy,
                usage: &a.usage,
            })
            .collect();
        let _ = write!(
            std::io::stderr().lock(),
            "aw-run: summary:\n{}",
            super::live::summary_table(&rows)
        );
    } else {
        let parts: Vec<String> = st
            .agents
            .iter()
            .map(|(n, a)| {
                let mut line = format!(
                    "{n} {} run(s) {} failure(s) {:.2} s",
                    a.total,
                    a.failures,
                    a.busy.as_secs_f64()
                );
                if a.usage.tokens() > 0 {
                    line.push_str(&format!(" {} tokens", a.usage.tokens()));
                }
                if let Some(c) = a.usage.cost_usd {
                    line.push_str(&format!(" {}", super::live::money(c)));
                }
                line
            })
            .collect();
        let mut all = String::new();
        if total.tokens() > 0 || total.cost_usd.is_some() {
            all = format!("; total {} tokens", total.tokens());
            if let Some(c) = total.cost_usd {
                all.push_str(&format!(" {}", super::live::money(c)));
            }
        }
        let _ = writeln!(
            std::io::stderr().lock(),
            "aw-run: summary: {}{all}",
            parts.join(", ")
        );
    }
}
