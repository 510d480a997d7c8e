//! The tool list: names, descriptions and input schemas, the subsets an agent may be given,
//! and what the model is told about working with them.

use std::str::FromStr;
use std::sync::OnceLock;

use serde_json::Value;

use super::args::schema;
use super::params;
use crate::error::{Error, Result};

pub use super::params::{
    DEFAULT_COLLAB_WAIT, DEFAULT_REPLY_WAIT, MAX_COLLAB_WAIT, MAX_REPLY_WAIT, MAX_WAIT_SECONDS,
};

/// What the model is told about working with these tools.
pub const INSTRUCTIONS: &str = "\
You are one agent of a team that shares a channel, an inbox per agent, documents and votes.
Work loop: call my_inbox (use wait_seconds to wait for work instead of polling), handle each
message, reply with channel_send (mention agents as @name so they are woken), then call
my_inbox_ack with the id of the newest message you handled. Keep durable state (plans,
decisions, findings) in documents (team_doc_*), not only in the channel; if a document owner
is set and it is not you, use document_suggest. Put long content in resource_create and
reference its id. When you see [PROPOSAL:id], vote with team_vote (votes are final); create
proposals for decisions the team must share. Mention only agents who must act.
Work on the board: take the next ready card with board_claim, lease the files you will edit
with lease_take before editing them, and when the card is done call board_done with a note
saying what was done (it releases the leases you took for it). Split large work with board_add (after: the
cards it waits for).";

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
        BoardAdd = "board_add",
        BoardClaim = "board_claim",
        BoardDone = "board_done",
        BoardList = "board_list",
        LeaseTake = "lease_take",
        LeaseRelease = "lease_release",
        LeaseList = "lease_list",
        SpawnAgent = "spawn_agent",
        SendInput = "send_input",
        Wait = "wait",
        CloseAgent = "close_agent",
        Approve = "approve",
        Reject = "reject",
        MergeRequest = "merge_request",
    }
}

/// How many tools every agent gets: all but the collab tools.
pub const DEFAULT_TOOLS: usize = 28;

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
    pub fn listed(&self) -> Vec<ToolDef> {
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

/// A tool as a model is told of it, whichever front end carries it: `aw-mcp` makes it an MCP
/// tool, the API backends of `aw-run` a tool of their request.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// JSON Schema of its input: an object schema that names every argument, and forbids
    /// others.
    pub schema: Value,
}

/// Every tool's definition in listing order, the collab tools included, built once.
pub fn all() -> &'static [ToolDef] {
    static TOOLS: OnceLock<Vec<ToolDef>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        Tool::ALL
            .iter()
            .map(|&t| ToolDef {
                name: t.name().to_string(),
                description: description(t).to_string(),
                schema: input_schema(t),
            })
            .collect()
    })
}

/// The JSON Schema of `t`'s arguments, made from its argument struct.
fn input_schema(t: Tool) -> Value {
    match t {
        Tool::ChannelSend => schema::<params::ChannelSend>(),
        Tool::ChannelRead => schema::<params::ChannelRead>(),
        Tool::MyInbox => schema::<params::MyInbox>(),
        Tool::MyInboxAck => schema::<params::MyInboxAck>(),
        Tool::MyStatusSet => schema::<params::MyStatusSet>(),
        Tool::TeamMembers => schema::<params::TeamMembers>(),
        Tool::TeamDocRead => schema::<params::DocRead>(),
        Tool::TeamDocWrite | Tool::TeamDocAppend => schema::<params::DocWrite>(),
        Tool::TeamDocList => schema::<params::NoArgs>(),
        Tool::TeamDocCreate => schema::<params::DocCreate>(),
        Tool::DocumentSuggest => schema::<params::DocumentSuggest>(),
        Tool::TeamProposalCreate => schema::<params::ProposalCreate>(),
        Tool::TeamVote => schema::<params::Vote>(),
        Tool::TeamProposalStatus => schema::<params::ProposalStatus>(),
        Tool::TeamProposalCancel => schema::<params::ProposalCancel>(),
        Tool::ResourceCreate => schema::<params::ResourceCreate>(),
        Tool::ResourceRead => schema::<params::ResourceRead>(),
        Tool::BoardAdd => schema::<params::BoardAdd>(),
        Tool::BoardClaim => schema::<params::BoardClaim>(),
        Tool::BoardDone => schema::<params::BoardDone>(),
        Tool::BoardList => schema::<params::BoardList>(),
        Tool::LeaseTake => schema::<params::LeaseTake>(),
        Tool::LeaseRelease => schema::<params::LeaseRelease>(),
        Tool::LeaseList => schema::<params::NoArgs>(),
        Tool::SpawnAgent => schema::<params::SpawnAgent>(),
        Tool::SendInput => schema::<params::SendInput>(),
        Tool::Wait => schema::<params::Wait>(),
        Tool::CloseAgent => schema::<params::CloseAgent>(),
        Tool::Approve | Tool::Reject => schema::<params::Decide>(),
        Tool::MergeRequest => schema::<params::MergeRequest>(),
    }
}

