//! Iterative runs (`aw-run --iter N|DURATION`): one agent works on the workflow's kickoff,
//! as its task, over many runs. Each iteration is a channel entry that mentions the agent
//! (`@coder iteration 2/5`); its controller runs it like any other message, with the task,
//! the progress so far and every earlier iteration's summary and commit added to the prompt
//! (the controller's `task_context`). The iteration's summary is the agent's reply.
//!
//! In a git work tree each iteration that changed files ends with a commit of exactly those
//! files (never the aw root), its message the summary with the trailers `Aw-Iteration: I/N`
//! and `Aw-Instance: NAME`. Each iteration is recorded, one JSON line appended to
//! `_state/iterations/<agent>.jsonl` (see [`crate::iterations`]), which `--resume` continues
//! from.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use super::controller::Shared;
use super::redact::redact;
use super::workflow::Workflow;
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::iterations::{Record, append, records};
use crate::post::{self, PostOptions};
use crate::reply::{reply_text, wait_reply};
use crate::usage::Usage;

pub mod git;

use git::Repo;

/// The line that, alone in a reply, says the task is done.
pub const DONE_LINE: &str = "AW-DONE";

/// Longest commit subject taken from a summary, in characters.
const SUBJECT_MAX: usize = 200;

/// When the iterations stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// After this many iterations.
    Count(u64),
    /// Once this much time has passed (the running iteration finishes).
    Time(Duration),
}

impl Limit {
    /// `5` is five iterations, `30m` (a number with `s`, `m` or `h`) a duration.
    pub fn parse(text: &str) -> std::result::Result<Limit, String> {
        let t = text.trim();
        let bad = || {
            format!(
                "'{}': expected a number of iterations (5) or a duration (90s, 30m, 2h)",
                crate::names::sanitize(text)
            )
        };
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            return match t.parse::<u64>() {
                Ok(0) => Err(format!("'{t}': expected at least 1 iteration")),
                Ok(n) => Ok(Limit::Count(n)),
                Err(_) => Err(bad()),
            };
        }
        if !t.ends_with(['s', 'm', 'h']) {
            return Err(bad());
        }
        match super::parse_duration(t) {
            Ok(d) if d.is_zero() => Err(format!("'{t}': expected a duration above 0")),
            Ok(d) => Ok(Limit::Time(d)),
            Err(why) if why.contains(crate::time::MAX_DURATION_TEXT) => {
                Err(format!("'{t}': {why}"))
            }
            Err(_) => Err(bad()),
        }
    }

    /// The `N` of `I/N`: the count, or `?` for a duration.
    fn of(&self) -> String {
        match self {
            Limit::Count(n) => n.to_string(),
            Limit::Time(_) => "?".to_string(),
        }
    }

    /// The limit as given (`5`, `30m`), for the records.
    fn text(&self) -> String {
        match self {
            Limit::Count(n) => n.to_string(),
            Limit::Time(d) => format!("{}s", d.as_secs_f64()),
        }
    }
}

/// An iterative run, as the command line asks for it.
#[derive(Debug, Clone)]
pub struct Plan {
    pub agent: String,
    pub limit: Limit,
    pub resume: bool,
    /// The git work tree iterations commit to, if any.
    pub repo: Option<Repo>,
    /// The entry document shown in each prompt, if the workflow has shared context.
    pub document: Option<String>,
    pub json: bool,
    pub quiet: bool,
    /// What the controller adds to each prompt; set before each iteration.
    pub context: Arc<Mutex<String>>,
    /// What summaries, records and commit messages never show (see
    /// [`secrets`](super::redact::secrets)).
    pub secrets: Vec<String>,
}

