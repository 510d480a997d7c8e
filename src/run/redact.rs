//! Secrets that aw never stores or echoes: the values of environment variables whose names
//! say they are secret ([`is_secret_name`]: an API key, a token, a password, ...), those an
//! agent's `secrets:` names, and credentials written inside a URL (`https://user:pass@host`,
//! `?token=...`); of an agent's own environment (`env`) and of aw-run's. Ordinary values (a
//! greeting, a mode, a base URL) are not secrets and are shown as written. Whatever aw writes
//! or prints of a run — transcripts, failure reasons, the reply it posts for an agent, the
//! iteration records, commit messages and summaries of `--iter`, the entries it echoes (and
//! so the log of `--detach`) — goes through [`redact`] first.
//!
//! A text cut to a limit can end with the head of a secret whose rest was cut: [`redact_cut`]
//! also drops such a head, so that no part of a secret is kept.

use super::capture::Capture;

/// Shortest value taken for a secret: shorter ones would blank out ordinary words.
pub const MIN_SECRET: usize = 4;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Parts of an environment variable's name that make its value a secret (any case), found
/// anywhere in the name (`APIKEY`, `GH_TOKEN`, `DB_PASSWORD`).
pub const MARKS: [&str; 7] = [
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "PRIVATE",
];

/// Words of an environment variable's name (between `_`) that make its value a secret (any
/// case): whole words only, so that `GIT_AUTHOR_NAME` is not one.
pub const WORDS: [&str; 6] = ["AUTH", "OAUTH", "AUTHORIZATION", "PASS", "COOKIE", "PAT"];

/// Whether a variable's name says its value is secret: it contains one of [`MARKS`], or one
/// of its words is one of [`WORDS`].
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    MARKS.iter().any(|m| n.contains(m)) || n.split('_').any(|w| WORDS.contains(&w))
}

/// The credentials written inside a URL in `value`: the user information before `@`
/// (`user:password` gives the password, a lone user is taken for a token), and the values of
/// query parameters whose names say they are secret (`?api_key=...`).
pub fn url_credentials(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(at) = rest.find("://") {
        let after = &rest[at + 3..];
        let end = after
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '>')
            .unwrap_or(after.len());
        let url = &after[..end];
        let authority = &url[..url.find(['/', '?', '#']).unwrap_or(url.len())];
        if let Some(at) = authority.rfind('@') {
            let info = &authority[..at];
            match info.split_once(':') {
                Some((_, pass)) => out.push(pass.to_string()),
                None => out.push(info.to_string()),
            }
        }
        if let Some(q) = url.find('?') {
            let query = &url[q + 1..];
            let query = &query[..query.find('#').unwrap_or(query.len())];
            for pair in query.split('&') {
                if let Some((k, v)) = pair.split_once('=')
                    && is_secret_name(k)
                {
                    out.push(v.to_string());
                }
            }
        }
        rest = &after[end..];
    }
    out.retain(|s| !s.is_empty());
    out
}

/// The secrets among the variables `vars`: the values of those whose names say so
/// ([`is_secret_name`]) or that `named` lists, and the credentials inside URLs in any value;
/// at least [`MIN_SECRET`] bytes each, longest first.
pub fn secrets_of<'a>(
    vars: impl IntoIterator<Item = (&'a str, &'a str)>,
    named: &[String],
) -> Vec<String> {
    let mut v = Vec::new();
    for (k, value) in vars {
        if is_secret_name(k) || named.iter().any(|n| n == k) {
            v.push(value.to_string());
        }
        v.extend(url_credentials(value));
    }
    v.retain(|s| s.len() >= MIN_SECRET);
    union([v.as_slice()])
}

/// The secrets of aw-run's own environment (see [`secrets_of`]), with those `named` lists.
pub fn secrets(named: &[String]) -> Vec<String> {
    let own: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    secrets_of(own.iter().map(|(k, v)| (k.as_str(), v.as_str())), named)
}

/// The secrets of an agent's environment (see [`secrets_of`]), with those `named` lists.
pub fn values(agent_env: &[(String, String)], named: &[String]) -> Vec<String> {
    secrets_of(
        agent_env.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        named,
    )
}

/// The secrets of several lists in one, longest first.
pub fn union<'a>(lists: impl IntoIterator<Item = &'a [String]>) -> Vec<String> {
    let mut v: Vec<String> = lists.into_iter().flatten().cloned().collect();
    v.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    v.dedup();
    v
}

