//! The zsh completion of a tool.

use super::{Operands, Tool, generated};
use crate::cli::flags::{Arg, Cmd, Complete, Flag};

const HELPERS: &str = include_str!("helpers.zsh");

/// Text inside a single-quoted `_arguments` spec: quotes, brackets and colons escaped.
fn text(s: &str) -> String {
    s.replace('\'', r"'\''")
        .replace('[', r"\[")
        .replace(']', r"\]")
        .replace(':', r"\:")
}

/// A description of `_describe`: quotes and colons escaped.
fn described(s: &str) -> String {
    s.replace('\'', r"'\''").replace(':', r"\:")
}

/// The message shown above a value's candidates: its name, or the flag's for a one-letter
/// name.
fn message(f: &Flag, v: &str) -> String {
    let v = v.trim_matches(['[', ']']);
    text(&if v.len() > 1 { v } else { f.long }.to_lowercase())
}

/// The action that completes `c`.
fn action(c: Complete) -> String {
    match c {
        Complete::Text => " ".into(),
        Complete::Dir => "_directories".into(),
        Complete::File => "_files".into(),
        Complete::Instance => "_aw_instances".into(),
        Complete::Agent => "_aw_agents".into(),
        Complete::AgentOrUser => "{_aw_agents; compadd user}".into(),
        Complete::Sender => "{_aw_agents; compadd user system}".into(),
        Complete::Target | Complete::AgentAddress => "_aw_targets".into(),
        Complete::Document => "_aw_documents".into(),
        Complete::Choices(words) => format!("({})", words.join(" ")),
    }
}

/// The `_arguments` spec of a flag.
fn spec(f: &Flag) -> String {
    let about = format!("[{}]", text(&f.about()));
    let value = match f.value {
        Some(v) if f.optional_value() => format!("::{}:{}", message(f, v), action(f.complete)),
        Some(v) => format!(":{}:{}", message(f, v), action(f.complete)),
        None => String::new(),
    };
    let (short_mark, long_mark) = match f.value {
        Some(_) if f.optional_value() => ("-", "=-"),
        Some(_) => ("+", "="),
        None => ("", ""),
    };
    let excl = match (f.long, f.short, f.many) {
        ("help" | "version", _, _) => "(- *)".to_string(),
        (_, _, true) => "*".to_string(),
        (long, Some(c), false) => format!("(-{c} --{long})"),
        _ => String::new(),
    };
    match f.short {
        Some(c) => format!(
            "'{excl}'{{-{c}{short_mark},--{}{long_mark}}}'{about}{value}'",
            f.long
        ),
        None => format!("'{excl}--{}{long_mark}{about}{value}'", f.long),
    }
}

/// The `_arguments` specs of a command's arguments.
fn arg_specs(args: &[Arg]) -> Vec<String> {
    args.iter()
        .enumerate()
        .map(|(i, a)| {
            // `PATH...`: every word from here on (`*::` would narrow the words).
            let (at, colons) = match (a.many, a.optional) {
                (true, _) => ("*".to_string(), ":"),
                (false, true) => ((i + 1).to_string(), "::"),
                (false, false) => ((i + 1).to_string(), ":"),
            };
            format!(
                "'{at}{colons}{}:{}'",
                text(&a.name.to_lowercase()),
                action(a.complete)
            )
        })
        .collect()
}

/// `_arguments -s $common SPECS && ret=0`, its specs on lines of their own.
fn arguments(indent: &str, specs: &[String]) -> String {
    let mut s = format!("{indent}_arguments -s $common");
    for sp in specs {
        s += &format!(" \\\n{indent}  {sp}");
    }
    s + " && ret=0\n"
}

