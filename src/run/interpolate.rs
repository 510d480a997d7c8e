//! `${{ name }}` variables in workflow text.
//!
//! A [`Template`] is parsed once into literal text and variable references, each with its
//! byte offset in the text (so a check can point at it). Rules:
//!
//! - A reference is `${{`, optional whitespace (newlines too), a name, optional whitespace,
//!   `}}`. Names are dot-separated segments of `[A-Za-z_][A-Za-z0-9_-]*`.
//! - There is no escape: every `${{` starts a reference, and one without a closing `}}` is an
//!   error. To put the characters `${{` in a text, pass them in a variable
//!   (`--var open='${{'`); a value is never scanned for references again.
//! - The variables ([`Vars`]): setup outputs (by their `as` name) and `--var NAME=VALUE`
//!   definitions, both named by [`check_var_name`]; `env.NAME`, the runner's own environment;
//!   and the built-ins [`BUILTINS`]. A name used but not defined is an error that names it.
//!
//! In plain text (kickoff, system prompt) a value is put in verbatim ([`Template::render`]).
//!
//! In a shell command (setup `shell`, task `shell`) a value never becomes part of the
//! command text ([`Template::render_shell`]): each distinct variable is passed in an
//! environment variable `AW_VAR_1`, `AW_VAR_2`, ... and the reference is replaced by an
//! expansion of it that the shell keeps as one verbatim word, chosen by the context the shell
//! is in where the reference stands, as [`super::shell`] reads it (nested contexts included:
//! `$(...)` and backquotes open commands again, inside double quotes too):
//!
//! | where                                     | written              | becomes                    |
//! |-------------------------------------------|----------------------|----------------------------|
//! | in commands, `${x:-...}` outside quotes    | `echo ${{ x }}`      | `echo "${AW_VAR_1}"`       |
//! | in double quotes, `"${x:-...}"`           | `echo "a${{ x }}b"`  | `echo "a${AW_VAR_1}b"`     |
//! | in single quotes                          | `echo 'a${{ x }}b'`  | `echo 'a'"${AW_VAR_1}"'b'` |
//! | in a here-document (`<<E`)                | `${{ x }}`           | `${AW_VAR_1}`              |
//! | in `"$(...)"`, in backquotes              | `"$(ls ${{ x }})"`   | `"$(ls "${AW_VAR_1}")"`    |
//!
//! Whatever the form, the shell only ever expands the variable: a value's `$(...)`,
//! backquotes and quotes are never run or parsed, and a value is never split or globbed.
//! Refused (a [`TemplateError`] at the reference, so `--check` reports it), where the shell
//! would not expand the variable as data: right after a backslash or a `$`; in a
//! here-document whose delimiter is quoted (`<<'E'`), or in a delimiter; in arithmetic
//! (`$((...))`, `((...))`, `$[...]`); in a `${x#...}` pattern or any `${...}` form other
//! than `${x}`, `${x-...}`, `${x=...}`, `${x?...}`, `${x+...}` (with or without `:`); in
//! `$'...'`; and anywhere after something the shells read differently or the scanner does
//! not know (see [`super::shell`]).

use std::collections::BTreeMap;

use super::shell::{self, Place};
use crate::error::{Error, Result};
use crate::names::sanitize;
use crate::suggest::suggestion;

/// The namespaces that setup outputs and `--var` names may not take.
pub const NAMESPACES: [&str; 3] = ["env", "workflow", "context"];

/// The variables the runner defines (`context.*` only with a file context).
pub const BUILTINS: [&str; 4] = [
    "workflow.name",
    "workflow.instance",
    "context.channel",
    "context.document",
];

/// Prefix of the environment variables that carry values into a shell command.
pub const SHELL_VAR_PREFIX: &str = "AW_VAR_";

