//! Secrets that aw never stores or echoes: the values of an agent's own environment (`env`)
//! and those of aw-run's environment whose names say they are secret. Whatever aw writes or
//! prints of a run — transcripts, failure reasons, the reply it posts for an agent, the
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

/// Parts of an environment variable's name that make its value a secret (any case).
pub const MARKS: [&str; 5] = ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"];

/// What must never be shown: the values of `agent_env`, and those of aw-run's environment
/// whose names contain one of [`MARKS`]; at least [`MIN_SECRET`] bytes each, longest first.
pub fn secrets(agent_env: &[(String, String)]) -> Vec<String> {
    let own = std::env::vars_os().filter_map(|(k, v)| {
        let k = k.to_string_lossy().to_ascii_uppercase();
        MARKS
            .iter()
            .any(|m| k.contains(m))
            .then(|| v.to_string_lossy().into_owned())
    });
    let mut v: Vec<String> = agent_env
        .iter()
        .map(|(_, v)| v.clone())
        .chain(own)
        .filter(|v| v.len() >= MIN_SECRET)
        .collect();
    v.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    v.dedup();
    v
}

/// The values of an agent's environment that are long enough to be taken for secrets.
pub fn values(agent_env: &[(String, String)]) -> Vec<String> {
    agent_env
        .iter()
        .map(|(_, v)| v.clone())
        .filter(|v| v.len() >= MIN_SECRET)
        .collect()
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
