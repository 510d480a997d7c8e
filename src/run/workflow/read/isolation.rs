//! Reading `isolation:`, at the top level and of an agent: `worktree` (a git worktree of
//! the agent's own) or `none`.

use std::path::Component;

use crate::run::diagnostic::Spanned;
use crate::run::reader::{Fields, Reader};
use crate::run::workflow::{Isolation, Workflow};
use crate::run::yaml::Node;

/// `isolation: none|worktree` at `path`.
pub(super) fn read_isolation(
    r: &mut Reader,
    node: &Node,
    path: &str,
) -> Option<Spanned<Isolation>> {
    r.keyword(node, path, Isolation::from_name, Isolation::NAMES)
}

/// The top level's `isolation:`; then, for each agent in a worktree, its `cwd` must lie in
/// the worktree: relative, with no `..`.
pub(super) fn read_top(r: &mut Reader, fields: &Fields, wf: &mut Workflow) {
    if let Some(node) = fields.get("isolation") {
        wf.isolation = read_isolation(r, node, "isolation");
    }
    let mut bad = Vec::new();
    for def in &wf.agents {
        let (Some(_), Some(cwd), Some(written)) = (wf.isolated(def), &def.cwd, &def.cwd_written)
        else {
            continue;
        };
        let outside = written
            .components()
            .any(|c| matches!(c, Component::RootDir | Component::ParentDir));
        if outside {
            bad.push((cwd.pos, format!("agents.{}.cwd", def.name.value)));
        }
    }
    for (pos, path) in bad {
        r.error(
            pos,
            &path,
            "in a worktree, cwd is relative to the worktree's top: no absolute path, no '..'",
        );
    }
}
