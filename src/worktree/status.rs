//! How each worktree of an instance stands: there or not, its commit, changes to files,
//! commits ahead of and behind its target.

use serde::Serialize;

use super::record::{Record, records};
use super::repo::{ahead_behind, commit, dirty, is_worktree};
use crate::error::Result;
use crate::instance::Instance;

/// One worktree as it stands.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    #[serde(flatten)]
    pub record: Record,
    /// Whether the worktree is there (not removed by hand).
    pub present: bool,
    /// Its commit, when it is there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// Whether it has changes to files, when it is there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dirty: Option<bool>,
    /// Commits of its branch that its target lacks, and the other way round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ahead: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behind: Option<u64>,
}

impl Status {
    /// `clean`, `dirty` or `missing`.
    pub fn state(&self) -> &'static str {
        match (self.present, self.dirty) {
            (false, _) => "missing",
            (true, Some(true)) => "dirty",
            _ => "clean",
        }
    }

    /// One line: agent, path, branch, head (short), state, ahead/behind target.
    pub fn summary(&self) -> String {
        let r = &self.record;
        let head = self.head.as_deref().map_or("-", |h| &h[..h.len().min(12)]);
        let against = match (&r.target, self.ahead, self.behind) {
            (Some(t), Some(a), Some(b)) => format!("+{a} -{b} {t}"),
            (Some(t), _, _) => format!("? {t}"),
            (None, _, _) => "-".to_string(),
        };
        format!(
            "{}\t{}\t{}\t{head}\t{}\t{against}",
            r.agent,
            r.path.display(),
            r.branch,
            self.state()
        )
    }
}

/// The worktrees of `inst`, by agent.
pub fn list(inst: &Instance) -> Result<Vec<Status>> {
    let mut out = Vec::new();
    for (_, r) in records(inst)? {
        let present = is_worktree(&r.path);
        let head = present.then(|| commit(&r.path, "HEAD")).flatten();
        let dirty = match present {
            true => Some(dirty(&r.path)?),
            false => None,
        };
        let counts = match (&head, &r.target) {
            (Some(h), Some(t)) => ahead_behind(&r.repo, h, &format!("refs/heads/{t}")),
            _ => None,
        };
        out.push(Status {
            present,
            head,
            dirty,
            ahead: counts.map(|c| c.0),
            behind: counts.map(|c| c.1),
            record: r,
        });
    }
    Ok(out)
}
