//! One controller's attempt: what it is (everything it needs to run its agent and what it
//! keeps between runs), one run with its retries (the prompt, the backend's call, the
//! reply, the acknowledgement, the transcript and what it spent) and the events it
//! reports, and the state it publishes for `aw-ctl ps`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::budget::{Account, over_budget, priced, remaining_usd};
use super::event::{Event, Report};
pub(super) use super::prompting::Due;
use super::prompting::PromptSource;
use super::shared::Shared;
use super::transcripts::{Record, Transcripts};
use crate::channel::Channel;
use crate::inbox;
use crate::instance::Instance;
use crate::models::Price;
use crate::post::{self, PostOptions};
use crate::process::Stop;
use crate::run::backend::{Backend, Later, RunContext, RunOutcome, Status};
use crate::run::redact::redact;
use crate::serve::{self, ControllerState, Served};
use crate::usage::{Budget, Usage};

/// Retry policy of failed runs.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Attempts per run, at least 1.
    pub attempts: u32,
    /// Wait before the second attempt; doubled for each further one.
    pub backoff: Duration,
}

/// Everything one controller needs. What every controller of a server has alike (the
/// instance, the root, the document, the server's part of the record, the secrets of
/// aw-run's own environment, where MCP configurations go) is held once and shared: a server
/// of many agents pays for each agent only what is its own (see BENCHMARKS.md, "what a
/// served agent costs").
pub struct Controller {
    pub inst: Arc<Instance>,
    pub agent: String,
    pub backend: Box<dyn Backend>,
    pub system: Option<String>,
    /// The entry document; `None` when the workflow has no shared context (`context:
    /// false`): the prompt then shows neither the recent channel nor a document.
    pub document: Option<Arc<str>>,
    pub root: Arc<Path>,
    /// Where the agent's MCP configuration goes and what it runs.
    pub mcp: Arc<Mcp>,
    /// The arguments of `aw-mcp` besides the agent (its collab tools and their limits).
    pub tool_args: Vec<String>,
    pub timeout: Option<Duration>,
    pub max_runs: u64,
    pub reply_fallback: bool,
    pub retry: Retry,
    /// First transcript number to use.
    pub next_transcript: u64,
    /// After a run failed for good, how long before its messages are tried again (unless
    /// something new arrives first).
    pub cooldown: Duration,
    /// The server's part of what `aw-ctl ps` shows of this controller; the agent, its state
    /// and its runs are the controller's own.
    pub record: Arc<Served>,
    /// Runs started since the server started.
    pub runs: u64,
    /// The state and run count last recorded.
    pub published: Option<(ControllerState, u64)>,
    /// Values that transcripts and replies never show (see [`secrets`](crate::run::redact::secrets)).
    pub secrets: Arc<[String]>,
    /// What this agent's own runs may spend.
    pub budget: Budget,
    /// The prices of the agent's model: they price a run whose backend reports no cost.
    pub price: Option<Box<Price>>,
    /// Text added at the end of every prompt, read as each prompt is built: an iterative
    /// run's task and progress (see [`crate::run::iter`]).
    pub task_context: Option<Arc<Mutex<String>>>,
    /// Stops this controller alone (a closed worker); a child of
    /// [`Shared::stop`](crate::run::controller::Shared::stop), so
    /// stopping them all stops it too.
    pub stop: Stop,
    /// The agent's claim (see
    /// [`serve::take`](crate::serve::take)), let go when the controller ends.
    pub serving_lock: Option<crate::serve::Claim>,
    /// It works the board (`board: next`): each run starts from a card (see
    /// [`cards`](super::cards)).
    pub board: bool,
    /// `needs: approval`: each run waits for an approval first.
    pub needs: Option<Box<crate::run::workflow::Gate>>,
    /// `isolation: worktree`: the agent's worktree, made (or made afresh once its work was
    /// merged) before each attempt and removed after one when its work was merged.
    pub worktree: Option<Box<crate::worktree::Spec>>,
    /// `session: keep`: the backend (`claude` or `codex`) whose CLI session each run
    /// continues (see [`crate::sessions`]).
    pub session: Option<&'static str>,
}

