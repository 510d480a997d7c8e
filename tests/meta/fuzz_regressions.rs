//! Inputs found by the fuzz targets (fuzz/, see the README's FUZZING section), replayed
//! through the real program: each once crashed it, and must now be refused with a one-line
//! error at its place and the documented exit status. The unit tests next to each fix hold
//! the narrower cases.

use crate::common;

use std::path::Path;

const DATAERR: i32 = 65;

/// `aw-run --check FILE` on `text`: its exit status and the lines it printed on stderr.
fn check(dir: &Path, text: &str) -> (Option<i32>, Vec<String>) {
    let file = dir.join("w.yaml");
    std::fs::write(&file, text).unwrap();
    let mut cmd = common::tool("aw-run");
    cmd.arg("--check").arg(&file).current_dir(dir);
    let out = common::run_with(cmd, None);
    let err = String::from_utf8_lossy(&out.stderr);
    (out.status.code(), err.lines().map(str::to_string).collect())
}

fn workflow(task: &str) -> String {
    format!("name: f\nagents:\n  a:\n    mock:\n      replies: [ok]\ntasks:\n{task}")
}

/// The `expr` target: an `if:` nested a few thousand levels deep overflowed the stack
/// (SIGSEGV) while the expression was parsed.
#[test]
fn a_deeply_nested_if_is_refused_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    for expr in [
        format!("{}a{}", "(".repeat(100_000), ")".repeat(100_000)),
        format!("'{}a'", "!".repeat(100_000)),
        format!("a{}", " && a".repeat(50_000)),
    ] {
        let text = workflow(&format!("  - if: {expr}\n    shell: 'true'\n"));
        let (code, lines) = check(dir.path(), &text);
        assert_eq!(code, Some(DATAERR), "{lines:?}");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("w.yaml:7:") && lines[0].contains("nested more than 64 levels deep"),
            "{}",
            lines[0]
        );
    }
}

/// The `interpolate` target: a reference right after `<<\` (taken as part of a here-document
/// delimiter) made `aw-run --check` panic (exit 101).
#[test]
fn a_reference_in_a_here_document_delimiter_is_refused_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["cat <<\\${{ x }}", "'<<\\${{x}}'"] {
        let text = workflow(&format!(
            "  - shell: echo hi\n    as: x\n  - shell: {shell}\n"
        ));
        let (code, lines) = check(dir.path(), &text);
        assert_eq!(code, Some(DATAERR), "{shell}: {lines:?}");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("w.yaml:9:"), "{}", lines[0]);
    }
}

/// The `workflow` target: a YAML error, or an empty node, at the end of a file without a
/// final newline was placed on a line after the last one.
#[test]
fn a_yaml_error_at_the_end_is_placed_inside_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (code, lines) = check(dir.path(), ":\n~");
    assert_eq!(code, Some(DATAERR), "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("w.yaml:2:2: invalid YAML"),
        "{}",
        lines[0]
    );
    // An empty document: the null found at the end of the text.
    let (code, lines) = check(dir.path(), "---");
    assert_eq!(code, Some(DATAERR), "{lines:?}");
    assert!(
        lines[0].contains("w.yaml:1:4: expected a mapping"),
        "{lines:?}"
    );
}