/// Is `s` one segment of a variable name: `[A-Za-z_][A-Za-z0-9_-]*`?
fn is_segment(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Is `name` well formed as a reference (`diff`, `env.HOME`, `workflow.name`)?
pub fn is_reference(name: &str) -> bool {
    name.split('.').all(is_segment)
}

/// Check a name that a setup task (`as`) or `--var` defines: one segment, not a namespace.
pub fn check_var_name(name: &str) -> Result<(), String> {
    if NAMESPACES.contains(&name) {
        Err(format!(
            "'{name}' is reserved (it names the {name}.* variables)"
        ))
    } else if is_segment(name) {
        Ok(())
    } else {
        Err(format!(
            "invalid variable name '{}': expected [A-Za-z_][A-Za-z0-9_-]*",
            sanitize(name)
        ))
    }
}

/// Variable values by full name (`diff`, `env.HOME`, `workflow.name`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vars {
    values: BTreeMap<String, String>,
}

impl Vars {
    pub fn new() -> Vars {
        Vars::default()
    }

    /// `env.NAME` for each variable of this process's environment (those that are UTF-8).
    pub fn from_process_env() -> Vars {
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        let mut vars = Vars::new();
        vars.set_env(env);
        vars
    }

    /// Define `env.NAME` for each `(NAME, value)`.
    pub fn set_env(&mut self, env: impl IntoIterator<Item = (String, String)>) {
        for (k, v) in env {
            self.values.insert(format!("env.{k}"), v);
        }
    }

    /// Define (or redefine) a variable by its full name.
    pub fn set(&mut self, name: &str, value: impl Into<String>) {
        self.values.insert(name.to_string(), value.into());
    }

    /// Define a variable from a `--var NAME=VALUE` argument.
    pub fn define(&mut self, def: &str) -> Result<()> {
        let bad = |why: String| Error::Usage(format!("--var '{}': {why}", sanitize(def)));
        let (name, value) = def
            .split_once('=')
            .ok_or_else(|| bad("expected NAME=VALUE".into()))?;
        check_var_name(name).map_err(bad)?;
        self.set(name, value);
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// Every defined name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// The value of `name`, or why there is none: `undefined variable 'x'`, with a likely
    /// intended name when one is close.
    pub fn lookup(&self, name: &str) -> Result<&str, String> {
        if let Some(v) = self.get(name) {
            return Ok(v);
        }
        let name = sanitize(name);
        Err(match name.strip_prefix("env.") {
            Some(env) => {
                format!("undefined variable '{name}': {env} is not set in the environment")
            }
            None => format!(
                "undefined variable '{name}'{}",
                suggestion(&name, self.names())
            ),
        })
    }
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Text(String),
    /// A reference: the variable's name and the byte offset of its `${{` in the text.
    Var {
        name: String,
        offset: usize,
    },
}

/// A text with `${{ name }}` references, parsed. The default is the empty text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Template {
    text: String,
    parts: Vec<Part>,
}

/// Why a template was refused, and the byte offset of the `${{` concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub offset: usize,
    pub message: String,
}

/// A shell command ready for `sh -c TEXT` with `env` added to its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellCommand {
    pub text: String,
    pub env: Vec<(String, String)>,
}

