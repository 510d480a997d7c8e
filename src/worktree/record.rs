//! What aw knows of each worktree: `_state/worktrees.json`, by agent; and where a worktree
//! is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::instance::Instance;

/// The folder of the worktrees, at the top of the repository's work tree.
pub const DIR: &str = ".aw-worktrees";

/// The state file of the worktrees, under `_state/`.
pub const STATE: &str = "worktrees.json";

/// The lock taken while a worktree is made or removed, under `_state/`.
pub(super) const LOCK: &str = "worktree.lock";

/// What aw knows of one agent's worktree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub agent: String,
    /// Absolute.
    pub path: PathBuf,
    pub branch: String,
    /// The branch its work is merged into; none when the repository had no branch checked
    /// out (its work is then never taken as merged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The commit the branch started from.
    pub base: String,
    /// The top of the main work tree.
    pub repo: PathBuf,
    pub created: String,
}

/// The records of `inst`, by agent.
pub(super) type Records = BTreeMap<String, Record>;

pub(super) fn records(inst: &Instance) -> Result<Records> {
    crate::state::load(&inst.state_file(STATE))
}

/// The record of `agent`'s worktree in `inst`, if it has one.
pub fn get(inst: &Instance, agent: &str) -> Result<Option<Record>> {
    Ok(records(inst)?.remove(agent))
}

/// The worktree of `agent` of `inst` in the repository whose work tree's top is `top`.
pub fn path_of(top: &Path, inst: &Instance, agent: &str) -> PathBuf {
    top.join(DIR).join(inst.name()).join(agent)
}
