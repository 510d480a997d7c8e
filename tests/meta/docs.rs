//! Documentation checks.
//!
//! - Every flag that a tool's `--help` names is documented in the OPTIONS section of
//!   `man/<tool>.1` and offered by its bash, zsh and fish completions.
//! - Every exit code that the EXIT STATUS section of `man/<tool>.1` names is named by the
//!   tool's `--help` and the other way round, and is in the shared table of `man/aw.7`, which
//!   is the table of `aw::error::exit`.
//! - Every man page passes `mandoc -Tlint -W warning` (a missing mandoc fails).
//! - The files of `completions/` are what each tool's `--generate` prints from its table of
//!   options (`make completions` writes them), every flag of a table is one its parser
//!   takes, and the bash completion completes in a real bash.
//!
//! To check a new tool, add it to [`TOOLS`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use aw::error::exit;

/// The tools whose documentation is checked.
const TOOLS: &[&str] = &["aw-send", "aw-peek", "aw-ctl", "aw-mcp", "aw-run"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", rel(path)))
}

/// A path as shown in messages: relative to the repository.
fn rel(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string()
}

fn help(tool: &str) -> String {
    let out = Command::cargo_bin(tool)
        .unwrap_or_else(|e| panic!("{tool}: no such binary: {e}"))
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("{tool} --help: {e}"));
    assert!(out.status.success(), "{tool} --help failed: {out:?}");
    String::from_utf8(out.stdout).expect("--help output is UTF-8")
}

/// Can `c` be part of a flag name (so that it glues to a flag next to it)?
fn wordy(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Every flag that a help text names: long flags `--[a-z][a-z-]*` not glued to a word before
/// them, and short flags `-[a-zA-Z]` that stand alone as a token (`-i,` and `[-i` count).
fn flags(help: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let chars: Vec<char> = help.chars().collect();
    let mut i = 0;
    while i + 2 < chars.len() {
        let glued = i > 0 && wordy(chars[i - 1]);
        if chars[i] == '-' && chars[i + 1] == '-' && chars[i + 2].is_ascii_lowercase() && !glued {
            let mut j = i + 2;
            while j < chars.len() && (chars[j].is_ascii_lowercase() || chars[j] == '-') {
                j += 1;
            }
            let flag: String = chars[i..j].iter().collect();
            out.insert(flag.trim_end_matches('-').to_string());
            i = j;
        } else {
            i += 1;
        }
    }
    for token in help.split_whitespace() {
        let t = token.trim_matches(|c| "[](){}|,;:".contains(c));
        let b = t.as_bytes();
        if b.len() == 2 && b[0] == b'-' && b[1].is_ascii_alphabetic() {
            out.insert(t.to_string());
        }
    }
    out
}

/// Does `needle` occur in `hay` with no flag character right before or after it?
fn has_token(hay: &str, needle: &str) -> bool {
    hay.match_indices(needle).any(|(i, _)| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + needle.len()..].chars().next();
        !before.is_some_and(|c| wordy(c) || c == '\\') && !after.is_some_and(wordy)
    })
}

/// The text of one `.Sh` section of an mdoc page (empty when the page has none).
fn section<'a>(page: &'a str, name: &str) -> &'a str {
    let head = format!(".Sh {name}\n");
    let Some(start) = page.find(&head).map(|i| i + head.len()) else {
        return "";
    };
    let end = page[start..]
        .find("\n.Sh ")
        .map_or(page.len(), |i| start + i);
    &page[start..end]
}

/// Is `flag` documented in an mdoc text: as `Fl -root` / `Fl i`, or literally as `--root`,
/// `\-\-root`, `-i` or `\-i`?
fn in_man(text: &str, flag: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    let bare = &flag[1..];
    words
        .windows(2)
        .any(|w| w[0].trim_start_matches('.') == "Fl" && w[1] == bare)
        || has_token(text, flag)
        || has_token(text, &flag.replace('-', "\\-"))
}

