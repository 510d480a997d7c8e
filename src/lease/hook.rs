//! The pre-commit guard: a git hook that refuses a commit touching a path leased by someone
//! other than the committer, installed into the hooks folder of the work tree's repository
//! (wherever `core.hooksPath` puts it).
//!
//! It composes with the hook in place: a `pre-commit` that is not aw's is kept as
//! `pre-commit.local`, which the guard runs first (with the same arguments and input), and
//! which `uninstall` puts back. Installing again rewrites the guard (it is recognised by its
//! marker line) but refuses to replace a guard edited since, unless forced.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::fs::{Dir, atomic_write};
use crate::{Error, Result};

/// The line that marks a hook as aw's guard.
pub const MARKER: &str = "# aw pre-commit guard";

/// The name of the hook, and of the hook kept beside the guard.
const HOOK: &str = "pre-commit";
const LOCAL: &str = "pre-commit.local";

/// What the guard checks against: the aw tools, root and instance it calls.
pub struct Guard<'a> {
    /// The `aw-ctl` to run (the guard falls back to the one in `PATH` when it is gone).
    pub aw_ctl: &'a Path,
    pub root: &'a Path,
    pub instance: &'a str,
}

/// What [`install`] or [`uninstall`] did, for a person.
#[derive(Debug, PartialEq, Eq)]
pub enum Done {
    /// The guard was written; the hook in place, if any, kept as `pre-commit.local`.
    Installed {
        hook: PathBuf,
        kept: Option<PathBuf>,
    },
    /// The same guard was already there.
    Already(PathBuf),
    /// The guard was removed; `pre-commit.local` put back, if there was one.
    Removed { hook: PathBuf, restored: bool },
    /// No guard of aw's was there.
    Absent(PathBuf),
}

/// `s` quoted for sh.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The text of the guard.
pub fn script(g: &Guard) -> String {
    format!(
        r#"#!/bin/sh
{MARKER}: refuses a commit that touches a path leased by someone other than the
# committer ($AW_AGENT, else `git config aw.agent`), with `aw-ctl lease check`.
# Installed by `aw-ctl hooks install`, removed by `aw-ctl hooks uninstall`;
# `git commit --no-verify` skips it. A hook that was here before runs first.
hooks=$(dirname -- "$0")
if [ -x "$hooks/{LOCAL}" ]; then
    "$hooks/{LOCAL}" "$@" || exit $?
fi
ctl={ctl}
[ -x "$ctl" ] || ctl=aw-ctl
if ! command -v "$ctl" >/dev/null 2>&1; then
    echo "aw pre-commit guard: aw-ctl not found: leases not checked" >&2
    exit 0
fi
agent=${{AW_AGENT:-$(git config aw.agent)}}
agent=${{agent%%@*}}
set -- --root {root} -i {inst} lease check
[ -n "$agent" ] && set -- "$@" --as "$agent"
out=$(git diff --cached --name-only -z |
    sed -z 's/[][*?\\]/\\&/g' |
    xargs -0 -r "$ctl" "$@" --)
status=$?
[ $status -eq 0 ] && exit 0
[ -n "$out" ] && printf '%s\n' "$out" >&2
echo "aw pre-commit guard: commit refused: a path is leased by someone else (git commit --no-verify commits anyway)" >&2
exit 1
"#,
        ctl = quote(&g.aw_ctl.to_string_lossy()),
        root = quote(&g.root.to_string_lossy()),
        inst = quote(g.instance),
    )
}

/// The hooks folder of the repository of the work tree `dir` is in.
fn hooks_dir(dir: &Path) -> Result<PathBuf> {
    crate::git::hooks_dir(dir).ok_or_else(|| {
        Error::NotFound(format!("{}: not in a git work tree", dir.display()))
            .hint("run it inside the work tree of a git repository")
    })
}

fn is_guard(path: &Path) -> Result<Option<String>> {
    match std::fs::read(path) {
        Ok(b) => {
            let text = String::from_utf8_lossy(&b).into_owned();
            Ok(text
                .lines()
                .nth(1)
                .is_some_and(|l| l.starts_with(MARKER))
                .then_some(text))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Install the guard into the repository of `dir`. A `pre-commit` that is not aw's is kept
/// as `pre-commit.local` (refused, 73, when that exists already); a guard edited since it
/// was installed is replaced only with `force` (refused, 73, otherwise).
pub fn install(dir: &Path, g: &Guard, force: bool) -> Result<Done> {
    let hooks = hooks_dir(dir)?;
    std::fs::create_dir_all(&hooks).map_err(|e| Error::create(&hooks, e))?;
    let hook = hooks.join(HOOK);
    let local = hooks.join(LOCAL);
    let text = script(g);
    let mut kept = None;
    match is_guard(&hook)? {
        Some(t) if t == text => return Ok(Done::Already(hook)),
        Some(_) if !force => {
            return Err(Error::Exists(format!(
                "{}: aw's guard differs from this aw's (edited, or from another version)",
                hook.display()
            ))
            .hint("aw-ctl hooks install --force replaces it"));
        }
        Some(_) => {}
        None if exists(&hook) => {
            if exists(&local) {
                return Err(Error::Exists(format!(
                    "{}: a hook that is not aw's is there, and {LOCAL} too: chaining would replace one",
                    hook.display()
                ))
                .hint(format!("merge them into {LOCAL}, then install again")));
            }
            let d = Dir::open(&hooks).map_err(|e| Error::io(&hooks, e))?;
            d.rename(OsStr::new(HOOK), OsStr::new(LOCAL))
                .map_err(|e| Error::io(&hook, e))?;
            kept = Some(local);
        }
        None => {}
    }
    atomic_write(&hook, text.as_bytes())?;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| Error::io(&hook, e))?;
    Ok(Done::Installed { hook, kept })
}

/// Remove the guard from the repository of `dir`, putting `pre-commit.local` back as
/// `pre-commit`. A `pre-commit` that is not aw's is left alone.
pub fn uninstall(dir: &Path) -> Result<Done> {
    let hooks = hooks_dir(dir)?;
    let hook = hooks.join(HOOK);
    if is_guard(&hook)?.is_none() {
        return Ok(Done::Absent(hook));
    }
    let d = Dir::open(&hooks).map_err(|e| Error::io(&hooks, e))?;
    let restored = exists(&hooks.join(LOCAL));
    match restored {
        true => d.rename(OsStr::new(LOCAL), OsStr::new(HOOK)),
        false => d.unlink(OsStr::new(HOOK)),
    }
    .map_err(|e| Error::io(&hook, e))?;
    Ok(Done::Removed { hook, restored })
}
