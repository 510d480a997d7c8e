//! Who calls a tool, and what a tool gives back.

use super::catalogue::Toolset;
use crate::instance::Instance;
use crate::process::Stop;

/// Who calls a tool: one agent of one instance, with the tools it is given.
#[derive(Clone)]
pub struct Caller {
    pub inst: Instance,
    pub agent: String,
    /// Set to end a tool call that waits (a reply to `channel_send`, `wait`) early: an
    /// in-process run being stopped.
    pub stop: Stop,
    /// The tools this agent gets.
    pub tools: Toolset,
}

impl Caller {
    pub fn new(inst: Instance, agent: impl Into<String>) -> Caller {
        Caller {
            inst,
            agent: agent.into(),
            stop: Stop::default(),
            tools: Toolset::default(),
        }
    }
}

/// A tool's successful outcome: text for the model, and the same data structured.
pub struct Reply {
    pub text: String,
    pub structured: Option<serde_json::Value>,
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Reply {
        Reply {
            text: text.into(),
            structured: None,
        }
    }

    pub fn with(text: impl Into<String>, structured: serde_json::Value) -> Reply {
        Reply {
            text: text.into(),
            structured: Some(structured),
        }
    }
}