/// Make `wf` a workflow of the one agent that iterates (`agent`, or its only one) and check
/// that it has a task: the kickoff. Errors name `file`.
pub fn choose(wf: &mut Workflow, file: &Path, agent: Option<&str>) -> Result<String> {
    let f = file.display();
    if wf.kickoff.is_none() {
        return Err(Error::invalid(format!(
            "{f}: --iter needs a kickoff: the task"
        )));
    }
    if !wf.tasks.is_empty() {
        return Err(Error::invalid(format!(
            "{f}: --iter runs the kickoff as its task, not tasks:"
        )));
    }
    let names: Vec<String> = wf.agent_names().map(str::to_string).collect();
    let name = match agent {
        Some(a) if names.iter().any(|n| n == a) => a.to_string(),
        Some(a) => {
            return Err(Error::not_found(format!(
                "{f}: no agent '{}' (agents: {})",
                crate::names::sanitize(a),
                names.join(", ")
            )));
        }
        None if names.len() == 1 => names[0].clone(),
        None => {
            return Err(Error::Usage(format!(
                "--iter: {f} has {} agents ({}): name one with --agent",
                names.len(),
                names.join(", ")
            )));
        }
    };
    wf.agents.retain(|d| d.name.value == name);
    Ok(name)
}

/// The summary of a reply: its text without done lines, and whether it had one.
fn summary_of(reply: &str) -> (String, bool) {
    let mut done = false;
    let kept: Vec<&str> = reply
        .lines()
        .filter(|l| {
            let is = l.trim() == DONE_LINE;
            done |= is;
            !is
        })
        .collect();
    (kept.join("\n").trim().to_string(), done)
}

/// A commit subject: the summary's first line, at most [`SUBJECT_MAX`] characters.
fn subject(summary: &str, fallback: &str) -> String {
    let first = summary.lines().next().unwrap_or("").trim();
    if first.is_empty() {
        return fallback.to_string();
    }
    match first.char_indices().nth(SUBJECT_MAX) {
        Some((i, _)) => format!("{}...", first[..i].trim_end()),
        None => first.to_string(),
    }
}

/// The commit message of iteration `i`: the subject, the whole summary when it says more,
/// and the trailers.
fn commit_message(summary: &str, i: u64, limit: &Limit, instance: &str) -> String {
    let label = format!("{i}/{}", limit.of());
    let subject = subject(summary, &format!("aw iteration {label}"));
    let mut m = subject.clone();
    if summary != subject && !summary.is_empty() {
        m.push_str("\n\n");
        m.push_str(summary);
    }
    m.push_str(&format!(
        "\n\nAw-Iteration: {label}\nAw-Instance: {instance}\n"
    ));
    m
}

/// What each prompt of iteration `i` adds: the task, the progress and the earlier
/// iterations (the spec's context injection).
fn context(plan: &Plan, task: &str, done: &[Record], i: u64, spent: Duration) -> String {
    let mut s = String::from("\n## Iterative Task\n\n<task_context>\n## Original Task\n");
    s.push_str(task.trim_end());
    s.push_str("\n\n## Progress\n");
    match plan.limit {
        Limit::Count(n) => s.push_str(&format!("Iteration: {i} of {n}\n")),
        Limit::Time(d) => s.push_str(&format!(
            "Iteration: {i} (the iterations run for {} s; {} s used)\n",
            d.as_secs_f64(),
            spent.as_secs()
        )),
    }
    if let Some(base) = done.first().and_then(|r| r.base.as_deref()) {
        s.push_str(&format!("Base commit: {base}\n"));
    }
    if let Some(doc) = &plan.document {
        s.push_str(&format!(
            "Notes: the document {doc}, shown above under Current Workspace\n"
        ));
    }
    if !done.is_empty() {
        s.push_str("\n## Previous Iterations\n");
        for r in done {
            let commit = match &r.commit {
                Some(c) => format!("commit {c}"),
                None if plan.repo.is_some() => "no commit (no change)".to_string(),
                None => "no commit".to_string(),
            };
            s.push_str(&format!("### Iteration {} -> {commit}\n", r.iteration));
            if !r.files.is_empty() {
                s.push_str(&format!("Files: {}\n", r.files.join(", ")));
            }
            let summary = if r.summary.is_empty() {
                "(none)"
            } else {
                &r.summary
            };
            s.push_str(&format!("Summary: {summary}\n"));
        }
    }
    s.push_str("</task_context>\n\n");
    s.push_str(&format!(
        "Work on the task above: this is iteration {i}. Your reply is the iteration's \
         summary (its first line becomes the commit subject). When the whole task is done, \
         end your reply with a line that says only {DONE_LINE} (or set your status to done): \
         no further iteration runs.\n"
    ));
    s
}

