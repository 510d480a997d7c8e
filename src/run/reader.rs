//! Typed reading of a positioned YAML tree: every mismatch becomes a diagnostic at the
//! offending key or value, prefixed with its place in the structure (`agents.alice.max_runs`),
//! and reading goes on so that one check reports every problem.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::diagnostic::{Diagnostics, Pos, Spanned};
use super::interpolate::{Template, TemplateError};
use super::yaml::{Document, Node};
use crate::suggest::suggestion;

/// `path.key`, or `key` at the top.
pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `path: message`, or `message` at the top.
fn at(path: &str, message: &str) -> String {
    if path.is_empty() {
        message.to_string()
    } else {
        format!("{path}: {message}")
    }
}

/// The entries of a mapping whose keys were checked: no duplicates, only allowed keys.
#[derive(Debug, Default)]
pub struct Fields<'n> {
    entries: Vec<(Spanned<&'n str>, &'n Node)>,
}

impl<'n> Fields<'n> {
    pub fn get(&self, key: &str) -> Option<&'n Node> {
        self.entry(key).map(|(_, v)| v)
    }

    /// The key itself (for its position) and its value.
    pub fn entry(&self, key: &str) -> Option<(Spanned<&'n str>, &'n Node)> {
        self.entries.iter().find(|(k, _)| k.value == key).cloned()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, (Spanned<&'n str>, &'n Node)> {
        self.entries.iter()
    }
}

/// A `${{ name }}` reference found while reading, checked once every variable is known.
#[derive(Debug, Clone)]
pub struct Reference {
    pub name: String,
    /// Where in the structure (`kickoff`, `setup[1].shell`).
    pub path: String,
    pub pos: Pos,
    /// Set when the reference is in a file other than the workflow file (a prompt file).
    pub file: Option<PathBuf>,
    /// Only the outputs of setup tasks before this index are defined for it (`None`: all).
    pub before_task: Option<usize>,
}

/// Where references in a template may look for setup outputs, and how it is used.
#[derive(Debug, Clone, Copy)]
pub struct Use {
    pub before_task: Option<usize>,
    /// A shell command: refuse what a shell rendering would refuse.
    pub shell: bool,
}

impl Use {
    /// Plain text that sees every setup output.
    pub const TEXT: Use = Use {
        before_task: None,
        shell: false,
    };
}

/// A shell variable (`$name`, `${name}`) written in a shell command, checked once every
/// task output is known: one named like an output is likely meant as `${{ name }}`.
#[derive(Debug, Clone)]
pub struct ShellVar {
    pub name: String,
    /// As written (`$diff`, `${diff}`).
    pub written: String,
    /// Where in the structure (`setup[1].shell`).
    pub path: String,
    pub pos: Pos,
}

/// The shell variables written in `text` (not `${{ ... }}`): each name, as written, and its
/// byte offset.
fn shell_vars(text: &str) -> Vec<(String, String, usize)> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (i, _) in text.match_indices('$') {
        let rest = &text[i + 1..];
        let (braced, body) = match rest.strip_prefix('{') {
            Some(b) if b.starts_with('{') => continue,
            Some(b) => (true, b),
            None => (false, rest),
        };
        let len = body.find(|c: char| !is_name(c)).unwrap_or(body.len());
        let name = &body[..len];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        if braced && !body[len..].starts_with('}') {
            continue;
        }
        let written = if braced {
            format!("${{{name}}}")
        } else {
            format!("${name}")
        };
        found.push((name.to_string(), written, i));
    }
    found
}

pub struct Reader<'d> {
    pub doc: &'d Document,
    pub diags: Diagnostics,
    pub refs: Vec<Reference>,
    pub shell_vars: Vec<ShellVar>,
}

