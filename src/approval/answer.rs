//! Answers in the channel: a message of an approver that begins `approve #3` or
//! `reject #3: REASON` decides request 3, when the request lets replies answer it.

use super::store::Verdict;

/// An answer found in a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub id: u64,
    pub verdict: Verdict,
    pub reason: Option<String>,
}

/// The answer that `text` gives, if it is one: after any `@name` mentions, the word
/// `approve` (or `approved`) or `reject` (or `rejected`), any case, then the id (`#3` or
/// `3`), then nothing, or a reason after `:`, `-` or a space.
pub fn answer(text: &str) -> Option<Answer> {
    let mut rest = text.trim_start();
    while let Some(r) = rest.strip_prefix('@') {
        let end = r.find(char::is_whitespace)?;
        rest = r[end..].trim_start();
    }
    let word_end = rest
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    let verdict = match rest[..word_end].to_ascii_lowercase().as_str() {
        "approve" | "approved" => Verdict::Approve,
        "reject" | "rejected" => Verdict::Reject,
        _ => return None,
    };
    rest = &rest[word_end..];
    let after_word = rest.trim_start_matches([' ', '\t']);
    if after_word.len() == rest.len() {
        return None;
    }
    let after_hash = after_word.strip_prefix('#').unwrap_or(after_word);
    let digits = after_hash
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(after_hash.len());
    let id: u64 = after_hash[..digits].parse().ok().filter(|n| *n > 0)?;
    let tail = &after_hash[digits..];
    let reason = match tail.chars().next() {
        None => None,
        Some(c) if c.is_whitespace() || c == ':' || c == '-' || c == '.' || c == ',' => {
            let r = tail
                .trim_start()
                .trim_start_matches([':', '-', '.', ','])
                .trim();
            (!r.is_empty()).then(|| r.to_string())
        }
        Some(_) => return None,
    };
    Some(Answer {
        id,
        verdict,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(id: u64, verdict: Verdict, reason: Option<&str>) -> Option<Answer> {
        Some(Answer {
            id,
            verdict,
            reason: reason.map(str::to_string),
        })
    }

    #[test]
    fn answers_are_recognised_with_their_reason() {
        assert_eq!(answer("approve #3"), a(3, Verdict::Approve, None));
        assert_eq!(answer("  Approved 12."), a(12, Verdict::Approve, None));
        assert_eq!(
            answer("@system @bot reject #3: tests fail"),
            a(3, Verdict::Reject, Some("tests fail"))
        );
        assert_eq!(
            answer("REJECT #4 - not now\nsee the log"),
            a(4, Verdict::Reject, Some("not now\nsee the log"))
        );
        assert_eq!(
            answer("approve 5 looks good"),
            a(5, Verdict::Approve, Some("looks good"))
        );
    }

    #[test]
    fn other_messages_are_not_answers() {
        for text in [
            "@bot [APPROVAL #3] approved by user (deploy)",
            "I approve #3",
            "approve",
            "approve #",
            "approve #0",
            "approve #3x",
            "approves #3",
            "approve#3",
            "@user",
            "",
        ] {
            assert_eq!(answer(text), None, "{text:?}");
        }
    }
}
