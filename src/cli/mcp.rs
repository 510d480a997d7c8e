//! `aw-mcp`: a stdio MCP server for one agent identity.

use crate::cli::complete::{Operands, Tool};
use crate::cli::flags::{self, BASE, Flag};
use crate::cli::{self, Common, Out};
use crate::error::{Error, Result};
use crate::mcp::push::{self, Scope};
use crate::mcp::{Pushing, Server};
use crate::names;
use crate::registry::{self, Agent};

/// What `--help` says before the options.
const ABOUT: &str = "\
aw-mcp - MCP server (stdio) giving one agent the aw channel, inbox, documents and votes

Usage: aw-mcp --agent NAME[@INSTANCE] [--collab [--max-workers N] [--spawn-depth N]]
              [--delegate] [--channel | --channel-all] [--root DIR] [-i NAME]

Speaks MCP (JSON-RPC) on stdin/stdout; logs go to stderr. The identity is fixed at start.
An agent that is not registered is registered with backend 'external'.
Wire it into Claude Code with the output of: aw-ctl mcp-config NAME@INSTANCE
With --channel, new mentions are pushed into a live Claude Code session that loaded
the server as a channel (aw-mcp(1), PUSHING INTO A LIVE SESSION, gives the command).
";

/// What `--help` says after the options.
const EXIT: &str = "\
Exit status: 0 on end of input or SIGTERM, 64 usage, 65 bad name or damaged state
file, 66 no such instance but one with a near name exists, 69 runtime or protocol could not start, 70 internal error, 73 cannot create,
74 I/O error, 75 lock timeout, 77 permission denied, 130 on SIGINT.
";

/// The options of aw-mcp.
pub const FLAGS: &[Flag] = &[
    Flag {
        long: "agent",
        short: Some('a'),
        value: Some("NAME[@INSTANCE]"),
        doc: "who is speaking (default: $AW_AGENT)",
        brief: "the agent this server speaks for",
        ..BASE
    },
    Flag {
        long: "collab",
        doc: "also give the collab tools: spawn_agent, send_input,\n\
              wait, close_agent",
        brief: "also give the collab tools",
        ..BASE
    },
    Flag {
        long: "max-workers",
        value: Some("N"),
        doc: "with --collab: workers alive at once in the instance\n(default 8)",
        ..BASE
    },
    Flag {
        long: "spawn-depth",
        value: Some("N"),
        doc: "with --collab: how deep spawning goes (default 1:\n\
              workers cannot spawn workers)",
        brief: "with --collab: how deep spawning goes",
        ..BASE
    },
    Flag {
        long: "delegate",
        doc: "only coordinate: the collab tools, and none of the\n\
              tools that write documents",
        brief: "only coordinate: the collab tools, no tools that write documents",
        ..BASE
    },
    Flag {
        long: "channel",
        doc: "push each new mention of the agent into the session\n\
              (Claude Code channels; also AW_CHANNEL=mentions)",
        brief: "push new mentions into the session (Claude Code channels)",
        ..BASE
    },
    Flag {
        long: "channel-all",
        doc: "as --channel, for every entry of the channel\n\
              (also AW_CHANNEL=all)",
        brief: "as --channel, for every entry of the channel",
        ..BASE
    },
    Flag {
        long: "create",
        doc: "create the instance even if an existing one has a\n\
              near name (otherwise refused as a likely typo, 66)",
        brief: "create the instance even if an existing one has a near name",
        ..BASE
    },
    flags::ROOT,
    Flag {
        doc: "instance (default: from --agent, $AW_INSTANCE or 'default')",
        ..flags::INSTANCE
    },
    flags::GENERATE,
    flags::HELP,
    flags::VERSION,
];

/// The help text: about, options, exit status.
pub fn help() -> String {
    flags::help(ABOUT, FLAGS, 31, EXIT)
}

/// What the completions know of aw-mcp.
pub fn tool() -> Tool<'static, ()> {
    Tool::plain("aw-mcp", help, FLAGS, Operands::None)
}

