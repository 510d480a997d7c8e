//! The `mock` backend: scripted replies posted in-process (and written to the attempt's live
//! log), optionally votes, and the usage each run reports.

use super::{Backend, RunContext, RunOutcome, Status};
use crate::post::{self, PostOptions};
use crate::proposal;
use crate::run::attempt_log::Stream;
use crate::run::workflow::MockDef;

pub struct Mock {
    def: MockDef,
    /// Runs started so far (attempts included).
    runs: u64,
}

impl Mock {
    pub fn new(def: MockDef) -> Mock {
        Mock { def, runs: 0 }
    }
}

impl Backend for Mock {
    fn run(&mut self, ctx: &RunContext) -> RunOutcome {
        let mut out = self.outcome(ctx);
        if out.status != Status::Killed {
            out.usage = self.def.usage.clone();
        }
        out
    }
}

impl Mock {
    fn outcome(&mut self, ctx: &RunContext) -> RunOutcome {
        (ctx.started)();
        // Made at the start, as a program's is once it runs.
        let log = (**ctx.log).clone();
        self.runs += 1;
        if let Some(d) = self.def.delay
            && !ctx.stop.sleep(d)
        {
            return RunOutcome::new(Status::Killed);
        }
        if self.runs <= self.def.fail {
            return RunOutcome::failed(format!("mock failure {} of {}", self.runs, self.def.fail));
        }
        if let Some(choice) = &self.def.vote
            && let Err(e) = vote(ctx, &choice.value)
        {
            return RunOutcome::failed(format!("cannot vote: {e}"));
        }
        let k = (self.runs - self.def.fail) as usize;
        let text = match self.def.replies.len() {
            0 => {
                let n = ctx.prompt_messages;
                format!("{}: handled {n} message(s)", ctx.agent)
            }
            len => self.def.replies[k.min(len) - 1].value.clone(),
        };
        if let Some(l) = &log {
            l.push(Stream::Stdout, format!("{text}\n").as_bytes());
            l.finish();
        }
        match post::post(ctx.inst, ctx.agent, &text, &PostOptions::default()) {
            Ok(_) => RunOutcome::new(Status::Ok),
            Err(e) => RunOutcome::failed(format!("cannot post: {e}")),
        }
    }
}

/// Vote as the agent in every active proposal it has not voted in: for `choice` when it is an
/// option, else for the first option.
fn vote(ctx: &RunContext, choice: &str) -> crate::error::Result<()> {
    for p in proposal::list(ctx.inst, true)? {
        if p.votes.iter().any(|v| v.voter == ctx.agent) {
            continue;
        }
        let pick = p
            .options
            .iter()
            .find(|o| o.id == choice)
            .or(p.options.first())
            .map(|o| o.id.clone());
        if let Some(pick) = pick {
            proposal::vote(ctx.inst, ctx.agent, &p.id, &pick, None)?;
        }
    }
    Ok(())
}