impl Template {
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let (template, errors) = Template::parse_all(text);
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(template),
        }
    }

    /// Parse on past bad references: the template without them, and every error.
    pub fn parse_all(text: &str) -> (Template, Vec<TemplateError>) {
        let mut parts = Vec::new();
        let mut errors = Vec::new();
        let mut rest = 0;
        while let Some(found) = text[rest..].find("${{") {
            let offset = rest + found;
            if offset > rest {
                parts.push(Part::Text(text[rest..offset].to_string()));
            }
            let (name, end) = reference(text, offset);
            match name {
                Ok(name) => parts.push(Part::Var { name, offset }),
                Err(e) => errors.push(e),
            }
            rest = end;
        }
        if rest < text.len() {
            parts.push(Part::Text(text[rest..].to_string()));
        }
        let template = Template {
            text: text.to_string(),
            parts,
        };
        (template, errors)
    }

    /// The text as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Each reference: name and byte offset, in order.
    pub fn vars(&self) -> impl Iterator<Item = (&str, usize)> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var { name, offset } => Some((name.as_str(), *offset)),
            Part::Text(_) => None,
        })
    }

    /// The text with each reference replaced by its value, verbatim.
    pub fn render(&self, vars: &Vars) -> Result<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Var { name, .. } => out.push_str(vars.lookup(name).map_err(Error::Invalid)?),
            }
        }
        Ok(out)
    }

    /// Refuse what [`Template::render_shell`] would refuse whatever the values.
    pub fn check_shell(&self) -> Result<(), TemplateError> {
        self.shell_text().map(|_| ())
    }

    /// The command text, with references turned into quoted expansions of `AW_VAR_n`, and
    /// the values to pass in those variables (see the module documentation).
    pub fn render_shell(&self, vars: &Vars) -> Result<ShellCommand> {
        let (text, names) = self.shell_text().map_err(|e| Error::Invalid(e.message))?;
        let mut env = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let value = vars.lookup(name).map_err(Error::Invalid)?;
            if value.contains('\0') {
                return Err(Error::invalid(format!(
                    "variable '{name}' holds a NUL byte, which cannot be passed to a shell"
                )));
            }
            env.push((shell_var(i), value.to_string()));
        }
        Ok(ShellCommand { text, env })
    }

    /// The command text and the variable behind each `AW_VAR_n` (n = index + 1).
    fn shell_text(&self) -> Result<(String, Vec<&str>), TemplateError> {
        let chars: Vec<Option<char>> = self
            .parts
            .iter()
            .flat_map(|p| match p {
                Part::Text(t) => t.chars().map(Some).collect(),
                Part::Var { .. } => vec![None],
            })
            .collect();
        let mut places = shell::places(&chars).into_iter();
        let mut out = String::new();
        let mut names: Vec<&str> = Vec::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Var { name, offset } => {
                    let index = names.iter().position(|n| n == name).unwrap_or_else(|| {
                        names.push(name);
                        names.len() - 1
                    });
                    // A reference the scanner read as part of a word it took apart (a
                    // here-document delimiter) has no place: refused, never a panic.
                    let Some(place) = places.next() else {
                        return Err(TemplateError {
                            offset: *offset,
                            message: format!(
                                "'${{{{ {name} }}}}' is where the shell would not expand it"
                            ),
                        });
                    };
                    out.push_str(&expansion(place, &shell_var(index), name, *offset)?);
                }
            }
        }
        Ok((out, names))
    }
}

fn shell_var(index: usize) -> String {
    format!("{SHELL_VAR_PREFIX}{}", index + 1)
}

/// Read the reference whose `${{` is at `open`: its name, and the offset just past its `}}`
/// (the end of the text when there is none).
fn reference(text: &str, open: usize) -> (Result<String, TemplateError>, usize) {
    let err = |message: String| {
        Err(TemplateError {
            offset: open,
            message,
        })
    };
    let inner = open + 3;
    let Some(close) = text[inner..].find("}}") else {
        return (err("'${{' without a closing '}}'".into()), text.len());
    };
    let end = inner + close + 2;
    let name = text[inner..inner + close].trim();
    if name.is_empty() {
        return (err("empty variable reference '${{ }}'".into()), end);
    }
    if !is_reference(name) {
        let msg = format!(
            "invalid variable name '{}' in '${{{{ }}}}': expected names like diff, env.HOME or workflow.name",
            sanitize(name)
        );
        return (err(msg), end);
    }
    (Ok(name.to_string()), end)
}

