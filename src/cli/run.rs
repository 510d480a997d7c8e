//! `aw-run`: run a workflow file, or serve registered agents.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::run_detach;
use crate::cli::flags;
pub use crate::cli::run_flags::{FLAGS, help, tool};
use crate::cli::{self, Common, Out};
use crate::error::{Error, Result, exit};
use crate::instance::{Instance, Root};
use crate::run::controller::Retry;
use crate::run::runner::{self, Options};
use crate::run::workflow::{Context, Workflow};
use crate::run::{LoadError, Vars, iter, workflow};

#[derive(Debug)]
struct Args {
    common: Common,
    check: bool,
    detach: bool,
    /// Create an instance named by -i or AW_INSTANCE even when one with a near name exists.
    create: bool,
    serve: bool,
    /// The workflow file, or with `--serve` the agents.
    positional: Vec<OsString>,
    vars: Vec<String>,
    opts: Options,
    iter: Option<iter::Limit>,
    agent: Option<String>,
    resume: bool,
}

use cli::duration;

/// What the command line asks for.
enum Parsed {
    Help,
    Version,
    Generate(String),
    Run(Box<Args>),
}

fn parse() -> Result<Parsed> {
    use lexopt::prelude::*;
    let mut a = Args {
        common: Common::default(),
        check: false,
        detach: false,
        create: false,
        serve: false,
        positional: Vec::new(),
        vars: Vec::new(),
        iter: None,
        agent: None,
        resume: false,
        opts: Options {
            poll: None,
            max_runs: 50,
            timeout: None,
            retry: Retry {
                attempts: 3,
                backoff: Duration::from_secs(1),
            },
            cooldown: Duration::from_secs(60),
            budget: Default::default(),
            rate: Some(crate::run::controller::DEFAULT_RATE),
            pair: Some(crate::run::controller::DEFAULT_PAIR),
            keep: false,
            quiet: false,
            json: false,
            ready: None,
            iter: None,
            label: None,
        },
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next().map_err(cli::lex_err)? {
        if let Some(k) = Common::key(&arg) {
            a.common.set(k, &mut p)?;
            continue;
        }
        if let Value(v) = arg {
            if !(a.serve || a.positional.is_empty()) {
                return Err(cli::unexpected(Value(v), FLAGS));
            }
            a.positional.push(v);
            continue;
        }
        let Some(f) = flags::find(FLAGS, &arg) else {
            return Err(cli::unexpected(arg, FLAGS));
        };
        match f.long {
            "check" => a.check = true,
            "var" => a.vars.push(cli::string(&mut p, "--var")?),
            "keep" => a.opts.keep = true,
            "create" => a.create = true,
            "detach" => a.detach = true,
            "serve" => a.serve = true,
            "iter" => {
                let v = cli::string(&mut p, "--iter")?;
                a.iter = Some(
                    iter::Limit::parse(&v).map_err(|why| Error::Usage(format!("--iter {why}")))?,
                );
            }
            "agent" => {
                let name = cli::string(&mut p, "--agent")?;
                crate::names::check_agent(&name)?;
                a.agent = Some(name);
            }
            "resume" => a.resume = true,
            // Kept for the scripts that pass it: checked, then ignored.
            "debounce" => {
                duration(&mut p, "--debounce")?;
            }
            "poll" => {
                let secs: f64 = cli::number(&mut p, "--poll")?;
                if !(secs > 0.0 && secs <= 3600.0) {
                    return Err(Error::Usage("--poll: expected seconds in (0, 3600]".into()));
                }
                a.opts.poll = Some(Duration::from_secs_f64(secs));
            }
            "max-runs" => {
                a.opts.max_runs = cli::number(&mut p, "--max-runs")?;
                if a.opts.max_runs == 0 {
                    return Err(Error::Usage("--max-runs: must be at least 1".into()));
                }
            }
            "max-rate" => {
                let v = cli::string(&mut p, "--max-rate")?;
                a.opts.rate = crate::run::controller::Rate::parse(&v)
                    .map_err(|why| Error::Usage(format!("--max-rate '{v}': {why}")))?;
            }
            "max-pair" => {
                let v = cli::string(&mut p, "--max-pair")?;
                a.opts.pair = crate::run::controller::Rate::parse(&v)
                    .map_err(|why| Error::Usage(format!("--max-pair '{v}': {why}")))?;
            }
            "timeout" => a.opts.timeout = Some(duration(&mut p, "--timeout")?),
            "retries" => {
                a.opts.retry.attempts = cli::number(&mut p, "--retries")?;
                if a.opts.retry.attempts == 0 {
                    return Err(Error::Usage("--retries: must be at least 1".into()));
                }
            }
            "backoff" => a.opts.retry.backoff = duration(&mut p, "--backoff")?,
            "cooldown" => a.opts.cooldown = duration(&mut p, "--cooldown")?,
            "budget-usd" => {
                let usd: f64 = cli::number(&mut p, "--budget-usd")?;
                if !(usd.is_finite() && usd > 0.0) {
                    return Err(Error::Usage(
                        "--budget-usd: expected dollars above 0".into(),
                    ));
                }
                a.opts.budget.usd = Some(usd);
            }
            "budget-tokens" => {
                let n: u64 = cli::number(&mut p, "--budget-tokens")?;
                if n == 0 {
                    return Err(Error::Usage(
                        "--budget-tokens: expected a whole number of tokens above 0".into(),
                    ));
                }
                a.opts.budget.tokens = Some(n);
            }
            "quiet" => a.opts.quiet = true,
            "json" => a.opts.json = true,
            "help" => return Ok(Parsed::Help),
            "version" => return Ok(Parsed::Version),
            "generate" => return Ok(Parsed::Generate(cli::string(&mut p, "--generate")?)),
            other => panic!("aw-run: --{other} is in the table of flags but not parsed"),
        }
    }
    if a.serve && a.check {
        return Err(Error::Usage(
            "--serve and --check do not go together".into(),
        ));
    }
    if a.iter.is_none() && (a.agent.is_some() || a.resume) {
        let flag = if a.resume { "--resume" } else { "--agent" };
        return Err(Error::Usage(format!("{flag} needs --iter")));
    }
    if a.serve && a.iter.is_some() {
        return Err(Error::Usage("--serve and --iter do not go together".into()));
    }
    if !a.serve && a.positional.is_empty() {
        return Err(Error::Usage("no workflow FILE given".into()));
    }
    if !a.serve && a.common.instances_given.len() > 1 {
        return Err(Error::Usage(format!(
            "-i is given more than once ({}): a workflow runs on one instance (aw-run --serve \
             serves several)",
            a.common.instances_given.join(", ")
        )));
    }
    if a.serve && a.common.instances_given.len() > 1 && !a.positional.is_empty() {
        return Err(Error::Usage(
            "-i is given more than once with named AGENTs: name each as AGENT@INSTANCE \
             (several -i without AGENT serve every runnable agent of each)"
                .into(),
        ));
    }
    if a.serve && !a.vars.is_empty() {
        return Err(Error::Usage(
            "--var needs a workflow file, not --serve".into(),
        ));
    }
    Ok(Parsed::Run(Box::new(a)))
}

/// aw-run's main: the guard that a run starts (it takes no arguments), else a run.
pub fn main() -> std::process::ExitCode {
    // Before the arguments: the guard takes none.
    if crate::run::guard::is_guard() {
        return crate::run::guard::serve();
    }
    cli::main("aw-run", run)
}

pub fn run(out: &mut Out) -> Result<u8> {
    let mut a = match parse()? {
        Parsed::Help => return cli::print_help(out, &help()),
        Parsed::Generate(kind) => {
            out.exact();
            out.raw(crate::cli::complete::generate(&tool(), &kind)?.as_bytes())?;
            return Ok(0);
        }
        Parsed::Version => return cli::print_version(out, "aw-run"),
        Parsed::Run(a) => *a,
    };
    if a.opts.json {
        out.exact();
    }
    if a.detach && !a.check {
        // The server in the background reads and checks all the rest.
        return run_detach::detach(out);
    }
    crate::process::one_allocation_pool();
    a.opts.ready = run_detach::ready_pipe()?;
    // The server `--detach` started (its command line has no `--detach`).
    let detached = a.opts.ready.clone();
    if a.serve {
        let root = a.common.root()?;
        let groups = serve_groups(&a)?
            .into_iter()
            .map(|(i, agents)| Ok((root.instance(&i)?, agents)))
            .collect::<Result<Vec<_>>>()?;
        if let Some(ready) = &detached {
            for (inst, _) in &groups {
                runner::check_serve_instance(inst)?;
            }
            // The log of the first instance named.
            run_detach::to_log(&groups[0].0, ready)?;
        }
        start_guard();
        out.flush()?;
        if let [(inst, agents)] = &groups[..] {
            return runner::serve(inst, root.path(), agents, &a.opts);
        }
        return runner::serve_several(root.path(), &groups, &a.opts);
    }
    let file = PathBuf::from(&a.positional[0]);
    let mut vars = Vars::from_process_env();
    for def in &a.vars {
        vars.define(def)?;
    }
    if a.check {
        let iter = a.iter.is_some().then_some(a.agent.as_deref());
        return check(out, &file, &vars, iter, a.opts.json);
    }
    let (mut wf, warnings) = match workflow::load(&file, &vars) {
        Ok(w) => w,
        Err(LoadError::Read(e)) => return Err(e),
        Err(e @ LoadError::Invalid(_)) => {
            eprintln!("{e}");
            return Ok(e.exit_code());
        }
    };
    for w in &warnings {
        eprintln!("{}", w.render());
    }
    let agent = match a.iter {
        Some(_) => Some(iter::choose(&mut wf, &file, a.agent.as_deref())?),
        None => None,
    };
    let missing = runner::environment(&wf, &vars);
    if let Some((_, first)) = missing.first() {
        let code = first.exit_code();
        for (_, e) in &missing {
            crate::warn::report("aw-run", e);
        }
        return Ok(code);
    }
    // The command line's limits win over the file's.
    a.opts.budget = a.opts.budget.or(wf.budget);
    if matches!(wf.context, Context::Memory { .. }) {
        if detached.is_some() {
            return Err(Error::Usage(
                "--detach cannot keep a memory context (it is removed when aw-run exits)".into(),
            ));
        }
        let tmp = TempRoot::new()?;
        let inst = Root::new(tmp.0.clone()).instance(&instance_name(&a, &wf))?;
        a.opts.iter = plan(&a, &wf, agent, &tmp.0)?;
        start_guard();
        out.flush()?;
        return runner::run(wf, &inst, &tmp.0, vars, &a.opts);
    }
    let (root, inst) = place(&a, &wf, &vars)?;
    // An instance named on purpose (-i, AW_INSTANCE) next to one with a near name is
    // likely a typo: refused unless --create says the new one is meant.
    if a.common.instance.is_some() || std::env::var("AW_INSTANCE").is_ok_and(|v| !v.is_empty()) {
        inst.check_new(a.create)?;
    }
    a.opts.iter = plan(&a, &wf, agent, root.path())?;
    if let Some(ready) = &detached {
        crate::warn::noting_created("aw-run", root.path(), || inst.create())?;
        run_detach::to_log(&inst, ready)?;
    }
    start_guard();
    out.flush()?;
    runner::run(wf, &inst, root.path(), vars, &a.opts)
}

/// Which agents of which instances `--serve` serves, by instance in the order first named:
/// `AGENT@INSTANCE` in that instance, a bare `AGENT` in the instance of `-i` (given once at
/// most, checked by [`parse`]), `AW_INSTANCE` or `default`; with no AGENT, every runnable
/// agent (an empty list) of each instance of `-i`, or of that one instance.
fn serve_groups(a: &Args) -> Result<Vec<(String, Vec<String>)>> {
    let here = crate::instance::instance_name(a.common.instance.as_deref());
    if a.positional.is_empty() {
        if a.common.instances_given.len() > 1 {
            return Ok(a
                .common
                .instances_given
                .iter()
                .map(|i| (i.clone(), Vec::new()))
                .collect());
        }
        return Ok(vec![(here, Vec::new())]);
    }
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for p in &a.positional {
        let (name, inst) = crate::names::parse_agent_address(&p.to_string_lossy())?;
        let inst = inst.unwrap_or_else(|| here.clone());
        match groups.iter_mut().find(|(i, _)| *i == inst) {
            // Named twice: served once.
            Some((_, agents)) if agents.contains(&name) => {}
            Some((_, agents)) => agents.push(name),
            None => groups.push((inst, vec![name])),
        }
    }
    Ok(groups)
}

/// `aw-run --check`: every phase of the check in one pass (the file, then what its agents
/// need from this machine), every problem printed as `FILE:LINE:COL: what`. The exit code:
/// 0, 65 when the file has errors, else that of the first problem of the machine. With
/// `--iter` (`iter` holds its `--agent`), the agent it would iterate is chosen as a run
/// chooses it, and only that agent's needs are checked. With `json`, each problem is a
/// JSON line on stdout instead (see [`problem_json`]).
fn check(
    out: &mut Out,
    file: &Path,
    vars: &Vars,
    iter: Option<Option<&str>>,
    json: bool,
) -> Result<u8> {
    let (mut wf, mut found) = match workflow::load_for_check(file, vars) {
        Ok(w) => w,
        Err(LoadError::Read(e)) => return Err(e),
        Err(LoadError::Invalid(list)) => {
            report_problems(out, &list, json)?;
            return Ok(exit::DATAERR);
        }
    };
    let mut code = if found.iter().any(|d| !d.warning) {
        exit::DATAERR
    } else {
        0
    };
    // As a run would: only the agent iterated is needed.
    let mut refused = None;
    if let (0, Some(wf), Some(agent)) = (code, wf.as_mut(), iter) {
        refused = iter::choose(wf, file, agent).err();
    }
    if let (None, Some(wf)) = (&refused, &wf) {
        let missing = runner::environment(wf, vars);
        if let (0, Some((_, e))) = (code, missing.first()) {
            code = e.exit_code();
        }
        found.extend(
            missing
                .iter()
                .map(|(pos, e)| environment_problem(file, *pos, e)),
        );
        found.extend(
            runner::environment_warnings(wf, vars)
                .into_iter()
                .map(|(pos, message)| workflow::Diagnostic {
                    file: file.to_path_buf(),
                    pos,
                    message,
                    warning: true,
                }),
        );
    }
    crate::run::diagnostic::sort(&mut found, file);
    report_problems(out, &found, json)?;
    refused.map_or(Ok(code), Err)
}

/// The problems a check found: `FILE:LINE:COL: what` lines on stderr, or with `json` one
/// [`problem_json`] line each on stdout.
fn report_problems(out: &mut Out, list: &[workflow::Diagnostic], json: bool) -> Result<()> {
    for d in list {
        if json {
            out.line(&problem_json(d).to_string())?;
        } else {
            eprintln!("{}", d.render());
        }
    }
    out.flush()
}

/// `{"event":"problem","file":F,"line":L,"col":C,"severity":"error"|"warning","message":M}`.
fn problem_json(d: &workflow::Diagnostic) -> serde_json::Value {
    serde_json::json!({
        "event": "problem",
        "file": d.file.display().to_string(),
        "line": d.pos.line,
        "col": d.pos.col,
        "severity": if d.warning { "warning" } else { "error" },
        "message": d.message,
    })
}

/// A problem of what an agent needs from the machine, as a check reports it.
fn environment_problem(file: &Path, pos: workflow::Pos, e: &Error) -> workflow::Diagnostic {
    workflow::Diagnostic {
        file: file.to_path_buf(),
        pos,
        message: e.to_string(),
        warning: false,
    }
}

/// Start the guard that kills the backends' process groups if this process dies, even by
/// SIGKILL. Without it, only the backend programs themselves die with aw-run.
fn start_guard() {
    if let Err(e) = crate::run::guard::start() {
        crate::warn::warn(
            "aw-run",
            format!(
                "cannot start the guard process ({e}): what backends start may outlive a killed aw-run"
            ),
        );
    }
}

/// The iterations `--iter` asks for, once the git work tree (the agent's `cwd`, else the
/// current folder) is known to have nothing staged. Outside a work tree they run without
/// commits, as a warning says.
fn plan(a: &Args, wf: &Workflow, agent: Option<String>, root: &Path) -> Result<Option<iter::Plan>> {
    let (Some(limit), Some(agent)) = (a.iter, agent) else {
        return Ok(None);
    };
    let dir = match wf.agent(&agent).and_then(|d| d.cwd.as_ref()) {
        Some(c) => c.value.clone(),
        None => PathBuf::from("."),
    };
    let repo = iter::git::Repo::find(&dir, root);
    match &repo {
        Some(r) => r.check_index()?,
        None => crate::warn::warn(
            "aw-run",
            format!(
                "{}: not in a git work tree: the iterations make no commits",
                std::path::absolute(&dir).unwrap_or(dir).display()
            ),
        ),
    }
    Ok(Some(iter::Plan {
        agent,
        limit,
        resume: a.resume,
        repo,
        document: None,
        json: a.opts.json,
        quiet: a.opts.quiet,
        context: Default::default(),
        // Known once the agent's environment is (aw-run sets them).
        secrets: Vec::new(),
    }))
}

/// The instance name: `-i`, else `AW_INSTANCE`, else the workflow's name.
fn instance_name(a: &Args, wf: &Workflow) -> String {
    match &a.common.instance {
        Some(i) => i.clone(),
        None => match std::env::var("AW_INSTANCE") {
            Ok(v) if !v.is_empty() => v,
            _ => wf.name.value.clone(),
        },
    }
}

/// Where the workflow runs. `context.config.dir` names the instance directory itself (its
/// parent is the root, its name the instance), unless `--root` or `-i` say otherwise.
fn place(a: &Args, wf: &Workflow, vars: &Vars) -> Result<(Root, Instance)> {
    let dir = match &wf.context {
        Context::File { config, .. } if a.common.root.is_none() && a.common.instance.is_none() => {
            config.dir.as_ref()
        }
        _ => None,
    };
    let Some(dir) = dir else {
        let root = a.common.root()?;
        let inst = root.instance(&instance_name(a, wf))?;
        return Ok((root, inst));
    };
    let mut vars = vars.clone();
    vars.set("workflow.name", wf.name.value.as_str());
    let text = dir.value.render(&vars)?;
    let path = std::path::absolute(Path::new(&text)).map_err(|e| Error::io(&text, e))?;
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(Error::invalid(format!(
            "context.config.dir '{text}': not a directory name"
        )));
    };
    let root = Root::new(parent);
    let inst = root.instance(&name.to_string_lossy())?;
    Ok((root, inst))
}

/// A throw-away root for `provider: memory`, removed when dropped.
struct TempRoot(PathBuf);

impl TempRoot {
    fn new() -> Result<TempRoot> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!("aw-run.{}.{nanos}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map(|()| TempRoot(path.clone()))
            .map_err(|e| Error::create(&path, e))
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
