//! Running the `tasks:` of a workflow: in order, a `parallel` group's tasks at the same time
//! (each in its own thread, all finishing even when one fails), `if:` deciding whether a
//! task runs, `as:` storing its output (a later task may store another value under the
//! same name).

use std::io::Write;
use std::time::Duration;

use serde_json::json;

use super::interpolate::Vars;
use super::workflow::{Gate, Task, TaskKind};
use crate::approval::{self, NewRequest, Outcome as Verdict, WaitOptions};
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::post::{self, PostOptions};
use crate::process::Stop;
use crate::reply::{Nap, reply_text, wait_reply_with};

/// What the tasks gave: the output of the last task that ran, and every `as:` value.
#[derive(Debug, Default)]
pub struct Outcome {
    pub output: Option<String>,
    pub results: Vec<(String, String)>,
}

impl Outcome {
    /// On stdout: the output (with a final newline when it has none), or with `json` one
    /// object `{"output", "results", "duration_ms"}`.
    pub fn print(&self, json: bool, took: Duration) {
        let mut out = std::io::stdout().lock();
        if json {
            let results: serde_json::Map<String, serde_json::Value> = self
                .results
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            let v = json!({"output": self.output, "results": results,
                "duration_ms": took.as_millis() as u64});
            let _ = writeln!(out, "{v}");
        } else if let Some(o) = &self.output {
            let _ = write!(out, "{}", crate::term::on_stdout(o));
            if !o.is_empty() && !o.ends_with('\n') {
                let _ = writeln!(out);
            }
        }
        let _ = out.flush();
    }

    /// The outcome as printed: the secrets in its output and values replaced (see
    /// [`redact`](super::redact)); a reply may hold one.
    pub fn redacted(&self, secrets: &[String]) -> Outcome {
        let r = |t: &str| super::redact::redact(t, secrets);
        Outcome {
            output: self.output.as_deref().map(r),
            results: self
                .results
                .iter()
                .map(|(k, v)| (k.clone(), r(v)))
                .collect(),
        }
    }

    fn set(&mut self, name: &str, value: &str, vars: &mut Vars) {
        vars.set(name, value);
        self.results.retain(|(k, _)| k != name);
        self.results.push((name.to_string(), value.to_string()));
    }
}