impl<'d> Reader<'d> {
    pub fn new(doc: &'d Document, file: &Path) -> Reader<'d> {
        Reader {
            doc,
            diags: Diagnostics::new(file),
            refs: Vec::new(),
            shell_vars: Vec::new(),
        }
    }

    pub fn error(&mut self, pos: Pos, path: &str, message: &str) {
        self.diags.error(pos, at(path, message));
    }

    /// The entries of a mapping in file order; a duplicate key is an error and is dropped.
    pub fn entries<'n>(&mut self, node: &'n Node, path: &str) -> Option<Fields<'n>> {
        let pairs = node
            .map()
            .map_err(|m| self.error(node.pos, path, &m))
            .ok()?;
        let mut fields = Fields::default();
        // The line of each key seen: a mapping of many keys (10,000 agents) costs what each
        // key does, not what each pair of keys does.
        let mut seen = std::collections::HashMap::with_capacity(pairs.len());
        for (key, value) in pairs {
            let Some(name) = key.scalar_text() else {
                self.error(key.pos, path, "a key must be a name, not a list or mapping");
                continue;
            };
            if let Some(line) = seen.get(name) {
                let msg = format!("duplicate key '{name}' (first at line {line})");
                self.error(key.pos, path, &msg);
                continue;
            }
            seen.insert(name, key.pos.line);
            fields.entries.push((Spanned::new(name, key.pos), value));
        }
        Some(fields)
    }

    /// Like [`Reader::entries`], and a key not in `allowed` is an error.
    pub fn fields<'n>(
        &mut self,
        node: &'n Node,
        path: &str,
        allowed: &[&str],
    ) -> Option<Fields<'n>> {
        let mut fields = self.entries(node, path)?;
        let mut unknown = Vec::new();
        fields.entries.retain(|(k, _)| {
            let known = allowed.contains(&k.value);
            if !known {
                unknown.push(k.clone());
            }
            known
        });
        for key in unknown {
            let msg = if key.value == "<<" {
                "merge keys ('<<') are not supported: write the keys out".to_string()
            } else {
                format!(
                    "unknown key '{}'{}",
                    crate::names::sanitize(key.value),
                    suggestion(key.value, allowed.iter().copied())
                )
            };
            self.error(key.pos, path, &msg);
        }
        Some(fields)
    }

    pub fn string(&mut self, node: &Node, path: &str) -> Option<Spanned<String>> {
        match node.str() {
            Ok(s) => Some(Spanned::new(s.to_string(), node.pos)),
            Err(m) => {
                self.error(node.pos, path, &m);
                None
            }
        }
    }

    /// A string that is not empty.
    pub fn name(&mut self, node: &Node, path: &str) -> Option<Spanned<String>> {
        let s = self.string(node, path)?;
        if s.trim().is_empty() {
            self.error(node.pos, path, "must not be empty");
            return None;
        }
        Some(s)
    }

    /// A whole number of at least `min`.
    pub fn whole(&mut self, node: &Node, path: &str, min: u64) -> Option<Spanned<u64>> {
        let n = node
            .whole()
            .map_err(|m| self.error(node.pos, path, &m))
            .ok()?;
        match u64::try_from(n) {
            Ok(n) if n >= min => Some(Spanned::new(n, node.pos)),
            _ => {
                self.error(node.pos, path, &format!("must be at least {min}"));
                None
            }
        }
    }

    /// One of the words `names`, as `from_name` reads it; another is refused with the word
    /// it is closest to.
    pub fn keyword<T>(
        &mut self,
        node: &Node,
        path: &str,
        from_name: fn(&str) -> Option<T>,
        names: &[&str],
    ) -> Option<Spanned<T>> {
        let text = node.scalar_text();
        if let Some(v) = text.and_then(from_name) {
            return Some(Spanned::new(v, node.pos));
        }
        let found = match text {
            Some(t) => format!(
                "'{}'{}",
                crate::names::sanitize(t),
                suggestion(t, names.iter().copied())
            ),
            None => node.type_name().to_string(),
        };
        let msg = format!("expected {}, found {found}", names.join(" or "));
        self.error(node.pos, path, &msg);
        None
    }

    pub fn boolean(&mut self, node: &Node, path: &str) -> Option<bool> {
        node.boolean()
            .map_err(|m| self.error(node.pos, path, &m))
            .ok()
    }

    /// A list of non-empty strings.
    pub fn strings(&mut self, node: &Node, path: &str) -> Option<Vec<Spanned<String>>> {
        let items = node
            .seq()
            .map_err(|m| self.error(node.pos, path, &m))
            .ok()?;
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            out.extend(self.name(item, &format!("{path}[{i}]")));
        }
        Some(out)
    }

    /// A duration: seconds as a number, or a string for [`parse_duration`]; more than zero.
    pub fn duration(&mut self, node: &Node, path: &str) -> Option<Spanned<Duration>> {
        let parsed = match (node.number(), node.str()) {
            (Some(secs), _) => Duration::try_from_secs_f64(secs)
                .map_err(|_| duration_error(&secs.to_string()))
                .and_then(crate::time::check),
            (None, Ok(text)) => parse_duration(text),
            (None, Err(_)) => Err(format!(
                "expected a duration (90, \"90s\", \"5m\", \"1h\"), found {}",
                node.type_name()
            )),
        };
        match parsed {
            Ok(d) if !d.is_zero() => Some(Spanned::new(d, node.pos)),
            Ok(_) => {
                self.error(node.pos, path, "must be more than zero");
                None
            }
            Err(m) => {
                self.error(node.pos, path, &m);
                None
            }
        }
    }

    /// A string holding a template; its references are recorded for the final check.
    pub fn template(&mut self, node: &Node, path: &str, how: Use) -> Option<Spanned<Template>> {
        let text = self.string(node, path)?;
        self.scalar_template(node, &text, path, how)
    }

    /// A template from the text of scalar `node` (which need not be a string).
    pub fn scalar_template(
        &mut self,
        node: &Node,
        text: &str,
        path: &str,
        how: Use,
    ) -> Option<Spanned<Template>> {
        let doc = self.doc;
        let locate = |offset: usize| doc.locate(node, "${{", text[..offset].matches("${{").count());
        let template = self.parse_template(text, path, how, None, &locate)?;
        if how.shell {
            for (name, written, offset) in shell_vars(text) {
                let pos = doc.locate(node, &written, text[..offset].matches(&written).count());
                let path = path.to_string();
                self.shell_vars.push(ShellVar {
                    name,
                    written,
                    path,
                    pos,
                });
            }
        }
        Some(Spanned::new(template, node.pos))
    }

    /// A template read from a separate file; positions are in that file.
    pub fn file_template(
        &mut self,
        file: &Path,
        text: &str,
        path: &str,
        how: Use,
    ) -> Option<Template> {
        let locate = |offset: usize| Pos::START.advance(&text[..offset]);
        self.parse_template(text, path, how, Some(file), &locate)
    }

    fn parse_template(
        &mut self,
        text: &str,
        path: &str,
        how: Use,
        file: Option<&Path>,
        locate: &dyn Fn(usize) -> Pos,
    ) -> Option<Template> {
        let (template, mut errors) = Template::parse_all(text);
        if errors.is_empty() && how.shell {
            errors.extend(template.check_shell().err());
        }
        for TemplateError { offset, message } in &errors {
            self.error_in(file, locate(*offset), path, message);
        }
        for (name, offset) in template.vars() {
            self.refs.push(Reference {
                name: name.to_string(),
                path: path.to_string(),
                pos: locate(offset),
                file: file.map(Path::to_path_buf),
                before_task: how.before_task,
            });
        }
        errors.is_empty().then_some(template)
    }

    /// An error in `file`, or in the workflow file when `None`.
    pub fn error_in(&mut self, file: Option<&Path>, pos: Pos, path: &str, message: &str) {
        match file {
            Some(f) => self.diags.error_in(f, pos, at(path, message)),
            None => self.error(pos, path, message),
        }
    }
}

