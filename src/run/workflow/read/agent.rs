//! Reading the `agents:` map: each agent's name, backend and the keys that backend takes,
//! its tools, prompt, environment, command and mock script.

use std::path::Path;

use super::budget::{read_budget, read_usage};
use crate::error::Error;
use crate::names::{self, sanitize};
use crate::registry::PERMISSION_MODES;
use crate::run::diagnostic::{Pos, Spanned};
use crate::run::interpolate::Template;
use crate::run::reader::{Fields, Reader, Use, join};
use crate::run::workflow::{
    AgentDef, BackendKind, MockDef, SystemPrompt, names_prompt_file, read_capped,
};
use crate::run::yaml::{Kind, Node};
use crate::suggest::suggestion;
use crate::tools::files::FileTool;

const AGENT_KEYS: [&str; 26] = [
    "backend",
    "model",
    "system_prompt",
    "tools",
    "max_tokens",
    "max_steps",
    "timeout",
    "idle_timeout",
    "permission_mode",
    "max_runs",
    "cwd",
    "env",
    "secrets",
    "command",
    "mock",
    "reply_fallback",
    "budget",
    "collab",
    "delegate",
    "max_workers",
    "spawn_depth",
    "board",
    "needs",
    "approve_tools",
    "isolation",
    "session",
];
const MOCK_KEYS: [&str; 5] = ["replies", "fail", "delay", "vote", "usage"];

pub(super) fn read_agents(r: &mut Reader, top: &Fields, dir: &Path) -> Vec<AgentDef> {
    let Some((key, node)) = top.entry("agents") else {
        r.error(
            Pos::START,
            "",
            "no agents: define at least one under 'agents:'",
        );
        return Vec::new();
    };
    if node.is_null() || matches!(&node.kind, Kind::Map(e) if e.is_empty()) {
        r.error(key.pos, "agents", "no agents: define at least one");
        return Vec::new();
    }
    let Some(entries) = r.entries(node, "agents") else {
        return Vec::new();
    };
    // Sized once: an agent's definition is about 1 KB, and a list grown by doubling would
    // hold up to twice the room of every agent.
    let mut agents = Vec::with_capacity(entries.iter().len());
    agents.extend(
        entries
            .iter()
            .filter_map(|(name, def)| read_agent(r, name, def, dir)),
    );
    agents
}

fn check_agent_name(r: &mut Reader, name: &Spanned<&str>) {
    let why = if !names::is_agent_name(name.value) {
        format!(
            "invalid agent name '{}': expected [A-Za-z][A-Za-z0-9_-]*, at most {} characters",
            sanitize(name.value),
            names::MAX_NAME
        )
    } else if let Some(why) = names::unmentionable(name.value) {
        why
    } else if names::RESERVED_SENDERS.contains(&name.value) {
        format!(
            "'{}' is reserved for a sender that is not an agent",
            name.value
        )
    } else {
        return;
    };
    r.error(name.pos, "agents", &why);
}

