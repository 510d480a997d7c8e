//! The file tools' operations on the [`Sandbox`]: read, list, search and write, with the
//! limits of [`super`] and a note in brackets for what is cut.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, BufRead, BufReader};

use nix::sys::stat::{FchmodatFlags, fchmodat};

use super::sandbox::{
    Entry, Sandbox, changed, io_error, is_a_folder, join, not_regular, parts, stat_at,
};
use crate::error::{Error, Result};
use crate::fs::beneath::{Kind, read_capped};
use crate::names::sanitize;

/// Most bytes of text `read_file` and `search` give (256 KiB).
pub const MAX_READ: usize = 256 * 1024;
/// Most entries `list_files` gives.
pub const MAX_LIST: usize = 2000;
/// Most matching lines `search` gives.
pub const MAX_MATCHES: usize = 500;
/// Largest file `search` reads (4 MiB); larger ones are skipped.
pub const MAX_SEARCH_FILE: usize = 4 << 20;
/// How many first bytes of a file `search` looks at for a NUL, the sign of a binary file.
pub const BINARY_PROBE: usize = 8 * 1024;
/// Longest part of a matching line `search` shows, in characters.
pub const MAX_MATCH_LINE: usize = 400;
/// Largest content `write_file` takes (1 MiB).
pub const MAX_WRITE: usize = 1 << 20;

pub(super) fn read_file(
    sb: &Sandbox,
    given: &str,
    offset: u64,
    limit: Option<u64>,
) -> Result<String> {
    let found = sb.find(given)?;
    match found.kind {
        Kind::File => {}
        Kind::Dir => return Err(is_a_folder(given, "use list_files")),
        _ => return Err(not_regular(given)),
    }
    let f = sb.open_file(given, &found.rel)?;
    let read = read_lines(f, offset, limit).map_err(|e| io_error(given, e))?;
    let mut text = String::from_utf8_lossy(&read.text).into_owned();
    if let Some(lines) = read.past_end {
        return Err(Error::invalid(format!(
            "{}: offset {offset} is past the end (the file has {lines} lines)",
            sanitize(given)
        )));
    }
    let note = if let Some(line) = read.long_line {
        Some(format!(
            "line {line} is longer than {} KiB and was cut; read on with offset={}",
            MAX_READ / 1024,
            line + 1
        ))
    } else if let Some(next) = read.next {
        Some(format!("more follows: read on with offset={next}"))
    } else if text.is_empty() {
        Some("empty file".to_string())
    } else {
        None
    };
    if let Some(note) = note {
        add_note(&mut text, &note);
    }
    Ok(text)
}

pub(super) fn list_files(sb: &Sandbox, given: &str, recursive: bool) -> Result<String> {
    let found = sb.find(given)?;
    match found.kind {
        Kind::Dir => {}
        Kind::File => return Ok(found.shown),
        _ => return Err(not_regular(given)),
    }
    let mut lines = Vec::new();
    let mut cut = false;
    sb.walk(given, &found, recursive, &mut |e: &Entry| {
        if lines.len() == MAX_LIST {
            cut = true;
            return false;
        }
        match e.kind {
            Kind::Dir => lines.push(format!("{}/", e.shown)),
            Kind::Symlink => lines.push(format!("{}@", e.shown)),
            Kind::File => lines.push(e.shown.clone()),
            Kind::Other => {}
        }
        true
    })?;
    let mut text = lines.join("\n");
    if cut {
        let note = format!("cut at {MAX_LIST} entries: list a folder further down");
        add_note(&mut text, &note);
    } else if text.is_empty() {
        add_note(&mut text, "empty folder");
    }
    Ok(text)
}

