//! What a run's prompt is made of: the run ([`Due`]: the messages it is on, its card) and
//! the controller's part ([`PromptSource`]), owned (the shared parts are counted
//! references) so that the prompt can be built after the backend has started its program,
//! while the controller is busy with the call.

use std::sync::{Arc, Mutex};

use crate::channel::Channel;
use crate::inbox;
use crate::instance::Instance;
use crate::run::prompt::{self, PromptParts};

/// A run the dispatcher starts: the messages its prompt shows, the older ones summarised,
/// and the run's number.
pub(super) struct Due {
    pub msgs: Vec<inbox::InboxMessage>,
    pub older: Option<prompt::Older>,
    pub run: u64,
    /// The card the run starts from, claimed for the agent (`board: next`).
    pub card: Option<Box<crate::board::Card>>,
}

impl Due {
    /// The newest message the run is on: acknowledged with the others when it succeeds.
    pub(super) fn last(&self) -> u64 {
        self.msgs.last().map_or(0, |m| m.entry.id)
    }
}

/// A controller's part of its prompts.
pub(super) struct PromptSource {
    pub inst: Arc<Instance>,
    pub agent: String,
    /// The agent's system prompt when the backend does not take it apart.
    pub system: Option<String>,
    pub document: Option<Arc<str>>,
    pub task_context: Option<Arc<Mutex<String>>>,
}

impl PromptSource {
    /// The prompt of attempt `attempt` on `due`: the inbox, with the recent channel and the
    /// document when the workflow shares context, and the task's context at the end.
    pub(super) fn full(&self, channel: &Channel, due: &Due, attempt: u32) -> String {
        self.build(channel, due, attempt, prompt::build, true)
    }

    /// The prompt of a run that continues a kept session: only what is new since.
    pub(super) fn continued(&self, channel: &Channel, due: &Due, attempt: u32) -> String {
        self.build(channel, due, attempt, prompt::continued, false)
    }

    /// The prompt of attempt `attempt` on `due` as `build` makes it, with the recent channel
    /// and the document when `context` and the workflow shares them, then the run's card and
    /// the task's context.
    fn build(
        &self,
        channel: &Channel,
        due: &Due,
        attempt: u32,
        build: fn(&PromptParts) -> String,
        context: bool,
    ) -> String {
        let shared_context = self.document.as_deref().filter(|_| context).map(|name| {
            let recent = channel
                .tail(prompt::RECENT)
                .map(|b| b.entries)
                .unwrap_or_default();
            (recent, name, crate::document::read(&self.inst, name).ok())
        });
        let text = build(&PromptParts {
            agent: &self.agent,
            instance: self.inst.name(),
            system: self.system.as_deref(),
            inbox: &due.msgs,
            older: due.older,
            recent: shared_context.as_ref().map(|c| c.0.as_slice()),
            document: shared_context.as_ref().map(|c| (c.1, c.2.as_deref())),
            attempt,
        });
        let text = match &due.card {
            Some(c) => text + &super::cards::prompt_section(c),
            None => text,
        };
        match &self.task_context {
            Some(c) => text + &c.lock().unwrap_or_else(|e| e.into_inner()),
            None => text,
        }
    }
}