/// Is `flag` offered by a bash completion: as a word inside a quoted string (so that a
/// `[[ -n ... ]]` or `compgen -f` in the script does not count)?
fn in_bash(script: &str, flag: &str) -> bool {
    script.lines().any(|line| {
        let line = line.trim_start();
        if line.starts_with('#') {
            return false;
        }
        let mut inside = None;
        let mut quoted = String::new();
        for c in line.chars() {
            match inside {
                None if c == '"' || c == '\'' => inside = Some(c),
                Some(q) if c == q => {
                    inside = None;
                    quoted.push(' ');
                }
                Some(_) => quoted.push(c),
                None => {}
            }
        }
        quoted.split_whitespace().any(|w| w == flag)
    })
}

/// Is `flag` offered by a zsh completion: as an `_arguments` option spec, that is the flag,
/// an optional argument marker (`=`, `+`, `-`, `=-`), then `[` or `:`; or in a brace group
/// such as `{-i+,--instance=}`.
fn in_zsh(script: &str, flag: &str) -> bool {
    script.match_indices(flag).any(|(i, _)| {
        let before = script[..i].chars().next_back();
        if before.is_some_and(|c| wordy(c) || c == '\\') {
            return false;
        }
        let mut rest = &script[i + flag.len()..];
        for marker in ["=-", "=", "+", "-"] {
            if let Some(r) = rest.strip_prefix(marker) {
                rest = r;
                break;
            }
        }
        let spec = rest.starts_with('[') || rest.starts_with(':');
        let brace = matches!(before, Some('{') | Some(','))
            && (rest.starts_with(',') || rest.starts_with('}'));
        spec || brace
    })
}

/// Is `flag` offered by a fish completion: `-l root` / `--long-option root` for a long flag,
/// `-s i` / `--short-option i` for a short one?
fn in_fish(script: &str, flag: &str) -> bool {
    let (keys, name): (&[&str], &str) = match flag.strip_prefix("--") {
        Some(long) => (&["-l", "--long", "--long-option"], long),
        None => (&["-s", "--short", "--short-option"], &flag[1..]),
    };
    script.lines().any(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        words
            .windows(2)
            .any(|w| keys.contains(&w[0]) && w[1].trim_matches(|c| c == '\'' || c == '"') == name)
    })
}

/// Does a file's text (first argument) offer a flag (second argument)?
type Check = fn(&str, &str) -> bool;

