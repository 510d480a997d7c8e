//! Reading an agent's `approve_tools:`: the class of its tool calls that waits for an
//! approval (`write_file: true`, or `write_outside: GLOBS`), and who approves, how long they
//! have and what then (as `needs: {approval: {...}}`).

use crate::lease::glob::Glob;
use crate::run::diagnostic::Spanned;
use crate::run::reader::{Reader, join};
use crate::run::workflow::{AgentDef, BackendKind, ToolGate, Writes};
use crate::run::yaml::Node;
use crate::tools::files::FileTool;

const KEYS: [&str; 6] = [
    "write_file",
    "write_outside",
    "by",
    "timeout",
    "then",
    "replies",
];

/// `approve_tools: {write_file: true | write_outside: GLOB | [GLOB...], by, timeout, then,
/// replies}` of `agent` (read so far); `None` after an error.
pub(super) fn read_approve_tools(
    r: &mut Reader,
    node: &Node,
    path: &str,
    agent: &AgentDef,
) -> Option<Spanned<ToolGate>> {
    let f = r.fields(node, path, &KEYS)?;
    let p = |key: &str| join(path, key);
    let backend = agent.backend.value;
    if !matches!(backend, BackendKind::Anthropic | BackendKind::Openai) {
        let msg = format!(
            "only for backends anthropic and openai, whose tool calls aw runs (this agent's is \
             {}; Claude Code and Codex have their own permissions: permission_mode, tools)",
            backend.name()
        );
        r.error(node.pos, path, &msg);
        return None;
    }
    let writes = match (f.entry("write_file"), f.entry("write_outside")) {
        (Some(_), Some((k, _))) => {
            r.error(
                k.pos,
                &p("write_outside"),
                "write_file: true asks for every write already: give one of the two",
            );
            return None;
        }
        (Some((_, n)), None) => match r.boolean(n, &p("write_file"))? {
            true => Writes::All,
            false => {
                r.error(
                    n.pos,
                    &p("write_file"),
                    "expected true (leave the key out for no approval)",
                );
                return None;
            }
        },
        (None, Some((_, n))) => {
            let globs = match n.str() {
                Ok(_) => r.name(n, &p("write_outside")).map(|s| vec![s]),
                Err(_) => r.strings(n, &p("write_outside")),
            }?;
            let mut ok = !globs.is_empty();
            if !ok {
                r.error(n.pos, &p("write_outside"), "name at least one glob");
            }
            for g in &globs {
                if let Err(e) = Glob::parse(&g.value) {
                    r.error(g.pos, &p("write_outside"), &e.to_string());
                    ok = false;
                }
            }
            if !ok {
                return None;
            }
            Writes::Outside(globs.into_iter().map(|g| g.value).collect())
        }
        (None, None) => {
            r.error(
                node.pos,
                path,
                "name the calls that wait: write_file: true, or write_outside: GLOBS",
            );
            return None;
        }
    };
    if !agent
        .tools
        .iter()
        .any(|t| FileTool::from_name(&t.value) == Some(FileTool::WriteFile))
    {
        r.error(
            node.pos,
            path,
            "the agent has no write_file tool to approve (tools: [write_file])",
        );
        return None;
    }
    let gate = super::tasks::read_gate_keys(r, &f, path)?;
    Some(Spanned::new(ToolGate { writes, gate }, node.pos))
}