/// Run `tasks` in order; the first failure stops them (an error naming the task).
pub fn run_tasks(
    inst: &Instance,
    tasks: &[Task],
    vars: &mut Vars,
    stop: &Stop,
    nap: &Nap<'_>,
) -> Result<Outcome> {
    let mut outcome = Outcome::default();
    for (i, task) in tasks.iter().enumerate() {
        let label = format!("task {}", i + 1);
        match &task.kind {
            TaskKind::Parallel(group) => {
                let results: Vec<Result<Option<String>>> = std::thread::scope(|s| {
                    let handles: Vec<_> = group
                        .iter()
                        .enumerate()
                        .map(|(j, t)| {
                            let label = format!("{label}.{}", j + 1);
                            let vars = &*vars;
                            s.spawn(move || run_one(inst, t, &label, vars, stop, nap))
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| {
                            h.join()
                                .unwrap_or_else(|_| Err(Error::No("a task panicked".into())))
                        })
                        .collect()
                });
                let mut first_error = None;
                for (t, r) in group.iter().zip(results) {
                    match r {
                        Ok(Some(out)) => {
                            if let Some(name) = &t.output {
                                outcome.set(name, &out, vars);
                            }
                            outcome.output = Some(out);
                        }
                        Ok(None) => {}
                        Err(e) => {
                            first_error.get_or_insert(e);
                        }
                    }
                }
                if let Some(e) = first_error {
                    return Err(e);
                }
            }
            _ => {
                if let Some(out) = run_one(inst, task, &label, vars, stop, nap)? {
                    if let Some(name) = &task.output {
                        outcome.set(name, &out, vars);
                    }
                    outcome.output = Some(out);
                }
            }
        }
    }
    Ok(outcome)
}

/// One shell or send task; `None` when its `if:` was false.
fn run_one(
    inst: &Instance,
    task: &Task,
    label: &str,
    vars: &Vars,
    stop: &Stop,
    nap: &Nap<'_>,
) -> Result<Option<String>> {
    let name = format!("{label} ({})", task.describe());
    if let Some(when) = &task.when {
        let yes = when
            .value
            .eval(vars)
            .map_err(|e| Error::invalid(format!("{name}: if: {e}")))?;
        if !yes {
            return Ok(None);
        }
    }
    if let Some(gate) = &task.needs
        && !approved(
            inst,
            format!("tasks: {label}: {}", task.describe()),
            &name,
            &gate.value,
            stop,
        )?
    {
        return Ok(None);
    }
    match &task.kind {
        TaskKind::Shell(t) => super::command::shell(&name, &t.value, vars, Some(stop)).map(Some),
        TaskKind::Send { text, to, timeout } => {
            let mut text = text
                .value
                .render(vars)
                .map_err(|e| Error::invalid(format!("{name}: {e}")))?;
            let (mentions, _) = crate::mention::resolve(&text, |n| n == to.value);
            if !mentions.contains(&to.value) {
                text = format!("@{} {text}", to.value);
            }
            let posted = post::post(inst, "system", &text, &PostOptions::default())
                .map_err(|e| Error::No(format!("{name}: {e}")))?;
            match wait_reply_with(inst, &to.value, posted.entry.id, *timeout, stop, nap) {
                Ok(entries) => Ok(Some(reply_text(&entries))),
                Err(Error::Interrupted) => Err(Error::Interrupted),
                Err(e) => Err(Error::No(format!("{name} failed: {e}"))),
            }
        }
        TaskKind::Parallel(_) => unreachable!("groups are not nested"),
    }
}

/// Ask for the approval the task `name` needs and wait for it: `true` to run the task,
/// `false` to skip it (its time ran out with `then: skip`), an error when it was rejected
/// or its time ran out. The request is keyed by the task (`key`), so that an aw-run
/// started again after a kill finds the request it asked (pending, or decided meanwhile)
/// rather than asking again; it is settled before the task runs, so that one approval
/// never runs it twice.
pub(super) fn approved(
    inst: &Instance,
    key: String,
    name: &str,
    gate: &Gate,
    stop: &Stop,
) -> Result<bool> {
    let (last, verdict) = ask_and_wait(inst, approval::Kind::Task, key, name, gate, stop)?;
    let why = last
        .decision
        .as_ref()
        .map_or(String::new(), |d| match &d.reason {
            Some(r) => format!(" by {}: {r}", d.by),
            None => format!(" by {}", d.by),
        });
    match verdict {
        Verdict::Approved => Ok(true),
        Verdict::Skipped => Ok(false),
        Verdict::Rejected | Verdict::Expired => Err(Error::No(format!(
            "{name}: approval #{} {}{why}",
            last.id,
            verdict.name()
        ))),
    }
}

/// Ask, as `system`, for the approval `gate` describes of what `name` does (keyed by
/// `key`), wait for the outcome, and settle the request; the last request of its chain
/// and the outcome. Errors: interrupted by `stop`, or the request could not be asked or
/// read (named after `name`).
pub(crate) fn ask_and_wait(
    inst: &Instance,
    kind: approval::Kind,
    key: String,
    name: &str,
    gate: &Gate,
    stop: &Stop,
) -> Result<(approval::Request, Verdict)> {
    ask_and_wait_with(inst, kind, key, name, String::new(), gate, stop)
}

/// [`ask_and_wait`], the request showing `details` below what is asked.
pub(crate) fn ask_and_wait_with(
    inst: &Instance,
    kind: approval::Kind,
    key: String,
    name: &str,
    details: String,
    gate: &Gate,
    stop: &Stop,
) -> Result<(approval::Request, Verdict)> {
    let mut key = key;
    if key.len() > approval::MAX_KEY {
        // A task's first line may be long: its start, and a checksum of the whole.
        let sum = crate::hash::fnv1a(key.as_bytes());
        key = format!("{} {sum:016x}", cut(&key, approval::MAX_KEY - 17));
    }
    let new = NewRequest {
        kind,
        what: cut(name, approval::MAX_WHAT),
        details: cut(&details, approval::MAX_DETAILS),
        by: gate.by.clone(),
        timeout: gate.timeout,
        then: gate.then.clone(),
        key: Some(key),
        replies: gate.replies,
    };
    let failed = |e: Error| match e {
        Error::Interrupted => Error::Interrupted,
        e => Error::No(format!("{name}: approval: {e}")),
    };
    let (asked, _) = approval::ask(inst, "system", new).map_err(failed)?;
    let opts = WaitOptions {
        stop: Some(stop),
        ..WaitOptions::default()
    };
    let done = approval::wait(inst, asked.id, &opts).map_err(failed)?;
    approval::settle(inst, asked.id).map_err(failed)?;
    Ok(done)
}

/// `text`, cut to at most `max` bytes (ending with `...` when it was cut).
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max - 3;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_and_keys_are_cut_to_their_limits() {
        let long = "é".repeat(300);
        let c = cut(&long, approval::MAX_WHAT);
        assert!(c.len() <= approval::MAX_WHAT && c.ends_with("..."), "{c}");
        assert_eq!(cut("short", 10), "short");
    }

    #[test]
    fn a_task_with_a_long_first_line_is_asked_once_under_a_key_that_fits() {
        let dir = tempfile::tempdir().unwrap();
        let inst = crate::instance::Root::new(dir.path())
            .instance("t")
            .unwrap();
        let gate = Gate {
            timeout: Some(Duration::from_millis(50)),
            then: approval::Then::Skip,
            ..Gate::default()
        };
        let key = format!("tasks: task 1: shell: echo {}", "x".repeat(400));
        let stop = Stop::default();
        for _ in 0..2 {
            let (r, v) =
                ask_and_wait(&inst, approval::Kind::Task, key.clone(), &key, &gate, &stop).unwrap();
            assert_eq!(v, Verdict::Skipped);
            assert!(r.key.as_ref().unwrap().len() <= approval::MAX_KEY);
            assert!(r.what.len() <= approval::MAX_WHAT);
        }
        // Settled after the first, so the second asked anew.
        assert_eq!(approval::list(&inst).unwrap().len(), 2);
    }
}
