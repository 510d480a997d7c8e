//! `${{ name }}` in shell commands (`shell:` tasks): whatever a value holds, it reaches the
//! program as one word of data, never as syntax.
//!
//! The first byte chooses a mode.
//!
//! - Any template (odd first byte): the rest, as UTF-8, is a command text. Checked: no panic;
//!   `check_shell` refuses exactly what `render_shell` refuses; plain rendering puts each
//!   value in verbatim; a rendered command text does not depend on the values (they travel
//!   in the environment only), and the environment carries each value as it is.
//! - A generated script (even first byte): a reference (once or twice) in a word of a chosen
//!   context (bare, double quotes, single quotes, a here-document; with [`NESTED`] also
//!   `${u:-...}`), after statements that mislead a naive scanner, with [`NESTED`] inside
//!   layers of command substitution (`"$(...)"`, backquotes, an assignment), with a value
//!   from a hostile alphabet. The command is run by
//!   `/bin/sh` in an empty directory: it must print exactly the word expected (the value
//!   verbatim in its place) and leave the directory empty. A reference in a nested context
//!   may instead be refused by the check; one at the top level may not.
#![no_main]

use std::process::{Command, Stdio};
use std::sync::OnceLock;

use aw::run::{Template, Vars};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

/// Generate contexts nested in command substitutions and parameter expansions, and the
/// statements that mislead a scanner that does not track them.
const NESTED: bool = true;

/// Characters of hostile values: shell syntax, blanks, globs, quotes, non-ASCII.
const ALPHABET: &[char] = &[
    ' ', '\t', '\n', '$', '(', ')', '`', '\'', '"', '\\', ';', '|', '&', '<', '>', '*', '?', '[',
    ']', '{', '}', '~', '#', '=', '-', '!', '%', ',', ':', '/', '.', 'x', 'a', '0', '1', 'é',
    '\u{a0}', 't', 'o', 'u', 'c', 'h', 'P', 'W', 'N', 'E', 'D', '@', '^', '+',
];

/// Statements put before the probe: quoting that opens and closes, comments, here-document
/// look-alikes.
const NOISE: &[&str] = &[
    "",
    ": 'it''s' \"a\\\"b\"; ",
    "# it's a comment \" `\n",
    "cat >/dev/null <<'Q'\n$x `y` \" is not here\nQ\n",
    ": <<Q\nthe \" and ' here are text\nQ\n",
    "case a in (a) : ;; esac; ",
];

/// Noise that needs nested contexts tracked.
const NESTED_NOISE: &[&str] = &[
    "n=$((1<<2)); ",
    "m=$(echo \")\"); ",
    ": \"$(echo 'it''s')\" `echo \"'\"`; ",
    ": ${u:-\"}\"}; ",
];

fn runner_dir() -> &'static std::path::PathBuf {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| common::scratch("interpolate"))
}

fn vars_for(tpl: &Template, value: &dyn Fn(usize) -> String) -> Vars {
    let mut vars = Vars::new();
    for (i, (name, _)) in tpl.vars().enumerate() {
        if !vars.contains(name) {
            vars.set(name, value(i));
        }
    }
    vars
}

fn any_template(text: &str) {
    let (tpl, errors) = Template::parse_all(text);
    if !errors.is_empty() {
        for e in &errors {
            assert!(
                e.offset < text.len() && text[e.offset..].starts_with("${{"),
                "{e:?}"
            );
        }
        return;
    }
    let hostile = |i: usize| format!("a b\n$(touch PWNED)'\"`{i}`*");
    let calm = |_: usize| "x".to_string();
    let vars = vars_for(&tpl, &hostile);
    let plain = tpl.render(&vars).expect("every variable is defined");
    let mut expect = String::new();
    for p in tpl.parts() {
        match p {
            aw::run::interpolate::Part::Text(t) => expect.push_str(t),
            aw::run::interpolate::Part::Var { name, .. } => {
                expect.push_str(vars.get(name).unwrap())
            }
        }
    }
    assert_eq!(plain, expect);
    let checked = tpl.check_shell();
    match tpl.render_shell(&vars) {
        Ok(cmd) => {
            assert!(checked.is_ok());
            let other = tpl
                .render_shell(&vars_for(&tpl, &calm))
                .expect("same template");
            assert_eq!(
                cmd.text, other.text,
                "the command text depends on the values"
            );
            for (k, v) in &cmd.env {
                assert!(k.starts_with(aw::run::interpolate::SHELL_VAR_PREFIX));
                assert!(vars.names().any(|n| vars.get(n) == Some(v.as_str())));
            }
        }
        Err(e) => {
            let why = checked.expect_err("render_shell refused what check_shell took");
            assert!(
                e.to_string().contains(&why.message),
                "{e} / {}",
                why.message
            );
        }
    }
}

