//! Reading a workflow from its YAML tree: each part of the file in turn, then the check of
//! every `${{ name }}` against what will be defined where it is used. This file holds the
//! top level and the keys each part takes; the parts are files of their own: `agent`
//! (`agents:`), `budget` (usage, budgets, `pricing:`), `context` (`context:`), `tasks`
//! (`setup:`, `tasks:`) and `references` (the `${{ name }}` check).

mod agent;
mod budget;
mod context;
mod references;
mod tasks;

pub(super) use references::check_references;

use std::path::{Path, PathBuf};

use super::{Budget, Context, Pricing, Workflow};
use crate::mention;
use crate::run::diagnostic::{Pos, Spanned, suggestion};
use crate::run::reader::{Reader, Use};
use crate::run::yaml::Node;
use agent::read_agents;
use budget::{read_budget, read_pricing};
use context::read_context;
use tasks::{read_setup, read_tasks};

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
