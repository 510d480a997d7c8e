//! `@name` mentions and message priority.

crate::keyword_enum! {
    /// How urgent an inbox message is.
    pub enum Priority {
        Normal = "normal",
        High = "high",
    }
}

/// Every `@name` token in `text`: `@` at the start or after a character that is not a word
/// character (so `bob@example.com` is not a mention), followed by `[A-Za-z][A-Za-z0-9_-]*`.
/// In order of first appearance, without duplicates.
pub fn tokens(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'@' {
            let prev_ok = i == 0 || {
                // The character before '@' (may be multi-byte).
                let prev = text[..i].chars().next_back().unwrap();
                !(prev.is_alphanumeric() || prev == '_')
            };
            let start = i + 1;
            if prev_ok && start < bytes.len() && bytes[start].is_ascii_alphabetic() {
                let mut end = start + 1;
                while end < bytes.len()
                    && (bytes[end].is_ascii_alphanumeric()
                        || bytes[end] == b'_'
                        || bytes[end] == b'-')
                {
                    end += 1;
                }
                // A trailing '-' is punctuation ("@bob-" in "ask @bob- now"), not the name.
                let name = text[start..end].trim_end_matches('-');
                if !out.contains(&name) {
                    out.push(name);
                }
                i = end;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Split the mention tokens of `text` into registered agents (the entry's mentions) and
/// unknown names (typos to warn about). `user` and `system` are neither.
pub fn resolve(text: &str, is_agent: impl Fn(&str) -> bool) -> (Vec<String>, Vec<String>) {
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for t in tokens(text) {
        if is_agent(t) {
            known.push(t.to_string());
        } else if !crate::names::RESERVED_SENDERS.contains(&t) {
            unknown.push(t.to_string());
        }
    }
    (known, unknown)
}

/// `high` when more than one agent is mentioned or the text says urgent, asap, blocked or
/// critical (as whole words, any case); `normal` otherwise.
pub fn priority(message: &str, mentions: usize) -> Priority {
    if mentions > 1 {
        return Priority::High;
    }
    let lower = message.to_ascii_lowercase();
    let word = |c: char| c.is_alphanumeric() || c == '_';
    for kw in ["urgent", "asap", "blocked", "critical"] {
        for (i, _) in lower.match_indices(kw) {
            let before = lower[..i].chars().next_back();
            let after = lower[i + kw.len()..].chars().next();
            if !before.is_some_and(word) && !after.is_some_and(word) {
                return Priority::High;
            }
        }
    }
    Priority::Normal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_mentions() {
        assert_eq!(tokens("@a hi @b, @a"), vec!["a", "b"]);
        assert_eq!(tokens("mail bob@example.com"), Vec::<&str>::new());
        assert_eq!(tokens("(@x) é@y @9 @"), vec!["x"]);
        assert_eq!(tokens("ask @bob- now"), vec!["bob"]);
    }

    #[test]
    fn resolves() {
        let (k, u) = resolve("@alice @bobb @user", |n| n == "alice");
        assert_eq!(k, vec!["alice"]);
        assert_eq!(u, vec!["bobb"]);
    }

    #[test]
    fn priorities() {
        assert_eq!(priority("hi", 1), Priority::Normal);
        assert_eq!(priority("hi", 2), Priority::High);
        assert_eq!(priority("this is URGENT!", 1), Priority::High);
        assert_eq!(priority("unblocked", 1), Priority::Normal);
        assert_eq!(priority("blocked_on", 1), Priority::Normal);
        assert_eq!(priority("asap", 1).name(), "high");
    }

    #[test]
    fn priorities_round_trip_through_json() {
        crate::keyword::assert_round_trips(Priority::ALL, |p| p.name(), Priority::from_name);
        assert_eq!(Priority::NAMES, ["normal", "high"]);
    }
}