/// One generated script: the command text and the output expected.
struct Script {
    text: String,
    expect: String,
    nested: bool,
}

fn script(sel: &[u8; 4], value: &str) -> Script {
    let (pre, suf) = (
        ["", "p"][sel[0] as usize >> 7],
        ["", "s"][(sel[0] as usize >> 6) & 1],
    );
    let twice = sel[0] & 0x20 != 0;
    let r = "${{ x }}";
    let word = if twice {
        format!("{pre}{r}m{r}{suf}")
    } else {
        format!("{pre}{r}{suf}")
    };
    let val = if twice {
        format!("{pre}{value}m{value}{suf}")
    } else {
        format!("{pre}{value}{suf}")
    };
    let kinds = if NESTED { 7 } else { 5 };
    let (mut text, mut expect, mut nested) = match sel[0] as usize % kinds {
        0 => (format!("printf '[%s]' {word}"), format!("[{val}]"), false),
        1 => (
            format!("printf '[%s]' \"{word}\""),
            format!("[{val}]"),
            false,
        ),
        2 => (format!("printf '[%s]' '{word}'"), format!("[{val}]"), false),
        3 => (format!("cat <<E\n{word}\nE\n"), format!("{val}\n"), false),
        4 => (format!("cat <<\"E\"x\n{word}\nEx\n"), String::new(), false),
        5 => (
            format!("printf '[%s]' \"${{u:-{word}}}\""),
            format!("[{val}]"),
            true,
        ),
        _ => (
            format!("printf '[%s]' ${{u:-{word}}}"),
            format!("[{val}]"),
            true,
        ),
    };
    if sel[0] as usize % kinds == 4 {
        // A quoted delimiter: nothing is expanded, so the check refuses it.
        return Script {
            text,
            expect,
            nested: false,
        };
    }
    // Layers of command substitution.
    if NESTED {
        let mut backquoted = false;
        for i in 0..(sel[1] & 3) {
            let inner = std::mem::take(&mut text);
            let e = expect.trim_end_matches('\n').to_string();
            text = match (sel[1] >> (2 + 2 * i)) & 3 {
                0 => format!("printf '(%s)' \"$({inner})\""),
                1 if !backquoted => {
                    backquoted = true;
                    format!("printf '(%s)' \"`{inner}`\"")
                }
                2 => format!("v=$({inner}\n); printf '(%s)' \"$v\""),
                _ => format!("printf '(%s)' \"$( {inner} )\""),
            };
            expect = format!("({e})");
            nested = true;
        }
    }
    let noise: Vec<&str> = if NESTED {
        NOISE.iter().chain(NESTED_NOISE).copied().collect()
    } else {
        NOISE.to_vec()
    };
    let n = noise[sel[2] as usize % noise.len()];
    if NESTED_NOISE.contains(&n) {
        nested = true;
    }
    text = format!("{n}{text}");
    Script {
        text,
        expect,
        nested,
    }
}

fn generated(data: &[u8]) {
    let Some((sel, bytes)) = data.split_first_chunk::<4>() else {
        return;
    };
    let value: String = bytes
        .iter()
        .map(|&b| ALPHABET[b as usize % ALPHABET.len()])
        .collect();
    let s = script(sel, &value);
    let tpl = Template::parse(&s.text).expect("the generated template parses");
    let mut vars = Vars::new();
    vars.set("x", value.clone());
    let cmd = match tpl.render_shell(&vars) {
        Ok(cmd) => cmd,
        Err(e) if s.expect.is_empty() || s.nested => {
            let _ = e;
            return;
        }
        Err(e) => panic!("refused at the top level: {e}\n{}", s.text),
    };
    assert!(
        !s.expect.is_empty(),
        "a quoted here-document delimiter was taken:\n{}",
        s.text
    );
    let dir = runner_dir();
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(&cmd.text)
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .env("LC_ALL", "C")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("run /bin/sh");
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    for f in &left {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let got = String::from_utf8_lossy(&out.stdout);
    assert!(
        got == s.expect && left.is_empty(),
        "value {value:?}\ntemplate:\n{}\ncommand:\n{}\nprinted {got:?}\nexpected {:?}\nfiles left: {left:?}",
        s.text,
        cmd.text,
        s.expect
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 1 {
        if let Ok(text) = std::str::from_utf8(rest) {
            any_template(text);
        }
    } else {
        generated(rest);
    }
});
