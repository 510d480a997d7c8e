//! The shell commands a workflow runs itself, its setup tasks and its `shell:` tasks:
//! `sh -c` in a process group of its own, values passed through the environment, its
//! output capped.

use std::process::{Command, Stdio};

use super::interpolate::Vars;
use crate::error::{Error, Result};

/// Most of its stdout a setup or shell task may print (16 MiB): past it the task is killed
/// and fails.
pub const MAX_SHELL_OUTPUT: usize = 16 << 20;

/// Run `template` with `sh -c`, values passed through the environment; its stdout without
/// one trailing newline. A failure is an error naming `name`.
///
/// Like a backend, the shell runs in its own process group that dies with aw-run, the
/// guard told of it (so a `kill -9` of aw-run takes what it started too), and with `stop`
/// set (a stopped pipeline) its group is killed. What it leaves running in the background
/// once it has exited is its own, but its stdout is closed [`GRACE`] after the shell's
/// exit (a job that kept it open does not hold the run).
///
/// [`GRACE`]: super::backend::exec::GRACE
pub(super) fn shell(
    name: &str,
    template: &super::Template,
    vars: &Vars,
    stop: Option<&crate::process::Stop>,
) -> Result<String> {
    let cmd = template
        .render_shell(vars)
        .map_err(|e| Error::invalid(format!("{name}: {e}")))?;
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(&cmd.text)
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let n = super::backend::exec::prepare(&mut c, true);
    let mut child = c
        .spawn()
        .map_err(|e| Error::No(format!("{name}: cannot run sh: {e}")))?;
    let group = super::backend::exec::GroupGuard::watch(n, child.id());
    let ended = super::backend::exec::collect(&mut child, stop, MAX_SHELL_OUTPUT);
    group.release();
    use super::backend::exec::Ended;
    let (status, out) = match ended {
        Err(e) => return Err(Error::No(format!("{name}: cannot wait for sh: {e}"))),
        Ok((Ended::Stopped, _)) => return Err(Error::Interrupted),
        Ok((Ended::TooLong, _)) => {
            return Err(Error::No(format!(
                "{name} printed more than {} MiB (write a large output to a file)",
                MAX_SHELL_OUTPUT >> 20
            )));
        }
        Ok((Ended::Exited(status), out)) => (status, out),
    };
    if !status.success() {
        let how = match status.code() {
            Some(c) => format!("exit status {c}"),
            None => "killed by a signal".to_string(),
        };
        return Err(Error::No(format!("{name} failed: {how}")));
    }
    let text = String::from_utf8_lossy(&out);
    Ok(text.strip_suffix('\n').unwrap_or(&text).to_string())
}
