//! `aw-ctl` commands about the team: status, proposals and votes, MCP wiring.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::ctl::Args;
use crate::cli::Out;
use crate::error::{Error, Result};
use crate::names;
use crate::proposal::{self, Choice, NewProposal, Resolution};
use crate::registry::{Config, Registry};
use crate::status;

/// `aw-ctl status [NAME]`: agents' state, task and unread counts, and active proposals.
pub fn status(out: &mut Out, a: &Args, only: Option<&str>) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    proposal::refresh(&inst)?;
    let reg = Registry::load(&inst)?;
    if let Some(n) = only {
        names::check_agent(n)?;
        if !reg.contains(n) {
            return Err(Error::not_found(format!(
                "no agent '{n}' in instance '{}'",
                inst.name()
            )));
        }
    }
    let owner = Config::load(&inst)?.document_owner;
    let active = proposal::list(&inst, true)?;
    let agents: Vec<_> = status::members(&inst, &reg, only)?
        .into_iter()
        .map(|m| {
            json!({
                "name": m.agent.name,
                "backend": m.agent.backend,
                "model": m.agent.model,
                "state": m.state,
                "task": m.task,
                "metadata": m.metadata,
                "updated": m.updated,
                "unread": m.unread,
                "cursor": m.cursor,
            })
        })
        .collect();
    if a.json {
        let props: Vec<_> = active.iter().map(|p| p.to_json()).collect();
        out.line(
            &json!({"instance": inst.name(), "documentOwner": owner, "agents": agents, "proposals": props})
                .to_string(),
        )?;
        return Ok(0);
    }
    out.line(&format!(
        "instance {}{}",
        inst.name(),
        owner
            .map(|o| format!(" (documents owned by @{o})"))
            .unwrap_or_default()
    ))?;
    for ag in &agents {
        let mut line = format!(
            "  {:<16} {:<8} {:>4} unread",
            ag["name"].as_str().unwrap_or(""),
            ag["state"].as_str().unwrap_or(""),
            ag["unread"]
        );
        if let Some(t) = ag["task"].as_str() {
            line.push_str("  ");
            line.push_str(t);
        }
        out.line(&line)?;
    }
    if only.is_none() {
        for p in &active {
            out.line(&format!("  proposal {}", p.summary()))?;
        }
    }
    Ok(0)
}

/// `aw-ctl proposals [--all] [--json]`.
pub fn proposals(out: &mut Out, a: &Args) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    for p in proposal::list(&inst, !a.all)? {
        if a.json {
            out.line(&p.to_json().to_string())?;
        } else {
            out.line(&p.summary())?;
        }
    }
    Ok(0)
}

/// `aw-ctl vote PROPOSAL CHOICE [--as NAME] [--reason R]`.
pub fn vote(out: &mut Out, a: &Args, id: &str, choice: &str) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = super::ctl::who(a)?;
    let p = proposal::vote(&inst, &who, id, choice, a.reason.as_deref())?;
    print_proposal(out, a, &p)
}

/// `aw-ctl cancel PROPOSAL [--as NAME]`.
pub fn cancel(out: &mut Out, a: &Args, id: &str) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = super::ctl::who(a)?;
    let p = proposal::cancel(&inst, &who, id)?;
    print_proposal(out, a, &p)
}

fn print_proposal(out: &mut Out, a: &Args, p: &proposal::Proposal) -> Result<u8> {
    if a.json {
        out.line(&p.to_json().to_string())?;
    } else {
        out.line(&p.summary())?;
    }
    Ok(0)
}

/// `aw-ctl propose TYPE TITLE [--option ID[=LABEL]]... [--rule R] [--quorum N]
/// [--tie-breaker T] [--binding] [--timeout SECS] [--description TEXT] [--id ID] [--as NAME]`.
pub fn propose(out: &mut Out, a: &Args, kind: &str, title: &str) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = super::ctl::who(a)?;
    let options = a
        .options
        .iter()
        .map(|o| match o.split_once('=') {
            Some((id, label)) => Choice {
                id: id.to_string(),
                label: label.to_string(),
            },
            None => Choice {
                id: o.clone(),
                label: o.clone(),
            },
        })
        .collect();
    let d = Resolution::default();
    let new = NewProposal {
        id: a.id.clone(),
        kind: kind.to_string(),
        title: title.to_string(),
        description: a.description.clone(),
        options,
        resolution: Resolution {
            rule: a.rule.clone().unwrap_or(d.rule),
            quorum: a.quorum,
            tie_breaker: a.tie_breaker.clone().unwrap_or(d.tie_breaker),
        },
        binding: a.binding,
        timeout_seconds: a.timeout,
    };
    let p = proposal::create(&inst, &who, new)?;
    if a.json {
        out.line(&p.to_json().to_string())?;
    } else {
        out.line(&p.id)?;
    }
    Ok(0)
}

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

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("string serializes")
}

/// `aw-ctl mcp-config NAME@INSTANCE [--codex | --codex-toml]`.
pub fn mcp_config(out: &mut Out, a: &Args, addr: &str) -> Result<u8> {
    let (name, inst) = super::ctl::agent_instance(a, addr)?;
    if names::RESERVED_SENDERS.contains(&name.as_str()) {
        return Err(Error::invalid(format!(
            "'{name}' is a reserved sender and cannot be an agent"
        )));
    }
    let exe = aw_mcp_path()?;
    let root = absolute(a.common.root().path())?;
    let agent = format!("{name}@{}", inst.name());
    let exe_s = exe.to_string_lossy().into_owned();
    let root_s = root.to_string_lossy().into_owned();
    if a.codex || a.codex_toml {
        let args = format!("[{}, {}]", toml_str("--agent"), toml_str(&agent));
        let env = format!("{{ AW_ROOT = {} }}", toml_str(&root_s));
        let keys = [
            ("command", toml_str(&exe_s)),
            ("args", args),
            ("env", env),
            ("required", "true".to_string()),
            ("default_tools_approval_mode", toml_str("approve")),
        ];
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
    let cfg = json!({
        "mcpServers": {
            "aw": {
                "type": "stdio",
                "command": exe_s,
                "args": ["--agent", agent],
                "env": {"AW_ROOT": root_s},
                "alwaysLoad": true
            }
        }
    });
    out.line(&serde_json::to_string_pretty(&cfg).expect("json"))?;
    Ok(0)
}
