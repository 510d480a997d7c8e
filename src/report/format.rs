//! Text for people and for HTML: escaping, durations, counts, the class of an outcome.

/// `text` safe in HTML text and in a quoted attribute.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A duration for people: `850ms`, `1.2s`, `3m05s`, `1h02m`.
pub fn duration(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => crate::time::clock(std::time::Duration::from_millis(ms)),
    }
}

/// A count with thin groups of three digits: `12 345`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    out
}

/// The CSS class of an outcome: `ok`, `failed`, `timeout`, `killed`, else `other`.
pub fn outcome_class(status: &str) -> &'static str {
    match status {
        "ok" => "ok",
        "failed" => "failed",
        "timeout" => "timeout",
        "killed" => "killed",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_numbers_read_well() {
        assert_eq!(
            esc("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
        assert_eq!(count(0), "0");
        assert_eq!(count(1234567), "1\u{202f}234\u{202f}567");
        assert_eq!(duration(999), "999ms");
        assert_eq!(duration(1500), "1.5s");
        assert_eq!(duration(185_000), "3m05s");
    }
}
