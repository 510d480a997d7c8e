//! What the agents of a workflow need from this machine, checked before anything is
//! written: CLI programs in `PATH`, API keys, exec programs, the file tools' folder.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;

use super::backends::{exec_argv, unavailable};
use crate::error::{Error, Result};
use crate::run::backend::{anthropic, openai};
use crate::run::interpolate::Vars;
use crate::run::workflow::{BackendKind, Workflow};
use crate::spawn::{find_in, find_program, is_executable, missing_program, program_of};
use crate::tools::files::FileTool;

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
pub fn environment(wf: &Workflow, vars: &Vars) -> Vec<(crate::run::workflow::Pos, Error)> {
    let mut found = Vec::new();
    let mut programs = Programs::default();
    // An agent whose backend could not be read has a stand-in: its error says enough.
    for def in wf.agents.iter().filter(|d| d.backend_read) {
        let name = &def.name.value;
        let at = def.backend.pos;
        match def.backend.value {
            BackendKind::Mock => {}
            // A setup or shell task may make the program: then it is checked when it runs.
            BackendKind::Exec if makes_files(wf) => {}
            BackendKind::Exec => {
                if let Some(e) = exec_program(wf, def, vars, &mut programs) {
                    let pos = def
                        .command
                        .as_ref()
                        .and_then(|c| c.first())
                        .map_or(at, |c| c.pos);
                    found.push((pos, e));
                }
            }
            BackendKind::Claude | BackendKind::Codex => {
                let program = program_of(def.backend.value);
                if find_program(program).is_none() {
                    found.push((at, missing_program(name, def.backend.value)));
                }
            }
            BackendKind::Anthropic | BackendKind::Openai => {
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
                let key = if def.backend.value == BackendKind::Anthropic {
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
    found.extend(isolation(wf));
    found
}

/// `isolation: worktree` outside a git work tree (66), or without git (69): once, at the
/// first text that asks for it.
fn isolation(wf: &Workflow) -> Option<(crate::run::workflow::Pos, Error)> {
    let at = wf.agents.iter().find_map(|d| wf.isolated(d))?.pos;
    let here = std::env::current_dir().ok()?;
    let e = crate::worktree::top_of(&here).err()?;
    let e = match e {
        Error::NotFound(why) => Error::NotFound(format!("isolation: worktree: {why}")),
        Error::Unavailable(why) => Error::Unavailable(format!("isolation: worktree: {why}")),
        other => other,
    };
    Some((at, e))
}

/// What may be missing but need not be, for `--check`: an exec agent's program that is not
/// there (or cannot be run) in a workflow whose setup or shell tasks may make it, as a
/// warning at the command.
pub fn environment_warnings(
    wf: &Workflow,
    vars: &Vars,
) -> Vec<(crate::run::workflow::Pos, String)> {
    if !makes_files(wf) {
        return Vec::new();
    }
    let mut programs = Programs::default();
    wf.agents
        .iter()
        .filter(|d| d.backend_read && d.backend.value == BackendKind::Exec)
        .filter_map(|def| {
            let (program, why) = program_problem(wf, def, vars, &mut programs)?;
            let pos = def.command.as_ref().and_then(|c| c.first())?.pos;
            let what = match why {
                Missing::NoFile => "does not exist",
                Missing::NotExecutable => "is not an executable file",
                Missing::NotInPath => "is not in PATH",
            };
            let msg = format!(
                "{}: command '{program}' {what} (a setup or shell task may create it)",
                def.name.value
            );
            Some((pos, msg))
        })
        .collect()
}

/// Does the workflow run commands of its own (setup, shell tasks) before or beside its
/// agents, which may make or remove an exec agent's program?
fn makes_files(wf: &Workflow) -> bool {
    fn shell(t: &crate::run::workflow::Task) -> bool {
        match &t.kind {
            crate::run::workflow::TaskKind::Shell(_) => true,
            crate::run::workflow::TaskKind::Parallel(ts) => ts.iter().any(shell),
            crate::run::workflow::TaskKind::Send { .. } => false,
        }
    }
    !wf.setup.is_empty() || wf.tasks.iter().any(shell)
}

/// Why an exec agent's program cannot be started.
#[derive(Clone, Copy)]
enum Missing {
    /// A path that is no file.
    NoFile,
    NotExecutable,
    /// A bare name not found in `PATH`.
    NotInPath,
}

/// Why an exec agent's program cannot be started, if it cannot: a path (relative to the
/// workflow's directory) that is not an executable file, or a bare name not found in `PATH`
/// (the agent's own `PATH` when its `env` sets one). `None` too when it depends on a setup
/// output.
fn exec_program(
    wf: &Workflow,
    def: &crate::run::workflow::AgentDef,
    vars: &Vars,
    programs: &mut Programs,
) -> Option<Error> {
    let (program, why) = program_problem(wf, def, vars, programs)?;
    let what = match why {
        Missing::NoFile => "no such program",
        Missing::NotExecutable => "not an executable file",
        Missing::NotInPath => "no such program in PATH",
    };
    Some(Error::Unavailable(format!(
        "{}: command '{program}': {what}",
        def.name.value
    )))
}

/// What one check of a workflow found of its exec agents' programs, by program and the
/// `PATH` it was looked up in (none for a path): a workflow of many agents that run one
/// program looks it up once.
#[derive(Default)]
struct Programs(HashMap<(String, Option<OsString>), Option<Missing>>);

/// The program of an exec agent and why it cannot be started, if it cannot (see
/// [`exec_program`]).
fn program_problem(
    wf: &Workflow,
    def: &crate::run::workflow::AgentDef,
    vars: &Vars,
    programs: &mut Programs,
) -> Option<(String, Missing)> {
    let argv = exec_argv(wf, def, vars).ok()?;
    let program = argv.into_iter().next()?;
    let path = match program.contains('/') {
        true => None,
        false => Some(match def.env.iter().find(|(k, _)| k.value == "PATH") {
            Some((_, v)) => v.value.render(vars).ok()?.into(),
            None => std::env::var_os("PATH").unwrap_or_default(),
        }),
    };
    let key = (program, path);
    let why = match programs.0.get(&key) {
        Some(why) => *why,
        None => {
            let why = match &key.1 {
                None => match std::fs::metadata(&key.0) {
                    Err(_) => Some(Missing::NoFile),
                    Ok(m) if !is_executable(&m) => Some(Missing::NotExecutable),
                    Ok(_) => None,
                },
                Some(path) => find_in(&key.0, path)
                    .is_none()
                    .then_some(Missing::NotInPath),
            };
            programs.0.insert(key.clone(), why);
            why
        }
    };
    why.map(|why| (key.0, why))
}
