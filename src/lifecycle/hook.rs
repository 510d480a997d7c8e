//! What a workflow names for an event, and one run of it: `sh -c` from the workflow file's
//! directory, the event as JSON on stdin and in the environment, its stdout discarded, its
//! stderr kept (the first [`MAX_STDERR`] bytes), its process group killed at its timeout
//! and, once it has exited, whatever it left running in that group too.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::event::{Event, Kind};
use crate::process::{Cut, Spawning};

/// How long a hook may run when its workflow gives no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Most of a hook's stderr kept (64 KiB); the rest is read and dropped.
pub const MAX_STDERR: usize = 64 << 10;

/// How long the stderr of a hook that has exited is read for, when something it started
/// outside its group keeps it open.
const GRACE: Duration = Duration::from_millis(500);

/// The command named for one event, and how long it may run.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    /// Given to `sh -c`.
    pub run: String,
    pub timeout: Duration,
}

/// The hooks of a workflow, at most one per event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hooks(Vec<(Kind, Hook)>);

impl Hooks {
    /// Name `hook` for `kind` (instead of any named before).
    pub fn set(&mut self, kind: Kind, hook: Hook) {
        self.0.retain(|(k, _)| *k != kind);
        self.0.push((kind, hook));
    }

    pub fn get(&self, kind: Kind) -> Option<&Hook> {
        self.0.iter().find(|(k, _)| *k == kind).map(|(_, h)| h)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &(Kind, Hook)> {
        self.0.iter()
    }
}

/// What a hook answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Exit 0: go on.
    Go,
    /// Exit 2: not yet, with what it said on stderr (trimmed).
    NotYet(String),
    /// Another exit code, a signal, its timeout, or it could not start: why.
    Failed(String),
}

/// One run of a hook.
#[derive(Debug, Clone)]
pub struct Ran {
    pub answer: Answer,
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    pub duration: Duration,
    /// What it wrote on stderr (its first [`MAX_STDERR`] bytes).
    pub stderr: String,
}

/// Run `hook` for `ev` from `dir`: it never outlives its timeout (its whole group is
/// killed then), and nothing it does makes this wait longer than that and [`GRACE`].
pub fn run(hook: &Hook, ev: &Event, dir: &Path, how: &Spawning) -> Ran {
    let t0 = Instant::now();
    let failed = |why: String| Ran {
        answer: Answer::Failed(why),
        code: None,
        duration: t0.elapsed(),
        stderr: String::new(),
    };
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(&hook.run)
        .current_dir(dir)
        .envs(ev.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let n = (how.prepare)(&mut c);
    let mut child = match c.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot start: {e}")),
    };
    let pgid = child.id();
    (how.watch)(n, pgid);
    if let Some(mut stdin) = child.stdin.take() {
        let json = ev.json() + "\n";
        // A hook that does not read its stdin, or exits first, is no error.
        std::thread::spawn(move || {
            let _ = stdin.write_all(json.as_bytes());
        });
    }
    let (err_tx, err_rx) = mpsc::channel();
    if let Some(mut stderr) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let _ = Read::by_ref(&mut stderr)
                .take(MAX_STDERR as u64)
                .read_to_end(&mut kept);
            // The rest is read, so that the hook is never held by a full pipe.
            let _ = std::io::copy(&mut stderr, &mut std::io::sink());
            let _ = err_tx.send(kept);
        });
    }
    // What it left running in its group goes with it.
    let (status, cut) = crate::process::wait_killing_group(child, hook.timeout, how.stop);
    (how.release)(pgid);
    let stderr = err_rx.recv_timeout(GRACE).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    let code = status.as_ref().ok().and_then(|s| s.code());
    let answer = if let Some(cut) = cut {
        Answer::Failed(match cut {
            Cut::Timeout => format!(
                "ran past its timeout of {} s and was killed",
                hook.timeout.as_secs_f64()
            ),
            Cut::Stopped => "killed: aw-run is stopping".to_string(),
        })
    } else {
        match (status, code) {
            (Err(e), _) => Answer::Failed(format!("cannot wait for it: {e}")),
            (Ok(_), Some(0)) => Answer::Go,
            (Ok(_), Some(2)) => Answer::NotYet(stderr.trim().to_string()),
            (Ok(_), Some(n)) => Answer::Failed(format!("exit {n}")),
            (Ok(_), None) => Answer::Failed("killed by a signal".to_string()),
        }
    };
    Ran {
        answer,
        code,
        duration: t0.elapsed(),
        stderr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(run: &str, timeout: Duration) -> Ran {
        let hook = Hook {
            run: run.to_string(),
            timeout,
        };
        let ev = Event::new(Kind::RunEnd, "demo").with("agent", "coder");
        run_in(&hook, &ev, &Spawning::PLAIN)
    }

    fn run_in(hook: &Hook, ev: &Event, how: &Spawning) -> Ran {
        run(hook, ev, Path::new("."), how)
    }

    #[test]
    fn exit_codes_are_answers() {
        let t = Duration::from_secs(10);
        assert_eq!(go("exit 0", t).answer, Answer::Go);
        assert_eq!(
            go("echo \"$AW_AGENT: not done\" >&2; exit 2", t).answer,
            Answer::NotYet("coder: not done".into())
        );
        assert_eq!(go("exit 7", t).answer, Answer::Failed("exit 7".into()));
        let json = go("cat >&2; exit 2", t);
        let Answer::NotYet(text) = json.answer else {
            panic!("{:?}", json.answer)
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["event"], "on_run_end");
    }

    #[test]
    fn a_hook_past_its_timeout_is_killed() {
        let r = go("sleep 30", Duration::from_millis(200));
        assert!(
            matches!(&r.answer, Answer::Failed(w) if w.contains("timeout")),
            "{:?}",
            r.answer
        );
        assert!(r.duration < Duration::from_secs(20));
    }
}