fn read_agent(r: &mut Reader, name: &Spanned<&str>, node: &Node, dir: &Path) -> Option<AgentDef> {
    check_agent_name(r, name);
    let path = join("agents", name.value);
    let f = if node.is_null() {
        Fields::default()
    } else {
        r.fields(node, &path, &AGENT_KEYS)?
    };
    let p = |key: &str| join(&path, key);
    let model = f.get("model").and_then(|n| r.name(n, &p("model")));
    // After a backend error, reading goes on (for the other problems) with a stand-in.
    let chosen = choose_backend(r, &f, name, &path, model.as_ref());
    let backend_ok = chosen.is_some();
    let mut agent = AgentDef {
        name: Spanned::new(name.value.to_string(), name.pos),
        backend: chosen.unwrap_or(Spanned::new(BackendKind::Claude, name.pos)),
        backend_read: backend_ok,
        model,
        system_prompt: f
            .get("system_prompt")
            .and_then(|n| read_prompt(r, n, &p("system_prompt"), dir)),
        tools: f
            .get("tools")
            .and_then(|n| r.strings(n, &p("tools")))
            .unwrap_or_default(),
        max_tokens: f
            .get("max_tokens")
            .and_then(|n| r.whole(n, &p("max_tokens"), 1)),
        max_steps: f
            .get("max_steps")
            .and_then(|n| r.whole(n, &p("max_steps"), 1)),
        timeout: f.get("timeout").and_then(|n| r.duration(n, &p("timeout"))),
        idle_timeout: f
            .get("idle_timeout")
            .and_then(|n| r.duration(n, &p("idle_timeout"))),
        permission_mode: f
            .get("permission_mode")
            .and_then(|n| read_permission_mode(r, n, &p("permission_mode"))),
        max_runs: f
            .get("max_runs")
            .and_then(|n| r.whole(n, &p("max_runs"), 1)),
        cwd: f
            .get("cwd")
            .and_then(|n| r.name(n, &p("cwd")))
            .map(|s| Spanned::new(dir.join(&s.value), s.pos)),
        cwd_written: f.get("cwd").and_then(|n| n.str().ok()).map(Into::into),
        env: f
            .get("env")
            .map(|n| read_env(r, n, &p("env")))
            .unwrap_or_default(),
        secrets: f
            .get("secrets")
            .map(|n| read_secret_names(r, n, &p("secrets")))
            .unwrap_or_default(),
        command: f
            .get("command")
            .and_then(|n| read_command(r, n, &p("command"))),
        mock: f.get("mock").and_then(|n| read_mock(r, n, &p("mock"))),
        reply_fallback: true,
        budget: f
            .get("budget")
            .map(|n| read_budget(r, n, &p("budget")))
            .unwrap_or_default(),
        collab: None,
        delegate: false,
        board_next: false,
        needs: f
            .get("needs")
            .and_then(|n| super::tasks::read_needs(r, n, &p("needs"))),
        approve_tools: None,
        isolation: f
            .get("isolation")
            .and_then(|n| super::isolation::read_isolation(r, n, &p("isolation"))),
        session: f.get("session").and_then(|n| {
            let (read, names) = (
                crate::sessions::Mode::from_name,
                crate::sessions::Mode::NAMES,
            );
            r.keyword(n, &p("session"), read, names)
        }),
    };
    if let Some(n) = f.get("board") {
        agent.board_next = read_board_next(r, n, &p("board"));
    }
    if let Some(n) = f.get("reply_fallback") {
        agent.reply_fallback = r.boolean(n, &p("reply_fallback")).unwrap_or(true);
    }
    read_collab(r, &f, &path, &mut agent);
    if backend_ok {
        check_backend_keys(r, &agent, &f, &path);
        check_tools(r, &agent, &f, &path);
        check_program_keys(r, &agent, &f, &path);
        if let Some(n) = f.get("approve_tools") {
            agent.approve_tools =
                super::approve_tools::read_approve_tools(r, n, &p("approve_tools"), &agent);
        }
    }
    Some(agent)
}

/// `board: next`: each run of the agent starts from the next ready card of the board.
fn read_board_next(r: &mut Reader, node: &Node, path: &str) -> bool {
    match node.str() {
        Ok("next") => true,
        _ => {
            let found = match node.scalar_text() {
                Some(t) => format!("'{}'", sanitize(t)),
                None => node.type_name().to_string(),
            };
            let msg =
                format!("expected next (each run starts from the next ready card), found {found}");
            r.error(node.pos, path, &msg);
            false
        }
    }
}

