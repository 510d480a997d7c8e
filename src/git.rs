//! Every git command aw runs, built here so that none runs anything of the repository's
//! configuration: no hook, no `core.fsmonitor`, no clean/smudge/process filter, no signing
//! program, no external diff or pager, no automatic gc. A repository's configuration is
//! data an agent may have written; aw's own git commands never execute it.
//!
//! Also: which folders git itself uses for a work tree (its git directory, the common one
//! of linked work trees, the hooks folder, the configuration files it reads), which the file
//! tools keep out of an agent's reach.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Settings given on every command line, after the repository's own (so they win).
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
/// command, not required).
pub fn command(dir: &Path) -> Command {
    let mut c = bare(dir);
    for s in SAFE {
        c.arg("-c").arg(s);
    }
    for name in filter_drivers(dir) {
        for key in ["clean", "smudge", "process"] {
            c.arg("-c").arg(setting(&name, key, b""));
        }
        c.arg("-c").arg(setting(&name, "required", b"false"));
    }
    c
}

/// `filter.NAME.KEY=VALUE`, for a name that may hold any byte but NUL.
fn setting(name: &[u8], key: &str, value: &[u8]) -> std::ffi::OsString {
    let mut s = b"filter.".to_vec();
    s.extend_from_slice(name);
    s.push(b'.');
    s.extend_from_slice(key.as_bytes());
    s.push(b'=');
    s.extend_from_slice(value);
    OsStr::from_bytes(&s).to_os_string()
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
fn filter_drivers(dir: &Path) -> Vec<Vec<u8>> {
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