/// Where a server's agents' MCP configurations go (a private folder, made) and the
/// `aw-mcp` they run with which root: the same for every agent of the server.
pub struct Mcp {
    pub dir: PathBuf,
    pub aw_mcp: PathBuf,
    pub root: Arc<Path>,
}

/// Write a controller's record for `aw-ctl ps` (`_state/serve/AGENT.json`) to `inst`'s; a
/// failure is a warning.
pub(super) fn write_state(inst: &Instance, record: &Served) {
    if let Err(e) = serve::write(inst, record) {
        crate::warn::warn(
            "aw-run",
            format!("{}: state not recorded: {e}", record.agent),
        );
    }
}

impl Controller {
    /// Record the controller's state for `aw-ctl ps`, when it changed.
    pub(super) fn publish(&mut self, state: ControllerState) {
        if let Some(record) = self.note(state) {
            write_state(&self.inst, &record);
        }
    }

    /// Take `state` as the controller's: the record to write for `aw-ctl ps` when it
    /// changed, for the caller to write when it suits (a run's, once its thread is off).
    pub fn note(&mut self, state: ControllerState) -> Option<Served> {
        if self.published == Some((state, self.runs)) {
            return None;
        }
        self.published = Some((state, self.runs));
        Some(Served {
            agent: self.agent.clone(),
            state,
            runs: self.runs,
            ..(*self.record).clone()
        })
    }

    /// The agent's MCP configuration: its path.
    pub fn mcp_config(&self) -> PathBuf {
        self.mcp.dir.join(format!("{}.json", self.agent))
    }

    /// What [`Controller::mcp_config`] holds (`aw-mcp --agent NAME@INSTANCE` and the tool
    /// arguments), checked before every attempt and written afresh when it differs: the
    /// agent's own tools may reach the file, and a rewritten one must never take effect.
    /// Made when needed: most agents of a large server never run.
    pub fn mcp_text(&self) -> String {
        crate::tools::client_config::claude_json(
            &self.mcp.aw_mcp,
            &self.mcp.root,
            &format!("{}@{}", self.agent, self.inst.name()),
            &self.tool_args,
        )
    }

    /// An event of attempt `attempt` of run `run`, ended with `status` after `duration`.
    pub(super) fn event(
        &self,
        run: u64,
        attempt: u32,
        status: Status,
        duration: Duration,
        reason: Option<String>,
    ) -> Event {
        Event {
            agent: self.agent.clone(),
            instance: self.inst.name().to_string(),
            run,
            attempt,
            start: false,
            status,
            duration,
            reason,
            gave_up: false,
            woken_by: Vec::new(),
            card: None,
            transcript: 0,
            stderr_tail: None,
        }
    }

