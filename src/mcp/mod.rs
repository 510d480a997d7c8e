//! The MCP server behind `aw-mcp`: the stdio transport ([`framing`]) and the rmcp server of
//! one agent identity. The tools themselves are [`crate::tools`]; this module only carries
//! their list and their calls.

pub mod framing;
pub mod push;

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};

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
    /// Channel mode: what to push into the session, once it is ready.
    pub push: Option<Arc<Pushing>>,
}

/// Channel mode of a server: what it pushes, and whether its watch has started.
pub struct Pushing {
    pub scope: push::Scope,
    /// The newest channel entry when the server started.
    pub start: u64,
    started: AtomicBool,
}

impl Pushing {
    pub fn new(scope: push::Scope, start: u64) -> Pushing {
        Pushing {
            scope,
            start,
            started: AtomicBool::new(false),
        }
    }
}

/// What the instructions add in channel mode.
const PUSH_INSTRUCTIONS: &str = "\n\nMessages for you also arrive by themselves, as \
<channel source=\"aw\"> events (meta: from, id, instance, priority). Such an event does not \
mark anything read: call my_inbox to read your messages whole, and my_inbox_ack once handled.";

impl Server {
    pub fn new(inst: Instance, agent: impl Into<String>) -> Server {
        Server {
            caller: Caller::new(inst, agent),
            push: None,
        }
    }
}

impl rmcp::ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let mut caps = ServerCapabilities::builder().enable_tools().build();
        let mut instructions = INSTRUCTIONS.to_string();
        if self.push.is_some() {
            caps.experimental = Some([(push::CAPABILITY.to_string(), JsonObject::new())].into());
            instructions.push_str(PUSH_INSTRUCTIONS);
        }
        let config = ServerConfig::new(caps)
            .with_server_info(Implementation::new("aw", crate::VERSION))
            .with_instructions(instructions);
        match self.push {
            Some(_) => config.with_protocol_version(push::REVISION),
            None => config,
        }
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        match self.push {
            // Channels reach no session on a later revision.
            Some(_) => Cow::Borrowed(ProtocolVersion::known_up_to(&push::REVISION)),
            None => Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let Some(p) = &self.push else { return };
        if p.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let watch = push::Watch {
            inst: self.caller.inst.clone(),
            agent: self.caller.agent.clone(),
            scope: p.scope,
            start: p.start,
        };
        let rt = tokio::runtime::Handle::current();
        let peer = context.peer;
        let spawned = std::thread::Builder::new()
            .name("aw-push".into())
            .spawn(move || watch.run(peer, rt));
        if let Err(e) = spawned {
            eprintln!("aw-mcp: cannot start the channel push: {e}");
        }
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