/// `text` with every secret replaced by [`REDACTED`].
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut t = text.to_string();
    for s in secrets {
        if t.contains(s.as_str()) {
            t = t.replace(s.as_str(), REDACTED);
        }
    }
    t
}

/// A text that was cut after its end (`cut`), redacted: with every secret replaced, and
/// when it was cut, without a last part that begins a secret (the head of a secret the cut
/// went through). The bytes dropped are counted as cut.
pub fn redact_cut(c: &Capture, secrets: &[String]) -> Capture {
    let mut text = redact(&c.text, secrets);
    let mut cut = c.cut;
    if cut > 0 {
        let keep = text.len() - secret_head(&text, secrets);
        cut += (text.len() - keep) as u64;
        text.truncate(keep);
    }
    Capture { text, cut }
}

/// How many bytes at the end of `text` may be the head of a secret: the longest end that is
/// a proper beginning of one, with a replacement character left by a cut through a
/// multi-byte character taken with it.
fn secret_head(text: &str, secrets: &[String]) -> usize {
    const TORN: char = char::REPLACEMENT_CHARACTER;
    let (body, torn) = match text.strip_suffix(TORN) {
        Some(b) => (b, TORN.len_utf8()),
        None => (text, 0),
    };
    let mut longest = 0;
    for s in secrets {
        for k in (1..s.len()).rev() {
            if k <= longest {
                break;
            }
            if s.is_char_boundary(k) && body.ends_with(&s[..k]) {
                longest = k;
                break;
            }
        }
    }
    if longest == 0 { 0 } else { longest + torn }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_what_is_secret_is_taken() {
        let env = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        let e = env(&[
            ("GREETING", "hello"),
            ("MODE", "fast"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
            ("GIT_AUTHOR_NAME", "Alice Example"),
            ("OPENAI_API_KEY", "sk-abcdef"),
            ("GH_AUTH", "ghp-000111"),
            ("db_password", "hunter22"),
            ("PROXY", "https://bob:s3cr3t-pw@proxy.example/x?a=1"),
            (
                "HOOK",
                "https://hooks.example/x?channel=dev&token=t0k3n-9&x=y",
            ),
            ("TOKEN_URL", "https://ghp-777@github.com/x.git"),
            ("PLAIN", "my own words"),
        ]);
        let mut got = values(&e, &list(&["PLAIN"]));
        got.sort();
        let mut want = list(&[
            "sk-abcdef",
            "ghp-000111",
            "hunter22",
            "s3cr3t-pw",
            "t0k3n-9",
            "ghp-777",
            "https://ghp-777@github.com/x.git",
            "my own words",
        ]);
        want.sort();
        assert_eq!(got, want);
        assert_eq!(
            redact("hello world, the mode is fast", &got),
            "hello world, the mode is fast"
        );
    }

    #[test]
    fn secrets_are_replaced_longest_first() {
        let s = list(&["sk-live-abcdef", "abcd"]);
        assert_eq!(
            redact("key sk-live-abcdef and abcd", &s),
            "key [redacted] and [redacted]"
        );
    }

    #[test]
    fn a_cut_text_keeps_no_head_of_a_secret() {
        let s = list(&["sk-test-0123456789"]);
        let c = Capture {
            text: "output ... sk-test-01".into(),
            cut: 100,
        };
        let r = redact_cut(&c, &s);
        assert_eq!(r.text, "output ... ");
        assert_eq!(r.cut, 100 + "sk-test-01".len() as u64);
        // Not cut: the end is kept as it is.
        let whole = Capture {
            text: c.text.clone(),
            cut: 0,
        };
        assert_eq!(redact_cut(&whole, &s).text, c.text);
        // A whole secret before the cut is replaced, and a head after it dropped.
        let c = Capture {
            text: "a sk-test-0123456789 b sk-".into(),
            cut: 1,
        };
        assert_eq!(redact_cut(&c, &s).text, "a [redacted] b ");
        // A cut through a multi-byte character of a secret.
        let s = list(&["pässwört-1234"]);
        let c = Capture {
            text: format!("x p{}", char::REPLACEMENT_CHARACTER),
            cut: 1,
        };
        assert_eq!(redact_cut(&c, &s).text, "x ");
        let c = Capture {
            text: format!("x q{}", char::REPLACEMENT_CHARACTER),
            cut: 1,
        };
        assert_eq!(redact_cut(&c, &s).text, c.text);
    }
}