/// What the model is told a tool does.
fn description(t: Tool) -> &'static str {
    match t {
        Tool::ChannelSend => {
            "Post a message to the team channel as yourself. @name mentions wake those agents and land in their inbox. With wait_for, ask one agent and wait for its answer: the call returns the entries it wrote while handling your message."
        }
        Tool::ChannelRead => {
            "Read channel entries: the latest ones, or those after an entry id (or ISO timestamp)."
        }
        Tool::MyInbox => {
            "Your unread @mentions, oldest first, with priority: at most the oldest 50 and 64 KiB of text (at least one, whole); the newer ones are counted with their id range (`more`), for the next call. Reading does not acknowledge: call my_inbox_ack with the id it names after handling them, then my_inbox again for the next ones. With wait_seconds, waits for a mention when the inbox is empty."
        }
        Tool::MyInboxAck => {
            "Acknowledge your inbox up to and including an entry id, after you handled those messages."
        }
        Tool::MyStatusSet => {
            "Set your status for the team: state idle|running, current task, metadata."
        }
        Tool::TeamMembers => {
            "List the agents of this team (instance), optionally with their status and unread counts."
        }
        Tool::TeamDocRead => "Read a shared document (default notes.md).",
        Tool::TeamDocWrite => {
            "Replace a shared document's content (creates it). Only the document owner may write when one is set."
        }
        Tool::TeamDocAppend => {
            "Append to a shared document (creates it). Only the document owner may write when one is set."
        }
        Tool::TeamDocList => "List the shared documents.",
        Tool::TeamDocCreate => "Create a new shared document; fails if it exists.",
        Tool::DocumentSuggest => {
            "Suggest a document change to the document owner (posts @owner [DOC_SUGGEST] to the channel). Use this when you are not the owner."
        }
        Tool::TeamProposalCreate => {
            "Create a proposal for the team to vote on: election (options default to the agents), decision, approval (options default to yes/no) or assignment. Limits: 2 to 20 options, option ids of at most 64 bytes, labels and title of at most 200 bytes, description of at most 4096 bytes; at most 50 active proposals per team. A binding election whose id starts with doc-owner chooses the document owner: its options must be registered agents and its quorum at least a majority of them (at most all); a tie or a timeout leaves the owner unchanged."
        }
        Tool::TeamVote => {
            "Vote on an active proposal. Votes are final. Only registered agents vote in a doc-owner election."
        }
        Tool::TeamProposalStatus => {
            "Show one proposal with votes and counts, or all active proposals."
        }
        Tool::TeamProposalCancel => "Cancel a proposal you created.",
        Tool::ResourceCreate => {
            "Store long content (a diff, a log, a report) once and get an id to reference in messages instead of pasting it."
        }
        Tool::ResourceRead => "Read a resource by id, verbatim.",
        Tool::BoardAdd => {
            "Add a card of work to the team's board: a title, a body saying what is to be done, the ids of the cards it waits for (after: it is ready once they are all done; no cycles), the agent it is meant for, labels. Returns its id. Split a large task into cards with dependencies; agents claim the ready ones."
        }
        Tool::BoardClaim => {
            "Claim a card of the board: by id, or (the default) the next ready card, meant for you or for anyone. Each card goes to exactly one claimer. Returns the card, or says none is ready. The claim lapses when its time (ttl_seconds, default 1800) runs out or your server stops; claim the card again to renew it."
        }
        Tool::BoardDone => {
            "Finish a card you hold, with a note saying what was done. The cards waiting for it become ready (and are announced); your leases on files are released."
        }
        Tool::BoardList => {
            "List the cards of the board: id, state, title, holder and until, who it is for, what it waits for, labels. ready: only the claimable ones; mine: only those you hold or that are meant for you."
        }
        Tool::LeaseTake => {
            "Lease paths or globs of the work tree before editing them, exclusive (the default) or shared, with a reason. Fails at once when another agent holds an overlapping lease, naming its holder, until when and why; with wait_seconds, waits for it. Leases lapse after ttl_seconds (default 1800) or when your server stops."
        }
        Tool::LeaseRelease => {
            "Release your leases: one by id, those naming some of paths, or (with neither) all of them."
        }
        Tool::LeaseList => {
            "List the leases in force: id, holder, mode, paths, until when, and why."
        }
        Tool::SpawnAgent => {
            "Start a worker agent on a task: it is registered in this team, gets your prompt as a message from you, and is run by aw-run like any agent. Returns its name. Workers you spawn count against the team's budget and worker limit; close them with close_agent when their work is done."
        }
        Tool::SendInput => {
            "Send a message to an agent (a worker you spawned): a channel message from you that mentions it, so it runs again."
        }
        Tool::Wait => {
            "Wait until every named agent has handled everything sent to it (idle with nothing unread, failed, or closed), or until the timeout; returns each one's state and what it wrote since your last message to it."
        }
        Tool::CloseAgent => {
            "Close a worker you spawned: it is no longer run (a run in progress is stopped); its messages and history stay."
        }
        Tool::Approve => {
            "Approve an approval request ([APPROVAL #id] in the channel) that names you as an approver: what it holds goes ahead. Refused when you are not one of its approvers, or when it is decided already. A reason is at most 1000 bytes."
        }
        Tool::Reject => {
            "Reject an approval request that names you as an approver, with a reason (at most 1000 bytes): what it holds does not go ahead. Refused when you are not one of its approvers, or when it is decided already."
        }
        Tool::MergeRequest => {
            "Ask to merge your branch (default aw/<instance>/<you>, the branch of your worktree) into the team's target branch. Requests are served one at a time: your branch is rebased (or merged) onto the target in a scratch work tree, the team's verify command runs there, and only if it passes does the target move. When the team needs an approval for merges, a verified result waits for it before the target moves. Returns the request id and, when you wait, the outcome: merged, a conflict with the paths, a failed verify with its last lines, or a rejection (a conflict, a failure or a rejection is also posted in the channel, mentioning you). It waits by default, unless the team's aw-run serves the queue: it then returns at once and the outcome comes in the channel; wait chooses. Commit your work first."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proposal::{
        MAX_ACTIVE, MAX_DESCRIPTION, MAX_LABEL, MAX_OPTION_ID, MAX_OPTIONS, MAX_REASON, MAX_TITLE,
    };
    use serde_json::json;

    fn description(name: &str) -> String {
        let t = all().iter().find(|t| t.name == name).expect("tool");
        t.description.clone()
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
        let reason = v.schema["properties"]["reason"]["description"].as_str();
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
        assert_eq!(default[24], "lease_list");
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
        for t in [
            "team_doc_read",
            "spawn_agent",
            "close_agent",
            "team_vote",
            "board_add",
            "lease_take",
        ] {
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
            msg.ends_with(
                ", lease_list, spawn_agent, send_input, wait, close_agent, approve, reject, \
                 merge_request)"
            ),
            "{msg}"
        );
    }

    #[test]
    fn schemas_list_the_keywords_of_the_library() {
        let schema = |name: &str| {
            let t = all().iter().find(|t| t.name == name).unwrap();
            t.schema.clone()
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
