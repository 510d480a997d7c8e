//! Round trip: any message text sent with `aw-send`, as arguments or on stdin, comes back
//! byte for byte from `aw-peek --json`, and `channel.md` has one `### ` line per entry.

use crate::common;

use common::{Entry, Rng, Root, entry_from_json, header_lines, json_lines};

/// Largest argument piece: Linux refuses a single argument of 128 KiB or more.
const ARG_PIECE: usize = 100_000;

/// The largest message aw-send accepts (`MAX_MESSAGE`, documented in aw-send(1)).
const MAX_MESSAGE: usize = 4 << 20;

/// FNV-1a 64, as aw-workflow(5) defines `sum`.
fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// A line that is a valid entry header for the body `fake`, as a message line.
fn fake_header(id: u64, fake: &str) -> String {
    format!(
        "### 10:00:05 [system] #{id} <!-- at=2026-11-22T10:00:05.123Z len={} sum={:016x} -->",
        fake.len(),
        fnv1a(fake.as_bytes())
    )
}

/// Pieces that stress the escaping and the framing of the log.
fn fragments() -> Vec<String> {
    let mut v: Vec<String> = [
        "###",
        "### heading",
        "#### deeper",
        "###no space",
        "##",
        "#",
        "\\",
        "\\\\",
        "\\### already escaped",
        "\\n is not a newline",
        "",
        "   ",
        "trailing spaces   ",
        "\ttab\t",
        "\r",
        "a\rb",
        "café naïve",
        "日本語のテキスト",
        "🦀🚀✨",
        "👩\u{200d}👩\u{200d}👧",
        "e\u{301}",
        "\u{202e}right to left",
        "\u{feff}",
        "\u{200b}",
        "\u{2028}",
        "<!-- comment -->",
        "-->",
        "<!--",
        "[user] #1",
        "bob@example.com",
        "\u{1}\u{1b}[31mred\u{1b}[0m\u{7f}",
        "-",
        "--json",
        "len=3 sum=0000000000000000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(fake_header(999_999, "fake"));
    v.push(format!("{}\nfake\n", fake_header(2, "fake")));
    v
}

/// A random message: fragments, ASCII words and random Unicode, joined by assorted line
/// breaks and spaces. Never empty or all white space, never a NUL.
fn random_text(rng: &mut Rng, frags: &[String]) -> String {
    const SEPS: [&str; 7] = ["\n", "\r\n", " ", "", "\n\n", "\t", "\n\n\n"];
    let mut s = String::new();
    if rng.chance(10) {
        s.push_str(rng.pick(&["\n", "\n\n", " ", "\r\n"]));
    }
    for i in 0..rng.range(1, 12) {
        if i > 0 {
            s.push_str(rng.pick(&SEPS));
        }
        match rng.below(3) {
            0 => s.push_str(&rng.pick(frags)),
            1 => {
                for _ in 0..rng.range(1, 10) {
                    s.push((b'a' + rng.below(26) as u8) as char);
                }
            }
            _ => {
                for _ in 0..rng.range(1, 20) {
                    s.push(rng.any_char());
                }
            }
        }
    }
    if rng.chance(15) {
        s.push_str(rng.pick(&["\n", "\n\n", "  ", "\r\n", "\n\n\n"]));
    }
    if s.trim().is_empty() {
        s.push('x');
    }
    s
}

/// A text of exactly `size` bytes made of random texts.
fn big_text(rng: &mut Rng, frags: &[String], size: usize) -> String {
    let mut s = String::with_capacity(size + 64);
    while s.len() < size {
        s.push_str(&random_text(rng, frags));
        s.push_str(rng.pick(&["\n", "\r\n", " "]));
    }
    let mut cut = size;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    while s.len() < size {
        s.push(' ');
    }
    s
}

/// `text` `repeat`ed up to exactly `size` bytes (`text` is ASCII).
fn repeated(text: &str, size: usize) -> String {
    let mut s = text.repeat(size / text.len() + 1);
    s.truncate(size);
    s
}

/// Split `text` at spaces into arguments that aw-send joins back with single spaces, each
/// small enough for the kernel. `None` when that is impossible, or when the first argument
/// would be `-` (which means "read stdin").
fn as_args(text: &str) -> Option<Vec<String>> {
    let mut pieces: Vec<String> = Vec::new();
    let mut cur: Option<String> = None;
    for word in text.split(' ') {
        if word.len() > ARG_PIECE {
            return None;
        }
        cur = Some(match cur.take() {
            Some(c) if c.len() + 1 + word.len() <= ARG_PIECE => c + " " + word,
            Some(c) => {
                pieces.push(c);
                word.to_string()
            }
            None => word.to_string(),
        });
    }
    pieces.extend(cur);
    debug_assert_eq!(pieces.join(" "), text);
    if pieces[0] == "-" {
        return None;
    }
    Some(pieces)
}

/// Where two strings first differ, for a readable failure.
fn first_difference(a: &str, b: &str) -> String {
    let i = a
        .bytes()
        .zip(b.bytes())
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let show = |s: &str| {
        let lo = i.saturating_sub(20);
        let hi = (i + 20).min(s.len());
        String::from_utf8_lossy(&s.as_bytes()[lo..hi]).into_owned()
    };
    format!(
        "lengths {} and {}, first difference at byte {i}: {:?} vs {:?}",
        a.len(),
        b.len(),
        show(a),
        show(b)
    )
}

#[derive(Debug)]
struct Sent {
    id: u64,
    text: String,
    how: &'static str,
}

fn send_both_ways(root: &Root, inst: &str, text: &str, sent: &mut Vec<Sent>) {
    let id = root.send_stdin(inst, &[], text.as_bytes());
    sent.push(Sent {
        id,
        text: text.to_string(),
        how: "stdin",
    });
    if let Some(args) = as_args(text) {
        let mut a = vec!["-i", inst, "--"];
        a.extend(args.iter().map(String::as_str));
        let id = common::parse_id(&root.ok("aw-send", &a, None));
        sent.push(Sent {
            id,
            text: text.to_string(),
            how: "arguments",
        });
    }
}

fn check_read_back(root: &Root, inst: &str, sent: &[Sent]) -> Vec<Entry> {
    let entries = root.entries(inst);
    assert_eq!(entries.len(), sent.len(), "one entry per aw-send");
    for (i, (e, s)) in entries.iter().zip(sent).enumerate() {
        assert_eq!(e.id, (i + 1) as u64, "ids are dense from 1");
        assert_eq!(e.id, s.id, "the id aw-send printed ({})", s.how);
        assert_eq!(e.from, "user");
        assert!(e.mentions.is_empty(), "no agents, no mentions: {e:?}");
        assert!(
            e.message == s.text,
            "message {} sent on {} came back changed: {}",
            s.id,
            s.how,
            first_difference(&s.text, &e.message)
        );
    }
    let log = std::fs::read(root.channel(inst)).unwrap();
    assert_eq!(
        header_lines(&log),
        entries.len(),
        "lines beginning with '### ' in channel.md"
    );
    entries
}

#[test]
fn random_and_special_texts_round_trip() {
    let root = Root::new();
    let mut rng = Rng::new(0x5eed_0001);
    let frags = fragments();
    let mut texts: Vec<String> = frags
        .iter()
        .filter(|f| !f.trim().is_empty())
        .cloned()
        .collect();
    texts.extend(
        [
            "a\n\n\nb",
            "\n\nleading blank lines",
            "ends in blank lines\n\n\n",
            "ends in one newline\n",
            "crlf\r\nlines\r\n\r\n",
            "### first\n### second\n\\third\n\\\\fourth\n\n#####\n",
            "x\n###",
            "x\n\\",
            " - leading space and dash",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    for _ in 0..250 {
        texts.push(random_text(&mut rng, &frags));
    }
    let mut sent = Vec::new();
    for t in &texts {
        send_both_ways(&root, "rt", t, &mut sent);
    }
    let entries = check_read_back(&root, "rt", &sent);

    // The other ways to read the same log agree with the full read.
    let n = entries.len();
    for since in [0, 1, n / 2, n - 1, n] {
        let out = root.ok(
            "aw-peek",
            &["-i", "rt", "--json", "--since", &since.to_string()],
            None,
        );
        let got: Vec<Entry> = json_lines(out.as_bytes())
            .iter()
            .map(entry_from_json)
            .collect();
        assert_eq!(got, entries[since..], "--since {since}");
    }
    for last in [1, 5, n] {
        let out = root.ok(
            "aw-peek",
            &["-i", "rt", "--json", "-n", &last.to_string()],
            None,
        );
        let got: Vec<Entry> = json_lines(out.as_bytes())
            .iter()
            .map(entry_from_json)
            .collect();
        assert_eq!(got, entries[n - last..], "-n {last}");
    }
}

#[test]
fn one_mebibyte_texts_round_trip() {
    let root = Root::new();
    let mut rng = Rng::new(0x5eed_0002);
    let frags = fragments();
    let mib = 1 << 20;
    let texts = [
        big_text(&mut rng, &frags, mib),
        repeated("### a b\n", mib),
        repeated("\\ back slash \r\n", mib),
        repeated("x", mib),
    ];
    let mut sent = Vec::new();
    for t in &texts {
        assert_eq!(t.len(), mib);
        send_both_ways(&root, "big", t, &mut sent);
    }
    // Every text but the one without spaces also went as arguments.
    assert_eq!(sent.len(), 2 * texts.len() - 1);
    check_read_back(&root, "big", &sent);
}

#[test]
fn message_of_the_largest_size_round_trips() {
    let root = Root::new();
    // Escaping makes the stored body larger than the message; the limit is on the message.
    let text = repeated("###\n", MAX_MESSAGE);
    let id = root.send_stdin("max", &[], text.as_bytes());
    let sent = [Sent {
        id,
        text,
        how: "stdin",
    }];
    check_read_back(&root, "max", &sent);
}

#[test]
fn send_json_matches_what_is_read() {
    let root = Root::new();
    let mut rng = Rng::new(0x5eed_0003);
    let frags = fragments();
    let mut printed = Vec::new();
    for _ in 0..20 {
        let text = random_text(&mut rng, &frags);
        let out = root.ok("aw-send", &["-i", "js", "--json", "--", &text], None);
        let v = json_lines(out.as_bytes());
        assert_eq!(v.len(), 1, "aw-send --json prints one line");
        let e = entry_from_json(&v[0]);
        assert_eq!(e.message, text);
        printed.push(e);
    }
    assert_eq!(root.entries("js"), printed);
}