fn duration_error(text: &str) -> String {
    format!(
        "invalid duration '{}': expected seconds, or a number with s, m or h (90s, 5m, 1h)",
        crate::names::sanitize(text)
    )
}

/// Parse a duration: a number of seconds (`90`, `1.5`), or a number followed by `s`, `m`
/// or `h` (`90s`, `5m`, `0.5h`). Surrounding blanks are ignored; zero is accepted, more than
/// [`MAX_DURATION`](crate::time::MAX_DURATION) is not.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit) = match t.strip_suffix(['s', 'm', 'h']) {
        Some(n) => (n, &t[n.len()..]),
        None => (t, "s"),
    };
    let scale = match unit {
        "m" => 60.0,
        "h" => 3600.0,
        _ => 1.0,
    };
    let well_formed = !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit() || c == '.')
        && number.chars().any(|c| c.is_ascii_digit())
        && number.matches('.').count() <= 1;
    let secs: f64 = match number.parse() {
        Ok(n) if well_formed => n,
        _ => return Err(duration_error(text)),
    };
    Duration::try_from_secs_f64(secs * scale)
        .map_err(|_| duration_error(text))
        .and_then(crate::time::check)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ok = |t: &str| parse_duration(t).unwrap();
        assert_eq!(ok("90"), Duration::from_secs(90));
        assert_eq!(ok("90s"), Duration::from_secs(90));
        assert_eq!(ok(" 5m "), Duration::from_secs(300));
        assert_eq!(ok("1h"), Duration::from_secs(3600));
        assert_eq!(ok("0.5h"), Duration::from_secs(1800));
        assert_eq!(ok("1.5"), Duration::from_millis(1500));
        assert_eq!(ok("0"), Duration::ZERO);
        for bad in [
            "", "s", "5x", "-1", "1e3", "1.2.3", "5 m", "1h30m", "inf", "5ms",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.starts_with("invalid duration"), "{bad}: {err}");
        }
        assert!(parse_duration("99999999999999999999999h").is_err());
        for long in ["10000000000000000000", "8761h", "31536001"] {
            let err = parse_duration(long).unwrap_err();
            assert!(err.contains("longest duration"), "{long}: {err}");
        }
        assert_eq!(ok("8760h"), crate::time::MAX_DURATION);
    }
}
