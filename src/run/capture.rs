//! Output kept of a program's stream: its first [`MAX_CAPTURE`] bytes, and how many were cut.

/// Longest output kept from a backend's stdout or stderr, in bytes.
pub const MAX_CAPTURE: usize = 64 * 1024;

/// Output kept from a stream: at most [`MAX_CAPTURE`] bytes, and how many were cut.
#[derive(Debug, Clone, Default)]
pub struct Capture {
    pub text: String,
    pub cut: u64,
}

impl Capture {
    pub fn of(bytes: &[u8]) -> Capture {
        let keep = bytes.len().min(MAX_CAPTURE);
        Capture {
            text: String::from_utf8_lossy(&bytes[..keep]).into_owned(),
            cut: (bytes.len() - keep) as u64,
        }
    }
}
