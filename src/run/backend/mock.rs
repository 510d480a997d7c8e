//! The `mock` backend: scripted replies posted in-process.

use super::{Backend, RunContext, RunOutcome, Status};
use crate::post::{self, PostOptions};
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
        self.runs += 1;
        if let Some(d) = self.def.delay
            && !ctx.stop.sleep(d)
        {
            return RunOutcome::new(Status::Killed);
        }
        if self.runs <= self.def.fail {
            return RunOutcome::failed(format!("mock failure {} of {}", self.runs, self.def.fail));
        }
        let k = (self.runs - self.def.fail) as usize;
        let text = match self.def.replies.len() {
            0 => {
                let n = ctx.prompt_messages;
                format!("{}: handled {n} message(s)", ctx.agent)
            }
            len => self.def.replies[k.min(len) - 1].value.clone(),
        };
        match post::post(ctx.inst, ctx.agent, &text, &PostOptions::default()) {
            Ok(_) => RunOutcome::new(Status::Ok),
            Err(e) => RunOutcome::failed(format!("cannot post: {e}")),
        }
    }
}
