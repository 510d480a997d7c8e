//! The bash completion of a tool.

use super::{Operands, Tool, generated, spellings};
use crate::cli::flags::{Complete, Flag};

const HELPERS: &str = include_str!("helpers.bash");

/// What sets COMPREPLY to the words `c` offers (none for free text).
fn reply(c: Complete) -> Option<String> {
    let agents = r#"_aw_agents "$root" "$inst""#;
    Some(match c {
        Complete::Text => return None,
        Complete::Dir => "_aw_paths".into(),
        Complete::File => "_aw_paths -f".into(),
        Complete::Instance => r#"_aw_reply < <(_aw_instances "$root")"#.into(),
        Complete::Agent => format!("_aw_reply < <({agents})"),
        Complete::AgentOrUser => format!("_aw_reply < <({agents}; echo user)"),
        Complete::Sender => format!(r"_aw_reply < <({agents}; printf '%s\n' user system)"),
        Complete::Target => r#"_aw_reply < <(_aw_targets "$root" "$inst")"#.into(),
        Complete::AgentAddress => format!(r#"_aw_reply < <({agents} | sed "s/\$/@$inst/")"#),
        Complete::Document => r#"_aw_reply < <(_aw_documents "$root" "$inst")"#.into(),
        Complete::Choices(words) => format!(r"_aw_reply < <(printf '%s\n' {})", words.join(" ")),
    })
}

/// `-i | --instance`.
fn pattern(f: &Flag) -> String {
    spellings(f).join(" | ")
}

pub(super) fn render<R>(t: &Tool<R>) -> String {
    let func = format!("_{}", t.name.replace('-', "_"));
    let mut s = format!(
        "# bash completion for {}(1)                         -*- shell-script -*-\n",
        t.name
    );
    s += &generated(t.name, "complete-bash");
    s += "\n";
    s += HELPERS;
    s += &format!("\n{func}() {{\n");
    s += "    local words cword cur prev root inst i w n=0 serve=\n";
    s += "    local -a pos=()\n";
    s += "    _aw_words\n    _aw_where\n";
    if t.args == Operands::Commands {
        program(t, &mut s);
    }
    scan(t, &mut s);
    s += "    case $prev in\n";
    let free: Vec<String> = t
        .valued()
        .filter(|f| f.complete == Complete::Text && !t.optional(f))
        .map(pattern)
        .collect();
    if !free.is_empty() {
        s += &format!("    {}) return ;;\n", free.join(" | "));
    }
    for f in t.valued() {
        match (reply(f.complete), t.optional(f)) {
            (Some(r), true) => {
                s += &format!(
                    "    {}) if [[ $cur != -* ]]; then {r}; return; fi ;;\n",
                    pattern(f)
                )
            }
            (Some(r), false) => s += &format!("    {}) {r}; return ;;\n", pattern(f)),
            (None, _) => {}
        }
    }
    s += "    esac\n";
    options(t, &mut s);
    operands(t, &mut s);
    s += &format!("}}\ncomplete -F {func} {}\n", t.name);
    s
}

/// After a command that runs a program (`new NAME ... --`): programs, then files.
fn program<R>(t: &Tool<R>, s: &mut String) {
    let names: Vec<String> = t
        .commands
        .iter()
        .filter(|c| c.program)
        .map(|c| format!(r#"" ${{words[*]:1:i}} " == *" {} "*"#, c.name))
        .collect();
    if names.is_empty() {
        return;
    }
    *s += "    # After `COMMAND ... --` comes a program and its arguments.\n";
    *s += "    for ((i = 1; i < cword; i++)); do\n";
    *s += &format!(
        "        if [[ ${{words[i]}} == -- && ( {} ) ]]; then\n",
        names.join(" || ")
    );
    *s += "            if ((i + 1 == cword)); then\n";
    *s += "                mapfile -t COMPREPLY < <(compgen -c -- \"$cur\" | sort -u)\n";
    *s += "            else\n                _aw_paths -f\n            fi\n            return\n";
    *s += "        fi\n    done\n";
}

/// The words before the cursor that are not options nor their values.
fn scan<R>(t: &Tool<R>, s: &mut String) {
    *s += "    for ((i = 1; i < cword; i++)); do\n        w=${words[i]}\n        case $w in\n";
    let required: Vec<String> = t.valued().filter(|f| !t.optional(f)).map(pattern).collect();
    *s += &format!("        {}) ((i++)) ;;\n", required.join(" | "));
    for f in t.valued().filter(|f| t.optional(f)) {
        *s += &format!(
            "        {}) [[ ${{words[i + 1]}} != -* ]] && ((i + 1 < cword)) && ((i++)) ;;\n",
            pattern(f)
        );
    }
    if let Operands::Workflow { serve } = t.args {
        *s += &format!("        --{serve}) serve=1 ;;\n");
    }
    *s += "        -?*) ;;\n";
    *s += match t.args {
        // Everything from the first message word on is message text.
        Operands::Message => "        *) return ;;\n",
        // A target names the instance: @instance or agent@instance.
        Operands::Target => {
            "        *@*) inst=${w#*@}; n=$((n + 1)) ;;\n        *) n=$((n + 1)) ;;\n"
        }
        Operands::Commands => "        *) pos+=(\"$w\") ;;\n",
        Operands::None | Operands::Workflow { .. } => "        *) n=$((n + 1)) ;;\n",
    };
    *s += "        esac\n    done\n";
}

/// The options, when the word at the cursor starts with `-`: for a tool with commands, the
/// common ones and those of the command typed.
fn options<R>(t: &Tool<R>, s: &mut String) {
    let words = |it: &mut dyn Iterator<Item = &Flag>| -> String {
        it.flat_map(spellings).collect::<Vec<_>>().join(" ")
    };
    *s += "    if [[ $cur == -* ]]; then\n";
    *s += &format!("        local opts='{}'\n", words(&mut t.common()));
    if t.args == Operands::Commands {
        *s += "        case ${pos[0]}/${pos[1]} in\n";
        let mut cmds: Vec<_> = t.commands.iter().collect();
        // A command with a subcommand before the command alone: `budget/reset` before `budget/*`.
        cmds.sort_by_key(|c| c.words().1.is_none());
        for c in cmds {
            let own = words(&mut t.own(c.name));
            if own.is_empty() {
                continue;
            }
            let pat = match c.words() {
                (w, Some(sub)) => format!("{w}/{sub}"),
                (w, None) => format!("{w}/*"),
            };
            *s += &format!("        {pat}) opts+=' {own}' ;;\n");
        }
        *s += "        esac\n";
    }
    *s += "        _aw_reply < <(printf '%s\\n' $opts)\n        return\n    fi\n";
}

/// The words that are not options.
fn operands<R>(t: &Tool<R>, s: &mut String) {
    match t.args {
        Operands::None | Operands::Message => {}
        Operands::Target => {
            *s += "    ((n == 0)) && ";
            *s += &reply(Complete::Target).unwrap_or_default();
            *s += "\n";
        }
        Operands::Workflow { .. } => {
            *s += "    if [[ -n $serve && $cur == ?*@* ]]; then\n        ";
            *s += &reply(Complete::Target).unwrap_or_default();
            *s += "\n    elif [[ -n $serve ]]; then\n        ";
            *s += &reply(Complete::Agent).unwrap_or_default();
            *s += "\n    else\n        _aw_paths -f\n    fi\n";
        }
        Operands::Commands => {
            *s += "    case ${#pos[@]}/${pos[0]}/${pos[1]} in\n";
            let names = crate::cli::flags::command_names(t.commands);
            *s += &format!(
                "    0//) _aw_reply < <(printf '%s\\n' {}) ;;\n",
                names.join(" ")
            );
            for g in t.groups() {
                let subs: Vec<&str> = t.subcommands(g).iter().map(|x| x.0).collect();
                *s += &format!(
                    "    1/{g}/) _aw_reply < <(printf '%s\\n' {}) ;;\n",
                    subs.join(" ")
                );
            }
            for c in t.commands {
                let (w, sub) = c.words();
                for (j, a) in c.args.iter().enumerate() {
                    let Some(r) = reply(a.complete) else {
                        continue;
                    };
                    let pat = match sub {
                        // `PATH...`: at any position from its own.
                        Some(sub) if a.many => format!("*/{w}/{sub}"),
                        Some(sub) => format!("{}/{w}/{sub}", j + 2),
                        None if j == 0 => format!("1/{w}/"),
                        None => format!("{}/{w}/*", j + 1),
                    };
                    *s += &format!("    {pat}) {r} ;;\n");
                }
            }
            *s += "    esac\n";
        }
    }
}