/// `collab`, `delegate`, `max_workers`, `spawn_depth`: the collab tools and their limits.
/// The limits need one of the first two; an agent that only coordinates takes no `tools`.
fn read_collab(r: &mut Reader, f: &Fields, path: &str, agent: &mut AgentDef) {
    let p = |key: &str| join(path, key);
    let collab = f
        .get("collab")
        .and_then(|n| r.boolean(n, &p("collab")))
        .unwrap_or(false);
    agent.delegate = f
        .get("delegate")
        .and_then(|n| r.boolean(n, &p("delegate")))
        .unwrap_or(false);
    let mut limits = crate::registry::Collab::default();
    for key in ["max_workers", "spawn_depth"] {
        let Some((k, n)) = f.entry(key) else {
            continue;
        };
        let Some(v) = r.whole(n, &p(key), 1) else {
            continue;
        };
        let v = u32::try_from(v.value).unwrap_or(u32::MAX);
        if key == "max_workers" {
            limits.max_workers = v;
        } else {
            limits.max_depth = v;
        }
        if !collab && !agent.delegate {
            r.error(
                k.pos,
                &p(key),
                &format!("{key} goes with collab: true (or delegate: true)"),
            );
        }
    }
    if collab || agent.delegate {
        agent.collab = Some(limits);
    }
    if agent.delegate
        && let Some((k, _)) = f.entry("tools")
    {
        r.error(
            k.pos,
            &p("tools"),
            "an agent with delegate: true only coordinates and takes no tools",
        );
    }
}

/// The backend named, implied by `mock:`/`command:`, chosen by the model's provider prefix,
/// or `claude`. `None` after an error.
fn choose_backend(
    r: &mut Reader,
    f: &Fields,
    name: &Spanned<&str>,
    path: &str,
    model: Option<&Spanned<String>>,
) -> Option<Spanned<BackendKind>> {
    if let Some(node) = f.get("backend") {
        let text = r.string(node, &join(path, "backend"))?;
        let known = BackendKind::IN_WORKFLOWS.map(BackendKind::name);
        let Some(b) =
            BackendKind::from_name(&text).filter(|b| BackendKind::IN_WORKFLOWS.contains(b))
        else {
            let msg = format!(
                "unknown backend '{}'{}; expected one of: {}",
                sanitize(&text),
                suggestion(&text, known),
                known.join(", ")
            );
            r.error(node.pos, &join(path, "backend"), &msg);
            return None;
        };
        return Some(Spanned::new(b, node.pos));
    }
    match (f.entry("mock"), f.entry("command")) {
        (Some(_), Some(_)) => {
            r.error(
                name.pos,
                path,
                "both mock and command given: name the backend",
            );
            return None;
        }
        (Some((key, _)), None) => return Some(Spanned::new(BackendKind::Mock, key.pos)),
        (None, Some((key, _))) => return Some(Spanned::new(BackendKind::Exec, key.pos)),
        (None, None) => {}
    }
    let Some(model) = model else {
        return Some(Spanned::new(BackendKind::Claude, name.pos));
    };
    let Some((provider, _)) = model.split_once('/') else {
        return Some(Spanned::new(BackendKind::Claude, model.pos));
    };
    match BackendKind::for_provider(provider) {
        Some(b) => Some(Spanned::new(b, model.pos)),
        None => {
            let known: Vec<&str> = BackendKind::IN_WORKFLOWS
                .into_iter()
                .map(BackendKind::name)
                .filter(|n| BackendKind::for_provider(n).is_some())
                .collect();
            let msg = format!(
                "unknown model provider '{}' (known: {}); name the backend to use this model",
                sanitize(provider),
                known.join(", ")
            );
            r.error(model.pos, &join(path, "model"), &msg);
            None
        }
    }
}

/// Keys that only some backends take, and what some backends need.
fn check_backend_keys(r: &mut Reader, agent: &AgentDef, f: &Fields, path: &str) {
    let backend = agent.backend.value;
    for (key, only) in [("command", BackendKind::Exec), ("mock", BackendKind::Mock)] {
        if let Some((k, _)) = f.entry(key).filter(|_| backend != only) {
            let msg = format!(
                "only for backend {} (this agent's is {})",
                only.name(),
                backend.name()
            );
            r.error(k.pos, &join(path, key), &msg);
        }
    }
    if backend == BackendKind::Exec && f.get("command").is_none() {
        r.error(
            agent.name.pos,
            path,
            "backend exec needs a command (an argument list)",
        );
    }
    if backend.needs_model() && agent.model.is_none() {
        let msg = format!("backend {} needs a model", backend.name());
        r.error(agent.name.pos, path, &msg);
    }
}

