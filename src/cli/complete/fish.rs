//! The fish completion of a tool.

use super::{Operands, Tool, generated};
use crate::cli::flags::{Complete, Flag};

const HELPERS: &str = include_str!("helpers.fish");

/// A single-quoted fish word.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', r"\\").replace('\'', r"\'"))
}

/// The `-a` words that complete `c` (none for free text).
fn words(c: Complete) -> Option<String> {
    Some(match c {
        Complete::Text | Complete::File => return None,
        Complete::Dir => "(__fish_complete_directories)".into(),
        Complete::Instance => "(__aw_instances)".into(),
        Complete::Agent => "(__aw_agents)".into(),
        Complete::AgentOrUser => "(__aw_agents; echo user)".into(),
        Complete::Sender => "(__aw_agents; echo user; echo system)".into(),
        Complete::Target => "(__aw_targets)".into(),
        Complete::AgentAddress => "(for a in (__aw_agents); echo $a@(__aw_instance); end)".into(),
        Complete::Document => "(__aw_documents)".into(),
        Complete::Choices(w) => w.join(" "),
    })
}

/// The `complete` line of a flag, under `cond` when given.
fn flag(tool: &str, f: &Flag, cond: Option<&str>) -> String {
    let mut s = format!("complete -c {tool}");
    if let Some(c) = cond {
        s += &format!(" -n {}", quote(c));
    }
    if let Some(c) = f.short {
        s += &format!(" -s {c}");
    }
    s += &format!(" -l {}", f.long);
    if f.value.is_some() && !f.optional_value() {
        s += match f.complete {
            Complete::File => " -r -F",
            _ => " -x",
        };
    }
    if let Some(w) = words(f.complete).filter(|_| f.value.is_some()) {
        s += &format!(" -a {}", quote(&w));
    }
    s + &format!(" -d {}\n", quote(&capital(&f.about())))
}

/// `s` with a capital first letter, as fish shows descriptions.
fn capital(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

pub(super) fn render<R>(t: &Tool<R>) -> String {
    let tool = t.name;
    let fname = format!("__{}", tool.replace('-', "_"));
    let mut s = format!("# fish completion for {tool}(1)\n");
    s += &generated(tool, "complete-fish");
    s += "\n";
    s += HELPERS;
    s += "\n";
    // The words before the cursor that are not options nor their values.
    let valued: Vec<String> = t
        .valued()
        .filter(|f| !t.optional(f))
        .flat_map(super::spellings)
        .collect();
    s += "# The words before the cursor that are not options nor their values.\n";
    s += &format!("function {fname}_words\n    set -l skip 0\n    for t in (__aw_tokens)\n");
    s += "        if test $skip = 1\n            set skip 0\n            continue\n        end\n";
    s += &format!(
        "        switch $t\n            case {}\n                set skip 1\n",
        valued.join(" ")
    );
    s += "            case '-?*'\n            case '*'\n                echo $t\n        end\n    end\nend\n\n";
    match t.args {
        Operands::Workflow { serve } => {
            s += &format!(
                "complete -c {tool} -n 'not contains -- --{serve} (__aw_tokens)' -F\n\
                 complete -c {tool} -n 'contains -- --{serve} (__aw_tokens); and not string match -qr \"^[^@]+@\" -- (commandline -ct)' -f -a '(__aw_agents)' -d Agent\n\
                 complete -c {tool} -n 'contains -- --{serve} (__aw_tokens); and string match -qr \"^[^@]+@\" -- (commandline -ct)' -f -a '(__aw_targets)' -d Agent\n"
            );
        }
        _ => s += &format!("complete -c {tool} -f\n"),
    }
    if t.args == Operands::Target {
        // Not where an option's value that may be left out goes.
        let after: String = t
            .valued()
            .filter(|f| f.optional_value())
            .map(|f| format!("; and not __aw_after --{}", f.long))
            .collect();
        s += &format!(
            "complete -c {tool} -n 'test (count ({fname}_words)) -eq 0{after}' -a '(__aw_targets)'\n"
        );
    }
    for f in t.common() {
        s += &flag(tool, f, None);
        if f.optional_value()
            && let Some(w) = words(f.complete)
        {
            s += &format!(
                "complete -c {tool} -n {} -a {}\n",
                quote(&format!("__aw_after --{}", f.long)),
                quote(&w)
            );
        }
    }
    if t.args == Operands::Commands {
        commands(t, &fname, &mut s);
    }
    s
}

/// The commands, their subcommands, arguments and flags.
fn commands<R>(t: &Tool<R>, fname: &str, s: &mut String) {
    let tool = t.name;
    *s += "\n# Do the words before the cursor number the first argument, and start with the others?\n";
    *s += &format!("function {fname}_at\n    set -l w ({fname}_words)\n");
    *s += "    test (count $w) -eq $argv[1]; or return 1\n    set -e argv[1]\n";
    *s += "    for i in (seq (count $argv))\n";
    *s += "        test \"$w[$i]\" = \"$argv[$i]\"; or return 1\n    end\nend\n\n";
    *s += "# Do the words before the cursor start with the arguments?\n";
    *s += &format!("function {fname}_in\n    set -l w ({fname}_words)\n");
    *s += "    for i in (seq (count $argv))\n";
    *s += "        test \"$w[$i]\" = \"$argv[$i]\"; or return 1\n    end\nend\n\n";
    for w in crate::cli::flags::command_names(t.commands) {
        *s += &format!(
            "complete -c {tool} -n '{fname}_at 0' -a {w} -d {}\n",
            quote(&capital(&t.about(w)))
        );
    }
    for g in t.groups() {
        for (sub, about) in t.subcommands(g) {
            *s += &format!(
                "complete -c {tool} -n '{fname}_at 1 {g}' -a {sub} -d {}\n",
                quote(&capital(&about))
            );
        }
    }
    for c in t.commands {
        let n = c.name.split(' ').count();
        for (j, a) in c.args.iter().enumerate() {
            if let Some(w) = words(a.complete) {
                *s += &format!(
                    "complete -c {tool} -n '{fname}_at {} {}' -a {}\n",
                    n + j,
                    c.name,
                    quote(&w)
                );
            }
        }
    }
    for f in t.flags.iter().filter(|f| !f.cmds.is_empty()) {
        let cond: Vec<String> = f.cmds.iter().map(|c| format!("{fname}_in {c}")).collect();
        *s += &flag(tool, f, Some(&cond.join("; or ")));
    }
}
