//! The git commands of the worktrees, each built by [`crate::git`]: none runs anything of
//! the repository's configuration.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// git in `dir` for a command that checks nothing out (so runs no filter).
pub(super) fn git(dir: &Path) -> Command {
    crate::git::with_drivers(dir, &[])
}

/// Run `c` (`what` names it in errors): its stdout, trimmed; 69 when it fails, with the
/// first line git wrote on stderr.
pub(super) fn run(what: &str, mut c: Command) -> Result<String> {
    let out = c
        .output()
        .map_err(|e| Error::Unavailable(format!("git: cannot run it: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("failed");
        return Err(Error::Unavailable(format!("git {what}: {}", line.trim())));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The commit `rev` names in `dir`, if it names one.
pub(super) fn commit(dir: &Path, rev: &str) -> Option<String> {
    let mut c = git(dir);
    c.args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{rev}^{{commit}}"));
    run("rev-parse", c).ok().filter(|s| !s.is_empty())
}

/// The tip of the branch `name`, if there is one.
pub(super) fn tip(dir: &Path, name: &str) -> Option<String> {
    commit(dir, &format!("refs/heads/{name}"))
}

/// The branch checked out in the work tree `dir`, if one is.
pub(super) fn current_branch(dir: &Path) -> Option<String> {
    let mut c = git(dir);
    c.args(["symbolic-ref", "--quiet", "--short", "HEAD"]);
    run("symbolic-ref", c).ok().filter(|s| !s.is_empty())
}

/// Does the work tree `dir` have a change to a file: modified, staged, or untracked (not
/// ignored)?
pub(super) fn dirty(dir: &Path) -> Result<bool> {
    let mut c = crate::git::command(dir);
    c.args(["status", "--porcelain=v1", "-z", "--untracked-files=normal"]);
    Ok(!run("status", c)?.is_empty())
}

/// Is every commit of `tip` in `target` (`tip` is an ancestor of it, or `git cherry` finds
/// each commit's change in it, as after a rebase)?
pub(super) fn all_in(dir: &Path, tip: &str, target: &str) -> bool {
    let mut c = git(dir);
    c.args(["merge-base", "--is-ancestor", tip, target]);
    if c.output().is_ok_and(|o| o.status.success()) {
        return true;
    }
    let mut c = git(dir);
    c.args(["cherry", target, tip]);
    match run("cherry", c) {
        Ok(text) => text.lines().all(|l| l.starts_with('-')),
        Err(_) => false,
    }
}

/// How many commits `tip` has that `target` lacks, and the other way round.
pub(super) fn ahead_behind(dir: &Path, tip: &str, target: &str) -> Option<(u64, u64)> {
    let mut c = git(dir);
    c.args(["rev-list", "--left-right", "--count"])
        .arg(format!("{tip}...{target}"));
    let text = run("rev-list", c).ok()?;
    let mut n = text.split_whitespace().map(|s| s.parse::<u64>().ok());
    Some((n.next()??, n.next()??))
}

/// Is `path` the top of a work tree of git (a worktree still there)?
pub(super) fn is_worktree(path: &Path) -> bool {
    path.join(".git").is_file()
        && top_of(path)
            .is_ok_and(|top| std::fs::canonicalize(&top).ok() == std::fs::canonicalize(path).ok())
}

/// The top of the git work tree `dir` lies in: 66 when it lies in none, 69 when git cannot
/// be run.
pub fn top_of(dir: &Path) -> Result<PathBuf> {
    let shown = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let out = git(dir)
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .map_err(|e| Error::Unavailable(format!("git: cannot run it: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match out.status.success() && !text.is_empty() {
        true => Ok(PathBuf::from(text)),
        false => Err(Error::not_found(format!(
            "no git repository at {}",
            shown.display()
        ))),
    }
}
