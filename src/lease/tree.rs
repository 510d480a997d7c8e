//! The work tree whose paths leases name, and a path as a lease names it.
//!
//! Leases name paths relative to the work tree: the top level of the git work tree the
//! current directory is in, else the directory that holds the root (`.workflow/`'s
//! parent). A relative path given is relative to the current directory when that is inside
//! the work tree (to the work tree otherwise); an absolute one must lie inside it. `.`,
//! repeated `/` and `..` are resolved as text, and a path that `..` takes out of the work
//! tree is refused (65), as is one naming the work tree itself. Glob characters pass through.

use std::path::{Component, Path, PathBuf};

use crate::{Error, Result};

/// The work tree seen from `cwd`, for the root `root`: the top level of the git work tree
/// `cwd` is in, else the directory that holds `root`.
pub fn work_tree(root: &Path, cwd: &Path) -> PathBuf {
    if let Some(top) = crate::git::toplevel(cwd) {
        return top;
    }
    let holder = root.parent().unwrap_or(root);
    std::fs::canonicalize(holder).unwrap_or_else(|_| holder.to_path_buf())
}

/// `path` relative to the work tree `tree`, as a lease names it, from the current directory
/// `cwd` (both absolute).
pub fn normalize(tree: &Path, cwd: &Path, path: &str) -> Result<String> {
    let bad = |why: String| Error::invalid(format!("path {path:?}: {why}"));
    let p = Path::new(path);
    let full = match (p.is_absolute(), cwd.starts_with(tree)) {
        (true, _) => p.to_path_buf(),
        (false, true) => cwd.join(p),
        (false, false) => tree.join(p),
    };
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in full.components() {
        match c {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(bad("goes above /".into()));
                }
            }
            Component::Normal(n) => parts.push(n),
        }
    }
    let resolved: PathBuf = std::iter::once(std::ffi::OsStr::new("/"))
        .chain(parts)
        .collect();
    let outside = || {
        bad(format!("is outside the work tree {}", tree.display()))
            .hint("leases name paths of the work tree: the git top level, else the directory that holds .workflow/")
    };
    let Ok(rel) = resolved.strip_prefix(tree) else {
        return Err(outside());
    };
    let Some(rel) = rel.to_str() else {
        return Err(bad("is not valid UTF-8".into()));
    };
    if rel.is_empty() {
        return Err(bad("names the whole work tree".into()).hint("'**' leases all of it"));
    }
    let dir = path.ends_with('/') && !rel.ends_with('/');
    Ok(format!("{rel}{}", if dir { "/" } else { "" }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(cwd: &str, path: &str) -> Result<String> {
        normalize(Path::new("/w/t"), Path::new(cwd), path)
    }

    #[test]
    fn paths_are_made_relative_to_the_work_tree() {
        for (cwd, path, want) in [
            ("/w/t", "./a", "a"),
            ("/w/t", "a//b", "a/b"),
            ("/w/t", "/w/t/src/a.rs", "src/a.rs"),
            ("/w/t/src", "a.rs", "src/a.rs"),
            ("/w/t/src", "../lib/*.rs", "lib/*.rs"),
            ("/w/t", "src/", "src/"),
            ("/w/t", "src/**", "src/**"),
            ("/elsewhere", "docs/x.md", "docs/x.md"),
        ] {
            assert_eq!(norm(cwd, path).unwrap(), want, "{cwd} {path}");
        }
    }

    #[test]
    fn a_path_out_of_the_work_tree_is_refused_with_65() {
        for (cwd, path) in [
            ("/w/t", "../x"),
            ("/w/t/src", "../../x"),
            ("/w/t", "/etc/passwd"),
            ("/w/t", "/w/tt/a"),
            ("/w/t", "."),
            ("/w/t", "a/.."),
        ] {
            let e = norm(cwd, path).unwrap_err();
            assert_eq!(e.exit_code(), 65, "{cwd} {path}: {e}");
        }
    }
}