#[test]
fn help_flags_are_documented_and_completed() {
    let mut problems = Vec::new();
    for tool in TOOLS {
        let wanted = flags(&help(tool));
        assert!(
            wanted.contains("--help"),
            "{tool}: flag extraction found no --help in: {wanted:?}"
        );
        let man = repo().join(format!("man/{tool}.1"));
        let bash = repo().join(format!("completions/{tool}.bash"));
        let zsh = repo().join(format!("completions/_{tool}"));
        let fish = repo().join(format!("completions/{tool}.fish"));
        let checks: [(&Path, &str, Check); 4] = [
            (&man, "the OPTIONS section of", |page, f| {
                in_man(section(page, "OPTIONS"), f)
            }),
            (&bash, "", in_bash),
            (&zsh, "", in_zsh),
            (&fish, "", in_fish),
        ];
        for (path, where_, check) in checks {
            let text = match read(path) {
                Ok(t) => t,
                Err(e) => {
                    problems.push(format!("{tool}: {e}"));
                    continue;
                }
            };
            let missing: Vec<&str> = wanted
                .iter()
                .filter(|f| !check(&text, f))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                let place = if where_.is_empty() {
                    rel(path)
                } else {
                    format!("{where_} {}", rel(path))
                };
                problems.push(format!(
                    "{tool}: --help names {} missing from {place}",
                    missing.join(" ")
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "documentation is out of date with --help:\n  {}\n",
        problems.join("\n  ")
    );
}

/// The exit codes every tool shares, as the library defines them.
const TABLE: [u8; 12] = [
    exit::OK,
    exit::NO,
    exit::USAGE,
    exit::DATAERR,
    exit::NOINPUT,
    exit::UNAVAILABLE,
    exit::SOFTWARE,
    exit::CANTCREAT,
    exit::IOERR,
    exit::TEMPFAIL,
    exit::NOPERM,
    exit::INTERRUPTED,
];

/// The codes an EXIT STATUS section lists, one `.It CODE` each.
fn man_codes(section: &str) -> BTreeSet<u32> {
    section
        .lines()
        .filter_map(|l| l.strip_prefix(".It "))
        .filter_map(|w| w.trim().parse().ok())
        .collect()
}

/// The codes the `Exit status:` paragraph of a help text names: every number in it.
fn help_codes(help: &str) -> BTreeSet<u32> {
    let Some(start) = help.find("Exit status:") else {
        return BTreeSet::new();
    };
    let para = &help[start..];
    let para = para.split("\n\n").next().unwrap_or(para);
    para.split(|c: char| !c.is_ascii_alphanumeric())
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// `codes` as a list for messages.
fn list(codes: impl IntoIterator<Item = u32>) -> String {
    let v: Vec<String> = codes.into_iter().map(|c| c.to_string()).collect();
    v.join(" ")
}

#[test]
fn exit_codes_agree_with_help_and_the_table() {
    let mut problems = Vec::new();
    let table: BTreeSet<u32> = TABLE.iter().map(|&c| u32::from(c)).collect();
    let overview = repo().join("man/aw.7");
    let shared = man_codes(section(&read(&overview).unwrap(), "EXIT STATUS"));
    if shared != table {
        problems.push(format!(
            "{} lists {}, the library has {}",
            rel(&overview),
            list(shared.iter().copied()),
            list(table.iter().copied())
        ));
    }
    for tool in TOOLS {
        let page = repo().join(format!("man/{tool}.1"));
        let man = match read(&page) {
            Ok(p) => man_codes(section(&p, "EXIT STATUS")),
            Err(e) => {
                problems.push(format!("{tool}: {e}"));
                continue;
            }
        };
        let help = help_codes(&help(tool));
        if man.is_empty() || help.is_empty() {
            problems.push(format!(
                "{tool}: no exit codes found (man: {}, --help: {})",
                list(man.iter().copied()),
                list(help.iter().copied())
            ));
            continue;
        }
        let checks = [
            (
                &man,
                &help,
                format!("the EXIT STATUS of {}", rel(&page)),
                "--help",
            ),
            (&help, &man, "--help".to_string(), "the man page"),
        ];
        for (from, other, name, other_name) in checks {
            let missing: Vec<u32> = from.difference(other).copied().collect();
            if !missing.is_empty() {
                problems.push(format!(
                    "{tool}: {name} names {} that {other_name} does not",
                    list(missing)
                ));
            }
        }
        let unknown: Vec<u32> = man
            .union(&help)
            .copied()
            .filter(|c| !table.contains(c))
            .collect();
        if !unknown.is_empty() {
            problems.push(format!(
                "{tool}: {} not in the exit-code table",
                list(unknown)
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "exit codes disagree:\n  {}\n",
        problems.join("\n  ")
    );
}

#[test]
fn man_pages_pass_mandoc_lint() {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("man"))
        .expect("man/ exists")
        .map(|e| e.expect("readable man/").path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e.len() == 1 && e.as_bytes()[0].is_ascii_digit())
        })
        .collect();
    pages.sort();
    for tool in TOOLS {
        let page = repo().join(format!("man/{tool}.1"));
        assert!(pages.contains(&page), "{} is missing", rel(&page));
    }
    let out = match std::process::Command::new("mandoc")
        .args(["-Tlint", "-W", "warning"])
        .args(&pages)
        .output()
    {
        Ok(out) => out,
        Err(e) => panic!("cannot run mandoc (sh scripts/test-deps.sh installs it): {e}"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.trim().is_empty() && out.status.success(),
        "mandoc -Tlint -W warning complains ({}):\n{text}",
        out.status
    );
}

/// The shells a tool prints a completion for, and the file of each under `completions/`.
fn completion_files(tool: &str) -> [(&'static str, String); 3] {
    [
        ("complete-bash", format!("completions/{tool}.bash")),
        ("complete-zsh", format!("completions/_{tool}")),
        ("complete-fish", format!("completions/{tool}.fish")),
    ]
}

#[test]
fn completion_files_are_what_the_tools_generate() {
    let mut stale = Vec::new();
    for tool in TOOLS {
        for (kind, file) in completion_files(tool) {
            let out = Command::cargo_bin(tool)
                .unwrap()
                .args(["--generate", kind])
                .output()
                .unwrap();
            assert!(out.status.success(), "{tool} --generate {kind}: {out:?}");
            let generated = String::from_utf8(out.stdout).expect("a script is UTF-8");
            assert!(
                generated.contains(&format!("{tool} --generate {kind}")),
                "{tool} --generate {kind} does not say what made it"
            );
            if read(&repo().join(&file)).ok().as_deref() != Some(generated.as_str()) {
                stale.push(file);
            }
        }
    }
    assert!(
        stale.is_empty(),
        "these completion files differ from what the tools generate (run make completions): {}",
        stale.join(" ")
    );
    let out = Command::cargo_bin("aw-ctl")
        .unwrap()
        .args(["--generate", "complete-bsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with(
            "aw-ctl: --generate: unknown kind 'complete-bsh' (did you mean 'complete-bash'?)"
        ),
        "{out:?}"
    );
}

/// Every flag of each tool's table, with a value where it takes one, is taken by the tool's
/// parser: `TOOL FLAG [VALUE] --help` prints the help (a flag of the table that the parser
/// does not handle panics).
#[test]
fn every_flag_of_a_table_is_parsed() {
    use aw::cli::flags::Flag;
    let tables: [(&str, &[Flag]); 5] = [
        ("aw-send", aw::cli::send::FLAGS),
        ("aw-peek", aw::cli::peek::FLAGS),
        ("aw-ctl", aw::cli::ctl::FLAGS),
        ("aw-mcp", aw::cli::mcp::FLAGS),
        ("aw-run", aw::cli::run::FLAGS),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (tool, table) in tables {
        let help = help(tool);
        for f in table {
            let mut args = vec![format!("--{}", f.long)];
            if f.value.is_some() {
                args.push(
                    match f.long {
                        "agent" => "a",
                        "max-rate" | "max-pair" => "off",
                        "var" => "a=1",
                        "generate" => "complete-bash",
                        _ => "1",
                    }
                    .to_string(),
                );
            }
            args.push("--help".into());
            let out = Command::cargo_bin(tool)
                .unwrap()
                .current_dir(dir.path())
                .args(&args)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{tool} {args:?}: {out:?}");
            let version = format!("{tool} ");
            let want = match f.long {
                "generate" => "# bash completion",
                "version" => &version,
                _ => &help,
            };
            assert!(
                String::from_utf8_lossy(&out.stdout).starts_with(want),
                "{tool} {args:?}: {out:?}"
            );
            assert!(
                has_token(&help, &format!("--{}", f.long)),
                "{tool} --help does not name --{}",
                f.long
            );
        }
    }
}

/// The man page of aw-ctl names, for each option of its table, the commands that take it
/// (`.Pq Cm doc write , Cm propose` in its entry of OPTIONS), and no other; a subcommand whose
/// command takes it too (`budget reset`, `budget`) is named by its command.
#[test]
fn aw_ctl_man_page_names_the_commands_of_each_option() {
    use std::collections::BTreeMap;
    let page = read(&repo().join("man/aw-ctl.1")).unwrap();
    let mut entries: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in section(&page, "OPTIONS").lines() {
        if let Some(item) = line.strip_prefix(".It ") {
            let words: Vec<&str> = item.split_whitespace().collect();
            current = words
                .windows(2)
                .filter(|w| w[0] == "Fl" && w[1].starts_with('-'))
                .map(|w| w[1][1..].to_string())
                .next();
        } else if let (Some(flag), Some(cmds)) = (&current, line.strip_prefix(".Pq Cm ")) {
            entries
                .entry(flag.clone())
                .or_default()
                .extend(cmds.split(" , Cm ").map(|c| c.trim().to_string()));
        }
    }
    // Two flags of one name (`--wait`) have an entry each; the entries name their commands
    // together.
    let mut table: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for f in aw::cli::ctl::FLAGS.iter().filter(|f| !f.cmds.is_empty()) {
        table.entry(f.long).or_default().extend(f.cmds);
    }
    let mut problems = Vec::new();
    for (long, cmds) in table {
        let want: BTreeSet<String> = cmds
            .iter()
            .filter(|c| !c.split_once(' ').is_some_and(|(w, _)| cmds.contains(&w)))
            .map(|c| c.to_string())
            .collect();
        let got = entries.get(long).cloned().unwrap_or_default();
        if got != want {
            problems.push(format!(
                "--{long}: the table says {want:?}, the man page {got:?}"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "man/aw-ctl.1:\n  {}",
        problems.join("\n  ")
    );
}

/// The candidates that the bash completion of `tool` offers for `line` (the cursor at its
/// end), run in a real bash in `dir`: the function that `complete -p` names is called as
/// bash calls it on TAB.
fn bash_complete(dir: &Path, tool: &str, line: &str) -> Vec<String> {
    let script = format!(
        "source {}\n\
         f=$(complete -p {tool} | sed -n 's/.*-F \\([^ ]*\\) .*/\\1/p')\n\
         COMP_LINE=\"$1\"; COMP_POINT=${{#COMP_LINE}}\n\
         read -ra COMP_WORDS <<<\"$COMP_LINE\"\n\
         [[ $COMP_LINE == *' ' ]] && COMP_WORDS+=('')\n\
         COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n\
         \"$f\" {tool} \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        repo().join(format!("completions/{tool}.bash")).display()
    );
    let out = std::process::Command::new("bash")
        .current_dir(dir)
        .env_remove("AW_ROOT")
        .env_remove("AW_INSTANCE")
        .args(["-c", &script, "bash", line])
        .output()
        .expect("bash must be installed");
    assert!(out.status.success(), "bash: {out:?}");
    let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    got.sort();
    got
}

#[test]
fn bash_completes_commands_options_agents_and_documents() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ctl = |args: &[&str]| {
        let out = Command::cargo_bin("aw-ctl")
            .unwrap()
            .current_dir(d)
            .args(args)
            .write_stdin("x")
            .output()
            .unwrap();
        assert!(out.status.success(), "aw-ctl {args:?}: {out:?}");
    };
    ctl(&["new", "alice@team", "--backend", "mock"]);
    ctl(&["new", "bob@team", "--backend", "mock"]);
    ctl(&["-i", "team", "doc", "create", "findings/a.md"]);
    for (tool, line, want) in [
        ("aw-ctl", "aw-ctl st", &["status", "stop"][..]),
        ("aw-ctl", "aw-ctl -i team status ", &["alice", "bob"]),
        ("aw-ctl", "aw-ctl budget ", &["reset"]),
        (
            "aw-ctl",
            "aw-ctl doc ",
            &["append", "create", "list", "owner", "read", "rm", "write"],
        ),
        ("aw-ctl", "aw-ctl -i team doc read ", &["findings/a.md"]),
        ("aw-ctl", "aw-ctl doc list --j", &["--json"]),
        ("aw-ctl", "aw-ctl doc read --j", &[]),
        (
            "aw-ctl",
            "aw-ctl runs -",
            &[
                "--follow",
                "--generate",
                "--help",
                "--instance",
                "--json",
                "--root",
                "--version",
                "-V",
                "-f",
                "-h",
                "-i",
            ],
        ),
        (
            "aw-ctl",
            "aw-ctl -i team mcp-config ",
            &["alice@team", "bob@team"],
        ),
        ("aw-ctl", "aw-ctl new x --backend m", &["mock"]),
        ("aw-send", "aw-send -i team -t ", &["@team", "alice", "bob"]),
        ("aw-send", "aw-send hello -", &[]),
        ("aw-peek", "aw-peek -i team --doc ", &["findings/a.md"]),
        ("aw-peek", "aw-peek --fo", &["--follow"]),
        // Bash replaces the word from its `@` on.
        ("aw-run", "aw-run --serve -i team alice@", &["@team"]),
        (
            "aw-mcp",
            "aw-mcp --c",
            &["--channel", "--channel-all", "--collab", "--create"],
        ),
    ] {
        assert_eq!(bash_complete(d, tool, line), want, "{line:?}");
    }
}

/// Run `shell` with `args` in `dir`, standard output as text; a missing shell fails.
fn shell(dir: &Path, shell: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(shell)
        .current_dir(dir)
        .env_remove("AW_ROOT")
        .env_remove("AW_INSTANCE")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {shell} (sh scripts/test-deps.sh installs it): {e}")
        });
    assert!(out.status.success(), "{shell} {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn zsh_reads_and_fish_runs_the_completions() {
    for tool in TOOLS {
        let zsh = repo().join(format!("completions/_{tool}"));
        shell(&repo(), "zsh", &["-n", &zsh.display().to_string()]);
        let fish = repo().join(format!("completions/{tool}.fish"));
        shell(&repo(), "fish", &["-n", &fish.display().to_string()]);
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for args in [
        &["new", "alice@team", "--backend", "mock"][..],
        &["new", "bob@team", "--backend", "mock"],
    ] {
        let out = Command::cargo_bin("aw-ctl")
            .unwrap()
            .current_dir(d)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "aw-ctl {args:?}: {out:?}");
    }
    for (tool, line, want) in [
        ("aw-ctl", "aw-ctl st", &["status", "stop"][..]),
        ("aw-ctl", "aw-ctl -i team status ", &["alice", "bob"]),
        ("aw-ctl", "aw-ctl -i team runs --f", &["--follow"]),
        ("aw-ctl", "aw-ctl -i team ls --f", &[]),
        ("aw-send", "aw-send -i team -t ", &["@team", "alice", "bob"]),
        ("aw-run", "aw-run --serve -i team alice@", &["alice@team"]),
    ] {
        let script = format!(
            "source {}; complete -C {}",
            repo().join(format!("completions/{tool}.fish")).display(),
            shell_quote(line)
        );
        let mut got: Vec<String> = shell(d, "fish", &["-c", &script])
            .lines()
            .map(|l| l.split('\t').next().unwrap_or_default().to_string())
            .collect();
        got.sort();
        assert_eq!(got, want, "fish: {line:?}");
    }
}

/// A single-quoted shell word.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"\'"))
}

#[test]
fn flag_extraction() {
    let help = "Usage: x [--root DIR] [-i NAME] <CMD>\n  -n, --limit N  e.g. claude-sonnet-4-5, aw-ctl\n  --doc [FILE]  (-F) a-b --x- [MESSAGE... | -]\n";
    let got: Vec<String> = flags(help).into_iter().collect();
    assert_eq!(got, ["--doc", "--limit", "--root", "--x", "-F", "-i", "-n"]);
    assert!(in_man(".It Fl i , Fl -instance", "-i"));
    assert!(in_man(".It Fl i , Fl -instance", "--instance"));
    assert!(!in_man(".It Fl -instance-name", "--instance"));
    assert!(in_man("use \\-\\-root", "--root"));
    assert!(in_man("With\n.Fl F ,\npoll", "-F"));
    assert!(in_bash("opts='--root -i'", "-i"));
    assert!(!in_bash("[[ -n $x ]] && compgen -f", "-n"));
    assert!(!in_bash("[[ -n $x ]] && compgen -f", "-f"));
    assert!(in_zsh(
        "'(-i --instance)'{-i,--instance}'[instance]:name:'",
        "-i"
    ));
    assert!(in_zsh("'--root=[root]:dir:_files -/'", "--root"));
    assert!(in_zsh(
        "'(-n --limit)'{-n+,--limit=}'[at most N]:count:'",
        "-n"
    ));
    assert!(in_zsh(
        "'(-n --limit)'{-n+,--limit=}'[at most N]:count:'",
        "--limit"
    ));
    assert!(!in_zsh(
        "'(-n --limit)'{-x+,--lim=}'[at most N]:count:'",
        "--limit"
    ));
    assert!(!in_zsh("_describe -t commands", "-t"));
    assert!(in_fish("complete -c aw-peek -s n -l limit -r", "-n"));
    assert!(in_fish("complete -c aw-peek -s n -l limit -r", "--limit"));
    assert!(!in_fish("complete -c aw-peek -s n -l limit -r", "--lim"));
    let help = "Options:\n  -n 5\n\nExit status: 0 ok, 64 usage, 77 not the\nowner, 130 on SIGINT.\n\nMore: 3\n";
    assert_eq!(list(help_codes(help)), "0 64 77 130");
    let man = ".Bl -tag -width Ds\n.It 0\nSuccess.\n.It 65\nBad data, 4 MiB.\n.It Fl x\n.El\n";
    assert_eq!(list(man_codes(man)), "0 65");
}
