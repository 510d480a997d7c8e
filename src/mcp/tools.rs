//! The tool list of `aw-mcp`: names, descriptions and input schemas.

use std::sync::{Arc, OnceLock};

use rmcp::model::Tool;
use serde_json::{Value, json};

use crate::proposal::{
    MAX_DESCRIPTION, MAX_LABEL, MAX_OPTION_ID, MAX_OPTIONS, MAX_REASON, MAX_TITLE,
};

/// Longest `my_inbox` wait, in seconds.
pub const MAX_WAIT_SECONDS: u64 = 120;

/// Every tool name, in listing order.
pub const NAMES: [&str; 18] = [
    "channel_send",
    "channel_read",
    "my_inbox",
    "my_inbox_ack",
    "my_status_set",
    "team_members",
    "team_doc_read",
    "team_doc_write",
    "team_doc_append",
    "team_doc_list",
    "team_doc_create",
    "document_suggest",
    "team_proposal_create",
    "team_vote",
    "team_proposal_status",
    "team_proposal_cancel",
    "resource_create",
    "resource_read",
];

fn tool(name: &'static str, description: &'static str, props: Value, required: &[&str]) -> Tool {
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
    Tool::new(name, description, Arc::new(map))
}

fn file_prop() -> Value {
    json!({"type": "string", "description": "Document path relative to the documents folder, e.g. notes.md or findings/auth.md (default: notes.md)"})
}

fn id_prop(what: &str) -> Value {
    json!({"type": ["integer", "string"], "description": what})
}

/// The tools, built once.
pub fn all() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(build)
}

