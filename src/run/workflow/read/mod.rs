//! Reading a workflow from its YAML tree: each part of the file in turn, then the check of
//! every `${{ name }}` against what will be defined where it is used. This file holds the
//! top level; the parts are files of their own, each with the keys it takes: `agent`
//! (`agents:`; `approve_tools` its `approve_tools:`), `board` (`board:`), `budget` (usage,
//! budgets, `pricing:`), `context` (`context:`), `hooks` (`hooks:`), `isolation`
//! (`isolation:`), `merge` (`merge:`), `tasks` (`setup:`, `tasks:`) and `references` (the
//! `${{ name }}` check).

mod agent;
mod approve_tools;
mod board;
mod budget;
mod context;
mod hooks;
mod isolation;
mod merge;
mod references;
mod tasks;

pub(super) use references::check_references;

use std::path::{Path, PathBuf};

use super::{Budget, Context, Pricing, Workflow};
use crate::mention;
use crate::run::diagnostic::{Pos, Spanned};
use crate::run::reader::{Reader, Use};
use crate::run::yaml::Node;
use crate::suggest::suggestion;
use agent::read_agents;
use budget::{read_budget, read_pricing};
use context::read_context;
use tasks::{read_setup, read_tasks};

const TOP_KEYS: [&str; 13] = [
    "name",
    "agents",
    "context",
    "setup",
    "kickoff",
    "pricing",
    "budget",
    "tasks",
    "board",
    "merge",
    "hooks",
    "isolation",
    "otel",
];

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
        board: Vec::new(),
        merge: None,
        hooks: Vec::new(),
        isolation: None,
        otel: true,
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
    if let Some(node) = fields.get("board") {
        workflow.board = board::read_board(r, node, &agents);
    }
    if let Some(node) = fields.get("merge") {
        workflow.merge = merge::read_merge(r, node);
    }
    if let Some(node) = fields.get("hooks") {
        workflow.hooks = hooks::read_hooks(r, node, &workflow.dir);
    }
    isolation::read_top(r, &fields, &mut workflow);
    if let Some(node) = fields.get("otel") {
        workflow.otel = r.boolean(node, "otel").unwrap_or(true);
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