pub(super) fn render<R>(t: &Tool<R>) -> String {
    let func = format!("_{}", t.name);
    let mut s = format!("#compdef {}\n# zsh completion for {}(1)\n", t.name, t.name);
    s += &generated(t.name, "complete-zsh");
    s += "\n";
    s += HELPERS;
    s += "\n";
    if let Operands::Workflow { serve } = t.args {
        s += &format!(
            "# A workflow file, or with --{serve} the agents (agent@instance once an @ is typed).\n\
             (( $+functions[{func}_operands] )) || {func}_operands() {{\n\
             \x20 if (( $+opt_args[--{serve}] )) && [[ $PREFIX == ?*@* ]]; then\n\
             \x20   _aw_targets\n\
             \x20 elif (( $+opt_args[--{serve}] )); then\n\
             \x20   _aw_agents\n\
             \x20 else\n\
             \x20   _files\n\
             \x20 fi\n}}\n\n"
        );
    }
    for g in t.groups() {
        if own_function(t, g) {
            group(t, g, &func, &mut s);
        }
    }
    s += &format!("{func}() {{\n");
    s += "  local curcontext=$curcontext state line ret=1 w\n";
    s += "  local _aw_outer_root _aw_outer_instance\n";
    s += "  local -a common cmds\n  typeset -A opt_args\n";
    if t.args == Operands::Target {
        s += "  # A target before the cursor (@instance or agent@instance) names the instance.\n";
        s += "  for w in ${words[2,CURRENT-1]}; do\n";
        s += "    [[ $w == @?* || $w == [^-]*@?* ]] && _aw_outer_instance=${w#*@}\n  done\n";
    }
    s += "  common=(\n";
    for f in t.common() {
        s += &format!("    {}\n", spec(f));
    }
    s += "  )\n";
    let operands: Vec<String> = match t.args {
        Operands::None => vec![],
        Operands::Message => vec!["'*:message (or - for stdin): '".into()],
        Operands::Target => {
            vec!["'1::target (agent, agent@instance or @instance):_aw_targets'".into()]
        }
        Operands::Workflow { .. } => vec![format!("'*:workflow file or agent:{func}_operands'")],
        Operands::Commands => vec![
            "'(-)1:command:->command'".into(),
            "'(-)*::argument:->argument'".into(),
        ],
    };
    if t.args != Operands::Commands {
        s += &arguments("  ", &operands).replacen("-s $common", "-s -S $common", 1);
        s += &format!("  return ret\n}}\n\n{func} \"$@\"\n");
        return s;
    }
    s += "  _arguments -C $common '(-)1:command:->command' '(-)*::argument:->argument' && ret=0\n";
    s += "  _aw_outer_root=${opt_args[--root]}\n";
    s += "  _aw_outer_instance=${opt_args[-i]:-${opt_args[--instance]}}\n";
    s += "  case $state in\n  command)\n    cmds=(\n";
    for w in crate::cli::flags::command_names(t.commands) {
        s += &format!("      '{w}:{}'\n", described(&t.about(w)));
    }
    s += &format!(
        "    )\n    _describe -t commands '{} command' cmds && ret=0\n    ;;\n",
        t.name
    );
    s += &format!(
        "  argument)\n    curcontext=${{curcontext%:*:*}}:{}-$line[1]:\n",
        t.name
    );
    s += "    case $line[1] in\n";
    for w in crate::cli::flags::command_names(t.commands) {
        match t.commands.iter().find(|c| c.name == w) {
            Some(_) if own_function(t, w) => s += &format!("    {w}) {func}_{w} && ret=0 ;;\n"),
            Some(c) => {
                let mut specs = own_and_args(t, c);
                let subs = t.subcommands(w);
                if !subs.is_empty() && c.args.is_empty() {
                    let names: Vec<&str> = subs.iter().map(|x| x.0).collect();
                    specs.push(format!("'1::subcommand:({})'", names.join(" ")));
                }
                s += &format!("    {w})\n{}      ;;\n", arguments("      ", &specs));
            }
            None => s += &format!("    {w}) {func}_{w} && ret=0 ;;\n"),
        }
    }
    s += "    esac\n    ;;\n  esac\n  return ret\n}\n\n";
    s += &format!("{func} \"$@\"\n");
    s
}

/// The specs of a command's own flags, then of its arguments.
fn own_and_args<R>(t: &Tool<R>, c: &Cmd<R>) -> Vec<String> {
    let mut specs: Vec<String> = t.own(c.name).map(spec).collect();
    specs.extend(arg_specs(c.args));
    specs
}

/// Does the group `g` get a function of its own: it is no command alone (`doc`), or one of
/// its subcommands takes arguments or options the command alone does not
/// (`approvals ask`)?
fn own_function<R>(t: &Tool<R>, g: &str) -> bool {
    let Some(alone) = t.commands.iter().find(|c| c.name == g) else {
        return true;
    };
    t.commands.iter().any(|c| {
        matches!(c.words(), (w, Some(_)) if w == g)
            && (!c.args.is_empty() || t.own(c.name).any(|f| !f.cmds.contains(&alone.name)))
    })
}

/// The function that completes a command with subcommands (`doc`); the options of the
/// command alone, when it is one (`approvals`), before the subcommand.
fn group<R>(t: &Tool<R>, g: &str, func: &str, s: &mut String) {
    *s += &format!("(( $+functions[{func}_{g}] )) || {func}_{g}() {{\n");
    *s += "  local curcontext=$curcontext state line ret=1\n  local -a subs\n";
    let alone: String = t.own(g).map(|f| format!("{} ", spec(f))).collect();
    let sub = match t.commands.iter().any(|c| c.name == g) {
        true => "1::",
        false => "(-)1:",
    };
    *s += &format!(
        "  _arguments -C $common {alone}'{sub}{g} command:->sub' '(-)*::argument:->argument' && ret=0\n"
    );
    *s += "  # Options given between the command and its subcommand still name the root and instance.\n";
    *s += "  [[ -n ${opt_args[--root]} ]] && _aw_outer_root=${opt_args[--root]}\n";
    *s += "  [[ -n ${opt_args[-i]:-${opt_args[--instance]}} ]] &&\n";
    *s += "    _aw_outer_instance=${opt_args[-i]:-${opt_args[--instance]}}\n";
    *s += "  case $state in\n  sub)\n    subs=(\n";
    for (sub, about) in t.subcommands(g) {
        *s += &format!("      '{sub}:{}'\n", described(&about));
    }
    *s += &format!("    )\n    _describe -t commands '{g} command' subs && ret=0\n    ;;\n");
    *s += "  argument)\n    case $line[1] in\n";
    for c in t.commands {
        if let (w, Some(sub)) = c.words()
            && w == g
        {
            let specs = own_and_args(t, c);
            *s += &format!("    {sub})\n{}      ;;\n", arguments("      ", &specs));
        }
    }
    *s += "    esac\n    ;;\n  esac\n  return ret\n}\n\n";
}
