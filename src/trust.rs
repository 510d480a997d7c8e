//! Whose files aw trusts.
//!
//! A root found by searching the current directory and those above it is used only when
//! nobody else could have put it there, as git refuses a repository of "dubious ownership":
//! the `.workflow/` found, and every directory the search went through up to the one that
//! holds it, must belong to this user or to root (a process running as root trusts root's
//! alone), none of those directories may be writable by everyone unless it is sticky as
//! `/tmp` is (where nobody may remove or rename another's entry), and the root itself may
//! not be writable by everyone at all. A root that fails is refused (exit 77) unless it is
//! chosen explicitly (`--root`, `AW_ROOT`) or listed in the user's allow list
//! ([`safe_roots_path`]): one absolute path a line, a root or the directory that holds it,
//! `*` for every root; blank lines and lines that begin with `#` are ignored.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Remedy, Result};

/// The effective user id of this process.
pub fn me() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Is a file owned by `uid` trusted by this process: its own, or root's?
pub fn trusted_owner(uid: u32) -> bool {
    uid == me() || uid == 0
}

const WORLD_WRITABLE: u32 = 0o002;
const STICKY: u32 = 0o1000;

/// A user for people: `user NAME (uid N)`, or `uid N` when it has no name here.
pub fn user(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("user {} (uid {uid})", u.name),
        _ => format!("uid {uid}"),
    }
}

/// The user's allow list of roots: `aw/safe-roots` in `$XDG_CONFIG_HOME` when it is set
/// to an absolute path, else `~/.config/aw/safe-roots`.
pub fn safe_roots_path() -> Option<PathBuf> {
    match std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from) {
        Some(d) if d.is_absolute() => Some(d.join("aw/safe-roots")),
        _ => std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .map(|h| h.join(".config/aw/safe-roots")),
    }
}

/// Does the allow list name `root`, the directory that holds it, or `*`? A list another
/// user owns is not read.
fn listed_safe(root: &Path) -> bool {
    use std::io::Read;
    let Some(path) = safe_roots_path() else {
        return false;
    };
    let Ok(f) = std::fs::File::open(&path) else {
        return false;
    };
    if !f.metadata().is_ok_and(|m| trusted_owner(m.uid())) {
        return false;
    }
    let mut text = String::new();
    if f.take(1 << 20).read_to_string(&mut text).is_err() {
        return false;
    }
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .any(|l| {
            let p = Path::new(l);
            l == "*" || (p.is_absolute() && (p == root || Some(p) == root.parent()))
        })
}

/// Why the directory `dir` cannot be trusted, if it cannot: `owned by ...`, or `writable by
/// everyone` (`sticky_ok`: unless it is sticky).
fn distrust(dir: &Path, sticky_ok: bool) -> Option<String> {
    let m = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) => return Some(format!("unreadable ({e})")),
    };
    if !trusted_owner(m.uid()) {
        return Some(format!("owned by {}", user(m.uid())));
    }
    if m.mode() & WORLD_WRITABLE != 0 && !(sticky_ok && m.mode() & STICKY != 0) {
        return Some("writable by everyone".to_string());
    }
    None
}

/// Refuse the root `root` found by the search, which went through the directories
/// `walked` (the one where it started first, the one that holds `root` last), unless
/// nobody but this user or root could have put it there, or the allow list names it.
pub fn check_found(root: &Path, walked: &[PathBuf]) -> Result<()> {
    let link_owner = std::fs::symlink_metadata(root).map(|m| m.uid());
    let why = match link_owner {
        Ok(uid) if !trusted_owner(uid) => Some(format!("it is owned by {}", user(uid))),
        _ => distrust(root, false)
            .map(|why| format!("it is {why}"))
            .or_else(|| {
                walked.iter().find_map(|d| {
                    distrust(d, true)
                        .map(|why| format!("it is reached through {}, {why}", d.display()))
                })
            }),
    };
    let Some(why) = why else {
        return Ok(());
    };
    if listed_safe(root) {
        return Ok(());
    }
    let list = safe_roots_path().map_or("the allow list safe-roots".to_string(), |p| {
        p.display().to_string()
    });
    Err(
        Error::denied(format!("{}: not trusted: {why}", root.display())).remedy(
            Remedy::TrustRoot {
                root: root.to_path_buf(),
                list,
            },
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_of_this_user_is_trusted_one_everyone_may_write_is_not() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join(".workflow");
        std::fs::create_dir(&root).unwrap();
        let walked = vec![tmp.path().to_path_buf()];
        check_found(&root, &walked).unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        check_found(&root, &walked).unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_found(&root, &walked).unwrap_err();
        assert_eq!(e.exit_code(), 77);
        assert!(e.to_string().contains("writable by everyone"), "{e}");
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(check_found(&root, &walked).is_err());
    }
}
