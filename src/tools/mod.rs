//! The agent tools: the one definition of every tool an agent has, whichever front end
//! carries the call. `aw-mcp` serves them over stdio; the API backends of `aw-run` call them
//! in process. Neither front end knows the other; both go through [`call`].
//!
//! - [`catalogue`]: the tool names, descriptions and input schemas ([`ToolDef`], neutral: the
//!   front end makes of it what its protocol needs), the collab and delegate subsets
//!   ([`Toolset`]) and the [`INSTRUCTIONS`] for the model;
//! - [`args`]: reading a call's arguments into the tool's argument struct (`params`, which
//!   the input schemas are made from too);
//! - the handlers, by area: `messages` (channel and inbox), `team` (status, members),
//!   `documents` (documents and resources), `proposals`, `board` (the cards of work),
//!   `leases` (leases on files), `workers` (the collab tools), `approvals` (deciding
//!   approval requests), `merges` (the merge queue);
//! - [`files`]: the built-in file tools of API agents, confined to one folder;
//! - [`client_config`]: how a client (Claude Code, Codex) starts `aw-mcp` for one agent.
//!
//! The tools work on the domain (channel, inbox, document, proposal, registry, collab);
//! every failure is an [`Error`] that the front end gives the model as a tool error.

mod approvals;
pub mod args;
pub mod board;
mod caller;
pub mod catalogue;
pub mod client_config;
mod documents;
pub mod files;
mod leases;
mod merges;
mod messages;
mod params;
mod proposals;
mod team;
mod workers;

pub use caller::{Caller, Reply};
pub use catalogue::{INSTRUCTIONS, Tool, ToolDef, Toolset};

use crate::approval::Verdict;
use crate::error::{Error, Remedy, Result};
use args::{Args, parse};

/// Run one tool call as `s`: the tool named `name`, with the arguments `a`. What can be done
/// about a failure is said in an agent's terms, never as a command-line option.
pub fn call(s: &Caller, name: &str, a: &Args) -> Result<Reply> {
    run(s, name, a).map_err(|e| e.word_remedies(&agent_hint))
}

/// What an agent can do about an error: it cannot choose how its server was started.
fn agent_hint(r: &Remedy) -> Option<String> {
    match r {
        // The instance is checked when the server starts: a tool never meets this.
        Remedy::CreateInstance => None,
        Remedy::ChooseRoot => {
            Some("the root is chosen when this agent is started; ask whoever started it".into())
        }
        Remedy::ServeAgent => {
            Some("send without wait_for: the message reaches the agent once it is served".into())
        }
        Remedy::TrustRoot { list, .. } => Some(format!(
            "whoever trusts that root may add its path to {list}; ask whoever started this agent"
        )),
    }
}

fn run(s: &Caller, name: &str, a: &Args) -> Result<Reply> {
    let tool: Tool = name.parse()?;
    if !s.tools.has(tool) {
        return Err(Error::not_found(format!(
            "tool '{name}' is not given to {}{}",
            s.agent,
            if tool.is_collab() {
                " (the collab tools are given only to an agent started with them)"
            } else {
                " (it only coordinates: delegate mode)"
            }
        )));
    }
    let n = tool.name();
    match tool {
        Tool::ChannelSend => messages::channel_send(s, parse(n, a)?),
        Tool::ChannelRead => messages::channel_read(s, parse(n, a)?),
        Tool::MyInbox => messages::my_inbox(s, parse(n, a)?),
        Tool::MyInboxAck => messages::my_inbox_ack(s, parse(n, a)?),
        Tool::MyStatusSet => team::my_status_set(s, parse(n, a)?),
        Tool::TeamMembers => team::team_members(s, parse(n, a)?),
        Tool::TeamDocRead => documents::doc_read(s, parse(n, a)?),
        Tool::TeamDocWrite => documents::doc_write(s, parse(n, a)?, false),
        Tool::TeamDocAppend => documents::doc_write(s, parse(n, a)?, true),
        Tool::TeamDocList => parse::<params::NoArgs>(n, a).and_then(|_| documents::doc_list(s)),
        Tool::TeamDocCreate => documents::doc_create(s, parse(n, a)?),
        Tool::DocumentSuggest => documents::document_suggest(s, parse(n, a)?),
        Tool::TeamProposalCreate => proposals::proposal_create(s, parse(n, a)?),
        Tool::TeamVote => proposals::vote(s, parse(n, a)?),
        Tool::TeamProposalStatus => proposals::proposal_status(s, parse(n, a)?),
        Tool::TeamProposalCancel => proposals::proposal_cancel(s, parse(n, a)?),
        Tool::ResourceCreate => documents::resource_create(s, parse(n, a)?),
        Tool::ResourceRead => documents::resource_read(s, parse(n, a)?),
        Tool::BoardAdd => board::board_add(s, parse(n, a)?),
        Tool::BoardClaim => board::board_claim(s, parse(n, a)?),
        Tool::BoardDone => board::board_done(s, parse(n, a)?),
        Tool::BoardList => board::board_list(s, parse(n, a)?),
        Tool::LeaseTake => leases::lease_take(s, parse(n, a)?),
        Tool::LeaseRelease => leases::lease_release(s, parse(n, a)?),
        Tool::LeaseList => parse::<params::NoArgs>(n, a).and_then(|_| leases::lease_list(s)),
        Tool::SpawnAgent => workers::spawn_agent(s, parse(n, a)?),
        Tool::SendInput => workers::send_input(s, parse(n, a)?),
        Tool::Wait => workers::wait(s, parse(n, a)?),
        Tool::CloseAgent => workers::close_agent(s, parse(n, a)?),
        Tool::Approve => approvals::decide(s, parse(n, a)?, Verdict::Approve),
        Tool::Reject => approvals::decide(s, parse(n, a)?, Verdict::Reject),
        Tool::MergeRequest => merges::merge_request(s, parse(n, a)?),
    }
}
