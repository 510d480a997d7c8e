//! The repository of a request: where it is, its branches, and the scratch work trees of
//! the queue. Every git command goes through [`crate::git`]'s safe commands.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// git in `dir` for a command that checks nothing out (so runs no filter): no hook,
/// fsmonitor, signing or pager, without asking the repository for its filter drivers.
pub(super) fn plain(dir: &Path) -> Command {
    crate::git::with_drivers(dir, &[])
}

/// The absolute common git directory of the repository `dir` is in (66 when it is in none).
pub(super) fn common_dir(dir: &Path) -> Result<PathBuf> {
    let out = plain(dir)
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

/// Refuse (65) a name git would not take for a branch (the rules of
/// git-check-ref-format(1)).
pub fn check_name(what: &str, b: &str) -> Result<()> {
    let bad_char = |c: char| c.is_control() || " ~^:?*[\\".contains(c);
    let bad = b.is_empty()
        || b.starts_with(['-', '/', '.'])
        || b.ends_with(['/', '.'])
        || b.ends_with(".lock")
        || b == "@"
        || ["..", "//", "@{", "/."].iter().any(|s| b.contains(s))
        || b.chars().any(bad_char);
    match bad {
        true => Err(Error::invalid(format!(
            "{what} '{}': not a branch name",
            crate::names::sanitize(b)
        ))),
        false => Ok(()),
    }
}

/// The tip of each branch of `names` in `repo` (`None`: no such branch), asked at once.
pub(super) fn tips(repo: &Path, names: &[&str]) -> Result<Vec<Option<String>>> {
    let out = plain(repo)
        .args([
            "for-each-ref",
            "--format=%(refname)%00%(objectname)%00%(objecttype)",
        ])
        .args(names.iter().map(|n| format!("refs/heads/{n}")))
        .output()
        .map_err(no_git)?;
    if !out.status.success() {
        return Err(Error::Unavailable(format!(
            "git for-each-ref: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let found: Vec<Vec<&str>> = text.lines().map(|l| l.split('\0').collect()).collect();
    Ok(names
        .iter()
        .map(|n| {
            let full = format!("refs/heads/{n}");
            found
                .iter()
                .find(|f| f.first() == Some(&full.as_str()) && f.get(2) == Some(&"commit"))
                .and_then(|f| f.get(1).map(|c| c.to_string()))
        })
        .collect())
}

/// Refuse a branch name git would not take (65), or a branch the repository lacks (66);
/// `branches` are (what it is, its name).
pub(super) fn check_branches(repo: &Path, branches: &[(&str, &str)]) -> Result<()> {
    for (what, b) in branches {
        check_name(what, b)?;
    }
    let names: Vec<&str> = branches.iter().map(|(_, b)| *b).collect();
    for ((what, b), tip) in branches.iter().zip(tips(repo, &names)?) {
        if tip.is_none() {
            return Err(Error::not_found(format!(
                "{what} '{}': no such branch in {}",
                crate::names::sanitize(b),
                repo.display()
            )));
        }
    }
    Ok(())
}

/// Remove the scratch work tree at `path`, whatever it holds, and what git knows of it.
pub(super) fn remove_scratch(repo: &Path, path: &Path) {
    if !path.exists() {
        return;
    }
    let _ = plain(repo)
        .args(["worktree", "remove", "--force", "--force"])
        .arg(path)
        .output();
    if path.exists() {
        let _ = std::fs::remove_dir_all(path);
        let _ = plain(repo).args(["worktree", "prune"]).output();
    }
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

/// The work tree where `branch` is checked out, if one is (other than `but`).
pub(super) fn checked_out(repo: &Path, branch: &str, but: &Path) -> Result<Option<PathBuf>> {
    let out = plain(repo)
        .args(["worktree", "list", "--porcelain", "-z"])
        .output()
        .map_err(no_git)?;
    let want = format!("branch refs/heads/{branch}");
    let mut here: Option<PathBuf> = None;
    for field in out.stdout.split(|&b| b == 0) {
        let f = String::from_utf8_lossy(field);
        if let Some(p) = f.strip_prefix("worktree ") {
            here = Some(PathBuf::from(p));
        } else if f == want
            && let Some(p) = here.take()
            && p != but
        {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_git_refuses_are_refused_and_others_taken() {
        for ok in ["main", "aw/t/coder", "fix-42", "rel/1.2", "a@b"] {
            assert!(check_name("branch", ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "-rf", "/a", "a/", "a..b", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[", "a\\b",
            "x.lock", "@", "a@{1}", "a//b", ".a", "a/.b", "a.", "a\u{7f}",
        ] {
            assert_eq!(
                check_name("branch", bad).unwrap_err().exit_code(),
                65,
                "{bad:?}"
            );
        }
    }
}
