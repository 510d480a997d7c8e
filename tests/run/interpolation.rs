//! `${{ x }}` in shell text: a value reaches the program as one argument (or one word of
//! data) in every context the shell opens, `$(...)` and backquotes within double quotes
//! included; where it cannot be data, `--check` refuses it with FILE:LINE:COL. End to end
//! with aw-run, and a property test against the real shells.

use crate::common;

use std::path::Path;
use std::process::Command;

use aw::run::{Template, Vars};
use common::run_with;
use common::runner::{Setup, assert_code, stderr};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A workflow whose mock agent `rev` replies `reply`, stored as `r`, then `shell` runs.
fn workflow(reply: &str, shell: &str) -> String {
    format!(
        "agents:\n  rev:\n    mock: {{replies: [{reply:?}]}}\ntasks:\n  - send: hi\n    to: rev\n    as: r\n  - shell: {shell:?}\n"
    )
}

const EXEC: &str = "x -o -exec touch PWNED ;";

#[test]
fn a_reply_in_a_command_substitution_is_one_argument_of_find() {
    let s = Setup::new();
    let wf = workflow(
        EXEC,
        r#"echo "found: $(find . -maxdepth 0 -name ${{ r }})""#,
    );
    let out = s.run(&wf, &[]);
    assert_code(&out, 0);
    assert!(!s.dir().join("PWNED").exists(), "the reply ran a command");
    assert_eq!(stdout(&out), "found: \n");

    // find gets the whole reply as its -name pattern: it finds the file of that name.
    s.write(EXEC, "");
    let wf = workflow(
        EXEC,
        r#"echo "found: $(find . -maxdepth 1 -name ${{ r }})"; echo "`find . -maxdepth 1 -name ${{ r }}`""#,
    );
    let out = s.run(&wf, &[]);
    assert_code(&out, 0);
    assert!(!s.dir().join("PWNED").exists(), "the reply ran a command");
    assert_eq!(stdout(&out), format!("found: ./{EXEC}\n./{EXEC}\n"));
}

#[test]
fn arithmetic_with_a_shift_is_not_a_here_document() {
    let s = Setup::new();
    // Read as a here-document, `<<2))` made the next line a body, where the value was split.
    let wf = workflow("a  *  b", "n=$((1<<2))\nprintf '[%s]' $n ${{ r }}");
    let out = s.run(&wf, &[]);
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "[4][a  *  b]\n");
}

#[test]
fn single_quotes_inside_a_command_substitution_take_the_value_as_data() {
    let s = Setup::new();
    let wf = workflow(
        "it's $(touch PWNED)",
        r#"echo "got: $(printf '%s' 'k${{ r }}')""#,
    );
    let out = s.run(&wf, &[]);
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "got: kit's $(touch PWNED)\n");
    assert!(!s.dir().join("PWNED").exists());
}

