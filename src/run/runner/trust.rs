//! Which workers a server trusts: what it knows of each agent it serves from a trusted
//! source (never from the registry as it may be later), and the check of a worker's
//! registry entry against its spawner's.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::registry::{self, Agent};
use crate::run::workflow::BackendKind;

/// What a server knows of an agent it serves from a trusted source, never from the registry
/// as it may be later: the workflow file, the registry as the user's `aw-run --serve` read
/// it at its start (`aw-ctl new`), or a worker checked against its spawner. Exec workers
/// are checked against it ([`check_worker`]).
#[derive(Debug, Clone)]
pub(super) struct Trusted {
    pub(super) backend: String,
    /// An exec agent's argument vector (shared as its backend's is).
    pub(super) command: Arc<[String]>,
    /// What it may spawn, when it has the collab tools.
    pub(super) collab: Option<registry::Collab>,
    pub(super) depth: u32,
    /// It works in a worktree of its own (`isolation: worktree`): so does each worker it
    /// spawns, in one of the worker's own.
    pub(super) isolated: bool,
}

impl Trusted {
    /// A registry entry as it stands (`aw-run --serve` of agents the user registered).
    pub(super) fn of(a: &Agent) -> Trusted {
        Trusted {
            backend: a.backend.clone(),
            command: a.command.as_slice().into(),
            collab: a.collab,
            depth: a.depth,
            isolated: false,
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
pub(super) fn check_worker(
    w: &Agent,
    spawner: Option<&Trusted>,
    collab_known: bool,
) -> Result<Trusted> {
    let by = w.spawned_by.as_deref().unwrap_or("?");
    let refuse = |why: String| Err(Error::Denied(format!("spawned by {by}: {why}")));
    if !w.tools.is_empty() {
        return refuse("a worker has no tools of its own, and this entry lists some".into());
    }
    let exec = w.backend == BackendKind::Exec.name();
    if exec && spawner.is_none() {
        return refuse(format!(
            "an exec worker is served only by the aw-run that serves {by}"
        ));
    }
    // A spawner of unknown definition (served by nobody: an interactive session) is
    // taken at its word for any other backend.
    if let Some(sp) = spawner {
        if exec && sp.backend != BackendKind::Exec.name() {
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
        if exec && w.command[..] != sp.command[..] {
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
        command: w.command.as_slice().into(),
        collab,
        depth: w.depth,
        isolated: spawner.is_some_and(|s| s.isolated),
    })
}
