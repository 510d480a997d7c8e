//! The tool list: names, descriptions and input schemas, the subsets an agent may be given,
//! and what the model is told about working with them.

use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::proposal::{
    Kind, MAX_DESCRIPTION, MAX_LABEL, MAX_OPTION_ID, MAX_OPTIONS, MAX_REASON, MAX_TITLE, Rule,
    TieBreaker,
};
use crate::status::State;

/// What the model is told about working with these tools.
pub const INSTRUCTIONS: &str = "\
You are one agent of a team that shares a channel, an inbox per agent, documents and votes.
Work loop: call my_inbox (use wait_seconds to wait for work instead of polling), handle each
message, reply with channel_send (mention agents as @name so they are woken), then call
my_inbox_ack with the id of the newest message you handled. Keep durable state (plans,
decisions, findings) in documents (team_doc_*), not only in the channel; if a document owner
is set and it is not you, use document_suggest. Put long content in resource_create and
reference its id. When you see [PROPOSAL:id], vote with team_vote (votes are final); create
proposals for decisions the team must share. Mention only agents who must act.";

/// Longest `my_inbox` wait, in seconds.
pub const MAX_WAIT_SECONDS: u64 = 120;

/// How long `channel_send` with `wait_for` waits for the reply unless told, in seconds.
pub const DEFAULT_REPLY_WAIT: u64 = 120;

/// Longest `channel_send` wait for a reply, in seconds: well under the 10 minutes a CLI agent
/// may stay silent before aw-run stops it.
pub const MAX_REPLY_WAIT: u64 = 300;

crate::keyword_enum! {
    /// Every tool, in listing order. A new tool is a line here, its definition in
    /// [`definition`] and its handler in [`crate::tools::call`]; the compiler asks for both.
    pub enum Tool {
        ChannelSend = "channel_send",
        ChannelRead = "channel_read",
        MyInbox = "my_inbox",
        MyInboxAck = "my_inbox_ack",
        MyStatusSet = "my_status_set",
        TeamMembers = "team_members",
        TeamDocRead = "team_doc_read",
        TeamDocWrite = "team_doc_write",
        TeamDocAppend = "team_doc_append",
        TeamDocList = "team_doc_list",
        TeamDocCreate = "team_doc_create",
        DocumentSuggest = "document_suggest",
        TeamProposalCreate = "team_proposal_create",
        TeamVote = "team_vote",
        TeamProposalStatus = "team_proposal_status",
        TeamProposalCancel = "team_proposal_cancel",
        ResourceCreate = "resource_create",
        ResourceRead = "resource_read",
        SpawnAgent = "spawn_agent",
        SendInput = "send_input",
        Wait = "wait",
        CloseAgent = "close_agent",
    }
}

/// How many tools every agent gets: all but the collab tools.
pub const DEFAULT_TOOLS: usize = 18;

/// Longest `wait` for workers, in seconds (as for a reply to `channel_send`).
pub const MAX_COLLAB_WAIT: u64 = MAX_REPLY_WAIT;

/// How long `wait` waits unless told, in seconds.
pub const DEFAULT_COLLAB_WAIT: u64 = DEFAULT_REPLY_WAIT;

impl Tool {
    /// One of the collab tools (`aw-mcp --collab`).
    pub fn is_collab(self) -> bool {
        matches!(
            self,
            Tool::SpawnAgent | Tool::SendInput | Tool::Wait | Tool::CloseAgent
        )
    }

    /// A tool that writes documents: not for an agent that only coordinates.
    pub fn writes_documents(self) -> bool {
        matches!(
            self,
            Tool::TeamDocWrite | Tool::TeamDocAppend | Tool::TeamDocCreate
        )
    }
}

/// Which tools one agent gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Toolset {
    /// The collab tools, with these limits.
    pub collab: Option<crate::registry::Collab>,
    /// Only coordinating: the collab tools and no document-writing tools.
    pub delegate: bool,
}

impl Toolset {
    pub fn has(&self, t: Tool) -> bool {
        if t.is_collab() {
            return self.collab.is_some();
        }
        !(self.delegate && t.writes_documents())
    }

    /// The tools' definitions, in listing order.
    pub fn listed(&self) -> Vec<rmcp::model::Tool> {
        Tool::ALL
            .iter()
            .zip(all())
            .filter(|(t, _)| self.has(**t))
            .map(|(_, d)| d.clone())
            .collect()
    }
}

impl FromStr for Tool {
    type Err = Error;
    fn from_str(s: &str) -> Result<Tool> {
        Tool::from_name(s).ok_or_else(|| {
            Error::not_found(format!(
                "unknown tool '{}' (tools: {})",
                crate::names::sanitize(s),
                Tool::names()
            ))
        })
    }
}

