//! One agent's controller: wait for new channel activity, read the inbox, build the prompt,
//! run the backend (with retries), acknowledge what the prompt showed, and record a
//! transcript of each attempt. Before each attempt and after each run (and, through
//! [`RunContext::over_budget`], after each model call) the agent's own budget and the
//! workflow's are checked: past one, every controller stops.
//!
//! Controllers are not threads: one dispatcher (`dispatch`) looks at the inboxes of the
//! agents that new entries mention and runs each agent due on a thread of its own. They
//! share one [`Shared`] with the runner: a generation counter that the channel watcher bumps
//! on every change, the agents concerned, and each controller's state, under one mutex and
//! condition variable. An idle agent costs nothing.
//!
//! This file holds a look at an agent's inbox and one run with its retries; the rest is
//! split by concept, each part using only those below it in this map:
//!
//! | module        | what it holds |
//! |---------------|---------------|
//! | `dispatch`    | the dispatcher: which agents to look at, their runs' threads, cooldowns |
//! | `look`        | a look at an agent's inbox: is a run due, and what a run's end changes |
//! | `event`       | [`Event`]: what a controller reports |
//! | `transcripts` | an attempt's log and transcript, and what an agent's transcripts say it spent |
//! | `budget`      | what the runs spend, the ledger, and the checks against the budgets |
//! | `loop_guard`  | the run cap, the rate limit and the pair limit, and the pauses they cause |
//! | `config`      | [`Controller`]: everything one controller needs, and what it keeps between runs |
//! | `shared`      | [`Shared`], [`State`], [`AgentState`]: what the runner and the controllers share |
//! | `rate`        | [`Rate`]: the loop guard's limits and their defaults |

mod budget;
mod config;
mod dispatch;
mod event;
mod look;
mod loop_guard;
mod rate;
mod shared;
mod transcripts;

pub use config::{Controller, Retry};
pub use dispatch::dispatch;
pub use event::{Event, Report};
pub use rate::{DEFAULT_PAIR, DEFAULT_RATE, Rate};
pub use shared::{AgentState, Mail, Shared, State};
pub use transcripts::usage_of;

use std::time::{Duration, Instant};

use super::backend::{RunContext, RunOutcome, Status};
use super::prompt::{self, PromptParts};
use crate::channel::Channel;
use crate::inbox;
use crate::post::{self, PostOptions};
use crate::serve::{self, ControllerState};
use crate::usage::Usage;
use budget::{over_budget, priced, remaining_usd};

use super::redact::redact;
pub use super::redact::secrets;

impl Controller {
    /// Record the controller's state for `aw-ctl ps`, when it changed.
    pub(super) fn publish(&mut self, state: ControllerState) {
        if self.published == Some((state, self.served.runs)) {
            return;
        }
        self.served.state = state;
        self.published = Some((state, self.served.runs));
        if let Err(e) = serve::write(&self.inst, &self.served) {
            crate::warn::warn("aw-run", format!("{}: state not recorded: {e}", self.agent));
        }
    }