/// The expansion of `$var` that the shell keeps as one verbatim word at `place`.
fn expansion(place: Place, var: &str, name: &str, offset: usize) -> Result<String, TemplateError> {
    match place {
        Place::Double => Ok(format!("${{{var}}}")),
        Place::Single => Ok(format!("'\"${{{var}}}\"'")),
        Place::Unquoted => Ok(format!("\"${{{var}}}\"")),
        Place::Refused(why) => Err(TemplateError {
            offset,
            message: format!("'${{{{ {name} }}}}' {why}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    fn t(text: &str) -> Template {
        Template::parse(text).unwrap()
    }

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        let mut v = Vars::new();
        for (k, val) in pairs {
            v.set(k, *val);
        }
        v
    }

    #[test]
    fn parses_into_parts_with_offsets() {
        let tpl = t("a ${{ diff }} b ${{env.HOME}}${{\n workflow.name\n}}");
        let refs: Vec<(&str, usize)> = tpl.vars().collect();
        assert_eq!(refs, [("diff", 2), ("env.HOME", 16), ("workflow.name", 29)]);
        assert_eq!(tpl.parts()[0], Part::Text("a ".into()));
        assert_eq!(tpl.parts().len(), 5);
        assert_eq!(t("plain").parts(), [Part::Text("plain".into())]);
        assert!(t("").parts().is_empty());
        // Single braces and a lone `$` are text.
        assert_eq!(t("${x} ${ {y}} $").vars().count(), 0);
    }

    #[test]
    fn refuses_bad_references() {
        let err = |text: &str| Template::parse(text).unwrap_err();
        assert_eq!(
            err("ab ${{ diff"),
            TemplateError {
                offset: 3,
                message: "'${{' without a closing '}}'".into()
            }
        );
        assert_eq!(err("${{ }}").message, "empty variable reference '${{ }}'");
        let bad = err("x ${{ a b }}");
        assert_eq!(bad.offset, 2);
        assert!(
            bad.message.starts_with("invalid variable name 'a b'"),
            "{}",
            bad.message
        );
        assert!(Template::parse("${{ 1x }}").is_err());
        assert!(Template::parse("${{ a..b }}").is_err());
        assert!(Template::parse("${{ a ${{ b }}").is_err());
        // Parsing goes on past a bad reference.
        let (tpl, errors) = Template::parse_all("${{ a b }} ${{ ok }} ${{ }} ${{ end");
        assert_eq!(tpl.vars().collect::<Vec<_>>(), [("ok", 11)]);
        let offsets: Vec<usize> = errors.iter().map(|e| e.offset).collect();
        assert_eq!(offsets, [0, 21, 28]);
    }

    #[test]
    fn renders_values_verbatim_once() {
        let v = vars(&[("x", "${{ y }} $(id) \\n"), ("y", "no")]);
        assert_eq!(t("<${{ x }}>").render(&v).unwrap(), "<${{ y }} $(id) \\n>");
        let err = t("${{ nope }}").render(&v).unwrap_err();
        assert_eq!(err.to_string(), "undefined variable 'nope'");
        assert_eq!(err.exit_code(), crate::error::exit::DATAERR);
    }

    #[test]
    fn undefined_names_are_explained() {
        let mut v = vars(&[("diff", "")]);
        v.set_env([("HOME".to_string(), "/h".to_string())]);
        assert_eq!(v.lookup("env.HOME"), Ok("/h"));
        assert_eq!(
            v.lookup("env.NOPE").unwrap_err(),
            "undefined variable 'env.NOPE': NOPE is not set in the environment"
        );
        assert_eq!(
            v.lookup("dif").unwrap_err(),
            "undefined variable 'dif' (did you mean 'diff'?)"
        );
    }

    #[test]
    fn var_definitions() {
        let mut v = Vars::new();
        v.define("a=b=c").unwrap();
        v.define("empty=").unwrap();
        assert_eq!(v.get("a"), Some("b=c"));
        assert_eq!(v.get("empty"), Some(""));
        for bad in ["novalue", "=x", "env=1", "a.b=1", "9x=1"] {
            let err = v.define(bad).unwrap_err();
            assert_eq!(err.exit_code(), crate::error::exit::USAGE, "{bad}");
            assert!(
                err.to_string().starts_with(&format!("--var '{bad}': ")),
                "{err}"
            );
        }
        assert!(check_var_name("workflow").unwrap_err().contains("reserved"));
        assert!(check_var_name("my-var_2").is_ok());
    }

    #[test]
    fn shell_forms_follow_the_quoting() {
        let sh = |text: &str| {
            t(text)
                .render_shell(&vars(&[("x", "v"), ("y", "w")]))
                .unwrap()
        };
        assert_eq!(sh("echo ${{ x }}").text, r#"echo "${AW_VAR_1}""#);
        assert_eq!(sh(r#"echo "a${{x}}b""#).text, r#"echo "a${AW_VAR_1}b""#);
        assert_eq!(sh("echo 'a${{ x }}b'").text, r#"echo 'a'"${AW_VAR_1}"'b'"#);
        assert_eq!(sh(r#"echo "'" ${{ x }}"#).text, r#"echo "'" "${AW_VAR_1}""#);
        assert_eq!(sh(r#"echo \' ${{ x }}"#).text, r#"echo \' "${AW_VAR_1}""#);
        assert_eq!(
            sh("# it's\necho ${{ x }}").text,
            "# it's\necho \"${AW_VAR_1}\""
        );
        assert_eq!(sh("a#'b ${{ x }}").text, r#"a#'b '"${AW_VAR_1}"'"#);
        // One variable per distinct name.
        let cmd = sh("${{ x }} ${{ y }} ${{ x }}");
        assert_eq!(cmd.text, r#""${AW_VAR_1}" "${AW_VAR_2}" "${AW_VAR_1}""#);
        assert_eq!(
            cmd.env,
            [
                ("AW_VAR_1".to_string(), "v".to_string()),
                ("AW_VAR_2".to_string(), "w".to_string())
            ]
        );
    }

    #[test]
    fn shell_refusals() {
        let err = t(r#"echo \${{ x }}"#).check_shell().unwrap_err();
        assert_eq!(err.offset, 6);
        assert_eq!(
            err.message,
            "'${{ x }}' follows a backslash that would escape its expansion; remove the backslash"
        );
        let quoted = t("cat <<'E'\n${{ x }}\nE\n").check_shell().unwrap_err();
        assert_eq!(quoted.offset, 10);
        assert!(
            quoted.message.contains("quoted delimiter"),
            "{}",
            quoted.message
        );
        assert!(t(r#"echo "\${{ x }}""#).check_shell().is_err());
        // In single quotes a backslash is text.
        assert!(t(r#"echo '\${{ x }}'"#).check_shell().is_ok());
        let undefined = t("echo ${{ z }}").render_shell(&Vars::new()).unwrap_err();
        assert_eq!(undefined.to_string(), "undefined variable 'z'");
        let nul = t("echo ${{ x }}").render_shell(&vars(&[("x", "a\0b")]));
        assert!(nul.unwrap_err().to_string().contains("NUL"));
    }

    /// Run `sh -c` on `template` with `x` set to `value`; return stdout.
    fn run_sh(dir: &std::path::Path, template: &str, value: &str) -> Vec<u8> {
        let cmd = t(template).render_shell(&vars(&[("x", value)])).unwrap();
        let out = Command::new("sh")
            .arg("-c")
            .arg(&cmd.text)
            .envs(cmd.env)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{template}: {out:?}");
        out.stdout
    }

    #[test]
    fn shell_values_run_nothing_and_come_out_verbatim() {
        let dir = tempfile::tempdir().unwrap();
        let touched = dir.path().join("touched");
        let t = touched.display();
        let values = [
            format!("$(touch {t})"),
            format!("`touch {t}`"),
            format!("'; touch {t}; echo '"),
            format!("\"; touch {t}; echo \""),
            "'; rm -rf x".to_string(),
            "\"".to_string(),
            "\\".to_string(),
            "a\\".to_string(),
            "two\nlines\n".to_string(),
            "${{ y }}".to_string(),
            "$HOME ${HOME} * ?".to_string(),
            " spaced  out ".to_string(),
            String::new(),
        ];
        // Each template, and whether it wraps the value in `a` ... `b`.
        let templates = [
            (r#"printf '%s' "${{ x }}""#, false),
            (r#"printf '%s' ${{ x }}"#, false),
            (r#"printf '%s' 'a'${{ x }}'b'"#, true),
            (r#"printf '%s' 'a${{ x }}b'"#, true),
            (r#"printf '%s' "a${{x}}b""#, true),
        ];
        for value in &values {
            for (template, wrapped) in templates {
                let out = run_sh(dir.path(), template, value);
                let expect = if wrapped {
                    format!("a{value}b")
                } else {
                    value.clone()
                };
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    expect,
                    "{template} with {value:?}"
                );
            }
        }
        for value in &values {
            let out = run_sh(dir.path(), "cat <<EOF\n${{ x }}\nEOF\n", value);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                format!("{value}\n"),
                "here-document with {value:?}"
            );
            let out = run_sh(
                dir.path(),
                "cat <<-EOF; printf '%s' ${{ x }}\n\t<${{x}}>\n\tEOF\n",
                value,
            );
            assert_eq!(
                String::from_utf8(out).unwrap(),
                format!("<{value}>\n{value}"),
                "<<- with {value:?}"
            );
        }
        assert!(!touched.exists(), "a value was run as a command");
    }
}
