//! Building what runs an agent: the backend of a workflow's agent from its definition, and
//! that of a registered agent (`aw-ctl new`, a worker) from its registry entry.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::process::sibling;
use crate::registry::Agent;
use crate::run::backend::Backend;
use crate::run::backend::claude::Claude;
use crate::run::backend::codex::Codex;
use crate::run::backend::exec::{CLI_IDLE_TIMEOUT, Exec};
use crate::run::backend::mock::Mock;
use crate::run::backend::{anthropic, openai};
use crate::run::interpolate::Vars;
use crate::run::workflow::{BackendKind, Workflow};
use crate::spawn::{CLAUDE, CODEX, runnable};
use crate::tools::files::FileTool;

/// Build the backend of one agent, working in `cwd` (its own `cwd`, or in its worktree);
/// an exec agent runs `command` ([`exec_argv`]).
pub(super) fn backend(
    def: &crate::run::workflow::AgentDef,
    vars: &Vars,
    command: Arc<[String]>,
    env: Vec<(String, String)>,
    root: &Path,
    instance: &str,
    cwd: Option<PathBuf>,
) -> Result<Box<dyn Backend>> {
    let name = def.name.value.as_str();
    let idle = def.idle_timeout.as_ref().map(|t| t.value);
    match def.backend.value {
        BackendKind::Mock => Ok(Box::new(Mock::new(def.mock.clone().unwrap_or_default()))),
        BackendKind::Exec => Ok(Box::new(Exec {
            argv: command,
            env,
            cwd: cwd.clone(),
            idle_timeout: idle,
        })),
        BackendKind::Claude => Ok(Box::new(Claude {
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
            cwd: cwd.clone(),
            delegate: def.delegate,
        })),
        BackendKind::Codex => Ok(Box::new(Codex {
            program: CODEX.to_string(),
            model: def.model_name().map(str::to_string),
            mcp_keys: crate::tools::client_config::codex_keys(
                &sibling("aw-mcp"),
                root,
                &format!("{name}@{instance}"),
                &crate::tools::client_config::tool_args(def.collab, def.delegate),
            ),
            idle_timeout: idle.unwrap_or(CLI_IDLE_TIMEOUT),
            env,
            cwd: cwd.clone(),
            delegate: def.delegate,
        })),
        BackendKind::Anthropic | BackendKind::Openai => {
            let settings = crate::run::backend::api::Settings {
                model: def.model_name().unwrap_or_default().to_string(),
                system: def
                    .system_prompt
                    .as_ref()
                    .map(|s| s.template.value.render(vars))
                    .transpose()?,
                max_tokens: def.max_tokens.as_ref().map(|m| m.value),
                max_steps: def.max_steps.as_ref().map(|m| m.value),
                env: &env,
                read_timeout: idle.unwrap_or(crate::run::backend::api::DEFAULT_READ_TIMEOUT),
                files: def
                    .tools
                    .iter()
                    .filter_map(|t| FileTool::from_name(&t.value))
                    .collect(),
                cwd: match cwd {
                    Some(c) => c,
                    None => std::env::current_dir().map_err(|e| Error::io(Path::new("."), e))?,
                },
                aw_root: root.to_path_buf(),
                instance_dir: root.join(instance),
                toolset: crate::tools::Toolset {
                    collab: def.collab,
                    delegate: def.delegate,
                },
                approve: def.approve_tools.as_ref().map(|g| g.value.clone()),
            };
            let built: std::result::Result<Box<dyn Backend>, String> =
                if def.backend.value == BackendKind::Anthropic {
                    anthropic::backend(settings).map(|b| Box::new(b) as Box<dyn Backend>)
                } else {
                    openai::backend(settings).map(|b| Box::new(b) as Box<dyn Backend>)
                };
            built.map_err(|why| Error::Unavailable(format!("{name}: {why}")))
        }
        other => Err(unavailable(name, other)),
    }
}

