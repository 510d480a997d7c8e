//! Reading `hooks:`: for each event (see [`crate::lifecycle::Kind`]) a command, as a string,
//! or `{run: COMMAND, timeout: DURATION}`. A command whose first word is a path that is not
//! an executable file (from the workflow file's directory) gets a warning: a setup task may
//! make it.

use std::path::Path;

use crate::lifecycle::{DEFAULT_TIMEOUT, Kind};
use crate::run::diagnostic::Spanned;
use crate::run::reader::{Reader, join};
use crate::run::workflow::HookDef;
use crate::run::yaml::{Kind as NodeKind, Node};

const HOOK_KEYS: [&str; 2] = ["run", "timeout"];

/// `{EVENT: COMMAND | {run: COMMAND, timeout: DURATION}}`; an unknown event is an error
/// naming the nearest one.
pub(super) fn read_hooks(r: &mut Reader, node: &Node, dir: &Path) -> Vec<HookDef> {
    let mut hooks = Vec::new();
    let Some(f) = r.fields(node, "hooks", Kind::NAMES) else {
        return hooks;
    };
    for (key, value) in f.iter() {
        let kind = Kind::from_name(key.value).expect("a known key");
        let path = join("hooks", key.value);
        let (run, timeout) = match &value.kind {
            NodeKind::Map(_) => {
                let Some(h) = r.fields(value, &path, &HOOK_KEYS) else {
                    continue;
                };
                let Some(run) = h.get("run") else {
                    r.error(value.pos, &path, "a hook needs run: COMMAND");
                    continue;
                };
                let timeout = h
                    .get("timeout")
                    .and_then(|n| r.duration(n, &join(&path, "timeout")))
                    .map_or(DEFAULT_TIMEOUT, |t| t.value);
                let at = join(&path, "run");
                (r.name(run, &at).map(|run| (run, at)), timeout)
            }
            _ => (r.name(value, &path).map(|run| (run, path)), DEFAULT_TIMEOUT),
        };
        if let Some((run, at)) = run {
            warn_missing(r, &run, &at, dir);
            hooks.push(HookDef {
                event: Spanned::new(kind, key.pos),
                run,
                timeout,
            });
        }
    }
    hooks
}

/// Warn when the first word of `run` is a path (it holds a `/`) to no executable file, from
/// `dir`.
fn warn_missing(r: &mut Reader, run: &Spanned<String>, path: &str, dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Some(first) = run
        .value
        .split_whitespace()
        .next()
        .filter(|w| w.contains('/'))
    else {
        return;
    };
    let what = match std::fs::metadata(dir.join(first)) {
        Err(_) => "does not exist",
        Ok(m) if !m.is_file() || m.permissions().mode() & 0o111 == 0 => "is not an executable file",
        Ok(_) => return,
    };
    let msg = format!(
        "{path}: '{}' {what} (from the workflow file's directory)",
        crate::names::sanitize(first)
    );
    r.diags.warn(run.pos, msg);
}
