//! Every git command aw runs, built here so that none runs anything of the repository's
//! configuration: no hook, no `core.fsmonitor`, no clean/smudge/process filter, no signing
//! program, no external diff or pager, no automatic gc. A repository's configuration is
//! data an agent may have written; aw's own git commands never execute it.
//!
//! Also: which folders git itself uses for a work tree (its git directory, the common one
//! of linked work trees, the hooks folder, the configuration files it reads), which the file
//! tools keep out of an agent's reach.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Settings given to every command, over the repository's own.
const SAFE: [&str; 7] = [
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "core.pager=cat",
];

/// A git command run in `dir`, with stdin closed, no pager, and nothing of the
/// repository's configuration that could execute a program: the settings of [`SAFE`], and
/// every filter driver the repository configures emptied (no clean, smudge or process
/// command, not required). They are given in the environment (`GIT_CONFIG_KEY_n`), where a
/// driver's name may hold any byte, `=` too, and added to those already there.
pub fn command(dir: &Path) -> Command {
    with_drivers(dir, &filter_drivers(dir))
}

/// [`command`], the filter drivers of the repository given (as [`filter_drivers`] found
/// them): for a caller that runs several commands in one repository and asks once.
pub fn with_drivers(dir: &Path, drivers: &[Vec<u8>]) -> Command {
    let mut c = bare(dir);
    let mut set: Vec<(OsString, OsString)> = SAFE
        .iter()
        .filter_map(|s| s.split_once('='))
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    for name in drivers {
        for (key, value) in [
            ("clean", ""),
            ("smudge", ""),
            ("process", ""),
            ("required", "false"),
        ] {
            let mut k = b"filter.".to_vec();
            k.extend_from_slice(name);
            k.push(b'.');
            k.extend_from_slice(key.as_bytes());
            set.push((OsStr::from_bytes(&k).into(), value.into()));
        }
    }
    let first: usize = std::env::var("GIT_CONFIG_COUNT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    for (i, (k, v)) in set.iter().enumerate() {
        c.env(format!("GIT_CONFIG_KEY_{}", first + i), k)
            .env(format!("GIT_CONFIG_VALUE_{}", first + i), v);
    }
    c.env("GIT_CONFIG_COUNT", (first + set.len()).to_string());
    c
}

/// git in `dir`, with stdin closed, no pager and no hook or fsmonitor: for the commands
/// that only read the configuration or ask where things are (they run no filter).
fn bare(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("--no-pager")
        .arg("-C")
        .arg(dir)
        .args(["-c", "core.fsmonitor=false"])
        .env("GIT_PAGER", "cat")
        .env_remove("GIT_EXTERNAL_DIFF")
        .stdin(Stdio::null());
    c
}

/// The names of the filter drivers the configuration of the repository in `dir` defines
/// (`filter.NAME.KEY`); none outside a repository or when git cannot be run.
pub fn filter_drivers(dir: &Path) -> Vec<Vec<u8>> {
    let mut c = bare(dir);
    c.args(["config", "-z", "--name-only", "--get-regexp", r"^filter\."])
        .stderr(Stdio::null());
    let Ok(out) = c.output() else {
        return Vec::new();
    };
    let mut names: Vec<Vec<u8>> = out
        .stdout
        .split(|&b| b == 0)
        .filter_map(|key| {
            let rest = key.strip_prefix(b"filter.")?;
            let dot = rest.iter().rposition(|&b| b == b'.')?;
            Some(rest[..dot].to_vec())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The folders and files git itself uses for the work tree `dir` lies in, absolute: its git
/// directory, the common git directory of linked work trees, the hooks folder (wherever
/// `core.hooksPath` puts it), and every configuration file of the repository (its own, a
/// work tree's, and those they include); none outside a work tree or without git. Asking
/// runs nothing of the repository.
pub fn private_paths(dir: &Path) -> Vec<PathBuf> {
    let mut paths = ask(
        dir,
        &[
            "--absolute-git-dir",
            "--git-common-dir",
            "--git-path",
            "hooks",
        ],
    );
    let Some(git_dir) = paths.first().cloned() else {
        return paths;
    };
    // git reads the configuration from the top of the work tree (from the git directory
    // when there is none): relative origins are relative to it.
    let base = ask(dir, &["--show-toplevel"]).pop().unwrap_or(git_dir);
    let mut c = bare(&base);
    c.args(["config", "-z", "--list", "--show-origin", "--show-scope"])
        .stderr(Stdio::null());
    if let Ok(out) = c.output()
        && out.status.success()
    {
        // Records of scope, origin, then `key\nvalue`, each ended by NUL.
        let fields: Vec<&[u8]> = out.stdout.split(|&b| b == 0).collect();
        for rec in fields.chunks(3) {
            if let [scope, origin, _] = rec
                && matches!(*scope, b"local" | b"worktree")
                && let Some(file) = origin.strip_prefix(b"file:")
            {
                paths.push(base.join(OsStr::from_bytes(file)));
            }
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

/// The top level of the git work tree `dir` lies in; `None` outside one or without git.
pub fn toplevel(dir: &Path) -> Option<PathBuf> {
    ask(dir, &["--show-toplevel"]).pop()
}

/// The hooks folder of the repository `dir` lies in (wherever `core.hooksPath` puts it),
/// absolute; `None` outside a repository or without git.
pub fn hooks_dir(dir: &Path) -> Option<PathBuf> {
    ask(dir, &["--git-path", "hooks"]).pop()
}

/// The absolute paths `git rev-parse` gives for `what` in `dir`; none when it fails.
fn ask(dir: &Path, what: &[&str]) -> Vec<PathBuf> {
    let mut c = bare(dir);
    c.args(["rev-parse", "--path-format=absolute"])
        .args(what)
        .stderr(Stdio::null());
    match c.output() {
        Ok(out) if out.status.success() => out
            .stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| dir.join(OsStr::from_bytes(l)))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .expect("git must be installed");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    #[test]
    fn no_filter_runs_whatever_its_name() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, marks) = (tmp.path().join("w"), tmp.path().join("marks"));
        std::fs::create_dir_all(&marks).unwrap();
        git(tmp.path(), &["init", "-q", "w"]);
        std::fs::write(
            dir.join(".gitattributes"),
            "a.txt filter=a=b\nb.txt filter=x.y\n",
        )
        .unwrap();
        for (name, mark) in [("a=b", "ab"), ("x.y", "xy")] {
            let cmd = format!("touch {}; cat", marks.join(mark).display());
            for key in ["clean", "smudge"] {
                git(&dir, &["config", &format!("filter.{name}.{key}"), &cmd]);
            }
            git(
                &dir,
                &["config", &format!("filter.{name}.required"), "true"],
            );
        }
        std::fs::write(dir.join("a.txt"), "a\n").unwrap();
        std::fs::write(dir.join("b.txt"), "b\n").unwrap();
        for args in [
            &["add", "-A"][..],
            &["status", "--porcelain"],
            &["diff", "--cached"],
        ] {
            let out = command(&dir).args(args).output().unwrap();
            assert!(out.status.success(), "{args:?}: {out:?}");
        }
        let ran: Vec<_> = std::fs::read_dir(&marks).unwrap().collect();
        assert!(ran.is_empty(), "{ran:?}");
        // Without the overrides, both would have run.
        git(&dir, &["add", "--renormalize", "."]);
        assert!(marks.join("ab").exists() && marks.join("xy").exists());
    }
}
