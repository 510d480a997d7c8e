//! Did-you-mean suggestions: the known word closest to a mistyped one (a workflow key, an
//! agent, an instance), found by edit distance with case, `_` and `-` ignored.

/// The candidate closest to `word`, if one is close enough to be a likely typo: at most two
/// edits away (and fewer edits than `word` has characters), or equal when case, `_` and `-`
/// are ignored.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let folded = fold(word);
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| {
            let d = if fold(c) == folded {
                0
            } else {
                edit_distance(word, c)
            };
            (d, c)
        })
        .filter(|(d, _)| *d <= 2 && *d < word.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// ` (did you mean 'X'?)` when [`did_you_mean`] finds one, else nothing.
pub fn suggestion<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    did_you_mean(word, candidates)
        .map(|c| format!(" (did you mean '{c}'?)"))
        .unwrap_or_default()
}

fn fold(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '_' && *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Levenshtein distance in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(edit_distance("modle", "model"), 2);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn suggestions() {
        let keys = [
            "model",
            "max_runs",
            "max_steps",
            "system_prompt",
            "documentOwner",
        ];
        assert_eq!(did_you_mean("modle", keys), Some("model"));
        assert_eq!(did_you_mean("max_run", keys), Some("max_runs"));
        assert_eq!(did_you_mean("systemPrompt", keys), Some("system_prompt"));
        assert_eq!(did_you_mean("document_owner", keys), Some("documentOwner"));
        assert_eq!(did_you_mean("colour", keys), None);
        // A one-letter word is not "one edit away" from every other one-letter word.
        assert_eq!(did_you_mean("x", ["y", "as"]), None);
        assert_eq!(suggestion("modle", keys), " (did you mean 'model'?)");
        assert_eq!(suggestion("zzz", keys), "");
    }
}
