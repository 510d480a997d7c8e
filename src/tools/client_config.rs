//! How a client starts `aw-mcp` for one agent: Claude Code's `mcpServers` JSON and Codex's
//! `mcp_servers.aw` keys. `aw-ctl mcp-config` prints them; `aw-run` writes the JSON for its
//! backends. One place, so that both always say the same.

use std::path::Path;

use serde_json::json;

/// Claude Code's configuration (`--mcp-config FILE`): the server `aw`, started as
/// `EXE --agent AGENT [EXTRA...]` with `AW_ROOT=ROOT`. `agent` is `NAME@INSTANCE`.
pub fn claude_json(exe: &Path, root: &Path, agent: &str, extra: &[String]) -> String {
    let args: Vec<&str> = ["--agent", agent]
        .into_iter()
        .chain(extra.iter().map(String::as_str))
        .collect();
    let cfg = json!({
        "mcpServers": {
            "aw": {
                "type": "stdio",
                "command": exe.to_string_lossy(),
                "args": args,
                "env": {"AW_ROOT": root.to_string_lossy()},
                "alwaysLoad": true
            }
        }
    });
    serde_json::to_string_pretty(&cfg).expect("a JSON value serializes")
}

/// Codex's `mcp_servers.aw` keys with their values written as TOML.
pub fn codex_keys(
    exe: &Path,
    root: &Path,
    agent: &str,
    extra: &[String],
) -> Vec<(&'static str, String)> {
    let args: Vec<String> = ["--agent", agent]
        .into_iter()
        .chain(extra.iter().map(String::as_str))
        .map(toml_str)
        .collect();
    let args = format!("[{}]", args.join(", "));
    let env = format!("{{ AW_ROOT = {} }}", toml_str(&root.to_string_lossy()));
    vec![
        ("command", toml_str(&exe.to_string_lossy())),
        ("args", args),
        ("env", env),
        ("required", "true".to_string()),
        ("default_tools_approval_mode", toml_str("approve")),
        // Codex gives a tool call 60 s by default; `channel_send` may wait for a reply.
        (
            "tool_timeout_sec",
            (super::catalogue::MAX_REPLY_WAIT + 30).to_string(),
        ),
    ]
}

/// The `aw-mcp` options that give an agent its tools beyond the default ones.
pub fn tool_args(collab: Option<crate::registry::Collab>, delegate: bool) -> Vec<String> {
    let Some(c) = collab else {
        return Vec::new();
    };
    let mut v = vec![if delegate { "--delegate" } else { "--collab" }.to_string()];
    let d = crate::registry::Collab::default();
    if c.max_workers != d.max_workers {
        v.extend(["--max-workers".into(), c.max_workers.to_string()]);
    }
    if c.max_depth != d.max_depth {
        v.extend(["--spawn-depth".into(), c.max_depth.to_string()]);
    }
    v
}

/// A TOML basic string (JSON's escaping is valid TOML for these values).
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}
