//! `aw-ctl mcp-config`: how to start `aw-mcp` for an agent, for Claude Code or Codex.

use std::path::{Path, PathBuf};

use super::{Call, agent_instance};
use crate::cli::Out;
use crate::error::{Error, Result};
use crate::names;
use crate::tools::client_config;

/// Where `aw-mcp` is: next to this executable, else on PATH.
fn aw_mcp_path() -> Result<PathBuf> {
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        let p = dir.join("aw-mcp");
        if p.is_file() {
            return Ok(p);
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("aw-mcp");
            if p.is_file() {
                return absolute(&p);
            }
        }
    }
    Err(
        Error::not_found("cannot find aw-mcp next to aw-ctl or on PATH")
            .hint("make install, or add target/release to PATH"),
    )
}

fn absolute(p: &Path) -> Result<PathBuf> {
    if let Ok(c) = std::fs::canonicalize(p) {
        return Ok(c);
    }
    let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    Ok(cwd.join(p))
}

/// Quote a string for a POSIX shell.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The options of `mcp-config`.
struct Opts {
    codex: bool,
    codex_toml: bool,
    collab: bool,
    delegate: bool,
    channel: bool,
}

impl Opts {
    fn parse(c: &Call) -> Opts {
        Opts {
            codex: c.has("codex"),
            codex_toml: c.has("codex-toml"),
            collab: c.has("collab"),
            delegate: c.has("delegate"),
            channel: c.has("channel"),
        }
    }
}

/// How Claude Code is started for the pushes of `aw-mcp --channel` (the server is `aw`).
pub(super) const CHANNEL_LAUNCH: &str = "claude --dangerously-load-development-channels server:aw";

/// `aw-ctl mcp-config NAME@INSTANCE [--codex | --codex-toml] [--collab | --delegate]
/// [--channel]`.
pub(super) fn mcp_config(out: &mut Out, c: &Call, args: &[&str]) -> Result<u8> {
    // Configuration to copy: exact on a terminal too.
    out.exact();
    let a = Opts::parse(c);
    let (name, inst) = agent_instance(&c.common, args[0])?;
    if names::RESERVED_SENDERS.contains(&name.as_str()) {
        return Err(Error::invalid(format!(
            "'{name}' is a reserved sender and cannot be an agent"
        )));
    }
    let exe = aw_mcp_path()?;
    let root = absolute(c.common.root()?.path())?;
    let agent = format!("{name}@{}", inst.name());
    if a.collab && a.delegate {
        return Err(Error::Usage(
            "--collab and --delegate do not go together (--delegate gives the collab tools)".into(),
        ));
    }
    if a.channel && (a.codex || a.codex_toml) {
        return Err(Error::Usage(
            "--channel is for Claude Code: Codex has no channel pushes".into(),
        ));
    }
    let mut tools = client_config::tool_args(
        (a.collab || a.delegate).then(crate::registry::Collab::default),
        a.delegate,
    );
    if a.channel {
        tools.push("--channel".into());
    }
    if a.codex || a.codex_toml {
        let keys = client_config::codex_keys(&exe, &root, &agent, &tools);
        if a.codex_toml {
            out.line("[mcp_servers.aw]")?;
            for (k, v) in keys {
                out.line(&format!("{k} = {v}"))?;
            }
        } else {
            for (k, v) in keys {
                out.line(&format!(
                    "-c {}",
                    sh_quote(&format!("mcp_servers.aw.{k}={v}"))
                ))?;
            }
        }
        return Ok(0);
    }
    out.line(&client_config::claude_json(&exe, &root, &agent, &tools))?;
    if a.channel {
        eprintln!("hint: start Claude Code with: {CHANNEL_LAUNCH} --mcp-config FILE");
    }
    Ok(0)
}