/// The argument vector of an exec agent, rendered, a relative program path resolved against
/// the workflow's folder.
pub(super) fn exec_argv(
    wf: &Workflow,
    def: &crate::run::workflow::AgentDef,
    vars: &Vars,
) -> Result<Vec<String>> {
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

/// `argv` as the agents of a server hold it: the one `seen` already has when another agent
/// runs the same command (10,000 agents of one `command` hold it once, not 20,000 times).
pub(super) fn share(seen: &mut HashSet<Arc<[String]>>, argv: Vec<String>) -> Arc<[String]> {
    if let Some(shared) = seen.get(&argv[..]) {
        return shared.clone();
    }
    let shared: Arc<[String]> = argv.into();
    seen.insert(shared.clone());
    shared
}

pub(super) fn unavailable(agent: &str, backend: BackendKind) -> Error {
    Error::Unavailable(format!(
        "{agent}: the {} backend is not available in this version (use claude, codex, exec or mock)",
        backend.name()
    ))
}

/// The backend of a registered agent: what its registry entry says, with the defaults of
/// a workflow file for the rest (credentials from the environment).
/// With `place`, it works in a worktree: that folder, with that environment.
pub(super) fn registered_backend(
    a: &Agent,
    root: &Path,
    instance: &str,
    place: Option<(PathBuf, Vec<(String, String)>)>,
) -> Result<Box<dyn Backend>> {
    let (cwd, env) = match place {
        Some((cwd, env)) => (Some(cwd), env),
        None => (None, Vec::new()),
    };
    runnable(a)?;
    let toolset = crate::tools::Toolset {
        collab: a.collab,
        delegate: a.delegate,
    };
    let max_steps = a.limits.get("max_steps").and_then(|v| v.as_u64());
    let backend: Box<dyn Backend> = match a.backend.as_str() {
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
            env: env.clone(),
            cwd: cwd.clone(),
            delegate: a.delegate,
        }),
        "codex" => Box::new(Codex {
            program: CODEX.to_string(),
            model: a
                .model
                .as_ref()
                .map(|m| m.strip_prefix("openai/").unwrap_or(m).to_string()),
            mcp_keys: crate::tools::client_config::codex_keys(
                &sibling("aw-mcp"),
                root,
                &format!("{}@{instance}", a.name),
                &crate::tools::client_config::tool_args(a.collab, a.delegate),
            ),
            idle_timeout: CLI_IDLE_TIMEOUT,
            env: env.clone(),
            cwd: cwd.clone(),
            delegate: a.delegate,
        }),
        kind @ ("anthropic" | "openai") => {
            let model = a.model.clone().unwrap_or_default();
            let prefix = format!("{kind}/");
            let model = model.strip_prefix(&prefix).unwrap_or(&model);
            let model = crate::models::find(model).map_or(model.to_string(), |m| m.id.to_string());
            let settings = crate::run::backend::api::Settings {
                model,
                system: a.system_prompt.clone(),
                max_tokens: a.limits.get("max_tokens").and_then(|v| v.as_u64()),
                max_steps,
                env: &env,
                read_timeout: crate::run::backend::api::DEFAULT_READ_TIMEOUT,
                files: Vec::new(),
                cwd: match cwd {
                    Some(c) => c,
                    None => std::env::current_dir().map_err(|e| Error::io(Path::new("."), e))?,
                },
                aw_root: root.to_path_buf(),
                instance_dir: root.join(instance),
                toolset,
                approve: None,
            };
            let built: std::result::Result<Box<dyn Backend>, String> = if kind == "anthropic" {
                anthropic::backend(settings).map(|b| Box::new(b) as Box<dyn Backend>)
            } else {
                openai::backend(settings).map(|b| Box::new(b) as Box<dyn Backend>)
            };
            built.map_err(|why| Error::Unavailable(format!("{}: {why}", a.name)))?
        }
        _ => Box::new(Exec {
            argv: a.command.as_slice().into(),
            env: env.clone(),
            cwd: cwd.clone(),
            idle_timeout: None,
        }),
    };
    Ok(backend)
}
