//! The git side of an iterative run: find the repository, refuse a staged index, see which
//! files an iteration changed, and commit exactly those. Every git command is an argument
//! vector; paths are given after `--` with `--literal-pathspecs`, so no name is a pattern.
//! Each is built by [`crate::git::command`]: nothing of the repository's configuration
//! (hooks, `core.fsmonitor`, filters) runs.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::error::{Error, Result};

/// A git work tree that iterations commit to.
#[derive(Debug, Clone)]
pub struct Repo {
    /// Its top directory (`git rev-parse --show-toplevel`).
    pub top: PathBuf,
    /// The aw root, never committed.
    pub root: PathBuf,
}

/// The changed files of a work tree (as `git status` lists them, relative to the top), each
/// with a fingerprint of its status and content.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Snapshot(BTreeMap<Vec<u8>, u64>);

/// What git said when it failed: the first line of its stderr, or how it ended.
fn failure(what: &str, out: &Output) -> Error {
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let why = if line.is_empty() {
        match out.status.code() {
            Some(c) => format!("exit status {c}"),
            None => "killed by a signal".to_string(),
        }
    } else {
        line.trim().to_string()
    };
    Error::No(format!("{what}: {why}"))
}

impl Repo {
    /// The repository `dir` lies in; `None` outside one (or when git cannot be run).
    pub fn find(dir: &Path, root: &Path) -> Option<Repo> {
        let out = crate::git::command(dir)
            .args(["rev-parse", "--show-toplevel"])
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let text = out.stdout.strip_suffix(b"\n")?;
        if !out.status.success() || text.is_empty() {
            return None;
        }
        Some(Repo {
            top: PathBuf::from(OsStr::from_bytes(text)),
            root: std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf()),
        })
    }

    fn git(&self) -> Command {
        let mut c = crate::git::command(&self.top);
        c.arg("--literal-pathspecs");
        c
    }

    fn output(&self, what: &str, mut c: Command) -> Result<Output> {
        c.output()
            .map_err(|e| Error::Unavailable(format!("{what}: cannot run git: {e}")))
    }

    /// Refuse an index with staged changes: they would be mixed into the first commit.
    pub fn check_index(&self) -> Result<()> {
        let mut c = self.git();
        c.args([
            "diff",
            "--cached",
            "--quiet",
            "--no-ext-diff",
            "--no-textconv",
        ]);
        let out = self.output("git diff --cached", c)?;
        match out.status.code() {
            Some(0) => Ok(()),
            Some(1) => Err(Error::Exists(format!(
                "{}: the git index has staged changes; aw-run --iter commits each \
                 iteration and does not mix them in",
                self.top.display()
            ))
            .hint("commit them, or unstage them (git restore --staged .), then start again")),
            _ => Err(failure("git diff --cached", &out)),
        }
    }

    /// The commit checked out, if there is one.
    pub fn head(&self) -> Option<String> {
        let mut c = self.git();
        c.args(["rev-parse", "--verify", "-q", "HEAD"]);
        let out = c.output().ok()?;
        let id = String::from_utf8(out.stdout).ok()?;
        let id = id.trim();
        (out.status.success() && !id.is_empty()).then(|| id.to_string())
    }

    /// The aw root relative to the top, when it lies inside the work tree.
    fn root_inside(&self) -> Option<Vec<u8>> {
        let top = self.top.canonicalize().ok()?;
        let root = self
            .root
            .canonicalize()
            .unwrap_or_else(|_| self.root.clone());
        let rel = root.strip_prefix(&top).ok()?;
        Some(rel.as_os_str().as_bytes().to_vec())
    }

    /// The files `git status` lists as changed or untracked, but none under the aw root.
    pub fn snapshot(&self) -> Result<Snapshot> {
        let mut c = self.git();
        c.args([
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
        ]);
        let out = self.output("git status", c)?;
        if !out.status.success() {
            return Err(failure("git status", &out));
        }
        let skip = self.root_inside();
        let mut files = BTreeMap::new();
        for rec in out.stdout.split(|&b| b == 0) {
            let (Some(code), Some(path)) = (rec.get(..2), rec.get(3..)) else {
                continue;
            };
            let path = path.strip_suffix(b"/").unwrap_or(path);
            if path.is_empty() || skip.as_deref().is_some_and(|s| under(path, s)) {
                continue;
            }
            files.insert(path.to_vec(), self.fingerprint(code, path));
        }
        Ok(Snapshot(files))
    }

    /// A hash of a file's status code and what it holds now (a link's target; nothing for
    /// a removed file or a folder).
    fn fingerprint(&self, code: &[u8], path: &[u8]) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        code.hash(&mut h);
        let p = self.top.join(OsStr::from_bytes(path));
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(t) = std::fs::read_link(&p) {
                    t.as_os_str().as_bytes().hash(&mut h);
                }
            }
            Ok(m) if m.is_file() => {
                if let Ok(bytes) = std::fs::read(&p) {
                    bytes.hash(&mut h);
                }
            }
            _ => {}
        }
        h.finish()
    }

    /// Commit what changed since `before` (files that were changed already then are
    /// committed only when they changed again), with `message`: the new commit's id and
    /// the files, or `None` when nothing changed.
    pub fn commit(
        &self,
        before: &Snapshot,
        message: &str,
    ) -> Result<Option<(String, Vec<String>)>> {
        let after = self.snapshot()?;
        let changed: Vec<&Vec<u8>> = after
            .0
            .iter()
            .filter(|(p, f)| before.0.get(*p) != Some(f))
            .map(|(p, _)| p)
            .collect();
        if changed.is_empty() {
            return Ok(None);
        }
        let paths = || changed.iter().map(|p| OsStr::from_bytes(p));
        let mut add = self.git();
        add.args(["add", "-A", "--"]).args(paths());
        let out = self.output("git add", add)?;
        if !out.status.success() {
            return Err(failure("git add", &out));
        }
        let mut diff = self.git();
        diff.args([
            "diff",
            "--cached",
            "--quiet",
            "--no-ext-diff",
            "--no-textconv",
            "--",
        ])
        .args(paths());
        if self.output("git diff --cached", diff)?.status.success() {
            // Changed back to what is committed: nothing to commit.
            return Ok(None);
        }
        let mut commit = self.git();
        commit
            .args([
                "commit",
                "-q",
                "--no-verify",
                "--cleanup=whitespace",
                "-F",
                "-",
                "--",
            ])
            .args(paths())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = commit
            .spawn()
            .map_err(|e| Error::Unavailable(format!("git commit: cannot run git: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(message.as_bytes());
        }
        let out = child
            .wait_with_output()
            .map_err(|e| Error::io("<git commit>", e))?;
        if !out.status.success() {
            return Err(failure("git commit", &out));
        }
        let id = self
            .head()
            .ok_or_else(|| Error::No("git commit: no commit was made".into()))?;
        let files = changed
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        Ok(Some((id, files)))
    }
}

/// Is `path` the folder `dir` or inside it?
fn under(path: &[u8], dir: &[u8]) -> bool {
    if dir.is_empty() {
        return true;
    }
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_under_a_folder_only_at_a_slash() {
        assert!(under(b".workflow", b".workflow"));
        assert!(under(b".workflow/w/channel.md", b".workflow"));
        assert!(!under(b".workflowx/a", b".workflow"));
        assert!(!under(b"src/.workflow", b".workflow"));
        // The root is the whole work tree: nothing is committed.
        assert!(under(b"src/a.rs", b""));
    }
}
