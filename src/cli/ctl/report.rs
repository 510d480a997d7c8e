//! `aw-ctl report [--run N] [-o FILE] [--json]`: what happened in an instance, or in one
//! run of it, as one self-contained HTML page (see [`crate::report`]), or as the gathered
//! data in JSON.

use super::Call;
use crate::cli::Out;
use crate::error::Result;

/// `aw-ctl report`: to stdout, or written atomically to `-o FILE` (private: it holds the
/// agents' messages and output).
pub(super) fn report(out: &mut Out, c: &Call, _args: &[&str]) -> Result<u8> {
    let run: Option<u64> = c.number("run")?;
    let inst = c.common.instance()?;
    let r = crate::report::gather(&inst, run)?;
    for p in &r.problems {
        crate::warn::warn("aw-ctl", p);
    }
    let mut text = match c.has("json") {
        true => serde_json::to_string(&r).expect("a report serializes"),
        false => crate::report::render(&r),
    };
    match c.string("output") {
        Some(path) if path != "-" => {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            crate::fs::atomic_write_private(std::path::Path::new(&path), text.as_bytes())?;
            Ok(0)
        }
        _ => {
            out.line(text.trim_end_matches('\n'))?;
            Ok(0)
        }
    }
}
