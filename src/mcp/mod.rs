//! The MCP server behind `aw-mcp`: the stdio transport ([`framing`]) and the rmcp server of
//! one agent identity. The tools themselves are [`crate::tools`]; this module only carries
//! their list and their calls.

pub mod framing;

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};

use serde_json::Value;

use crate::instance::Instance;
use crate::tools::{self, Caller, INSTRUCTIONS, ToolDef};

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

/// A tool's neutral definition as MCP lists it.
fn listed(t: ToolDef) -> rmcp::model::Tool {
    let schema = match t.schema {
        Value::Object(map) => map,
        other => unreachable!("an input schema is an object: {other}"),
    };
    rmcp::model::Tool::new(t.name, t.description, Arc::new(schema))
}

/// The server for one agent of one instance: the agent's identity and tools, served over
/// stdio.
#[derive(Clone)]
pub struct Server {
    pub caller: Caller,
}

impl Server {
    pub fn new(inst: Instance, agent: impl Into<String>) -> Server {
        Server {
            caller: Caller::new(inst, agent),
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
        let tools = self.caller.tools.listed().into_iter().map(listed).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller.clone();
        let name = request.name.to_string();
        let args = request.arguments.unwrap_or_default();
        let shown = name.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let span = crate::otel::genai::tool(&name, &caller.agent, caller.inst.name());
            let r = tools::call(&caller, &name, &args);
            let bytes = r.as_ref().map_or(0, |reply| reply.text.len());
            crate::otel::genai::end_tool(span, bytes, r.is_err());
            r
        })
        .await;
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