pub fn run(out: &mut Out) -> Result<u8> {
    let mut common = Common::default();
    let mut agent: Option<String> = None;
    let mut collab = false;
    let mut limits = crate::registry::Collab::default();
    let mut limited = false;
    let mut delegate = false;
    let mut create = false;
    let mut channel: Option<Scope> = None;
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next().map_err(cli::lex_err)? {
        if let Some(k) = Common::key(&arg) {
            common.set(k, &mut p)?;
            continue;
        }
        let Some(f) = flags::find(FLAGS, &arg) else {
            return Err(cli::unexpected(arg, FLAGS));
        };
        match f.long {
            "agent" => agent = Some(cli::string(&mut p, "--agent")?),
            "collab" => collab = true,
            "delegate" => delegate = true,
            "create" => create = true,
            "channel" | "channel-all" => {
                let scope = match f.long {
                    "channel" => Scope::Mentions,
                    _ => Scope::All,
                };
                if channel.is_some_and(|c| c != scope) {
                    return Err(Error::Usage(
                        "--channel and --channel-all do not go together".into(),
                    ));
                }
                channel = Some(scope);
            }
            "max-workers" => {
                limits.max_workers = positive(&mut p, "--max-workers")?;
                limited = true;
            }
            "spawn-depth" => {
                limits.max_depth = positive(&mut p, "--spawn-depth")?;
                limited = true;
            }
            _ => return cli::common_flag(out, f, &mut p, &tool()),
        }
    }
    if limited && !collab && !delegate {
        return Err(Error::Usage(
            "--max-workers and --spawn-depth go with --collab or --delegate".into(),
        ));
    }
    let Some(agent) = agent.or_else(names::agent_from_env) else {
        return Err(
            Error::Usage("no agent".into()).hint("pass --agent NAME[@INSTANCE] or set AW_AGENT")
        );
    };
    let (name, inst_name) = names::parse_agent_address(&agent)?;
    if names::RESERVED_SENDERS.contains(&name.as_str()) {
        return Err(Error::invalid(format!(
            "'{name}' is a reserved sender and cannot be an agent"
        )));
    }
    let inst = match (inst_name, common.named_instance()?) {
        (Some(a), Some(b)) if a != b => {
            return Err(Error::Usage(format!(
                "--agent names instance '{a}' but -i names '{b}'"
            )));
        }
        (Some(i), _) => common.root()?.instance(&i)?,
        (None, _) => common.instance()?,
    };
    inst.check_new(create)?;
    if !registry::is_agent(&inst, &name)? {
        registry::register(
            &inst,
            Agent {
                name: name.clone(),
                backend: "external".into(),
                created: crate::time::now(),
                ..Agent::default()
            },
            false,
        )?;
    }
    crate::otel::genai::mcp(&inst);
    let channel = match channel {
        Some(c) => Some(c),
        None => push::scope_from_env().map_err(Error::Usage)?,
    };
    let start = match channel {
        Some(_) => crate::channel::Channel::new(&inst).last_id()?,
        None => 0,
    };
    let mut server = Server::new(inst, name);
    server.push = channel.map(|scope| std::sync::Arc::new(Pushing::new(scope, start)));
    server.caller.tools = crate::tools::Toolset {
        collab: (collab || delegate).then_some(limits),
        delegate,
    };
    serve(server)
}

/// A whole number of at least 1.
fn positive(p: &mut lexopt::Parser, flag: &str) -> Result<u32> {
    let v = cli::string(p, flag)?;
    v.parse::<u32>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| Error::Usage(format!("{flag}: '{v}' is not a whole number of at least 1")))
}

/// How long answers already made may take to reach stdout once input has ended.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Serve MCP on `transport` until the client is gone.
async fn serve_mcp<T>(server: Server, transport: T) -> Result<u8>
where
    T: rmcp::transport::Transport<rmcp::RoleServer> + 'static,
{
    use rmcp::ServiceExt;
    use rmcp::service::ServerInitializeError;
    let running = match server.serve(transport).await {
        Ok(r) => r,
        // End of input before (or during) the initialisation: nothing to serve.
        Err(ServerInitializeError::ConnectionClosed(_)) => return Ok(0),
        Err(e) => {
            return Err(Error::Unavailable(format!(
                "MCP initialisation failed: {e}"
            )));
        }
    };
    match running.waiting().await {
        Ok(_) => Ok(0),
        Err(e) => {
            eprintln!("aw-mcp: server task failed: {e}");
            Ok(crate::error::exit::SOFTWARE)
        }
    }
}

fn serve(server: Server) -> Result<u8> {
    use tokio::signal::unix::{SignalKind, signal};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Unavailable(format!("cannot start the runtime: {e}")))?;
    let code = rt.block_on(async move {
        // Install the handlers before anything else, so a signal ends the server at every
        // stage, the MCP initialisation included.
        let mut term = signal(SignalKind::terminate())
            .map_err(|e| Error::Unavailable(format!("cannot handle SIGTERM: {e}")))?;
        let mut int = signal(SignalKind::interrupt())
            .map_err(|e| Error::Unavailable(format!("cannot handle SIGINT: {e}")))?;
        let session = async move {
            let (transport, writer) = crate::mcp::framing::new(
                tokio::io::stdin(),
                tokio::io::stdout(),
                crate::mcp::MAX_REQUEST_LINE,
            );
            let writer = tokio::spawn(writer);
            let code = serve_mcp(server, transport).await;
            // The transport is gone: let the writer put out every answer queued so far,
            // without waiting forever on a client that stopped reading.
            match tokio::time::timeout(DRAIN, writer).await {
                Ok(Ok(Err(e))) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::Io {
                    path: "standard output".into(),
                    source: e,
                }),
                _ => code,
            }
        };
        tokio::select! {
            r = session => r,
            _ = int.recv() => Ok(crate::error::exit::INTERRUPTED),
            _ = term.recv() => Ok(0),
        }
    })?;
    // Do not wait for blocking tool calls (an inbox wait) or the stdin reader thread:
    // leave at once, as a server told to stop should.
    std::process::exit(code as i32)
}
