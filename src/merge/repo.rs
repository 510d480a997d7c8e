//! The repository of a request: where it is, its branches, and the scratch work trees of
//! the queue. Every git command goes through [`crate::git::command`].

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The absolute common git directory of the repository `dir` is in (66 when it is in none).
pub(super) fn common_dir(dir: &Path) -> Result<PathBuf> {
    let out = crate::git::command(dir)
        .args(["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .output()
        .map_err(no_git)?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match out.status.success() && !text.is_empty() {
        true => Ok(PathBuf::from(text)),
        false => Err(
            Error::not_found(format!("{}: not in a git repository", dir.display()))
                .hint("run it in the repository's work tree"),
        ),
    }
}

pub(super) fn no_git(e: std::io::Error) -> Error {
    Error::Unavailable(format!("git: cannot run it: {e}"))
}

/// Refuse a branch name git would not take (65), or a branch the repository lacks (66).
pub(super) fn check_branch(repo: &Path, what: &str, b: &str) -> Result<()> {
    let shown = crate::names::sanitize(b);
    let ok = !b.starts_with('-')
        && crate::git::command(repo)
            .args(["check-ref-format", "--branch", b])
            .output()
            .map_err(no_git)?
            .status
            .success();
    if !ok {
        return Err(Error::invalid(format!(
            "{what} '{shown}': not a branch name"
        )));
    }
    if rev(repo, &format!("refs/heads/{b}"))?.is_none() {
        return Err(Error::not_found(format!(
            "{what} '{shown}': no such branch in {}",
            repo.display()
        )));
    }
    Ok(())
}

/// The commit `name` names in `repo`, if any.
pub(super) fn rev(repo: &Path, name: &str) -> Result<Option<String>> {
    let out = crate::git::command(repo)
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{name}^{{commit}}"))
        .output()
        .map_err(no_git)?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok((out.status.success() && !text.is_empty()).then_some(text))
}

/// Remove the scratch work tree at `path`, whatever it holds, and what git knows of it.
pub(super) fn remove_scratch(repo: &Path, path: &Path) {
    if path.exists() {
        let _ = crate::git::command(repo)
            .args(["worktree", "remove", "--force", "--force"])
            .arg(path)
            .output();
        if path.exists() {
            let _ = std::fs::remove_dir_all(path);
        }
    }
    let _ = crate::git::command(repo)
        .args(["worktree", "prune"])
        .output();
}

/// Kill (SIGKILL) every process of this host whose working directory is in `scratch`: what a
/// killed server's verify command left running there.
pub(super) fn kill_left(scratch: &Path) {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if std::fs::read_link(p.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(scratch)) {
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}