/// The iteration to start from and the records it follows: with `resume`, the last series
/// of `agent`'s records (its successful iterations); else none.
fn resumed(inst: &Instance, plan: &Plan) -> Result<(String, Vec<Record>, Duration)> {
    let all = if plan.resume {
        records(inst, &plan.agent, "aw-run")?
    } else {
        Vec::new()
    };
    let Some(series) = all.last().map(|r| r.series.clone()) else {
        return Ok((crate::time::now(), Vec::new(), Duration::ZERO));
    };
    let mine: Vec<Record> = all.into_iter().filter(|r| r.series == series).collect();
    let spent = Duration::from_millis(mine.iter().map(|r| r.duration_ms).sum());
    let ok = mine.into_iter().filter(|r| r.status == "ok").collect();
    Ok((series, ok, spent))
}

/// What the transcripts of the runs that handled `entry` report about usage.
fn usage_of(inst: &Instance, agent: &str, entry: u64) -> Option<Usage> {
    crate::transcript::usage_of(inst, agent, |v| {
        v["inbox"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x.as_u64() == Some(entry)))
    })
}

/// The agent's status update time, and whether it says `done`.
fn status_of(inst: &Instance, agent: &str) -> (Option<String>, bool) {
    match crate::status::all(inst) {
        Ok(all) => match all.get(agent) {
            Some(s) => (
                Some(s.updated.clone()),
                s.state == crate::status::State::Done,
            ),
            None => (None, false),
        },
        Err(_) => (None, false),
    }
}

/// Messages to `agent` from before the start are not part of its task: acknowledge them,
/// so that the first run is the first iteration.
pub fn clear_inbox(inst: &Instance, agent: &str, upto: u64) -> Result<()> {
    crate::inbox::ack(inst, agent, Some(upto)).map(drop)
}

/// Run the iterations of `plan` on `task`; the controllers are running.
pub fn run(inst: &Instance, plan: &Plan, task: &str, shared: &Shared) -> Result<()> {
    let agent = plan.agent.as_str();
    let (series, mut done, mut spent) = resumed(inst, plan)?;
    let base = match done.first() {
        Some(r) => r.base.clone(),
        None => plan.repo.as_ref().and_then(Repo::head),
    };
    let mut i = done.last().map_or(1, |r| r.iteration + 1);
    let mut finished = done.last().is_some_and(|r| r.done);
    let mut ran = 0u64;
    loop {
        let over = match plan.limit {
            Limit::Count(n) => i > n,
            Limit::Time(d) => spent >= d,
        };
        if finished || over {
            break;
        }
        let before = plan.repo.as_ref().map(Repo::snapshot).transpose()?;
        let (status_before, _) = status_of(inst, agent);
        *plan.context.lock().unwrap_or_else(|e| e.into_inner()) =
            context(plan, task, &done, i, spent);
        let started = crate::time::now();
        let t0 = Instant::now();
        let label = format!("{i}/{}", plan.limit.of());
        let ask = match i {
            1 => format!("@{agent} iteration {label}: start the task."),
            _ => format!("@{agent} iteration {label}: continue the task."),
        };
        let posted = post::post(inst, "system", &ask, &PostOptions::default())?;
        let entry = posted.entry.id;
        let reply = wait_reply(inst, agent, entry, None, &shared.stop);
        let took = t0.elapsed();
        spent += took;
        let mut rec = Record {
            series: series.clone(),
            iteration: i,
            limit: plan.limit.text(),
            status: "ok".into(),
            reason: None,
            started,
            duration_ms: took.as_millis() as u64,
            entry,
            summary: String::new(),
            commit: None,
            files: Vec::new(),
            base: base.clone(),
            usage: usage_of(inst, agent, entry),
            done: false,
        };
        let failed = match reply {
            Err(Error::Interrupted) => return Err(Error::Interrupted),
            Err(e) => Some(e.to_string()),
            Ok(entries) => {
                // The agent may have posted a secret itself: it is never recorded,
                // committed or printed.
                let text = redact(&reply_text(&entries), &plan.secrets);
                let (summary, said_done) = summary_of(&text);
                let (status_after, is_done) = status_of(inst, agent);
                rec.done = said_done || (is_done && status_after != status_before);
                rec.summary = summary;
                match (&plan.repo, &before) {
                    (Some(repo), Some(before)) => {
                        let msg = commit_message(&rec.summary, i, &plan.limit, inst.name());
                        match repo.commit(before, &msg) {
                            Ok(c) => {
                                if let Some((id, files)) = c {
                                    rec.commit = Some(id);
                                    rec.files = files;
                                }
                                None
                            }
                            Err(e) => Some(e.to_string()),
                        }
                    }
                    _ => None,
                }
            }
        };
        let failed = failed.map(|why| redact(&why, &plan.secrets));
        if let Some(why) = &failed {
            rec.status = "failed".into();
            rec.reason = Some(why.clone());
        }
        append(inst, agent, &rec)?;
        report(plan, &rec);
        if let Some(why) = failed {
            return Err(Error::No(format!("iteration {label} failed: {why}")));
        }
        ran += 1;
        finished = rec.done;
        done.push(rec);
        i += 1;
    }
    if ran == 0 && plan.resume && !done.is_empty() {
        said_finished(plan, &series, done.len(), finished);
    }
    finish(plan, &done, ran, finished);
    Ok(())
}

