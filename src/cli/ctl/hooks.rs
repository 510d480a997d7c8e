//! `aw-ctl hooks install | uninstall`: the pre-commit guard that refuses a commit touching
//! a path leased by someone else.

use super::Call;
use crate::cli::Out;
use crate::error::{Error, Result};
use crate::lease::hook::{self, Done, Guard};

fn cwd() -> Result<std::path::PathBuf> {
    std::env::current_dir().map_err(|e| Error::io(".", e))
}

/// Say what was done.
fn say(out: &mut Out, done: Done) -> Result<u8> {
    let line = match done {
        Done::Installed { hook, kept: None } => format!("installed {}", hook.display()),
        Done::Installed {
            hook,
            kept: Some(local),
        } => format!(
            "installed {}; the hook that was there is now {} and runs first",
            hook.display(),
            local.display()
        ),
        Done::Already(hook) => format!("{} is installed already", hook.display()),
        Done::Removed {
            hook,
            restored: true,
        } => format!(
            "removed the guard; {} is the hook that was there before",
            hook.display()
        ),
        Done::Removed { hook, .. } => format!("removed {}", hook.display()),
        Done::Absent(hook) => format!("{}: no guard of aw's to remove", hook.display()),
    };
    out.line(&line)?;
    Ok(0)
}

/// `aw-ctl hooks install [--force]`.
pub(super) fn install(out: &mut Out, a: &Call, _: &[&str]) -> Result<u8> {
    let root = a.common.root()?;
    let inst = a.common.instance()?;
    let exe = std::env::current_exe().map_err(|e| Error::io("aw-ctl", e))?;
    let guard = Guard {
        aw_ctl: &exe,
        root: root.path(),
        instance: inst.name(),
    };
    say(out, hook::install(&cwd()?, &guard, a.has("force"))?)
}

/// `aw-ctl hooks uninstall`.
pub(super) fn uninstall(out: &mut Out, _: &Call, _: &[&str]) -> Result<u8> {
    say(out, hook::uninstall(&cwd()?)?)
}