pub(super) fn search(
    sb: &Sandbox,
    pattern: &str,
    given: &str,
    ignore_case: bool,
) -> Result<String> {
    if pattern.is_empty() {
        return Err(Error::invalid("'pattern' must not be empty"));
    }
    let found = sb.find(given)?;
    let mut s = Searcher::new(pattern, ignore_case);
    match found.kind {
        Kind::File => {
            let f = sb.open_file(given, &found.rel)?;
            s.file(f, &found.shown).map_err(|e| io_error(given, e))?;
        }
        Kind::Dir => sb.walk(given, &found, true, &mut |e: &Entry| {
            if e.kind == Kind::File {
                // A file that cannot be opened or read (gone, unreadable, no longer a
                // regular file) is passed over.
                if let Ok(f) = sb.open_file(&e.shown, &e.rel) {
                    let _ = s.file(f, &e.shown);
                }
            }
            !s.cut
        })?,
        _ => return Err(not_regular(given)),
    }
    Ok(s.finish(pattern))
}

pub(super) fn write_file(sb: &Sandbox, given: &str, content: &str) -> Result<String> {
    if content.len() > MAX_WRITE {
        return Err(Error::invalid(format!(
            "{}: the content is {} bytes, more than the {} MiB a file may be given",
            sanitize(given),
            content.len(),
            MAX_WRITE >> 20
        )));
    }
    let parts = parts(given)?;
    let Some((name, folders)) = parts.split_last().filter(|_| !given.ends_with('/')) else {
        return Err(is_a_folder(given, "give a file path"));
    };
    let (mut dir, folder_rel) = sb.folder(given, folders)?;
    sb.guard(given, &join(&folder_rel, name))?;
    let mut name = name.to_string();
    let mut kind = stat_at(&dir, &name).map_err(|e| io_error(given, e))?;
    if let Some((Kind::Symlink, _)) = kind {
        // A link that stays inside is written through: replace the file it leads to.
        let found = sb.find(given).map_err(|e| match e {
            Error::NotFound(_) => Error::denied(format!(
                "{}: a symbolic link that leads nowhere",
                sanitize(given)
            )),
            e => e,
        })?;
        let (folder, file) = match found.rel.rsplit_once('/') {
            Some((folder, file)) => (folder, file),
            None => ("", found.rel.as_str()),
        };
        dir = sb.open_dir(folder).map_err(|e| io_error(given, e))?;
        name = file.to_string();
        kind = stat_at(&dir, &name).map_err(|e| io_error(given, e))?;
    }
    let mode = match kind {
        None => None,
        Some((Kind::File, mode)) => Some(mode),
        Some((Kind::Dir, _)) => return Err(is_a_folder(given, "give a file path")),
        Some((Kind::Symlink, _)) => return Err(changed(given)),
        Some((Kind::Other, _)) => return Err(not_regular(given)),
    };
    crate::fs::atomic_write_at(&dir, OsStr::new(&name), content.as_bytes()).map_err(
        |e| match e {
            Error::Create { source, .. } | Error::Io { source, .. } => io_error(given, source),
            e => e,
        },
    )?;
    if let Some(mode) = mode {
        // Best effort: the content is written either way.
        let _ = fchmodat(
            dir.fd(),
            name.as_str(),
            mode,
            FchmodatFlags::NoFollowSymlink,
        );
    }
    let how = if mode.is_some() {
        "replaced"
    } else {
        "new file"
    };
    Ok(format!(
        "wrote {} bytes to {} ({how})",
        content.len(),
        parts.join("/")
    ))
}

/// The matches of one search, and what was skipped.
struct Searcher {
    needle: String,
    ignore_case: bool,
    out: String,
    matches: usize,
    skipped: usize,
    cut: bool,
}

impl Searcher {
    fn new(pattern: &str, ignore_case: bool) -> Searcher {
        Searcher {
            needle: if ignore_case {
                pattern.to_lowercase()
            } else {
                pattern.to_string()
            },
            ignore_case,
            out: String::new(),
            matches: 0,
            skipped: 0,
            cut: false,
        }
    }