/// `--resume` found the series finished: say so (on stderr, unless quiet or JSON), as
/// nothing runs.
fn said_finished(plan: &Plan, series: &str, n: usize, done: bool) {
    if plan.quiet || plan.json {
        return;
    }
    let why = match (done, plan.limit) {
        (true, _) => "the agent said the task is done".to_string(),
        (false, Limit::Count(limit)) => format!("its {limit} iterations have run"),
        (false, Limit::Time(_)) => "its time limit is spent".to_string(),
    };
    let _ = writeln!(
        std::io::stderr().lock(),
        "aw-run: {}: the series begun {series} is finished ({n} iteration{}, {why}): nothing to resume",
        plan.agent,
        if n == 1 { "" } else { "s" }
    );
}

/// One line per iteration on stderr, or one JSON object on stdout.
fn report(plan: &Plan, r: &Record) {
    if plan.json {
        let v = json!({
            "event": "iteration",
            "agent": plan.agent,
            "iteration": r.iteration,
            "limit": r.limit,
            "status": r.status,
            "reason": r.reason,
            "duration_ms": r.duration_ms,
            "commit": r.commit,
            "files": r.files,
            "summary": r.summary,
            "usage": r.usage,
            "done": r.done,
        });
        let _ = writeln!(std::io::stdout().lock(), "{v}");
        return;
    }
    if plan.quiet {
        return;
    }
    let mut line = format!(
        "aw-run: iter {}/{} {} {:.1}s",
        r.iteration,
        plan.limit.of(),
        r.status,
        r.duration_ms as f64 / 1000.0
    );
    match (&r.commit, &plan.repo) {
        (Some(c), _) => line.push_str(&format!(" commit {}", &c[..c.len().min(7)])),
        (None, Some(_)) if r.status == "ok" => line.push_str(" no change"),
        _ => {}
    }
    let what = match &r.reason {
        Some(why) => why.clone(),
        None => subject(&r.summary, "-"),
    };
    line.push_str(&format!(": {}", crate::names::sanitize(&what)));
    if r.done {
        line.push_str(" (done)");
    }
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The end: the last summary on stdout, or with `--json` one summary object.
fn finish(plan: &Plan, done: &[Record], ran: u64, finished: bool) {
    let last = done.last().map_or("", |r| r.summary.as_str());
    let mut out = std::io::stdout().lock();
    if plan.json {
        let stopped = if finished { "done" } else { "limit" };
        let v = json!({
            "event": "iterations",
            "agent": plan.agent,
            "iterations": done.len(),
            "ran": ran,
            "stopped": stopped,
            "commits": done.iter().filter_map(|r| r.commit.clone()).collect::<Vec<_>>(),
            "summary": last,
        });
        let _ = writeln!(out, "{v}");
    } else if !last.is_empty() {
        let _ = writeln!(out, "{}", crate::term::on_stdout(last));
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_a_count_or_a_duration_with_a_unit() {
        assert_eq!(Limit::parse("5"), Ok(Limit::Count(5)));
        assert_eq!(
            Limit::parse("30m"),
            Ok(Limit::Time(Duration::from_secs(1800)))
        );
        assert_eq!(
            Limit::parse("1.5s"),
            Ok(Limit::Time(Duration::from_millis(1500)))
        );
        for bad in [
            "0",
            "0s",
            "x",
            "",
            "1.5",
            "-1",
            "5x",
            "99999999999999999999",
        ] {
            assert!(Limit::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Limit::Count(5).of(), "5");
        assert_eq!(Limit::Time(Duration::from_secs(60)).of(), "?");
    }

    #[test]
    fn the_done_line_is_taken_out_of_the_summary() {
        assert_eq!(
            summary_of("Added tests.\n  AW-DONE \n"),
            ("Added tests.".to_string(), true)
        );
        assert_eq!(
            summary_of("Not AW-DONE yet\n"),
            ("Not AW-DONE yet".to_string(), false)
        );
    }

    #[test]
    fn a_commit_message_has_a_short_subject_and_the_trailers() {
        let m = commit_message("Fix the parser", 2, &Limit::Count(5), "w");
        assert_eq!(m, "Fix the parser\n\nAw-Iteration: 2/5\nAw-Instance: w\n");
        let m = commit_message(
            "Fix it\nand more",
            3,
            &Limit::Time(Duration::from_secs(9)),
            "w",
        );
        assert_eq!(
            m,
            "Fix it\n\nFix it\nand more\n\nAw-Iteration: 3/?\nAw-Instance: w\n"
        );
        let m = commit_message("", 1, &Limit::Count(1), "w");
        assert!(
            m.starts_with("aw iteration 1/1\n\nAw-Iteration: 1/1\n"),
            "{m}"
        );
        let long = "é".repeat(300);
        let s = subject(&long, "-");
        assert_eq!(s.chars().count(), SUBJECT_MAX + 3);
    }

    fn plan() -> Plan {
        Plan {
            agent: "coder".into(),
            limit: Limit::Count(3),
            resume: false,
            repo: None,
            document: Some("notes.md".into()),
            json: false,
            quiet: false,
            context: Default::default(),
            secrets: Vec::new(),
        }
    }

    fn record(i: u64, summary: &str, commit: Option<&str>) -> Record {
        Record {
            series: "s".into(),
            iteration: i,
            limit: "3".into(),
            status: "ok".into(),
            reason: None,
            started: "t".into(),
            duration_ms: 5,
            entry: i,
            summary: summary.into(),
            commit: commit.map(str::to_string),
            files: vec!["a.txt".into()],
            base: Some("b4se".into()),
            usage: None,
            done: false,
        }
    }

    #[test]
    fn the_context_carries_the_task_the_progress_and_every_earlier_iteration() {
        let p = plan();
        let first = context(&p, "Write a poem.", &[], 1, Duration::ZERO);
        assert!(
            first.contains("## Original Task\nWrite a poem.\n"),
            "{first}"
        );
        assert!(first.contains("Iteration: 1 of 3\n"), "{first}");
        assert!(first.contains("the document notes.md"), "{first}");
        assert!(!first.contains("Previous Iterations"), "{first}");
        let done = [
            record(1, "Wrote verse one.", Some("c0ffee1")),
            record(2, "Wrote verse two.", None),
        ];
        let third = context(&p, "Write a poem.", &done, 3, Duration::ZERO);
        assert!(third.contains("Base commit: b4se\n"), "{third}");
        assert!(
            third.contains(
                "### Iteration 1 -> commit c0ffee1\nFiles: a.txt\nSummary: Wrote verse one.\n"
            ),
            "{third}"
        );
        assert!(third.contains("### Iteration 2 -> no commit\n"), "{third}");
        assert!(third.contains("Iteration: 3 of 3\n"), "{third}");
    }
}
