//! Workflow files as `aw-run --check FILE` reads them: the bytes written to a file, then
//! loaded and checked (YAML, structure, references, templates, expressions, durations).
//!
//! Input: the file's bytes. Checked: no panic; a refusal lists at least one error; every
//! problem is one line, at a position (line and column from 1) inside the file it names;
//! a file that loads checks the same way twice.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use aw::run::{Vars, check, load};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fn file() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| common::scratch("workflow").join("w.yaml"))
}

fn vars() -> Vars {
    let mut v = Vars::new();
    v.set_env([("HOME".to_string(), "/home/u".to_string())]);
    v.define("ticket=42").unwrap();
    v
}

fuzz_target!(|data: &[u8]| {
    let path = file();
    std::fs::write(path, data).unwrap();
    let text = String::from_utf8_lossy(data);
    // Lines as YAML counts them: a line ends at LF, CR LF or a lone CR.
    let lines = text.replace("\r\n", "\n").split(['\n', '\r']).count();
    let vars = vars();
    let diags = match load(path, &vars) {
        Ok((_, warnings)) => {
            let again = check(path, &vars).expect("a file that loads checks again");
            assert_eq!(again, warnings);
            warnings
        }
        Err(aw::run::LoadError::Invalid(list)) => {
            assert!(
                list.iter().any(|d| !d.warning),
                "refused without an error: {list:?}"
            );
            list
        }
        Err(aw::run::LoadError::Read(e)) => {
            // Only a file over the size limit is refused before it is read.
            assert!(data.len() as u64 > aw::run::workflow::MAX_FILE, "{e}");
            return;
        }
    };
    for d in &diags {
        let line = d.render();
        assert!(
            !line.contains('\n'),
            "a problem on more than one line: {line:?}"
        );
        assert!(d.pos.line >= 1 && d.pos.col >= 1, "{line}");
        if &d.file == path {
            assert!(d.pos.line <= lines, "{line}: past the last line ({lines})");
        }
    }
});