#[test]
fn check_refuses_a_reference_that_cannot_be_data_with_its_position() {
    let s = Setup::new();
    for (shell, what) in [
        ("echo $(( ${{ r }} + 1 ))", "is in an arithmetic expression"),
        (
            "echo \"${HOME#${{ r }}}\"",
            "is in the pattern of a ${...} expansion",
        ),
        ("cat <<'E'\n${{ r }}\nE\n", "quoted delimiter"),
        (
            "echo \"$(echo $'b\\'c')\" ${{ r }}",
            "cannot tell how the shell reads",
        ),
    ] {
        s.write("wf.yaml", &workflow("v", shell));
        let out = run_with(s.cmd(&["--check"]), None);
        assert_code(&out, 65);
        let err = stderr(&out);
        // The task's text is a double-quoted scalar on line 8, its quote at column 12.
        let column = 12 + format!("{shell:?}").find("${{").unwrap();
        let at = format!("wf.yaml:8:{column}: tasks[1].shell: '${{{{ r }}}}' ");
        assert!(err.starts_with(&at), "{shell}: expected {at}: {err}");
        assert!(err.contains(what), "{shell}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!s.root.inst_dir(common::runner::INST).exists());
    }
}

/// A deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Pieces of hostile values.
const ALPHABET: &[&str] = &[
    "'",
    "\"",
    "`",
    "$",
    "(",
    ")",
    "{",
    "}",
    "\\",
    ";",
    "&",
    "|",
    "<",
    ">",
    "*",
    "?",
    "[",
    "]",
    "~",
    "#",
    "\n",
    " ",
    "  ",
    "\t",
    "=",
    "%",
    "é",
    "✓",
    "-",
    "!",
    "a",
    "E",
    "0",
    "${{",
    "}}",
    "$(touch PWNED)",
    "`touch PWNED`",
    "-exec",
    "$HOME",
    "${x}",
    "'\"'",
    "\\n",
    ",",
    ".",
    "/",
];

fn value(rng: &mut Rng) -> String {
    let len = rng.below(12);
    (0..len)
        .map(|_| ALPHABET[rng.below(ALPHABET.len())])
        .collect()
}

/// What a context must write for a value.
type Expect = fn(&str) -> String;

/// Each context: a line of shell text writing file `o` (`X` stands for the reference),
/// and what `o` must hold for a value `v`. `printf '%s\0'` writes each argument it gets
/// followed by a NUL, so a split value shows.
fn contexts() -> Vec<(&'static str, Expect)> {
    vec![
        ("printf '%s\\0' X >o", |v| format!("{v}\0")),
        ("printf '%s\\0' \"a X b\" >o", |v| format!("a {v} b\0")),
        ("printf '%s\\0' 'aXb' >o", |v| format!("a{v}b\0")),
        ("printf '%s\\0' \"$(printf '%s.' X)\" >o", |v| {
            format!("{v}.\0")
        }),
        ("v=`printf '%s.' X`; printf '%s\\0' \"$v\" >o", |v| {
            format!("{v}.\0")
        }),
        ("printf '%s\\0' \"`printf '%s.' X`\" >o", |v| {
            format!("{v}.\0")
        }),
        ("printf '%s\\0' \"`printf '%s.' \\\"X\\\"`\" >o", |v| {
            format!("{v}.\0")
        }),
        ("printf '%s\\0' ${unset:-X} >o", |v| format!("{v}\0")),
        ("printf '%s\\0' \"${unset:-X}\" >o", |v| format!("{v}\0")),
        ("printf '%s\\0' ${unset-'<X>'} >o", |v| format!("<{v}>\0")),
        ("printf '%s\\0' \"${unset:-\"X\"}\" >o", |v| {
            format!("{v}\0")
        }),
        ("cat >o <<E\n<X>\nE", |v| format!("<{v}>\n")),
        ("cat >o <<-E\n\t<X>\n\tE", |v| format!("<{v}>\n")),
        ("cat >o <<E\n$(printf '%s.' X)\nE", |v| format!("{v}.\n")),
        (
            "printf '%s\\0' \"$(printf '%s' \"$(printf '%s.' X)\")\" >o",
            |v| format!("{v}.\0"),
        ),
        ("printf '%s\\0' \"$(printf '%s.' 'kX')\" >o", |v| {
            format!("k{v}.\0")
        }),
        (
            "printf '%s\\0' \"$(case a in (a) printf '%s.' X;; esac)\" >o",
            |v| format!("{v}.\0"),
        ),
        ("printf '%s\\0' \"$(cat <<E\nX.\nE\n)\" >o", |v| {
            format!("{v}.\0")
        }),
        ("n=$((1<<2)); printf '%s\\0' \"$n\"X >o", |v| {
            format!("4{v}\0")
        }),
        ("printf '%s\\0' \"$#X\" >o", |v| format!("0{v}\0")),
    ]
}

/// Contexts where no value can be data: every one is refused.
const REFUSED: &[&str] = &[
    "cat <<'E'\nX\nE",
    "echo $((X))",
    "((X))",
    "echo \"${HOME%X}\"",
    "echo ${HOME/X/}",
    "echo $X",
    "echo \\X",
    "cat <<X\nE\nX",
    "echo $'X'",
    "echo $((echo a) ) X",
];

/// The shells to run: sh, and dash and bash (also in POSIX mode) when installed.
fn shells() -> Vec<Vec<&'static str>> {
    let mut shells = vec![vec!["sh"]];
    let have = |name: &str| {
        Command::new(name)
            .args(["-c", ":"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if have("dash") {
        shells.push(vec!["dash"]);
    }
    if have("bash") {
        shells.push(vec!["bash"]);
        shells.push(vec!["bash", "--posix"]);
    }
    shells
}

#[test]
fn every_value_is_one_word_of_data_in_every_context() {
    let seed: u64 = std::env::var("AW_INTERP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1717);
    let mut rng = Rng(seed | 1);
    let contexts = contexts();
    let shells = shells();
    let dir = tempfile::tempdir().unwrap();
    // Files that a glob of a split value would find.
    for name in ["a", "E", "é"] {
        std::fs::write(dir.path().join(name), "").unwrap();
    }
    for text in REFUSED {
        let tpl = Template::parse(&text.replace('X', "${{ x }}")).unwrap();
        assert!(tpl.check_shell().is_err(), "{text:?} was not refused");
    }
    const VALUES: usize = 16;
    const ROUNDS: usize = 5;
    let mut cases = 0;
    for round in 0..ROUNDS {
        let values: Vec<String> = (0..VALUES).map(|_| value(&mut rng)).collect();
        let mut vars = Vars::new();
        let mut script = String::new();
        for (i, v) in values.iter().enumerate() {
            vars.set(&format!("x{i}"), v.as_str());
            for (k, (context, _)) in contexts.iter().enumerate() {
                let line = context
                    .replace('X', &format!("${{{{ x{i} }}}}"))
                    .replace(">o", &format!(">o{i}_{k}"));
                script.push_str(&line);
                script.push('\n');
            }
        }
        let cmd = Template::parse(&script)
            .unwrap()
            .render_shell(&vars)
            .unwrap_or_else(|e| panic!("seed {seed}, round {round}: {e}"));
        for shell in &shells {
            let out = Command::new(shell[0])
                .args(&shell[1..])
                .arg("-c")
                .arg(&cmd.text)
                .envs(cmd.env.iter().map(|(k, v)| (k, v)))
                .current_dir(dir.path())
                .output()
                .unwrap();
            for (i, v) in values.iter().enumerate() {
                for (k, (context, expect)) in contexts.iter().enumerate() {
                    let file = dir.path().join(format!("o{i}_{k}"));
                    let got = std::fs::read(&file).unwrap_or_default();
                    assert_eq!(
                        String::from_utf8_lossy(&got),
                        expect(v),
                        "seed {seed} (AW_INTERP_SEED), shell {shell:?}, value {v:?}, context {context:?}; stderr: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    std::fs::remove_file(&file).unwrap();
                    cases += 1;
                }
            }
            assert!(
                !dir.path().join("PWNED").exists(),
                "seed {seed}: a value ran"
            );
        }
    }
    assert_eq!(cases, ROUNDS * VALUES * contexts.len() * shells.len());
    assert!(!Path::new("PWNED").exists());
}

/// Stands for the value in an expected output.
const V: char = '\u{1}';

/// A random word in command context (an argument), nested up to `depth`, and what it
/// expands to (`V` for the value).
fn word(rng: &mut Rng, depth: usize) -> (String, String) {
    let kinds = if depth == 0 { 4 } else { 13 };
    let d = depth.saturating_sub(1);
    match rng.below(kinds) {
        0 => ("${{ x }}".into(), V.to_string()),
        1 => {
            let (t, e) = dq(rng, d, false);
            (format!("\"a{t}b\""), format!("a{e}b"))
        }
        2 => ("'a${{ x }}b'".into(), format!("a{V}b")),
        3 => ("${u-'a${{ x }}b'}".into(), format!("a{V}b")),
        4 => {
            let (t, e) = word(rng, d);
            (
                format!("\"$( (printf '%s' {t}); printf .)\""),
                format!("{e}."),
            )
        }
        5 => {
            let (t, e) = word(rng, d);
            (
                format!("\"$(f() {{ printf '%s' {t}; }}; f # ) (\n printf .)\""),
                format!("{e}."),
            )
        }
        6 => {
            let (t, e) = here_doc(rng, d, depth);
            let text = format!("cat <<-E{depth}\n\t{t}\n\tE{depth}\n");
            (format!("\"`{}`\"", backquoted(&text, true)), e)
        }
        7 => {
            let (t, e) = word(rng, d);
            (format!("\"$(printf '%s' {t}; printf .)\""), format!("{e}."))
        }
        8 => {
            let (t, e) = dq(rng, d, true);
            (format!("\"${{u:-{t}}}\""), e)
        }
        9 => {
            let (t, e) = word(rng, d);
            (format!("${{u:-{t}}}"), e)
        }
        10 => {
            let (t, e) = word(rng, d);
            let inner = backquoted(&format!("printf '%s' {t}; printf ."), true);
            (format!("\"`{inner}`\""), format!("{e}."))
        }
        11 => {
            let (t, e) = here_doc(rng, d, depth);
            (format!("\"$(cat <<E{depth}\n{t}\nE{depth}\n)\""), e)
        }
        _ => {
            let (t, e) = word(rng, d);
            (
                format!("\"$(case a in (a) printf '%s' {t};; esac; printf .)\""),
                format!("{e}."),
            )
        }
    }
}

/// Random text inside double quotes, and what it expands to. In a `${u:-...}` (`param`),
/// without a `'` or backquotes with `\"`, which shells read differently there.
fn dq(rng: &mut Rng, depth: usize, param: bool) -> (String, String) {
    let kinds = match (depth, param) {
        (0, _) => 2,
        (_, true) => 4,
        _ => 5,
    };
    let d = depth.saturating_sub(1);
    match rng.below(kinds) {
        0 => ("${{ x }}".into(), V.to_string()),
        1 if param => ("k${{ x }}".into(), format!("k{V}")),
        1 => ("k'${{ x }}'".into(), format!("k'{V}'")),
        2 => {
            let (t, e) = word(rng, d);
            (format!("$(printf '%s' {t}; printf .)"), format!("{e}."))
        }
        3 => {
            let (t, e) = dq(rng, d, true);
            (format!("${{u:-{t}}}"), e)
        }
        _ => {
            let (t, e) = word(rng, d);
            let inner = backquoted(&format!("printf '%s' {t}; printf ."), true);
            (format!("`{inner}`"), format!("{e}."))
        }
    }
}

/// A here-document body line (without its newline), and what the body prints less its
/// final newline.
fn here_doc(rng: &mut Rng, depth: usize, id: usize) -> (String, String) {
    if rng.below(2) == 0 {
        return ("<${{ x }}>".into(), format!("<{V}>"));
    }
    let (t, e) = word(rng, depth);
    let _ = id;
    (format!("$(printf '%s' {t}; printf .)"), format!("{e}."))
}

/// `text` written inside backquotes (within double quotes if `dq`).
fn backquoted(text: &str, dq: bool) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c == '\\' || c == '`' || (dq && c == '"') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[test]
fn nested_contexts_keep_every_value_one_word() {
    let seed: u64 = std::env::var("AW_INTERP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0e57_ed17);
    let mut rng = Rng(seed | 1);
    let shells = shells();
    let dir = tempfile::tempdir().unwrap();
    for name in ["a", "E", "é"] {
        std::fs::write(dir.path().join(name), "").unwrap();
    }
    const WORDS: usize = 40;
    const ROUNDS: usize = 8;
    let mut cases = 0;
    for round in 0..ROUNDS {
        let v = value(&mut rng);
        let mut vars = Vars::new();
        vars.set("x", v.as_str());
        let words: Vec<(String, String)> = (0..WORDS).map(|_| word(&mut rng, 3)).collect();
        let mut script = String::new();
        for (i, (w, _)) in words.iter().enumerate() {
            script.push_str(&format!("printf '%s\\0' {w} >o{i}\n"));
        }
        let cmd = Template::parse(&script)
            .unwrap()
            .render_shell(&vars)
            .unwrap_or_else(|e| panic!("seed {seed}, round {round}: {e}\n{script}"));
        for shell in &shells {
            let out = Command::new(shell[0])
                .args(&shell[1..])
                .arg("-c")
                .arg(&cmd.text)
                .envs(cmd.env.iter().map(|(k, v)| (k, v)))
                .current_dir(dir.path())
                .output()
                .unwrap();
            for (i, (w, e)) in words.iter().enumerate() {
                let file = dir.path().join(format!("o{i}"));
                let got = std::fs::read(&file).unwrap_or_default();
                let expect = format!("{}\0", e.replace(V, &v));
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    expect,
                    "seed {seed} (AW_INTERP_SEED), shell {shell:?}, value {v:?}, word {w:?}; stderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                std::fs::remove_file(&file).unwrap();
                cases += 1;
            }
            assert!(
                !dir.path().join("PWNED").exists(),
                "seed {seed}: a value ran"
            );
        }
    }
    assert_eq!(cases, ROUNDS * WORDS * shells.len());
}