/// `tools`: Claude Code's own tool names, free-form, for `claude`; the built-in file tools
/// for `anthropic` and `openai`, each once; refused for the other backends, which have no
/// use for it.
fn check_tools(r: &mut Reader, agent: &AgentDef, f: &Fields, path: &str) {
    let backend = agent.backend.value;
    let path = join(path, "tools");
    match backend {
        BackendKind::Claude => {}
        BackendKind::Anthropic | BackendKind::Openai => {
            for (i, tool) in agent.tools.iter().enumerate() {
                let at = format!("{path}[{i}]");
                let first = agent.tools[..i].iter().find(|t| t.value == tool.value);
                let msg = if let Some(first) = first {
                    format!(
                        "duplicate tool '{}' (first at line {})",
                        sanitize(tool),
                        first.pos.line
                    )
                } else if FileTool::from_name(tool).is_none() {
                    format!(
                        "unknown tool '{}'{}; the {} backend offers: {}",
                        sanitize(tool),
                        suggestion(tool, FileTool::NAMES.iter().copied()),
                        backend.name(),
                        FileTool::names()
                    )
                } else {
                    continue;
                };
                r.error(tool.pos, &at, &msg);
            }
        }
        BackendKind::Codex | BackendKind::Exec | BackendKind::Mock | BackendKind::External => {
            if let Some((key, _)) = f.entry("tools") {
                let msg = format!(
                    "only for the claude, anthropic and openai backends (this agent's is {})",
                    backend.name()
                );
                r.error(key.pos, &path, &msg);
            }
        }
    }
}

/// `idle_timeout` needs a backend that waits on a program or a service; `permission_mode`
/// is Claude Code's.
fn check_program_keys(r: &mut Reader, agent: &AgentDef, f: &Fields, path: &str) {
    let backend = agent.backend.value;
    if let Some((k, _)) = f
        .entry("idle_timeout")
        .filter(|_| backend == BackendKind::Mock)
    {
        let msg = "only for backends that wait on a program or a service (this agent's is mock)";
        r.error(k.pos, &join(path, "idle_timeout"), msg);
    }
    if let Some((k, _)) = f
        .entry("permission_mode")
        .filter(|_| backend != BackendKind::Claude)
    {
        let msg = format!(
            "only for backend claude (this agent's is {})",
            backend.name()
        );
        r.error(k.pos, &join(path, "permission_mode"), &msg);
    }
    if let Some((k, _)) = f
        .entry("session")
        .filter(|_| !matches!(backend, BackendKind::Claude | BackendKind::Codex))
    {
        let msg = format!(
            "only for backends claude and codex (this agent's is {})",
            backend.name()
        );
        r.error(k.pos, &join(path, "session"), &msg);
    }
}

/// One of Claude Code's permission modes.
fn read_permission_mode(r: &mut Reader, node: &Node, path: &str) -> Option<Spanned<String>> {
    let mode = r.string(node, path)?;
    if PERMISSION_MODES.contains(&mode.value.as_str()) {
        return Some(mode);
    }
    let msg = format!(
        "unknown permission mode '{}'{}; expected one of: {}",
        sanitize(&mode),
        suggestion(&mode, PERMISSION_MODES),
        PERMISSION_MODES.join(", ")
    );
    r.error(mode.pos, path, &msg);
    None
}

