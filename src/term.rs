//! Text from agents shown on a terminal. A terminal acts on what it is sent: an escape
//! sequence can set the clipboard (OSC 52), retitle the window or redraw the screen, a
//! carriage return can make a line look as if another author wrote it, and a bidirectional
//! override can show text in another order than it is. So on a terminal every such
//! character is shown as an escape anyone can read, and never sent as it is:
//!
//! - a C0 control other than newline and tab, DEL, or a C1 control: `\xHH` (`\x1b` for ESC,
//!   `\x07` for BEL, `\x0d` for CR, `\x9b` for the one-byte CSI);
//! - a bidirectional embedding, override or isolate (U+202A to U+202E, U+2066 to U+2069):
//!   `\u{HHHH}`;
//! - a byte that is not part of valid UTF-8: `\xHH`.
//!
//! Pipes, files and `--json` get the exact bytes: each tool decides with [`is_terminal`].

use std::borrow::Cow;
use std::fmt::Write;

/// Is `c` shown as an escape on a terminal?
pub fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c)
}

/// A bidirectional embedding, override or isolate (and their ends).
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` as a terminal may be sent it: each character of [`is_unsafe`] as its escape.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        push(&mut out, c);
    }
    Cow::Owned(out)
}

/// Bytes as a terminal may be sent them: UTF-8 as [`visible`], and each byte that is not
/// part of valid UTF-8 as `\xHH`.
pub fn visible_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return match visible(text) {
            Cow::Borrowed(_) => Cow::Borrowed(bytes),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        };
    }
    let mut out = String::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push(&mut out, c);
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Cow::Owned(out.into_bytes())
}

/// How long the end of `bytes` is that may be the start of a UTF-8 character cut by a
/// chunk boundary (0 to 3): kept until the next chunk comes.
pub fn cut_tail(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=3.min(n) {
        let b = bytes[n - back];
        if b & 0xc0 == 0x80 {
            continue;
        }
        let len = match b {
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => return 0,
        };
        return if len > back { back } else { 0 };
    }
    0
}

fn push(out: &mut String, c: char) {
    if !is_unsafe(c) {
        out.push(c);
    } else if (c as u32) <= 0xff {
        let _ = write!(out, "\\x{:02x}", c as u32);
    } else {
        let _ = write!(out, "\\u{{{:04x}}}", c as u32);
    }
}

/// `text` to be written on standard output: [`visible`] when it is a terminal, else as it is.
pub fn on_stdout(text: &str) -> Cow<'_, str> {
    if is_terminal() {
        visible(text)
    } else {
        Cow::Borrowed(text)
    }
}

/// Is the standard output a terminal?
pub fn is_terminal() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stdout())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_overrides_are_shown_as_escapes() {
        assert_eq!(visible("plain\ttext\nok"), "plain\ttext\nok");
        assert!(matches!(visible("plain"), Cow::Borrowed(_)));
        assert_eq!(
            visible("a\x1b]52;c;Y3VybA==\x07b\rc\u{7f}\u{9b}"),
            "a\\x1b]52;c;Y3VybA==\\x07b\\x0dc\\x7f\\x9b"
        );
        assert_eq!(
            visible("x\u{202e}gpj.exe\u{2069}"),
            "x\\u{202e}gpj.exe\\u{2069}"
        );
        assert_eq!(visible("é ✓ 日本"), "é ✓ 日本");
        assert_eq!(&*visible_bytes(b"a\xff\x1bb"), b"a\\xff\\x1bb");
        assert_eq!(&*visible_bytes("é\u{9b}".as_bytes()), b"\xc3\xa9\\x9b");
    }

    #[test]
    fn a_cut_character_is_kept_for_the_next_chunk() {
        let s = "a\u{202e}".as_bytes();
        assert_eq!(cut_tail(&s[..2]), 1);
        assert_eq!(cut_tail(&s[..3]), 2);
        assert_eq!(cut_tail(s), 0);
        assert_eq!(cut_tail(b"abc"), 0);
        assert_eq!(cut_tail("\u{9b}".as_bytes()), 0);
        assert_eq!(cut_tail(&"\u{9b}".as_bytes()[..1]), 1);
    }
}
