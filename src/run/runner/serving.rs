//! What the controllers of one server have in common, and how a controller is built for an
//! agent it serves: its MCP configuration, its record under `_state/serve/`, its defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::backends::registered_backend;
use super::options::Options;
use super::trust::Trusted;
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::models::Pricing;
use crate::process::sibling;
use crate::registry::Agent;
use crate::run::backend::Backend;
use crate::run::controller::Controller;
use crate::serve::{self, ControllerState, Served};
use crate::transcript::next_transcript;
use crate::worktree::Spec;

/// What the controllers of one server have in common.
pub(super) struct Serving {
    pub(super) inst: Instance,
    pub(super) root: PathBuf,
    pub(super) document: Option<String>,
    pub(super) workflow: Option<String>,
    pub(super) started: String,
    pub(super) opts: Options,
    /// Prices of models: the workflow's `pricing:` over the built-in table.
    pub(super) pricing: Pricing,
    /// The agents served from the start, as a trusted source defines them.
    pub(super) trusted: BTreeMap<String, Trusted>,
    /// Workers refused at the start (and said so).
    pub(super) refused: std::collections::BTreeSet<String>,
    /// Workers served here whose spawner another aw-run served when this one started,
    /// with that spawner: each is served only as long as its spawner is.
    pub(super) tethers: Vec<(String, String)>,
    /// The caps a detached server started for a worker is given.
    pub(super) caps: serve::Caps,
    /// The folder of the agents' MCP configurations, made, and the `aw-mcp` they run: the
    /// same for every agent, found once.
    pub(super) mcp: std::sync::OnceLock<(PathBuf, PathBuf)>,
    /// It serves the merge queue of the instance (the workflow has a `merge:` key).
    pub(super) merges: bool,
    /// The workflow's lifecycle hooks, and the directory they run from.
    pub(super) hooks: crate::lifecycle::Hooks,
    pub(super) hooks_dir: PathBuf,
}

impl Serving {
    /// Write the agent's MCP configuration (`aw-mcp --agent NAME@INSTANCE` and `tool_args`)
    /// and build its controller, with the server's defaults.
    pub(super) fn controller(
        &self,
        name: &str,
        backend: Box<dyn Backend>,
        tool_args: &[String],
    ) -> Result<Controller> {
        let inst = &self.inst;
        let (mcp_dir, aw_mcp) = match self.mcp.get() {
            Some(found) => found,
            None => {
                // Absolute: an exec agent with its own cwd gets it in AW_MCP_CONFIG.
                let d = std::path::absolute(inst.state_dir().join("mcp"))
                    .map_err(|e| Error::io(inst.state_dir(), e))?;
                // Private, whatever the umask: a configuration may hold what an agent's
                // tools need.
                crate::fs::private_dir(&d)?;
                self.mcp.get_or_init(|| (d, sibling("aw-mcp")))
            }
        };
        // Written before every attempt, not here: a server of many agents starts without a
        // file written for each.
        let mcp_path = mcp_dir.join(format!("{name}.json"));
        let mcp_text = crate::tools::client_config::claude_json(
            aw_mcp,
            &self.root,
            &format!("{name}@{}", inst.name()),
            tool_args,
        );
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
            secrets: crate::run::controller::secrets(&[]),
            budget: Default::default(),
            price: None,
            task_context: None,
            stop: Default::default(),
            serving_lock: None,
            board: false,
            needs: None,
            worktree: None,
            session: None,
        })
    }

    /// The controller of an agent of the registry (`aw-ctl new`, or a worker), in the
    /// worktree `worktree` when it works in one.
    pub(super) fn registered(&self, a: &Agent, worktree: Option<Spec>) -> Result<Controller> {
        let place = worktree
            .as_ref()
            .map(|w| (w.path.clone(), worktree_env(w).to_vec()));
        let backend = registered_backend(a, &self.root, self.inst.name(), place)?;
        let tool_args = crate::tools::client_config::tool_args(a.collab, a.delegate);
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
        c.worktree = worktree;
        Ok(c)
    }
}

/// The worktree of `agent` of `inst` in the repository of the current folder, made now.
pub(super) fn worktree_of(inst: &Instance, agent: &str) -> Result<Spec> {
    let here = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    let w = Spec::new(inst, &here, agent)?;
    w.ensure()
        .map_err(|e| Error::Unavailable(format!("{agent}: cannot make its worktree: {e}")))?;
    Ok(w)
}

/// What the backend of an agent in the worktree `w` has in its environment.
pub(super) fn worktree_env(w: &Spec) -> [(String, String); 2] {
    [
        ("AW_WORKTREE".into(), w.path.to_string_lossy().into_owned()),
        ("AW_BRANCH".into(), w.branch.clone()),
    ]
}