/// The definition `tools/list` gives for `t`.
fn listed(t: Tool) -> rmcp::model::Tool {
    let (description, props, required) = definition(t);
    let mut schema = json!({
        "type": "object",
        "properties": props,
        "additionalProperties": false,
    });
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    let Value::Object(map) = schema else {
        unreachable!()
    };
    rmcp::model::Tool::new(t.name(), description, Arc::new(map))
}

/// The names of the arguments `t` takes (its schema's properties), in listing order.
pub fn arguments(t: Tool) -> Vec<String> {
    match definition(t).1 {
        Value::Object(props) => props.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

fn file_prop() -> Value {
    json!({"type": "string", "description": "Document path relative to the documents folder, e.g. notes.md or findings/auth.md (default: notes.md)"})
}

fn id_prop(what: &str) -> Value {
    json!({"type": ["integer", "string"], "description": what})
}

/// Every tool's definition in listing order, the collab tools included, built once.
pub fn all() -> &'static [rmcp::model::Tool] {
    static TOOLS: OnceLock<Vec<rmcp::model::Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| Tool::ALL.iter().map(|&t| listed(t)).collect())
}

/// A tool's description, input properties and required inputs.
fn definition(t: Tool) -> (&'static str, Value, &'static [&'static str]) {
    match t {
        Tool::ChannelSend => (
            "Post a message to the team channel as yourself. @name mentions wake those agents and land in their inbox. With wait_for, ask one agent and wait for its answer: the call returns the entries it wrote while handling your message.",
            json!({
                "message": {"type": "string", "description": "Message text (Markdown); mention agents with @name"},
                "wait_for": {"type": "string", "description": "An agent to ask: it is mentioned if the message does not already, and the call waits until it has handled the message and returns its reply. The agent must be served by a running aw-run."},
                "wait_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_REPLY_WAIT, "description": "With wait_for: give up after this many seconds (default 120, at most 300); the message stays sent"}
            }),
            &["message"],
        ),
        Tool::ChannelRead => (
            "Read channel entries: the latest ones, or those after an entry id (or ISO timestamp).",
            json!({
                "since": id_prop("Only entries after this entry id (or after this ISO 8601 timestamp)"),
                "limit": {"type": "integer", "minimum": 1, "maximum": 500, "description": "At most this many entries (default 50): the newest, or the first ones after `since`"}
            }),
            &[],
        ),
        Tool::MyInbox => (
            "Your unread @mentions, oldest first, with priority: at most the oldest 50 and 64 KiB of text (at least one, whole); the newer ones are counted with their id range (`more`), for the next call. Reading does not acknowledge: call my_inbox_ack with the id it names after handling them, then my_inbox again for the next ones. With wait_seconds, waits for a mention when the inbox is empty.",
            json!({"wait_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS, "description": "When the inbox is empty, wait up to this many seconds for a new mention (default 0, at most 120)"}}),
            &[],
        ),
        Tool::MyInboxAck => (
            "Acknowledge your inbox up to and including an entry id, after you handled those messages.",
            json!({"until": id_prop("Entry id of the newest message you handled")}),
            &["until"],
        ),
        Tool::MyStatusSet => (
            "Set your status for the team: state idle|running, current task, metadata.",
            json!({
                "task": {"type": "string", "description": "What you are working on (empty clears it)"},
                "state": {"type": "string", "enum": State::NAMES},
                "metadata": {"type": "object", "description": "Free-form JSON object"}
            }),
            &[],
        ),
        Tool::TeamMembers => (
            "List the agents of this team (instance), optionally with their status and unread counts.",
            json!({"includeStatus": {"type": "boolean", "description": "Include state, task and unread count"}}),
            &[],
        ),
        Tool::TeamDocRead => (
            "Read a shared document (default notes.md).",
            json!({"file": file_prop()}),
            &[],
        ),
        Tool::TeamDocWrite => (
            "Replace a shared document's content (creates it). Only the document owner may write when one is set.",
            json!({"content": {"type": "string"}, "file": file_prop()}),
            &["content"],
        ),
        Tool::TeamDocAppend => (
            "Append to a shared document (creates it). Only the document owner may write when one is set.",
            json!({"content": {"type": "string"}, "file": file_prop()}),
            &["content"],
        ),
        Tool::TeamDocList => ("List the shared documents.", json!({}), &[]),
        Tool::TeamDocCreate => (
            "Create a new shared document; fails if it exists.",
            json!({"file": {"type": "string", "description": "Path relative to the documents folder, e.g. findings/auth.md"}, "content": {"type": "string"}}),
            &["file", "content"],
        ),
        Tool::DocumentSuggest => (
            "Suggest a document change to the document owner (posts @owner [DOC_SUGGEST] to the channel). Use this when you are not the owner.",
            json!({
                "suggestion": {"type": "string", "description": "The change to make"},
                "file": file_prop(),
                "reason": {"type": "string", "description": "Why the change is needed"}
            }),
            &["suggestion"],
        ),
        Tool::TeamProposalCreate => (
            "Create a proposal for the team to vote on: election (options default to the agents), decision, approval (options default to yes/no) or assignment. Limits: 2 to 20 options, option ids of at most 64 bytes, labels and title of at most 200 bytes, description of at most 4096 bytes; at most 50 active proposals per team. A binding election whose id starts with doc-owner chooses the document owner: its options must be registered agents and its quorum at least a majority of them (at most all); a tie or a timeout leaves the owner unchanged.",
            json!({
                "type": {"type": "string", "enum": Kind::NAMES},
                "title": {"type": "string", "maxLength": MAX_TITLE, "description": "One line, at most 200 bytes"},
                "description": {"type": "string", "maxLength": MAX_DESCRIPTION, "description": "Context for voters, at most 4096 bytes"},
                "options": {"type": "array", "maxItems": MAX_OPTIONS, "items": {"type": "object", "properties": {"id": {"type": "string", "maxLength": MAX_OPTION_ID}, "label": {"type": "string", "maxLength": MAX_LABEL}}, "required": ["id"]}, "description": "Choices as {id, label}: 2 to 20; ids of letters, digits, - _ . @ (at most 64 bytes), labels of at most 200 bytes"},
                "resolution": {"type": "object", "properties": {
                    "type": {"type": "string", "enum": Rule::NAMES},
                    "quorum": {"type": "integer", "minimum": 1, "description": "Votes needed to resolve (default: number of agents; a doc-owner election needs at least a majority of the agents)"},
                    "tieBreaker": {"type": "string", "enum": TieBreaker::NAMES}
                }},
                "binding": {"type": "boolean", "description": "Enforced by the system (an election with an id starting doc-owner sets the document owner)"},
                "timeoutSeconds": {"type": "integer", "minimum": 1, "description": "Resolve with the votes so far (or expire without votes) after this many seconds"},
                "id": {"type": "string", "description": "Optional proposal id (default prop-N)"}
            }),
            &["type", "title"],
        ),
        Tool::TeamVote => (
            "Vote on an active proposal. Votes are final. Only registered agents vote in a doc-owner election.",
            json!({
                "proposal": {"type": "string", "description": "Proposal id"},
                "choice": {"type": "string", "description": "Option id"},
                "reason": {"type": "string", "maxLength": MAX_REASON, "description": "Why, at most 1000 bytes"}
            }),
            &["proposal", "choice"],
        ),
        Tool::TeamProposalStatus => (
            "Show one proposal with votes and counts, or all active proposals.",
            json!({"proposal": {"type": "string", "description": "Proposal id (default: all active)"}}),
            &[],
        ),
        Tool::TeamProposalCancel => (
            "Cancel a proposal you created.",
            json!({"proposal": {"type": "string"}}),
            &["proposal"],
        ),
        Tool::ResourceCreate => (
            "Store long content (a diff, a log, a report) once and get an id to reference in messages instead of pasting it.",
            json!({
                "content": {"type": "string"},
                "type": {"type": "string", "enum": ["markdown", "json", "text", "diff"], "description": "Default markdown"}
            }),
            &["content"],
        ),
        Tool::ResourceRead => (
            "Read a resource by id, verbatim.",
            json!({"id": {"type": "string", "description": "Resource id, e.g. res-0123456789abcdef"}}),
            &["id"],
        ),
        Tool::SpawnAgent => (
            "Start a worker agent on a task: it is registered in this team, gets your prompt as a message from you, and is run by aw-run like any agent. Returns its name. Workers you spawn count against the team's budget and worker limit; close them with close_agent when their work is done.",
            json!({
                "prompt": {"type": "string", "description": "The worker's task, sent to it as your message"},
                "name": {"type": "string", "description": "Its agent name (default worker-N)"},
                "backend": {"type": "string", "enum": ["claude", "codex", "anthropic", "openai", "mock"], "description": "How it runs (default: your own backend)"},
                "model": {"type": "string", "description": "Its model (default: yours, when the backend is yours)"},
                "system_prompt": {"type": "string", "description": "Its system prompt"}
            }),
            &["prompt"],
        ),
        Tool::SendInput => (
            "Send a message to an agent (a worker you spawned): a channel message from you that mentions it, so it runs again.",
            json!({
                "agent": {"type": "string", "description": "The agent's name"},
                "message": {"type": "string", "description": "Message text"}
            }),
            &["agent", "message"],
        ),
        Tool::Wait => (
            "Wait until every named agent has handled everything sent to it (idle with nothing unread, failed, or closed), or until the timeout; returns each one's state and what it wrote since your last message to it.",
            json!({
                "agents": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Agent names"},
                "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_COLLAB_WAIT, "description": "Give up after this many seconds (default 120, at most 300) and return the states as they are"}
            }),
            &["agents"],
        ),
        Tool::CloseAgent => (
            "Close a worker you spawned: it is no longer run (a run in progress is stopped); its messages and history stay.",
            json!({"agent": {"type": "string", "description": "The worker's name"}}),
            &["agent"],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proposal::MAX_ACTIVE;

    fn description(name: &str) -> String {
        let t = all().iter().find(|t| t.name == name).expect("tool");
        t.description.as_deref().unwrap_or_default().to_string()
    }

    #[test]
    fn proposal_limits_in_descriptions_match_the_library() {
        let d = description("team_proposal_create");
        for limit in [
            format!("2 to {MAX_OPTIONS} options"),
            format!("ids of at most {MAX_OPTION_ID} bytes"),
            format!("title of at most {MAX_TITLE} bytes"),
            format!("description of at most {MAX_DESCRIPTION} bytes"),
            format!("at most {MAX_ACTIVE} active proposals"),
        ] {
            assert!(d.contains(&limit), "{limit:?} not in {d:?}");
        }
        assert_eq!(
            MAX_LABEL, MAX_TITLE,
            "the description gives them as one figure"
        );
        let v = all().iter().find(|t| t.name == "team_vote").unwrap();
        let reason = v.input_schema["properties"]["reason"]["description"].as_str();
        assert_eq!(
            reason,
            Some(format!("Why, at most {MAX_REASON} bytes").as_str())
        );
    }

    #[test]
    fn tools_are_listed_once_each_in_table_order() {
        crate::keyword::assert_round_trips(Tool::ALL, |t| t.name(), Tool::from_name);
        let listed: Vec<&str> = all().iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(listed, Tool::NAMES);
        let default: Vec<String> = Toolset::default()
            .listed()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        assert_eq!(default.len(), DEFAULT_TOOLS);
        assert_eq!(default[0], "channel_send");
        assert_eq!(default[17], "resource_read");
        let collab = Toolset {
            collab: Some(Default::default()),
            delegate: false,
        };
        assert_eq!(collab.listed().len(), DEFAULT_TOOLS + 4);
        let delegate = Toolset {
            delegate: true,
            ..collab
        };
        let names: Vec<String> = delegate
            .listed()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        assert_eq!(names.len(), DEFAULT_TOOLS + 4 - 3);
        for t in ["team_doc_write", "team_doc_append", "team_doc_create"] {
            assert!(!names.iter().any(|n| n == t), "{t} given to a delegate");
        }
        for t in ["team_doc_read", "spawn_agent", "close_agent", "team_vote"] {
            assert!(names.iter().any(|n| n == t), "{t} not given to a delegate");
        }
    }

    #[test]
    fn an_unknown_tool_is_not_found_with_the_list() {
        let e = "team_nope".parse::<Tool>().unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.starts_with("unknown tool 'team_nope' (tools: channel_send, channel_read, "),
            "{msg}"
        );
        assert!(
            msg.ends_with(", resource_read, spawn_agent, send_input, wait, close_agent)"),
            "{msg}"
        );
    }

    #[test]
    fn schemas_list_the_keywords_of_the_library() {
        let schema = |name: &str| {
            let t = all().iter().find(|t| t.name == name).unwrap();
            serde_json::Value::Object((*t.input_schema).clone())
        };
        let create = schema("team_proposal_create");
        assert_eq!(
            create["properties"]["type"]["enum"],
            json!(["election", "decision", "approval", "assignment"])
        );
        let resolution = &create["properties"]["resolution"]["properties"];
        assert_eq!(
            resolution["type"]["enum"],
            json!(["plurality", "majority", "unanimous"])
        );
        assert_eq!(
            resolution["tieBreaker"]["enum"],
            json!(["first", "random", "creator-decides"])
        );
        assert_eq!(
            schema("my_status_set")["properties"]["state"]["enum"],
            json!(["idle", "running", "done"])
        );
    }
}
