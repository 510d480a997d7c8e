//! Reading a workflow from its YAML tree: each part of the file in turn, then the check of
//! every `${{ name }}` against what will be defined where it is used.

use std::path::{Path, PathBuf};

use super::{
    AgentDef, Backend, Budget, Context, DEFAULT_CHANNEL, DocumentOwner, ELECTION, FileConfig,
    MockDef, Price, Pricing, SetupTask, SystemPrompt, Task, TaskKind, Usage, Workflow, models,
    names_prompt_file, read_capped,
};
use crate::error::Error;
use crate::mention;
use crate::names::{self, sanitize};
use crate::run::backend::claude::PERMISSION_MODES;
use crate::run::backend::files::FileTool;
use crate::run::diagnostic::{Pos, Spanned};
use crate::run::expr::Expr;
use crate::run::interpolate::{BUILTINS, Template, Vars, check_var_name};
use crate::run::reader::Reference;
use crate::run::reader::{Fields, Reader, Use, join};
use crate::run::yaml::{Kind, Node};
use crate::suggest::suggestion;

const TOP_KEYS: [&str; 8] = [
    "name", "agents", "context", "setup", "kickoff", "pricing", "budget", "tasks",
];
const AGENT_KEYS: [&str; 20] = [
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
    "command",
    "mock",
    "reply_fallback",
    "budget",
    "collab",
    "delegate",
    "max_workers",
    "spawn_depth",
];
const MOCK_KEYS: [&str; 5] = ["replies", "fail", "delay", "vote", "usage"];
const USAGE_KEYS: [&str; 5] = [
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
];
const BUDGET_KEYS: [&str; 2] = ["usd", "tokens"];
const PRICE_KEYS: [&str; 4] = ["input", "output", "cache_read", "cache_write"];
const CONTEXT_KEYS: [&str; 3] = ["provider", "documentOwner", "config"];
const CONFIG_KEYS: [&str; 3] = ["dir", "channel", "document"];
const SETUP_KEYS: [&str; 2] = ["shell", "as"];
const TASK_KEYS: [&str; 7] = ["shell", "send", "parallel", "to", "as", "timeout", "if"];

pub(super) fn read_workflow(r: &mut Reader, path: &Path) -> Workflow {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    let mut workflow = Workflow {
        name: Spanned::new(stem.unwrap_or_default(), Pos::START),
        file: path.to_path_buf(),
        dir,
        agents: Vec::new(),
        context: Context::default(),
        setup: Vec::new(),
        kickoff: None,
        tasks: Vec::new(),
        pricing: Pricing::default(),
        budget: Budget::default(),
    };
    let doc = r.doc;
    let fields = match &doc.root {
        None => {
            r.error(Pos::START, "", "empty workflow file: no agents");
            return workflow;
        }
        Some(root) => match r.fields(root, "", &TOP_KEYS) {
            Some(f) => f,
            None => return workflow,
        },
    };
    if let Some(node) = fields.get("name") {
        workflow.name = r.name(node, "name").unwrap_or(workflow.name);
    }
    workflow.agents = read_agents(r, &fields, &workflow.dir);
    let names: Vec<String> = workflow.agent_names().map(str::to_string).collect();
    let agents: Vec<&str> = names.iter().map(String::as_str).collect();
    workflow.context = read_context(r, fields.get("context"), &agents);
    if let Some(node) = fields.get("setup") {
        workflow.setup = read_setup(r, node);
    }
    if let Some(node) = fields.get("kickoff") {
        workflow.kickoff = r.template(node, "kickoff", Use::TEXT);
        warn_mentions(r, node, &agents);
    }
    if let Some(node) = fields.get("tasks") {
        workflow.tasks = read_tasks(r, node, workflow.setup.len(), &agents);
    }
    if let Some(node) = fields.get("pricing") {
        workflow.pricing = read_pricing(r, node);
    }
    if let Some(node) = fields.get("budget") {
        workflow.budget = read_budget(r, node, "budget");
    }
    workflow
}

fn read_agents(r: &mut Reader, top: &Fields, dir: &Path) -> Vec<AgentDef> {
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
    entries
        .iter()
        .filter_map(|(name, def)| read_agent(r, name, def, dir))
        .collect()
}