fn build() -> Vec<Tool> {
    vec![
        tool(
            "channel_send",
            "Post a message to the team channel as yourself. @name mentions wake those agents and land in their inbox.",
            json!({"message": {"type": "string", "description": "Message text (Markdown); mention agents with @name"}}),
            &["message"],
        ),
        tool(
            "channel_read",
            "Read channel entries: the latest ones, or those after an entry id (or ISO timestamp).",
            json!({
                "since": id_prop("Only entries after this entry id (or after this ISO 8601 timestamp)"),
                "limit": {"type": "integer", "minimum": 1, "maximum": 500, "description": "At most this many entries (default 50): the newest, or the first ones after `since`"}
            }),
            &[],
        ),
        tool(
            "my_inbox",
            "Your unread @mentions, oldest first, with priority. Reading does not acknowledge: call my_inbox_ack after handling them. With wait_seconds, waits for a mention when the inbox is empty.",
            json!({"wait_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS, "description": "When the inbox is empty, wait up to this many seconds for a new mention (default 0, at most 120)"}}),
            &[],
        ),
        tool(
            "my_inbox_ack",
            "Acknowledge your inbox up to and including an entry id, after you handled those messages.",
            json!({"until": id_prop("Entry id of the newest message you handled")}),
            &["until"],
        ),
        tool(
            "my_status_set",
            "Set your status for the team: state idle|running, current task, metadata.",
            json!({
                "task": {"type": "string", "description": "What you are working on (empty clears it)"},
                "state": {"type": "string", "enum": ["idle", "running"]},
                "metadata": {"type": "object", "description": "Free-form JSON object"}
            }),
            &[],
        ),
        tool(
            "team_members",
            "List the agents of this team (instance), optionally with their status and unread counts.",
            json!({"includeStatus": {"type": "boolean", "description": "Include state, task and unread count"}}),
            &[],
        ),
        tool(
            "team_doc_read",
            "Read a shared document (default notes.md).",
            json!({"file": file_prop()}),
            &[],
        ),
        tool(
            "team_doc_write",
            "Replace a shared document's content (creates it). Only the document owner may write when one is set.",
            json!({"content": {"type": "string"}, "file": file_prop()}),
            &["content"],
        ),
        tool(
            "team_doc_append",
            "Append to a shared document (creates it). Only the document owner may write when one is set.",
            json!({"content": {"type": "string"}, "file": file_prop()}),
            &["content"],
        ),
        tool(
            "team_doc_list",
            "List the shared documents.",
            json!({}),
            &[],
        ),
        tool(
            "team_doc_create",
            "Create a new shared document; fails if it exists.",
            json!({"file": {"type": "string", "description": "Path relative to the documents folder, e.g. findings/auth.md"}, "content": {"type": "string"}}),
            &["file", "content"],
        ),
        tool(
            "document_suggest",
            "Suggest a document change to the document owner (posts @owner [DOC_SUGGEST] to the channel). Use this when you are not the owner.",
            json!({
                "suggestion": {"type": "string", "description": "The change to make"},
                "file": file_prop(),
                "reason": {"type": "string", "description": "Why the change is needed"}
            }),
            &["suggestion"],
        ),
        tool(
            "team_proposal_create",
            "Create a proposal for the team to vote on: election (options default to the agents), decision, approval (options default to yes/no) or assignment. Limits: 2 to 20 options, option ids of at most 64 bytes, labels and title of at most 200 bytes, description of at most 4096 bytes; at most 50 active proposals per team. A binding election whose id starts with doc-owner chooses the document owner: its options must be registered agents and its quorum at least a majority of them (at most all); a tie or a timeout leaves the owner unchanged.",
            json!({
                "type": {"type": "string", "enum": ["election", "decision", "approval", "assignment"]},
                "title": {"type": "string", "maxLength": MAX_TITLE, "description": "One line, at most 200 bytes"},
                "description": {"type": "string", "maxLength": MAX_DESCRIPTION, "description": "Context for voters, at most 4096 bytes"},
                "options": {"type": "array", "maxItems": MAX_OPTIONS, "items": {"type": "object", "properties": {"id": {"type": "string", "maxLength": MAX_OPTION_ID}, "label": {"type": "string", "maxLength": MAX_LABEL}}, "required": ["id"]}, "description": "Choices as {id, label}: 2 to 20; ids of letters, digits, - _ . @ (at most 64 bytes), labels of at most 200 bytes"},
                "resolution": {"type": "object", "properties": {
                    "type": {"type": "string", "enum": ["plurality", "majority", "unanimous"]},
                    "quorum": {"type": "integer", "minimum": 1, "description": "Votes needed to resolve (default: number of agents; a doc-owner election needs at least a majority of the agents)"},
                    "tieBreaker": {"type": "string", "enum": ["first", "random", "creator-decides"]}
                }},
                "binding": {"type": "boolean", "description": "Enforced by the system (an election with an id starting doc-owner sets the document owner)"},
                "timeoutSeconds": {"type": "integer", "minimum": 1, "description": "Resolve with the votes so far (or expire without votes) after this many seconds"},
                "id": {"type": "string", "description": "Optional proposal id (default prop-N)"}
            }),
            &["type", "title"],
        ),
        tool(
            "team_vote",
            "Vote on an active proposal. Votes are final. Only registered agents vote in a doc-owner election.",
            json!({
                "proposal": {"type": "string", "description": "Proposal id"},
                "choice": {"type": "string", "description": "Option id"},
                "reason": {"type": "string", "maxLength": MAX_REASON, "description": "Why, at most 1000 bytes"}
            }),
            &["proposal", "choice"],
        ),
        tool(
            "team_proposal_status",
            "Show one proposal with votes and counts, or all active proposals.",
            json!({"proposal": {"type": "string", "description": "Proposal id (default: all active)"}}),
            &[],
        ),
        tool(
            "team_proposal_cancel",
            "Cancel a proposal you created.",
            json!({"proposal": {"type": "string"}}),
            &["proposal"],
        ),
        tool(
            "resource_create",
            "Store long content (a diff, a log, a report) once and get an id to reference in messages instead of pasting it.",
            json!({
                "content": {"type": "string"},
                "type": {"type": "string", "enum": ["markdown", "json", "text", "diff"], "description": "Default markdown"}
            }),
            &["content"],
        ),
        tool(
            "resource_read",
            "Read a resource by id, verbatim.",
            json!({"id": {"type": "string", "description": "Resource id, e.g. res-0123456789abcdef"}}),
            &["id"],
        ),
    ]
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
}
