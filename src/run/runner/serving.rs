//! What the controllers of one server have in common, and how a controller is built for an
//! agent it serves: its MCP configuration, its record under `_state/serve/`, its defaults.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
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
use crate::run::controller::{Controller, Mcp};
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
    /// What every controller of this server shares, made with the first one.
    pub(super) common: std::sync::OnceLock<Common>,
    /// It serves the merge queue of the instance (the workflow has a `merge:` key).
    pub(super) merges: bool,
    /// The workflow's lifecycle hooks, and the directory they run from.
    pub(super) hooks: crate::lifecycle::Hooks,
    pub(super) hooks_dir: PathBuf,
}

/// What every controller of one server shares, held once (see [`Controller`]).
pub(super) struct Common {
    pub(super) inst: Arc<Instance>,
    pub(super) document: Option<Arc<str>>,
    pub(super) mcp: Arc<Mcp>,
    /// The server's part of each controller's record.
    pub(super) record: Arc<Served>,
    /// The secrets of aw-run's own environment.
    pub(super) secrets: Arc<[String]>,
}

impl Serving {
    /// Build the controller of `name` with the server's defaults, not yet shown as served
    /// ([`Serving::show_served`]). Its MCP configuration is written before each attempt,
    /// not here: a server of many agents starts without a file written for each.
    pub(super) fn controller(
        &self,
        name: &str,
        backend: Box<dyn Backend>,
        tool_args: Vec<String>,
    ) -> Result<Controller> {
        let common = self.common()?;
        let inst = &self.inst;
        Ok(Controller {
            inst: common.inst.clone(),
            agent: name.to_string(),
            backend,
            system: None,
            document: common.document.clone(),
            root: common.mcp.root.clone(),
            mcp: common.mcp.clone(),
            tool_args,
            timeout: None,
            max_runs: self.opts.max_runs,
            reply_fallback: true,
            retry: self.opts.retry,
            next_transcript: next_transcript(inst, name),
            cooldown: self.opts.cooldown,
            record: common.record.clone(),
            runs: 0,
            published: None,
            secrets: common.secrets.clone(),
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

    /// Show `c` as served: its record under `_state/serve/`, idle.
    pub(super) fn show_served(&self, c: &mut Controller) -> Result<()> {
        match c.note(ControllerState::Idle) {
            Some(record) => serve::write(&self.inst, &record),
            None => Ok(()),
        }
    }

    /// [`Serving::show_served`] of every controller a server starts with, once all are
    /// registered: one record for all, beside the server's file, which each has until its
    /// state first changes (see [`serve::show_served`]): 10,000 agents are not 10,000
    /// files.
    pub(super) fn show_all_served(&self, cs: &mut [Controller]) -> Result<()> {
        serve::show_served(&self.inst, &self.common()?.record)?;
        for c in cs {
            c.note(ControllerState::Idle);
        }
        Ok(())
    }

    /// What every controller of this server shares: made (with the folder of the MCP
    /// configurations) by the first call.
    pub(super) fn common(&self) -> Result<&Common> {
        if let Some(c) = self.common.get() {
            return Ok(c);
        }
        let inst = &self.inst;
        // Absolute: an exec agent with its own cwd gets it in AW_MCP_CONFIG.
        let dir = std::path::absolute(inst.state_dir().join("mcp"))
            .map_err(|e| Error::io(inst.state_dir(), e))?;
        // Private, whatever the umask: a configuration may hold what an agent's tools need.
        crate::fs::private_dir(&dir)?;
        let root: Arc<Path> = Arc::from(self.root.as_path());
        let record = Served {
            instance: inst.name().to_string(),
            agent: String::new(),
            pid: std::process::id(),
            host: Some(crate::host::this().name.clone()),
            host_id: Some(crate::host::this().id.clone()),
            state: ControllerState::Idle,
            runs: 0,
            workflow: self.workflow.clone(),
            started: self.started.clone(),
            caps: Some(self.caps.clone()),
            server: None,
        };
        Ok(self.common.get_or_init(|| Common {
            inst: Arc::new(inst.clone()),
            document: self.document.as_deref().map(Arc::from),
            mcp: Arc::new(Mcp {
                dir,
                aw_mcp: sibling("aw-mcp"),
                root,
            }),
            record: Arc::new(record),
            secrets: crate::run::controller::secrets(&[]).into(),
        }))
    }

    /// The controller of an agent of the registry (`aw-ctl new`, or a worker), in the
    /// worktree `worktree` when it works in one.
    pub(super) fn registered(&self, a: &Agent, worktree: Option<Spec>) -> Result<Controller> {
        let place = worktree
            .as_ref()
            .map(|w| (w.path.clone(), worktree_env(w).to_vec()));
        let backend = registered_backend(a, &self.root, self.inst.name(), place)?;
        let tool_args = crate::tools::client_config::tool_args(a.collab, a.delegate);
        let mut c = self.controller(&a.name, backend, tool_args)?;
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
        c.price = a
            .model
            .as_deref()
            .and_then(|m| self.pricing.price(m))
            .map(Box::new);
        c.worktree = worktree.map(Box::new);
        self.show_served(&mut c)?;
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
