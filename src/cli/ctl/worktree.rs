//! `aw-ctl worktree`: the agents' worktrees (`isolation: worktree`), listed and removed.

use super::Call;
use crate::cli::Out;
use crate::error::Result;

/// `aw-ctl worktree ls [--json]`: one worktree per line.
pub(super) fn ls(out: &mut Out, a: &Call, _: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    for w in crate::worktree::list(&inst)? {
        if a.has("json") {
            let mut v = serde_json::to_value(&w).expect("a worktree serializes");
            v["state"] = w.state().into();
            out.line(&v.to_string())?;
        } else {
            out.line(&w.summary())?;
        }
    }
    Ok(0)
}

/// `aw-ctl worktree rm AGENT [--force]`: what was removed, and the branch kept when it was.
pub(super) fn rm(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    let r = crate::worktree::remove(&inst, args[0], a.has("force"))?;
    out.line(&format!("removed {}", r.path.display()))?;
    out.line(&match &r.kept {
        None => format!("removed branch {}", r.branch),
        Some(why) => format!("kept branch {}: {why}", r.branch),
    })?;
    Ok(0)
}