    /// What this agent's runs spend, and the budgets they are checked against.
    pub(super) fn account(&self) -> Account<'_> {
        Account {
            inst: &self.inst,
            agent: &self.agent,
            budget: &self.budget,
        }
    }

    /// What this agent's prompts are made of besides the run.
    fn prompt_source(&self) -> PromptSource {
        PromptSource {
            inst: self.inst.clone(),
            agent: self.agent.clone(),
            system: self
                .system
                .clone()
                .filter(|_| !self.backend.takes_system_prompt()),
            document: self.document.clone(),
            task_context: self.task_context.clone(),
        }
    }

    /// Where this agent's attempts leave their logs and transcripts.
    fn transcripts(&self) -> Transcripts<'_> {
        Transcripts {
            inst: &self.inst,
            agent: &self.agent,
            secrets: &self.secrets,
        }
    }

    /// One run with its retries; `true` when an attempt succeeded (and the inbox was acked).
    /// `running`: the record that says the agent runs, written once the backend's run is
    /// under way (off the path from the mention to its program's start), or before the run
    /// waits for its approval.
    pub(super) fn one_run(
        &mut self,
        shared: &Shared,
        report: &Report,
        due: &Due,
        running: Option<Served>,
    ) -> bool {
        let (running, inst) = (std::cell::Cell::new(running), self.inst.clone());
        let started = || {
            if let Some(r) = running.take() {
                write_state(&inst, &r);
            }
        };
        if self.needs.is_some() {
            started();
        }
        match self.approved(due) {
            Some(true) => {}
            // Rejected, expired or skipped: its messages are handled without a run.
            Some(false) => return true,
            None => return false,
        }
        let channel = Channel::new(&self.inst);
        let attempts = self.retry.attempts.max(1);
        let mut wait = self.retry.backoff;
        for attempt in 1..=attempts {
            if attempt > 1 {
                if !self.stop.sleep(wait) {
                    return false;
                }
                wait = wait.saturating_mul(2);
            }
            if self.stop.is_set() || self.account().check_budgets(shared) {
                return false;
            }
            let out = self.attempt(shared, report, (&channel, &started), due, attempt);
            if out.status == Status::Ok {
                return true;
            }
            if out.status == Status::Killed || out.permanent {
                return false;
            }
        }
        false
    }

    /// With `needs: approval`, ask for the run `due` to be approved and wait: `Some(true)`
    /// to run; `Some(false)` when it was rejected, or its time ran out (its messages are
    /// then acknowledged, and the decision is in the channel); `None` when stopped, or
    /// when the request could not be asked (a warning says why). The request is keyed by
    /// the first message of the run (and its card), so that a server started again after a
    /// kill finds it.
    fn approved(&self, due: &Due) -> Option<bool> {
        let Some(gate) = &self.needs else {
            return Some(true);
        };
        let first = due.msgs.first().map_or(0, |m| m.entry.id);
        let (name, key) = match &due.card {
            // A run from a card of the board (`board: next`) may have no message.
            Some(c) => (
                format!("a run of {} on card {}", self.agent, c.id),
                format!("run: {}: card {}: from #{first}", self.agent, c.id),
            ),
            None => (
                format!("a run of {} on #{first}..#{}", self.agent, due.last()),
                format!("run: {}: from #{first}", self.agent),
            ),
        };
        let kind = crate::approval::Kind::Run;
        match crate::run::pipeline::ask_and_wait(&self.inst, kind, key, &name, gate, &self.stop) {
            Ok((_, crate::approval::Outcome::Approved)) => Some(true),
            Ok((r, outcome)) => {
                crate::warn::warn(
                    "aw-run",
                    format!("{name}: approval #{} {}; not run", r.id, outcome.name()),
                );
                if let Err(e) = crate::inbox::ack(&self.inst, &self.agent, Some(due.last())) {
                    crate::warn::warn(
                        "aw-run",
                        format!("{}: inbox not acknowledged: {e}", self.agent),
                    );
                }
                Some(false)
            }
            Err(crate::error::Error::Interrupted) => None,
            Err(e) => {
                crate::warn::warn("aw-run", e.to_string());
                None
            }
        }
    }

    /// Attempt `attempt` of the run `due`: build its prompt, call the backend, answer and
    /// acknowledge, record it, and report its start and end; what it came to. `on_start` is
    /// called once the backend's run is under way.
    fn attempt(
        &mut self,
        shared: &Shared,
        report: &Report,
        (channel, on_start): (&Channel, &dyn Fn()),
        due: &Due,
        attempt: u32,
    ) -> RunOutcome {
        let kept = self.kept_session();
        let source = self.prompt_source();
        // Built when the backend reads it: for a program, once it has started.
        let mut prompt: Later<String> = match &kept {
            Some(_) => Later::new(Box::new(|| source.continued(channel, due, attempt))),
            None => Later::new(Box::new(|| source.full(channel, due, attempt))),
        };
        let before = channel.last_id().unwrap_or(0);
        let started = crate::time::now();
        self.report_start(report, due, attempt);
        let woken_by: Vec<u64> = due.msgs.iter().map(|m| m.entry.id).collect();
        let span = crate::otel::genai::agent(&crate::otel::genai::Attempt {
            agent: &self.agent,
            instance: self.inst.name(),
            run: due.run,
            attempt,
            woken_by: &woken_by,
            card: due.card.as_ref().map(|c| c.id),
        });
        let t0 = Instant::now();
        let entered = span.enter();
        let mut out = self.call(shared, (due, attempt), &prompt, on_start, kept.as_ref());
        if let Some(crate::sessions::Kept { id, .. }) = &kept
            && out.status == Status::Failed
            && out.session.is_none()
            && !out.permanent
            && !self.stop.is_set()
        {
            // The CLI did not take the session up: a fresh one, with the whole prompt.
            crate::warn::warn(
                "aw-run",
                format!(
                    "{}: session {id} not resumed ({}); a fresh session",
                    self.agent,
                    out.reason.as_deref().unwrap_or("failed")
                ),
            );
            prompt = Later::new(Box::new(|| source.full(channel, due, attempt)));
            out = self.call(shared, (due, attempt), &prompt, on_start, None);
        }
        drop(entered);
        let text = prompt.as_str();
        self.keep_session(kept.as_ref(), &out);
        // Counted before the answer is posted, so that an agent the answer wakes sees a
        // budget it went over and starts no run; the budget stop said after the answer.
        match &out.usage {
            Some(u) => self.account().spend(shared, u),
            None => shared.agent(&self.agent).running = Usage::default(),
        }
        let replies = self.answer(channel, before, due.last(), &mut out);
        if out.usage.is_some() {
            self.account().check_budgets(shared);
        }
        let record = Record {
            run: due.run,
            attempt,
            out: &out,
            started: &started,
            duration: t0.elapsed(),
            msgs: &due.msgs,
            replies: &replies,
            prompt: text,
        };
        self.record(shared, report, &record);
        crate::otel::genai::end_agent(
            span,
            text.len(),
            out.status.name(),
            out.reason.as_deref(),
            out.usage.as_ref(),
        );
        out
    }

    /// The session this agent's next run continues (`session: keep`): `None` for a fresh
    /// one, or when the record cannot be read (a warning says why).
    fn kept_session(&self) -> Option<crate::sessions::Kept> {
        let backend = self.session?;
        match crate::sessions::get(&self.inst, &self.agent, backend) {
            Ok(k) => k,
            Err(e) => {
                crate::warn::warn("aw-run", format!("{}: kept session: {e}", self.agent));
                None
            }
        }
    }

    /// Record the session a run that started from `from` reported, for the next run to
    /// continue (`session: keep`); not when the record was reset while it ran.
    fn keep_session(&self, from: Option<&crate::sessions::Kept>, out: &RunOutcome) {
        let (Some(backend), Some(id)) = (self.session, &out.session) else {
            return;
        };
        let from = from.map(|k| k.id.as_str());
        let total = out.session_total.as_ref();
        match crate::sessions::keep(&self.inst, &self.agent, from, (backend, id), total) {
            Ok(true) => {}
            Ok(false) => crate::warn::warn_note(
                "aw-run",
                &format!("{}: session {id} not kept: reset while it ran", self.agent),
            ),
            Err(e) => crate::warn::warn("aw-run", format!("{}: session not kept: {e}", self.agent)),
        }
    }

    /// Report that attempt `attempt` on `due` starts, with what woke the agent.
    fn report_start(&self, report: &Report, due: &Due, attempt: u32) {
        let mut ev = self.event(due.run, attempt, Status::Ok, Duration::ZERO, None);
        ev.start = true;
        ev.transcript = self.next_transcript;
        ev.woken_by = due
            .msgs
            .iter()
            .map(|m| (m.entry.id, m.entry.from.clone()))
            .collect();
        ev.card = due.card.as_ref().map(|c| c.id);
        report(&ev);
    }

    /// Call the backend with `prompt`, continuing the CLI session `resume` when given (its
    /// MCP configuration checked first, and written afresh when it differs), under the
    /// budgets; its outcome redacted, an implausible usage failed, and priced.
    fn call(
        &mut self,
        shared: &Shared,
        (due, attempt): (&Due, u32),
        prompt: &Later<String>,
        on_start: &dyn Fn(),
        resume: Option<&crate::sessions::Kept>,
    ) -> RunOutcome {
        let (agent, own, price) = (self.agent.as_str(), &self.budget, self.price.as_deref());
        let over_budget = |partial: &Usage| over_budget(shared, agent, own, price, partial);
        let mcp_config = self.mcp_config();
        let n = self.next_transcript;
        let transcripts = Transcripts {
            inst: &self.inst,
            agent: &self.agent,
            secrets: &self.secrets,
        };
        // Made once the program has started: what it prints waits in its pipe meanwhile.
        let log: Later<_> = Later::new(Box::new(move || transcripts.attempt_log(n)));
        let ctx = RunContext {
            inst: &self.inst,
            agent: &self.agent,
            run: due.run,
            attempt,
            prompt,
            prompt_messages: due.msgs.len(),
            card: due.card.as_ref().map(|c| c.id),
            root: &self.root,
            mcp_config: &mcp_config,
            timeout: self.timeout,
            stop: &self.stop,
            over_budget: &over_budget,
            remaining_usd: remaining_usd(&shared.lock(), shared, agent, own),
            log: &log,
            started: on_start,
            resume,
        };
        // Read, and written afresh only when it is not what it must be: a configuration
        // rewritten since (by the agent's own tools, say) never takes effect.
        let ready = crate::fs::ensure_private_unsynced(&mcp_config, self.mcp_text().as_bytes())
            .map(drop)
            .map_err(|e| format!("cannot write its MCP configuration: {e}"))
            .and_then(|()| match &self.worktree {
                Some(w) => w
                    .ensure()
                    .map(drop)
                    .map_err(|e| format!("cannot make its worktree: {e}")),
                None => Ok(()),
            });
        let mut out = match ready {
            Ok(()) => self.backend.run(&ctx),
            Err(why) => {
                let mut out = RunOutcome::new(Status::Failed);
                out.reason = Some(why);
                out
            }
        };
        if let Some(Err(e)) = self.worktree.as_deref().map(crate::worktree::Spec::tidy) {
            crate::warn::warn("aw-run", format!("{}: its worktree: {e}", self.agent));
        }
        // A reason may quote what a service sent back, a key among it.
        out.reason = out.reason.map(|r| redact(&r, &self.secrets));
        if let Some(why) = out.usage.as_ref().and_then(Usage::implausible) {
            // Not believed: the answer fails, its counts taken at the ceiling.
            out.status = Status::Failed;
            out.reason = Some(why);
            out.usage = out.usage.map(|u| u.believed());
        }
        out.usage = out.usage.map(|u| priced(&u, price));
        out
    }

    /// After a call that ended as `out`: the entries the agent wrote since entry `before`,
    /// with, when it succeeded, its printed answer posted (when nothing it wrote answers
    /// anyone) and its inbox acknowledged up to `last`. A failure to post or acknowledge
    /// fails `out`.
    fn answer(&self, channel: &Channel, before: u64, last: u64, out: &mut RunOutcome) -> Vec<u64> {
        let mut replies: Vec<u64> = channel
            .read_since(before)
            .map(|b| {
                b.entries
                    .iter()
                    .filter(|e| e.from == self.agent)
                    .map(|e| e.id)
                    .collect()
            })
            .unwrap_or_default();
        if out.status != Status::Ok {
            return replies;
        }
        if self.reply_fallback
            && !out.final_text.is_empty()
            && !self.answered(channel, before, &replies)
        {
            // What the agent printed may hold a secret of its environment.
            let reply = redact(&out.final_text, &self.secrets);
            match post::post(&self.inst, &self.agent, &reply, &PostOptions::default()) {
                Ok(p) => replies.push(p.entry.id),
                Err(e) => {
                    out.status = Status::Failed;
                    out.reason = Some(format!("cannot post the reply: {e}"));
                }
            }
        }
        if out.status == Status::Ok {
            self.acknowledge(last, out);
        }
        replies
    }

    /// Acknowledge the agent's inbox up to `last`; a failure fails `out`.
    fn acknowledge(&self, last: u64, out: &mut RunOutcome) {
        if let Err(e) = inbox::ack(&self.inst, &self.agent, Some(last)) {
            out.status = Status::Failed;
            out.reason = Some(format!("cannot acknowledge: {e}"));
        }
    }

    /// Whether the entries `replies` the agent wrote in a run (after entry `before`) answer
    /// anyone: an entry counts unless it only talks to the agent's own workers (the
    /// `spawn_agent`, `send_input` and `close_agent` messages of a lead).
    fn answered(&self, channel: &Channel, before: u64, replies: &[u64]) -> bool {
        if replies.is_empty() {
            return false;
        }
        let workers: Vec<String> = crate::registry::Registry::load_shared(&self.inst)
            .map(|r| {
                r.agents
                    .iter()
                    .filter(|a| a.spawned_by.as_deref() == Some(self.agent.as_str()))
                    .map(|a| a.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        if workers.is_empty() {
            return true;
        }
        let Ok(batch) = channel.read_since(before) else {
            return true;
        };
        batch
            .entries
            .iter()
            .filter(|e| replies.contains(&e.id))
            .any(|e| !crate::collab::to_workers(e, &workers))
    }

    /// What an attempt leaves: its transcript, a failure counted, and the event of its end.
    fn record(&mut self, shared: &Shared, report: &Report, r: &Record) {
        let transcript = self.next_transcript;
        self.transcripts().write(transcript, r);
        self.next_transcript += 1;
        let out = r.out;
        let ok = out.status == Status::Ok;
        if !ok {
            shared.agent(&self.agent).failures += 1;
        }
        let mut ev = self.event(r.run, r.attempt, out.status, r.duration, out.reason.clone());
        ev.transcript = transcript;
        if !ok {
            ev.stderr_tail = last_line(&redact(&out.stderr.text, &self.secrets));
        }
        ev.gave_up =
            !ok && (r.attempt == self.retry.attempts.max(1) || self.stop.is_set() || out.permanent);
        report(&ev);
    }
}

/// Most characters of a failed attempt's stderr line that its event shows.
pub const STDERR_TAIL_CHARS: usize = 200;

/// The last line of `text` that is not blank, trimmed, with control characters shown as
/// `?`, cut at [`STDERR_TAIL_CHARS`] (with `...`); `None` when there is none.
fn last_line(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    let mut shown: String = line
        .chars()
        .take(STDERR_TAIL_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if line.chars().count() > STDERR_TAIL_CHARS {
        shown.push_str("...");
    }
    Some(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stderr_tail_is_the_last_line_that_says_something_cut_to_a_line() {
        assert_eq!(
            last_line("a\nfatal: x\n\n  \n").as_deref(),
            Some("fatal: x")
        );
        assert_eq!(last_line("\n \n"), None);
        assert_eq!(last_line("bell\u{7} here").as_deref(), Some("bell? here"));
        let long = last_line(&"y".repeat(500)).unwrap();
        assert_eq!(long.len(), STDERR_TAIL_CHARS + 3);
        assert!(long.ends_with("y..."));
    }
}