    fn event(
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
            transcript: 0,
            stderr_tail: None,
        }
    }

    /// One run with its retries; `true` when an attempt succeeded (and the inbox was acked).
    fn one_run(
        &mut self,
        shared: &Shared,
        report: &Report,
        run: u64,
        msgs: &[inbox::InboxMessage],
        older: Option<prompt::Older>,
    ) -> bool {
        let channel = Channel::new(&self.inst);
        let last = msgs.last().map_or(0, |m| m.entry.id);
        let mut wait = self.retry.backoff;
        for attempt in 1..=self.retry.attempts.max(1) {
            if attempt > 1 {
                if !self.stop.sleep(wait) {
                    return false;
                }
                wait = wait.saturating_mul(2);
            }
            if self.stop.is_set() || self.check_budgets(shared) {
                return false;
            }
            let shared_context = self.document.as_deref().map(|name| {
                let recent = channel
                    .tail(prompt::RECENT)
                    .map(|b| b.entries)
                    .unwrap_or_default();
                (recent, name, crate::document::read(&self.inst, name).ok())
            });
            let text = prompt::build(&PromptParts {
                agent: &self.agent,
                instance: self.inst.name(),
                system: self
                    .system
                    .as_deref()
                    .filter(|_| !self.backend.takes_system_prompt()),
                inbox: msgs,
                older,
                recent: shared_context.as_ref().map(|c| c.0.as_slice()),
                document: shared_context.as_ref().map(|c| (c.1, c.2.as_deref())),
                attempt,
            });
            let text = match &self.task_context {
                Some(c) => text + &c.lock().unwrap_or_else(|e| e.into_inner()),
                None => text,
            };
            let before = channel.last_id().unwrap_or(0);
            let started = crate::time::now();
            let mut ev = self.event(run, attempt, Status::Ok, Duration::ZERO, None);
            ev.start = true;
            ev.transcript = self.next_transcript;
            ev.woken_by = msgs
                .iter()
                .map(|m| (m.entry.id, m.entry.from.clone()))
                .collect();
            report(&ev);
            let t0 = Instant::now();
            let (agent, own, price) = (self.agent.as_str(), &self.budget, self.price.as_ref());
            let over_budget = |partial: &Usage| over_budget(shared, agent, own, price, partial);
            let ctx = RunContext {
                inst: &self.inst,
                agent: &self.agent,
                run,
                attempt,
                prompt: &text,
                prompt_messages: msgs.len(),
                root: &self.root,
                mcp_config: &self.mcp_config,
                timeout: self.timeout,
                stop: &self.stop,
                over_budget: &over_budget,
                remaining_usd: remaining_usd(&shared.lock(), shared, agent, own),
                log: self.attempt_log(),
            };
            let mut out = match crate::fs::atomic_write_private_unsynced(
                &self.mcp_config,
                self.mcp_text.as_bytes(),
            ) {
                Ok(()) => self.backend.run(&ctx),
                Err(e) => {
                    let mut out = RunOutcome::new(Status::Failed);
                    out.reason = Some(format!("cannot write its MCP configuration: {e}"));
                    out
                }
            };
            // A reason may quote what a service sent back, a key among it.
            out.reason = out.reason.map(|r| redact(&r, &self.secrets));
            if let Some(why) = out.usage.as_ref().and_then(Usage::implausible) {
                // Not believed: the answer fails, its counts taken at the ceiling.
                out.status = Status::Failed;
                out.reason = Some(why);
                out.usage = out.usage.map(|u| u.believed());
            }
            out.usage = out.usage.map(|u| priced(&u, price));
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
            if out.status == Status::Ok {
                if self.reply_fallback
                    && !out.final_text.is_empty()
                    && !self.answered(&channel, before, &replies)
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
                if out.status == Status::Ok
                    && let Err(e) = inbox::ack(&self.inst, &self.agent, Some(last))
                {
                    out.status = Status::Failed;
                    out.reason = Some(format!("cannot acknowledge: {e}"));
                }
            }
            let duration = t0.elapsed();
            let transcript = self.next_transcript;
            self.transcript(
                run, attempt, &out, &started, duration, msgs, &replies, &text,
            );
            let ok = out.status == Status::Ok;
            if !ok {
                shared.agent(&self.agent).failures += 1;
            }
            match &out.usage {
                Some(u) => self.spend(shared, u),
                None => shared.agent(&self.agent).running = Usage::default(),
            }
            let mut ev = self.event(run, attempt, out.status, duration, out.reason.clone());
            ev.transcript = transcript;
            if !ok {
                ev.stderr_tail = last_line(&redact(&out.stderr.text, &self.secrets));
            }
            ev.gave_up = !ok
                && (attempt == self.retry.attempts.max(1) || self.stop.is_set() || out.permanent);
            report(&ev);
            if ok {
                return true;
            }
            if out.status == Status::Killed || out.permanent {
                return false;
            }
        }
        false
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
    use crate::models::Price;
    use crate::usage::Budget;

    fn usage(input: u64, output: u64, cost: Option<f64>) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cost_usd: cost,
            ..Usage::default()
        }
    }

    /// Shared state where `alice` spent $0.02 and `bob` $0.05, under a workflow budget of
    /// $0.10.
    fn shared() -> Shared {
        let shared = Shared {
            budget: Budget {
                usd: Some(0.10),
                tokens: None,
            },
            ..Shared::default()
        };
        {
            let mut st = shared.lock();
            st.agents.entry("alice".into()).or_default().usage = usage(10, 10, Some(0.02));
            st.agents.entry("bob".into()).or_default().usage = usage(10, 10, Some(0.05));
        }
        shared
    }

    #[test]
    fn a_partial_run_is_priced_and_checked_against_both_budgets() {
        let shared = shared();
        let own = Budget {
            usd: Some(0.03),
            tokens: None,
        };
        // $1 per million input tokens: 20,000 tokens cost $0.02.
        let price = Price {
            input: Some(1.0),
            output: Some(1.0),
            ..Price::default()
        };
        let partial = usage(20_000, 0, None);
        // Alice's own budget: $0.02 + $0.02 is over $0.03; bob's spending is not hers.
        assert_eq!(
            over_budget(&shared, "alice", &own, Some(&price), &partial).as_deref(),
            Some("budget: agent alice spent $0.0400, over its $0.03 budget")
        );
        // Unpriced, the partial run costs nothing known: under both budgets.
        assert_eq!(over_budget(&shared, "alice", &own, None, &partial), None);
        // Without an own budget, the workflow's counts everyone: $0.02 + $0.05 + $0.04.
        let big = usage(40_000, 0, None);
        assert_eq!(
            over_budget(&shared, "alice", &Budget::default(), Some(&price), &big).as_deref(),
            Some("budget: $0.1100 spent, over the $0.1 budget")
        );
        // A CLI's own figure is kept.
        let reported = usage(40_000, 0, Some(0.001));
        assert_eq!(
            over_budget(&shared, "alice", &own, Some(&price), &reported),
            None
        );
        // Once a budget stopped the run, every run is told so.
        shared.lock().over_budget = Some("budget: stopped".into());
        assert_eq!(
            over_budget(&shared, "bob", &Budget::default(), None, &usage(0, 0, None)).as_deref(),
            Some("budget: stopped")
        );
    }

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

    #[test]
    fn rates_parse_or_say_what_is_wrong() {
        assert_eq!(
            Rate::parse("20/60s"),
            Ok(Some(Rate {
                runs: 20,
                window: Duration::from_secs(60)
            }))
        );
        assert_eq!(Rate::parse("off"), Ok(None));
        for bad in ["20", "0/60s", "x/60s", "5/0s", "5/soon"] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_usd_left_is_the_smaller_of_the_two_budgets() {
        let shared = shared();
        let st = shared.lock();
        let left = |b: Budget| remaining_usd(&st, &shared, "alice", &b);
        let own = |usd: f64| Budget {
            usd: Some(usd),
            tokens: None,
        };
        // The workflow leaves $0.03 ($0.10 - $0.07).
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
        assert!(close(left(Budget::default()), 0.03));
        assert!(close(left(own(0.025)), 0.005));
        assert!(close(left(own(1.0)), 0.03));
        assert!(close(left(own(0.01)), 0.0));
        drop(st);
        let free = Shared::default();
        let st = free.lock();
        assert_eq!(remaining_usd(&st, &free, "alice", &Budget::default()), None);
        assert!(close(remaining_usd(&st, &free, "alice", &own(0.5)), 0.5));
    }
}