    /// Add the matching lines of the open file `f`, shown as `shown`.
    fn file(&mut self, mut f: File, shown: &str) -> io::Result<()> {
        let Some(bytes) = read_capped(&mut f, MAX_SEARCH_FILE)? else {
            self.skipped += 1;
            return Ok(());
        };
        if bytes[..bytes.len().min(BINARY_PROBE)].contains(&0) {
            self.skipped += 1;
            return Ok(());
        }
        let text = String::from_utf8_lossy(&bytes);
        for (i, line) in text.lines().enumerate() {
            let hit = if self.ignore_case {
                line.to_lowercase().contains(&self.needle)
            } else {
                line.contains(&self.needle)
            };
            if !hit {
                continue;
            }
            if self.matches == MAX_MATCHES || self.out.len() >= MAX_READ {
                self.cut = true;
                return Ok(());
            }
            self.matches += 1;
            let mut shown_line: String = line.chars().take(MAX_MATCH_LINE).collect();
            if shown_line.len() < line.len() {
                shown_line.push('…');
            }
            self.out
                .push_str(&format!("{shown}:{}: {shown_line}\n", i + 1));
        }
        Ok(())
    }

    fn finish(self, pattern: &str) -> String {
        let mut text = self.out;
        text.pop();
        if self.matches == 0 {
            add_note(&mut text, &format!("no match for '{}'", sanitize(pattern)));
        }
        if self.cut {
            let note = if self.matches == MAX_MATCHES {
                format!("cut at {MAX_MATCHES} matches: search a narrower path or pattern")
            } else {
                format!(
                    "cut at {} KiB of output: search a narrower path or pattern",
                    MAX_READ / 1024
                )
            };
            add_note(&mut text, &note);
        }
        if self.skipped > 0 {
            let note = format!(
                "{} file(s) skipped: binary, or larger than {} MiB",
                self.skipped,
                MAX_SEARCH_FILE >> 20
            );
            add_note(&mut text, &note);
        }
        text
    }
}

/// What [`read_lines`] read.
struct Lines {
    /// The lines given, as bytes.
    text: Vec<u8>,
    /// When the file ends before the first line asked for (past the first): how many lines
    /// it has.
    past_end: Option<u64>,
    /// The line to read on from, when more follows.
    next: Option<u64>,
    /// A line cut because it alone is longer than [`MAX_READ`].
    long_line: Option<u64>,
}

/// Read from `f` the lines from `offset` (counted from 1), at most `limit` of them and at most
/// [`MAX_READ`] bytes, ending at a line's end unless one line alone is longer.
fn read_lines(f: File, offset: u64, limit: Option<u64>) -> io::Result<Lines> {
    let mut r = BufReader::with_capacity(64 * 1024, f);
    let mut out = Lines {
        text: Vec::new(),
        past_end: None,
        next: None,
        long_line: None,
    };
    // The line the reader is in, whether part of it was read already, and how many whole
    // lines were given.
    let (mut line, mut begun, mut given) = (1u64, false, 0u64);
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            if out.text.is_empty() && offset > 1 {
                out.past_end = Some(line - u64::from(!begun));
            }
            return Ok(out);
        }
        let end = buf.iter().position(|&b| b == b'\n');
        let take = end.map_or(buf.len(), |i| i + 1);
        if line >= offset {
            if limit == Some(given) {
                out.next = Some(line);
                return Ok(out);
            }
            if out.text.len() + take > MAX_READ {
                if given == 0 {
                    // One line alone is longer than the cap: give its start.
                    let room = MAX_READ - out.text.len();
                    out.text.extend_from_slice(&buf[..room]);
                    out.long_line = Some(line);
                } else {
                    // Give whole lines only: take back the part of this one read so far.
                    let start = out.text.iter().rposition(|&b| b == b'\n');
                    out.text.truncate(start.map_or(0, |i| i + 1));
                    out.next = Some(line);
                }
                return Ok(out);
            }
            out.text.extend_from_slice(&buf[..take]);
            given += u64::from(end.is_some());
        }
        r.consume(take);
        begun = end.is_none();
        line += u64::from(end.is_some());
    }
}

/// End `text` with a line in brackets.
fn add_note(text: &mut String, note: &str) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("[{note}]"));
}
