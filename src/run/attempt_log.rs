//! An attempt's output while it runs: what its program writes on stdout and stderr is
//! appended, as it comes, to `_state/runs/<agent>/<n>.log` (`n` the number its transcript
//! `<n>.json` gets when the attempt ends, see [`crate::transcript::log_path`]), so that
//! `aw-ctl runs -f AGENT` can follow it.
//!
//! Secrets are redacted line by line before anything is written: a line is written once it
//! is whole (or, without a newline, once [`MAX_PENDING`] bytes are pending, redacted as a
//! cut text). After [`MAX_LOG`] bytes the rest of the attempt's output is left out, and a
//! last line says so. The file is private (0600), created with `O_NOFOLLOW`.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::capture::Capture;
use super::redact::{redact, redact_cut};

/// Most bytes of an attempt's output its log keeps.
pub const MAX_LOG: u64 = 4 * 1024 * 1024;

/// Most bytes of a line without its newline held back before they are written anyway.
pub const MAX_PENDING: usize = 64 * 1024;

/// Which stream bytes came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout = 0,
    Stderr = 1,
}

/// The log of one attempt.
pub struct AttemptLog {
    path: PathBuf,
    secrets: Vec<String>,
    state: Mutex<LogState>,
}

struct LogState {
    /// `None` once writing failed or the log is full.
    file: Option<File>,
    /// What each stream wrote since its last newline.
    pending: [Vec<u8>; 2],
    written: u64,
}

impl AttemptLog {
    /// Create (or empty) the log at `path`; `None` when it cannot be (a warning says why:
    /// the attempt runs all the same, its transcript is written at its end).
    pub fn create(path: &Path, secrets: &[String]) -> Option<AttemptLog> {
        let open = || -> std::io::Result<File> {
            use nix::fcntl::OFlag;
            let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC;
            let mode = nix::sys::stat::Mode::from_bits_truncate(0o600);
            crate::fs::owned::open(path, flags, mode)
        };
        match open() {
            Ok(f) => Some(AttemptLog {
                path: path.to_path_buf(),
                secrets: secrets.to_vec(),
                state: Mutex::new(LogState {
                    file: Some(f),
                    pending: [Vec::new(), Vec::new()],
                    written: 0,
                }),
            }),
            Err(e) => {
                crate::warn::warn(
                    "aw-run",
                    format!("{}: output not logged while it runs: {e}", path.display()),
                );
                None
            }
        }
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Take `bytes` that `stream` wrote: whole lines are written now.
    pub fn push(&self, stream: Stream, bytes: &[u8]) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *st;
        if st.file.is_none() {
            return;
        }
        let pending = &mut st.pending[stream as usize];
        pending.extend_from_slice(bytes);
        let whole = match pending.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            None if pending.len() >= MAX_PENDING => pending.len(),
            None => return,
        };
        let chunk: Vec<u8> = pending.drain(..whole).collect();
        let text = if chunk.ends_with(b"\n") {
            redact(&String::from_utf8_lossy(&chunk), &self.secrets)
        } else {
            // A cut line: no head of a secret is kept at the cut.
            let c = Capture {
                text: String::from_utf8_lossy(&chunk).into_owned(),
                cut: 1,
            };
            redact_cut(&c, &self.secrets).text
        };
        write(st, text.as_bytes());
    }

    /// The attempt ended: write what is pending.
    pub fn finish(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *st;
        for i in 0..2 {
            let rest = std::mem::take(&mut st.pending[i]);
            if !rest.is_empty() {
                let mut text = redact(&String::from_utf8_lossy(&rest), &self.secrets);
                text.push('\n');
                write(st, text.as_bytes());
            }
        }
        st.file = None;
    }
}

/// Append `bytes`, up to [`MAX_LOG`] in all; past it, one line says the rest was left out.
fn write(st: &mut LogState, bytes: &[u8]) {
    let Some(f) = &mut st.file else { return };
    let room = MAX_LOG.saturating_sub(st.written) as usize;
    let ok = if bytes.len() <= room {
        f.write_all(bytes)
    } else {
        let note = format!("\n--- output cut at {MAX_LOG} bytes ---\n");
        f.write_all(&bytes[..room])
            .and_then(|()| f.write_all(note.as_bytes()))
    };
    st.written += bytes.len().min(room) as u64;
    if ok.is_err() || bytes.len() > room {
        st.file = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_written_whole_redacted_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.log");
        let log = AttemptLog::create(&path, &["sk-secret".to_string()]).unwrap();
        log.push(Stream::Stdout, b"key sk-se");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        log.push(Stream::Stderr, b"warn\n");
        log.push(Stream::Stdout, b"cret here\nhalf");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "warn\nkey [redacted] here\n"
        );
        log.finish();
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .ends_with("here\nhalf\n")
        );
        // Bounded.
        let log = AttemptLog::create(&path, &[]).unwrap();
        let line = vec![b'x'; 1023];
        for _ in 0..(MAX_LOG / 1024 + 10) {
            log.push(Stream::Stdout, &line);
            log.push(Stream::Stdout, b"\n");
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with(&format!("--- output cut at {MAX_LOG} bytes ---\n")));
        assert!(text.len() as u64 <= MAX_LOG + 100);
    }
}
