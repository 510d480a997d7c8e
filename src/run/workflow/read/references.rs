//! The check of every `${{ name }}` of a workflow against what will be defined where it is
//! used: built-in names, setup outputs, the outputs of earlier tasks, run variables.

use crate::run::diagnostic::Spanned;
use crate::run::interpolate::{BUILTINS, Vars};
use crate::run::reader::Reader;
use crate::run::workflow::{Task, Workflow};

/// Check every `${{ name }}` found while reading against what will be defined where it
/// is used.
pub(in crate::run::workflow) fn check_references(r: &mut Reader, workflow: &Workflow, vars: &Vars) {
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
