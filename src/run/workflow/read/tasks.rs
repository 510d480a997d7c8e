//! Reading `setup:` and `tasks:`: shell and send tasks, parallel groups, their `to:`,
//! `as:` and `if:`.

use crate::names::sanitize;
use crate::run::diagnostic::Spanned;
use crate::run::expr::Expr;
use crate::run::interpolate::{Template, check_var_name};
use crate::run::reader::Reference;
use crate::run::reader::{Fields, Reader, Use, join};
use crate::run::workflow::{Gate, SetupTask, Task, TaskKind};
use crate::run::yaml::{Kind, Node};
use crate::suggest::suggestion;

const SETUP_KEYS: [&str; 3] = ["shell", "as", "needs"];
const TASK_KEYS: [&str; 8] = [
    "shell", "send", "parallel", "to", "as", "timeout", "if", "needs",
];

/// The keys of `needs: {approval: {...}}`.
const GATE_KEYS: [&str; 4] = ["by", "timeout", "then", "replies"];

pub(super) fn read_setup(r: &mut Reader, node: &Node) -> Vec<SetupTask> {
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
        needs: None,
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
    task.needs = f
        .get("needs")
        .and_then(|n| read_needs(r, n, &join(&path, "needs")));
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
pub(super) fn read_tasks(r: &mut Reader, node: &Node, base: usize, agents: &[&str]) -> Vec<Task> {
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
        refuse(r, "needs", "not on a parallel group: put it on its tasks");
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
    let needs = match f.get("needs") {
        Some(n) => Some(read_needs(r, n, &p("needs"))?),
        None => None,
    };
    Some(Task {
        pos: item.pos,
        kind,
        when,
        output,
        needs,
    })
}

/// `needs: approval`, or `needs: {approval: {by: [NAME...], timeout: DURATION, then:
/// fail|skip|NAME}}` (each key optional).
pub(super) fn read_needs(r: &mut Reader, node: &Node, path: &str) -> Option<Spanned<Gate>> {
    const EXPECTED: &str = "expected 'approval' or {approval: {by, timeout, then}}";
    if let Ok(word) = node.str() {
        if word == "approval" {
            return Some(Spanned::new(Gate::default(), node.pos));
        }
        r.error(
            node.pos,
            path,
            &format!("{EXPECTED}, found '{}'", sanitize(word)),
        );
        return None;
    }
    let f = r.fields(node, path, &["approval"])?;
    let Some(inner) = f.get("approval") else {
        r.error(node.pos, path, EXPECTED);
        return None;
    };
    let path = join(path, "approval");
    if inner.is_null() {
        return Some(Spanned::new(Gate::default(), node.pos));
    }
    let g = r.fields(inner, &path, &GATE_KEYS)?;
    read_gate_keys(r, &g, &path).map(|gate| Spanned::new(gate, node.pos))
}

/// The keys of an approval in `g` (at `path`): `by`, `timeout`, `then` and `replies`, each
/// optional; `None` after an error.
pub(super) fn read_gate_keys(r: &mut Reader, g: &Fields, path: &str) -> Option<Gate> {
    let path = path.to_string();
    let mut gate = Gate::default();
    let mut ok = true;
    if let Some(n) = g.get("by") {
        let by_path = join(&path, "by");
        let names = match n.str() {
            Ok(_) => r.name(n, &by_path).map(|s| vec![s]),
            Err(_) => r.strings(n, &by_path),
        };
        match names {
            Some(names) if !names.is_empty() => {
                gate.by.clear();
                for name in names {
                    match crate::names::check_agent(&name) {
                        Ok(()) => gate.by.push(name.value),
                        Err(e) => {
                            r.error(name.pos, &by_path, &e.to_string());
                            ok = false;
                        }
                    }
                }
            }
            Some(_) => {
                r.error(n.pos, &by_path, "name at least one approver");
                ok = false;
            }
            None => ok = false,
        }
    }
    if let Some(n) = g.get("replies") {
        match r.boolean(n, &join(&path, "replies")) {
            Some(b) => gate.replies = b,
            None => ok = false,
        }
    }
    if let Some(n) = g.get("timeout") {
        match r.duration(n, &join(&path, "timeout")) {
            Some(d) => gate.timeout = Some(d.value),
            None => ok = false,
        }
    }
    if let Some(n) = g.get("then") {
        let then_path = join(&path, "then");
        match r
            .name(n, &then_path)
            .map(|t| crate::approval::Then::parse(&t))
        {
            Some(Ok(t)) => gate.then = t,
            Some(Err(e)) => {
                r.error(n.pos, &then_path, &e.to_string());
                ok = false;
            }
            None => ok = false,
        }
        if gate.timeout.is_none() && ok {
            r.error(
                n.pos,
                &then_path,
                "needs a timeout: it says what happens when it runs out",
            );
            ok = false;
        }
    }
    ok.then_some(gate)
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