fn read_prompt(r: &mut Reader, node: &Node, path: &str, dir: &Path) -> Option<SystemPrompt> {
    let text = r.string(node, path)?;
    if !names_prompt_file(&text) {
        let template = r.scalar_template(node, &text, path, Use::TEXT)?;
        return Some(SystemPrompt {
            template,
            file: None,
        });
    }
    let file = dir.join(text.trim());
    let content = read_capped(&file).and_then(|b| {
        String::from_utf8(b)
            .map_err(|_| Error::invalid(format!("{}: not valid UTF-8", file.display())))
    });
    match content {
        Ok(content) => {
            let template = r.file_template(&file, &content, path, Use::TEXT)?;
            Some(SystemPrompt {
                template: Spanned::new(template, node.pos),
                file: Some(file),
            })
        }
        Err(e) => {
            let msg = format!("cannot read the prompt file: {e}");
            r.error(node.pos, path, &msg);
            None
        }
    }
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn read_env(r: &mut Reader, node: &Node, path: &str) -> Vec<(Spanned<String>, Spanned<Template>)> {
    let Some(entries) = r.entries(node, path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, value) in entries.iter() {
        let name = key.value;
        if !is_env_name(name) {
            let msg = format!(
                "invalid variable name '{}': expected [A-Za-z_][A-Za-z0-9_]*",
                sanitize(name)
            );
            r.error(key.pos, path, &msg);
        } else if name.starts_with("AW_") {
            r.error(
                key.pos,
                path,
                &format!("'{name}' is reserved: aw sets the AW_* variables"),
            );
        }
        let vpath = join(path, name);
        let text = match &value.kind {
            Kind::Scalar(text, _) if !value.is_null() => text.clone(),
            _ => {
                let msg = format!("expected a string, found {}", value.type_name());
                r.error(value.pos, &vpath, &msg);
                continue;
            }
        };
        if let Some(t) = r.scalar_template(value, &text, &vpath, Use::TEXT) {
            out.push((Spanned::new(name.to_string(), key.pos), t));
        }
    }
    out
}

/// `secrets:`: names of variables (of the agent's `env` or aw-run's environment) whose
/// values are secret although their names do not say so.
fn read_secret_names(r: &mut Reader, node: &Node, path: &str) -> Vec<String> {
    let names = r.strings(node, path).unwrap_or_default();
    let mut out = Vec::new();
    for n in names {
        if is_env_name(&n.value) {
            out.push(n.value);
        } else {
            let msg = format!(
                "invalid variable name '{}': expected [A-Za-z_][A-Za-z0-9_]*",
                sanitize(&n.value)
            );
            r.error(n.pos, path, &msg);
        }
    }
    out
}

fn read_command(r: &mut Reader, node: &Node, path: &str) -> Option<Vec<Spanned<Template>>> {
    if node.str().is_ok() {
        let msg = "expected a list of arguments, found a string (no shell is implied); \
                   write [\"sh\", \"-c\", \"...\"] to run one";
        r.error(node.pos, path, msg);
        return None;
    }
    let items = node.seq().map_err(|m| r.error(node.pos, path, &m)).ok()?;
    if items.is_empty() {
        r.error(node.pos, path, "must name a program");
        return None;
    }
    let args = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| r.template(item, &format!("{path}[{i}]"), Use::TEXT))
        .collect();
    Some(args)
}

fn read_mock(r: &mut Reader, node: &Node, path: &str) -> Option<MockDef> {
    let mut mock = MockDef::default();
    if node.is_null() {
        return Some(mock);
    }
    let f = r.fields(node, path, &MOCK_KEYS)?;
    if let Some(n) = f.get("replies") {
        let items = n
            .seq()
            .map_err(|m| r.error(n.pos, &join(path, "replies"), &m))
            .ok();
        for (i, item) in items.unwrap_or_default().iter().enumerate() {
            mock.replies
                .extend(r.string(item, &format!("{path}.replies[{i}]")));
        }
    }
    if let Some(n) = f.get("fail") {
        mock.fail = r.whole(n, &join(path, "fail"), 0).map_or(0, |s| s.value);
    }
    mock.delay = f
        .get("delay")
        .and_then(|n| r.duration(n, &join(path, "delay")))
        .map(|d| d.value);
    mock.vote = f.get("vote").and_then(|n| r.string(n, &join(path, "vote")));
    mock.usage = f
        .get("usage")
        .and_then(|n| read_usage(r, n, &join(path, "usage")));
    Some(mock)
}
