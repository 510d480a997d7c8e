//! The MCP server behind `aw-mcp`: one agent identity, every tool working on the instance
//! directory directly.

pub mod config;
pub mod framing;
pub mod handlers;
pub mod tools;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};

use crate::instance::Instance;
use crate::process::Stop;

/// What the server tells the model about working with these tools.
pub const INSTRUCTIONS: &str = "\
You are one agent of a team that shares a channel, an inbox per agent, documents and votes.
Work loop: call my_inbox (use wait_seconds to wait for work instead of polling), handle each
message, reply with channel_send (mention agents as @name so they are woken), then call
my_inbox_ack with the id of the newest message you handled. Keep durable state (plans,
decisions, findings) in documents (team_doc_*), not only in the channel; if a document owner
is set and it is not you, use document_suggest. Put long content in resource_create and
reference its id. When you see [PROPOSAL:id], vote with team_vote (votes are final); create
proposals for decisions the team must share. Mention only agents who must act.";

/// The longest content a tool takes: a document or a resource.
const MAX_CONTENT: usize = if crate::document::MAX_DOCUMENT > crate::resource::MAX_RESOURCE {
    crate::document::MAX_DOCUMENT
} else {
    crate::resource::MAX_RESOURCE
};

/// Longest request line read from the client, the newline not counted: content at the limit
/// with every byte written as a six-byte escape (`\u0001`, the longest JSON has), and 1 MiB
/// for the rest of the request. A longer line is skipped and answered with an error.
pub const MAX_REQUEST_LINE: usize = 6 * MAX_CONTENT + (1 << 20);

/// The server for one agent of one instance.
#[derive(Clone)]
pub struct Server {
    pub inst: Instance,
    pub agent: String,
    /// Set to end a tool call that waits (a reply to `channel_send`) early: an in-process
    /// run being stopped.
    pub stop: Stop,
    /// The tools this agent gets.
    pub tools: tools::Toolset,
}

impl Server {
    pub fn new(inst: Instance, agent: impl Into<String>) -> Server {
        Server {
            inst,
            agent: agent.into(),
            stop: Stop::default(),
            tools: tools::Toolset::default(),
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

impl rmcp::ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("aw", crate::VERSION))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.listed()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let this = self.clone();
        let name = request.name.to_string();
        let args = request.arguments.unwrap_or_default();
        let shown = name.clone();
        let outcome =
            tokio::task::spawn_blocking(move || handlers::call(&this, &name, &args)).await;
        let result = match outcome {
            Ok(Ok(reply)) => {
                let mut r = CallToolResult::success(vec![ContentBlock::text(reply.text)]);
                r.structured_content = reply.structured;
                r
            }
            Ok(Err(e)) => {
                eprintln!("aw-mcp: {shown}: {e}");
                CallToolResult::error(vec![ContentBlock::text(format!("Error: {e}"))])
            }
            Err(join) => {
                eprintln!("aw-mcp: {shown}: internal error: {join}");
                CallToolResult::error(vec![ContentBlock::text(format!(
                    "Error: internal error in {shown}"
                ))])
            }
        };
        Ok(result.into())
    }
}