fn check_agent_name(r: &mut Reader, name: &Spanned<&str>) {
    let why = if !names::is_agent_name(name.value) {
        format!(
            "invalid agent name '{}': expected [A-Za-z][A-Za-z0-9_-]*, at most {} characters",
            sanitize(name.value),
            names::MAX_NAME
        )
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
        backend: chosen.unwrap_or(Spanned::new(Backend::Claude, name.pos)),
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
        env: f
            .get("env")
            .map(|n| read_env(r, n, &p("env")))
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
    };
    if let Some(n) = f.get("reply_fallback") {
        agent.reply_fallback = r.boolean(n, &p("reply_fallback")).unwrap_or(true);
    }
    read_collab(r, &f, &path, &mut agent);
    if backend_ok {
        check_backend_keys(r, &agent, &f, &path);
        check_tools(r, &agent, &f, &path);
        check_program_keys(r, &agent, &f, &path);
    }
    Some(agent)
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
) -> Option<Spanned<Backend>> {
    if let Some(node) = f.get("backend") {
        let text = r.string(node, &join(path, "backend"))?;
        let known = Backend::IN_WORKFLOWS.map(Backend::name);
        let Some(b) = Backend::from_name(&text).filter(|b| Backend::IN_WORKFLOWS.contains(b))
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
        (Some((key, _)), None) => return Some(Spanned::new(Backend::Mock, key.pos)),
        (None, Some((key, _))) => return Some(Spanned::new(Backend::Exec, key.pos)),
        (None, None) => {}
    }
    let Some(model) = model else {
        return Some(Spanned::new(Backend::Claude, name.pos));
    };
    let Some((provider, _)) = model.split_once('/') else {
        return Some(Spanned::new(Backend::Claude, model.pos));
    };
    match Backend::for_provider(provider) {
        Some(b) => Some(Spanned::new(b, model.pos)),
        None => {
            let known: Vec<&str> = Backend::IN_WORKFLOWS
                .into_iter()
                .map(Backend::name)
                .filter(|n| Backend::for_provider(n).is_some())
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
    for (key, only) in [("command", Backend::Exec), ("mock", Backend::Mock)] {
        if let Some((k, _)) = f.entry(key).filter(|_| backend != only) {
            let msg = format!(
                "only for backend {} (this agent's is {})",
                only.name(),
                backend.name()
            );
            r.error(k.pos, &join(path, key), &msg);
        }
    }
    if backend == Backend::Exec && f.get("command").is_none() {
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
        Backend::Claude => {}
        Backend::Anthropic | Backend::Openai => {
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
        Backend::Codex | Backend::Exec | Backend::Mock | Backend::External => {
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
    if let Some((k, _)) = f.entry("idle_timeout").filter(|_| backend == Backend::Mock) {
        let msg = "only for backends that wait on a program or a service (this agent's is mock)";
        r.error(k.pos, &join(path, "idle_timeout"), msg);
    }
    if let Some((k, _)) = f
        .entry("permission_mode")
        .filter(|_| backend != Backend::Claude)
    {
        let msg = format!(
            "only for backend claude (this agent's is {})",
            backend.name()
        );
        r.error(k.pos, &join(path, "permission_mode"), &msg);
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

/// What each run of a mock reports: token counts (whole numbers, default 0) and a cost.
fn read_usage(r: &mut Reader, node: &Node, path: &str) -> Option<Usage> {
    let f = r.fields(node, path, &USAGE_KEYS)?;
    let mut tokens = |key: &str| {
        f.get(key)
            .and_then(|n| r.whole(n, &join(path, key), 0))
            .map_or(0, |t| t.value)
    };
    let usage = Usage {
        input_tokens: tokens("input_tokens"),
        output_tokens: tokens("output_tokens"),
        cache_read_tokens: tokens("cache_read_tokens"),
        cache_write_tokens: tokens("cache_write_tokens"),
        cost_usd: None,
    };
    Some(Usage {
        cost_usd: f
            .get("cost_usd")
            .and_then(|n| amount(r, n, &join(path, "cost_usd"), false)),
        ..usage
    })
}

/// A number, whole or decimal: at least 0, or more than 0 when `positive`.
fn amount(r: &mut Reader, node: &Node, path: &str, positive: bool) -> Option<f64> {
    let Some(x) = node.number() else {
        let msg = format!("expected a number, found {}", node.type_name());
        r.error(node.pos, path, &msg);
        return None;
    };
    let why = if !x.is_finite() {
        "must be a finite number"
    } else if positive && x <= 0.0 {
        "must be more than 0"
    } else if x < 0.0 {
        "must be at least 0"
    } else {
        return Some(x);
    };
    r.error(node.pos, path, why);
    None
}

/// `{usd: X, tokens: N}`.
fn read_budget(r: &mut Reader, node: &Node, path: &str) -> Budget {
    let Some(f) = r.fields(node, path, &BUDGET_KEYS) else {
        return Budget::default();
    };
    Budget {
        usd: f
            .get("usd")
            .and_then(|n| amount(r, n, &join(path, "usd"), true)),
        tokens: f
            .get("tokens")
            .and_then(|n| r.whole(n, &join(path, "tokens"), 1))
            .map(|t| t.value),
    }
}

/// `{MODEL: {input: X, output: X, cache_read: X, cache_write: X}}`; two names of one model
/// are an error.
fn read_pricing(r: &mut Reader, node: &Node) -> Pricing {
    let mut pricing = Pricing::default();
    let Some(entries) = r.entries(node, "pricing") else {
        return pricing;
    };
    let mut seen: Vec<(String, Spanned<&str>)> = Vec::new();
    for (key, value) in entries.iter() {
        let path = join("pricing", key.value);
        if key.value.trim().is_empty() {
            r.error(key.pos, "pricing", "a model name must not be empty");
            continue;
        }
        let id = models::resolve(key.value).id;
        if let Some((_, first)) = seen.iter().find(|(i, _)| *i == id) {
            let msg = format!(
                "'{}' is the same model as '{}' (line {}): give its prices once",
                sanitize(key.value),
                sanitize(first.value),
                first.pos.line
            );
            r.error(key.pos, "pricing", &msg);
            continue;
        }
        seen.push((id, key.clone()));
        if matches!(&value.kind, Kind::Map(e) if e.is_empty()) {
            let msg = format!("no price given; expected {}", PRICE_KEYS.join(", "));
            r.error(value.pos, &path, &msg);
            continue;
        }
        let Some(f) = r.fields(value, &path, &PRICE_KEYS) else {
            continue;
        };
        let mut get = |k: &str| f.get(k).and_then(|n| amount(r, n, &join(&path, k), false));
        let price = Price {
            input: get("input"),
            output: get("output"),
            cache_read: get("cache_read"),
            cache_write: get("cache_write"),
        };
        pricing.set(key.value, price);
    }
    pricing
}

fn read_context(r: &mut Reader, node: Option<&Node>, agents: &[&str]) -> Context {
    let Some(node) = node.filter(|n| !n.is_null()) else {
        return Context::default();
    };
    match node.boolean() {
        Ok(false) => return Context::Disabled,
        Ok(true) => {
            let msg = "expected false or a mapping, found true (leave context out for the default)";
            r.error(node.pos, "context", msg);
            return Context::default();
        }
        Err(_) => {}
    }
    if !matches!(node.kind, Kind::Map(_)) {
        let msg = format!("expected false or a mapping, found {}", node.type_name());
        r.error(node.pos, "context", &msg);
        return Context::default();
    }
    let Some(f) = r.fields(node, "context", &CONTEXT_KEYS) else {
        return Context::default();
    };
    let document_owner = f
        .get("documentOwner")
        .and_then(|n| read_owner(r, n, agents));
    let provider = f
        .get("provider")
        .and_then(|n| r.string(n, "context.provider"));
    match provider.as_ref().map(|p| p.value.as_str()) {
        None | Some("file") => Context::File {
            document_owner,
            config: f
                .get("config")
                .map(|n| read_config(r, n))
                .unwrap_or_default(),
        },
        Some("memory") => {
            if let Some((key, _)) = f.entry("config") {
                r.error(key.pos, "context.config", "only for provider file");
            }
            Context::Memory { document_owner }
        }
        Some(other) => {
            let msg = format!(
                "unknown provider '{}'{}; expected file or memory",
                sanitize(other),
                suggestion(other, ["file", "memory"])
            );
            r.error(
                provider.as_ref().map_or(node.pos, |p| p.pos),
                "context.provider",
                &msg,
            );
            Context::default()
        }
    }
}

fn read_owner(r: &mut Reader, node: &Node, agents: &[&str]) -> Option<Spanned<DocumentOwner>> {
    let path = "context.documentOwner";
    let name = r.name(node, path)?;
    if name.value == ELECTION {
        return Some(Spanned::new(DocumentOwner::Election, name.pos));
    }
    if !agents.contains(&name.value.as_str()) {
        let msg = format!(
            "'{}' is not an agent of this workflow{} (or write {ELECTION})",
            sanitize(&name),
            suggestion(&name, agents.iter().copied())
        );
        r.error(name.pos, path, &msg);
        return None;
    }
    Some(Spanned::new(DocumentOwner::Agent(name.value), name.pos))
}

fn read_config(r: &mut Reader, node: &Node) -> FileConfig {
    let path = "context.config";
    let Some(f) = r.fields(node, path, &CONFIG_KEYS) else {
        return FileConfig::default();
    };
    // The directory is needed before setup runs, so it sees no setup output.
    let before_setup = Use {
        before_task: Some(0),
        shell: false,
    };
    FileConfig {
        dir: f
            .get("dir")
            .and_then(|n| r.template(n, "context.config.dir", before_setup)),
        channel: f.get("channel").and_then(|n| {
            let path = "context.config.channel";
            let name = relative_name(r, n, path, false)?;
            if name.value != DEFAULT_CHANNEL {
                let why = format!(
                    "aw keeps the channel in {DEFAULT_CHANNEL}; no other name is supported"
                );
                r.error(name.pos, path, &why);
                return None;
            }
            Some(name)
        }),
        document: f
            .get("document")
            .and_then(|n| relative_name(r, n, "context.config.document", true)),
    }
}

/// A relative file name: no absolute path, no `.` or `..`, and no `/` unless `nested`.
fn relative_name(r: &mut Reader, node: &Node, path: &str, nested: bool) -> Option<Spanned<String>> {
    let name = r.name(node, path)?;
    let why = if name.starts_with('/') {
        "must be relative"
    } else if name
        .split('/')
        .any(|c| c == ".." || c == "." || c.is_empty())
    {
        "must not have empty, '.' or '..' components"
    } else if !nested && name.contains('/') {
        "must be a file name, without '/'"
    } else {
        return Some(name);
    };
    r.error(node.pos, path, why);
    None
}

fn read_setup(r: &mut Reader, node: &Node) -> Vec<SetupTask> {
    let Some(items) = node.seq().map_err(|m| r.error(node.pos, "setup", &m)).ok() else {
        return Vec::new();
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| read_task(r, i, item))
        .collect()
}

/// Setup task `i`. After an error it holds an empty command, so that the tasks keep their
/// indices (the workflow is refused anyway).
fn read_task(r: &mut Reader, i: usize, item: &Node) -> SetupTask {
    let path = format!("setup[{i}]");
    let mut task = SetupTask {
        shell: Spanned::new(Template::default(), item.pos),
        output: None,
    };
    if item.str().is_ok() {
        r.error(
            item.pos,
            &path,
            "expected a mapping like {shell: COMMAND, as: NAME}, found a string",
        );
        return task;
    }
    let Some(f) = r.fields(item, &path, &SETUP_KEYS) else {
        return task;
    };
    let how = Use {
        before_task: Some(i),
        shell: true,
    };
    match f.get("shell") {
        Some(n) => {
            task.shell = r
                .template(n, &join(&path, "shell"), how)
                .unwrap_or(task.shell)
        }
        None => r.error(item.pos, &path, "missing 'shell:'"),
    }
    task.output = f
        .get("as")
        .and_then(|n| read_output(r, n, &join(&path, "as")));
    task
}

fn read_output(r: &mut Reader, node: &Node, path: &str) -> Option<Spanned<String>> {
    let name = r.string(node, path)?;
    match check_var_name(&name) {
        Ok(()) => Some(name),
        Err(why) => {
            r.error(node.pos, path, &why);
            None
        }
    }
}

/// `tasks:`. References in top-level task `i` (and in its sub-tasks) see the setup outputs
/// and the outputs of the tasks before it: they are step `base + i`.
fn read_tasks(r: &mut Reader, node: &Node, base: usize, agents: &[&str]) -> Vec<Task> {
    let Some(items) = node.seq().map_err(|m| r.error(node.pos, "tasks", &m)).ok() else {
        return Vec::new();
    };
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            read_one_task(r, &format!("tasks[{i}]"), item, base + i, agents, false)
        })
        .collect()
}

/// One task at `path`, whose references see the variables of step `step`; `nested` inside
/// a parallel group (where another group is refused).
fn read_one_task(
    r: &mut Reader,
    path: &str,
    item: &Node,
    step: usize,
    agents: &[&str],
    nested: bool,
) -> Option<Task> {
    if item.str().is_ok() {
        let msg =
            "expected a mapping like {shell: COMMAND} or {send: TEXT, to: AGENT}, found a string";
        r.error(item.pos, path, msg);
        return None;
    }
    let f = r.fields(item, path, &TASK_KEYS)?;
    let p = |key: &str| join(path, key);
    let kinds: Vec<_> = ["shell", "send", "parallel"]
        .into_iter()
        .filter_map(|k| f.entry(k).map(|(key, _)| key))
        .collect();
    if kinds.len() != 1 {
        let msg = if kinds.is_empty() {
            "expected one of 'shell:', 'send:' or 'parallel:'".to_string()
        } else {
            let names: Vec<&str> = kinds.iter().map(|k| k.value).collect();
            format!("one task does one thing; found {}", names.join(" and "))
        };
        r.error(kinds.get(1).map_or(item.pos, |k| k.pos), path, &msg);
        return None;
    }
    let kind = kinds[0].value;
    let refuse = |r: &mut Reader, key: &str, why: &str| {
        if let Some((k, _)) = f.entry(key) {
            r.error(k.pos, &p(key), why);
        }
    };
    if kind != "send" {
        refuse(r, "to", "only for a send task");
        refuse(r, "timeout", "only for a send task");
    }
    if kind == "parallel" {
        refuse(r, "if", "not on a parallel group: put it on its tasks");
        refuse(r, "as", "not on a parallel group: put it on its tasks");
    }
    let how = Use {
        before_task: Some(step),
        shell: true,
    };
    let text_use = Use {
        shell: false,
        ..how
    };
    let kind = match kind {
        "shell" => TaskKind::Shell(r.template(f.get("shell")?, &p("shell"), how)?),
        "send" => {
            let text = r.template(f.get("send")?, &p("send"), text_use);
            let to = match f.get("to") {
                Some(n) => read_to(r, n, &p("to"), agents),
                None => {
                    r.error(item.pos, path, "a send task needs 'to: AGENT'");
                    None
                }
            };
            let timeout = f.get("timeout").and_then(|n| r.duration(n, &p("timeout")));
            TaskKind::Send {
                text: text?,
                to: to?,
                timeout: timeout.map(|t| t.value),
            }
        }
        _ => {
            let (key, node) = f.entry("parallel")?;
            if nested {
                let msg = "a parallel group inside a parallel group is not supported: list its tasks in the outer group";
                r.error(key.pos, path, msg);
                return None;
            }
            read_group(r, node, &p("parallel"), step, agents)?
        }
    };
    let when = f.get("if").and_then(|n| read_if(r, n, &p("if"), step));
    let output = f.get("as").and_then(|n| read_output(r, n, &p("as")));
    Some(Task {
        pos: item.pos,
        kind,
        when,
        output,
    })
}

/// The sub-tasks of a parallel group; two of them setting one variable is an error.
fn read_group(
    r: &mut Reader,
    node: &Node,
    path: &str,
    step: usize,
    agents: &[&str],
) -> Option<TaskKind> {
    let items = node.seq().map_err(|m| r.error(node.pos, path, &m)).ok()?;
    if items.is_empty() {
        r.error(node.pos, path, "an empty group: list at least one task");
        return None;
    }
    let tasks: Vec<Task> = items
        .iter()
        .enumerate()
        .filter_map(|(j, item)| read_one_task(r, &format!("{path}[{j}]"), item, step, agents, true))
        .collect();
    let outputs: Vec<&Spanned<String>> = tasks.iter().flat_map(Task::outputs).collect();
    for (j, out) in outputs.iter().enumerate() {
        if let Some(first) = outputs[..j].iter().find(|o| o.value == out.value) {
            let msg = format!(
                "'{}' is also set by the task at line {}: tasks of one group run at the same time, give each its own name",
                out.value, first.pos.line
            );
            r.error(out.pos, path, &msg);
        }
    }
    Some(TaskKind::Parallel(tasks))
}

fn read_to(r: &mut Reader, node: &Node, path: &str, agents: &[&str]) -> Option<Spanned<String>> {
    let name = r.name(node, path)?;
    if agents.contains(&name.value.as_str()) {
        return Some(name);
    }
    let msg = format!(
        "'{}' is not an agent of this workflow{}",
        sanitize(&name),
        suggestion(&name, agents.iter().copied())
    );
    r.error(name.pos, path, &msg);
    None
}

/// An `if:` expression; its variables are checked with the other references.
fn read_if(r: &mut Reader, node: &Node, path: &str, step: usize) -> Option<Spanned<Expr>> {
    let text = match &node.kind {
        Kind::Scalar(text, _) if !node.is_null() => text.clone(),
        _ => {
            let msg = format!("expected an expression, found {}", node.type_name());
            r.error(node.pos, path, &msg);
            return None;
        }
    };
    // Where a byte of the value is in the file: exact for a value written on one line, plain
    // or quoted without escapes; else the value's start.
    let raw = r.doc.raw(node);
    let start = if raw.starts_with(text.as_str()) {
        Some(node.pos)
    } else if raw.len() > 1 && raw[1..].starts_with(text.as_str()) {
        Some(node.pos.advance(&raw[..1]))
    } else {
        None
    };
    let locate = |offset: usize| start.map_or(node.pos, |s| s.advance(&text[..offset]));
    match Expr::parse(&text) {
        Ok(expr) => {
            for (name, offset) in expr.vars() {
                r.refs.push(Reference {
                    name: name.to_string(),
                    path: path.to_string(),
                    pos: locate(offset),
                    file: None,
                    before_task: Some(step),
                });
            }
            Some(Spanned::new(expr, node.pos))
        }
        Err(e) => {
            r.error(locate(e.offset), path, &e.message);
            None
        }
    }
}

/// Warn about each `@name` in the kickoff that is not an agent of the workflow.
fn warn_mentions(r: &mut Reader, node: &Node, agents: &[&str]) {
    let Some(text) = node.scalar_text() else {
        return;
    };
    let (_, unknown) = mention::resolve(text, |n| agents.contains(&n));
    for name in unknown {
        let pos = r.doc.locate(node, &format!("@{name}"), 0);
        let msg = format!(
            "kickoff: @{name} is not an agent of this workflow{}",
            suggestion(&name, agents.iter().copied())
        );
        r.diags.warn(pos, msg);
    }
}

/// Check every `${{ name }}` found while reading against what will be defined where it
/// is used.
pub(super) fn check_references(r: &mut Reader, workflow: &Workflow, vars: &Vars) {
    let mut scope = vars.clone();
    let has_files = workflow.context.has_files();
    for name in BUILTINS {
        if has_files || !name.starts_with("context.") {
            scope.set(name, "");
        }
    }
    // What each step defines: each setup task, then each task (a group: all its tasks').
    let setup = workflow.setup.len();
    let steps: Vec<Vec<&Spanned<String>>> = workflow
        .setup
        .iter()
        .map(|t| t.output.iter().collect())
        .chain(workflow.tasks.iter().map(Task::outputs))
        .collect();
    let mut refs = std::mem::take(&mut r.refs);
    refs.sort_by_key(|x| x.before_task.unwrap_or(setup));
    let mut defined = 0;
    for x in refs {
        // References come by increasing limit, so the scope only grows.
        let limit = x.before_task.unwrap_or(setup).min(steps.len());
        for out in steps[defined..limit.max(defined)].iter().flatten() {
            scope.set(out, "");
        }
        defined = defined.max(limit);
        if scope.contains(&x.name) {
            continue;
        }
        let later = (limit..steps.len())
            .find_map(|i| steps[i].iter().find(|o| o.value == x.name).map(|o| (i, o)));
        let msg = match later {
            Some((i, o)) => format!(
                "undefined variable '{}': the {} at line {} sets it later",
                x.name,
                if i < setup { "setup task" } else { "task" },
                o.pos.line
            ),
            None if !has_files && BUILTINS.contains(&x.name.as_str()) => {
                format!(
                    "undefined variable '{}': the workflow has no file context",
                    x.name
                )
            }
            None => scope.lookup(&x.name).unwrap_err(),
        };
        r.error_in(x.file.as_deref(), x.pos, &x.path, &msg);
    }
    // `$name` in a shell command where a task output `name` exists: the shell reads its own
    // (likely unset) variable, not the output.
    for v in std::mem::take(&mut r.shell_vars) {
        if steps.iter().flatten().any(|o| o.value == v.name) {
            let msg = format!(
                "{}: '{}' is a shell variable, not the task output '{}': write ${{{{ {} }}}}",
                v.path, v.written, v.name, v.name
            );
            r.diags.warn(v.pos, msg);
        }
    }
}
