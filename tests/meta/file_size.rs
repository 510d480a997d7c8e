//! No source file is longer than one sitting's reading: every `src/**/*.rs` has at most
//! [`MAX_LINES`] lines before its first `#[cfg(test)]` line (its test module). A file that
//! is itself only a test module (declared `#[cfg(test)] mod NAME;`, like
//! `run/workflow/tests.rs`) is not counted. A file over the limit is split by concept, one
//! idea to a file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Most lines a source file may have before its test module.
const MAX_LINES: usize = 1000;

/// Files still over the limit while another change splits them: (path under `src/`, why).
/// Empty when every file keeps the limit.
const PENDING: &[(&str, &str)] = &[];

/// The lines of `text` before its first `#[cfg(test)]` line (all of them when none).
fn lines_before_tests(text: &str) -> usize {
    text.lines()
        .position(|l| l.trim() == "#[cfg(test)]")
        .unwrap_or_else(|| text.lines().count())
}

/// The names of the modules `text` declares as test-only: `mod NAME;` whose line before
/// (blank lines aside) is `#[cfg(test)]`.
fn test_only_mods(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut found = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(name) = l
            .strip_prefix("mod ")
            .or_else(|| l.strip_prefix("pub mod "))
            .and_then(|r| r.strip_suffix(';'))
        else {
            continue;
        };
        let before = lines[..i].iter().rev().find(|l| !l.is_empty());
        if before == Some(&"#[cfg(test)]") {
            found.push(name.trim().to_string());
        }
    }
    found
}

/// Where the modules that the file `parent` declares live: beside it for `lib.rs`,
/// `main.rs` and `mod.rs`, else in the folder named after it.
fn module_dir(parent: &Path) -> PathBuf {
    let dir = parent.parent().unwrap_or(Path::new(""));
    match parent.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "main.rs" | "mod.rs") => dir.to_path_buf(),
        _ => dir.join(parent.file_stem().unwrap_or_default()),
    }
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.expect("directory entry").path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// Each file of `files` (with its text) over `max` lines before its tests, test-only
/// modules aside, as `path: N lines before its tests (limit max)`.
fn over_limit(files: &[(PathBuf, String)], max: usize) -> Vec<String> {
    let mut test_only = BTreeSet::new();
    for (path, text) in files {
        let dir = module_dir(path);
        for name in test_only_mods(text) {
            test_only.insert(dir.join(format!("{name}.rs")));
            test_only.insert(dir.join(&name).join("mod.rs"));
        }
    }
    files
        .iter()
        .filter(|(path, _)| !test_only.contains(path))
        .filter_map(|(path, text)| {
            let n = lines_before_tests(text);
            (n > max).then(|| {
                format!(
                    "{}: {n} lines before its tests (limit {max})",
                    path.display()
                )
            })
        })
        .collect()
}

#[test]
fn no_source_file_is_over_the_limit_before_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let files: Vec<(PathBuf, String)> = rust_files(&src)
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            (
                p.strip_prefix(root).expect("under the root").to_path_buf(),
                text,
            )
        })
        .collect();
    assert!(
        files.len() > 50,
        "only {} files found under {}",
        files.len(),
        src.display()
    );
    let pending: Vec<String> = PENDING.iter().map(|(p, _)| format!("src/{p}: ")).collect();
    let over: Vec<String> = over_limit(&files, MAX_LINES)
        .into_iter()
        .filter(|o| !pending.iter().any(|p| o.starts_with(p)))
        .collect();
    assert!(
        over.is_empty(),
        "split these files by concept:\n{}",
        over.join("\n")
    );
}

#[test]
fn the_check_counts_up_to_the_test_module_and_skips_test_only_files() {
    let long = |n: usize, tail: &str| format!("{}{tail}", "fn f() {}\n".repeat(n));
    let files = vec![
        // Over: 5 lines, no tests.
        (PathBuf::from("src/big.rs"), long(5, "")),
        // 3 lines before its tests, 10 after: under.
        (
            PathBuf::from("src/small.rs"),
            long(
                3,
                &format!("#[cfg(test)]\nmod tests {{\n{}}}\n", long(10, "")),
            ),
        ),
        // Declares a test-only module, and an ordinary one.
        (
            PathBuf::from("src/run/workflow.rs"),
            "mod read;\n#[cfg(test)]\n\nmod tests;\n".to_string(),
        ),
        // The test-only module itself: long, not counted.
        (PathBuf::from("src/run/workflow/tests.rs"), long(9, "")),
        // An ordinary module beside it: counted.
        (PathBuf::from("src/run/workflow/read/mod.rs"), long(6, "")),
    ];
    assert_eq!(
        over_limit(&files, 4),
        [
            "src/big.rs: 5 lines before its tests (limit 4)",
            "src/run/workflow/read/mod.rs: 6 lines before its tests (limit 4)",
        ]
    );
    assert_eq!(lines_before_tests("a\nb\n  #[cfg(test)]\nc\n"), 2);
    assert_eq!(test_only_mods("#[cfg(test)]\nmod a;\nmod b;\n"), ["a"]);
    assert_eq!(module_dir(Path::new("src/lib.rs")), Path::new("src"));
    assert_eq!(
        module_dir(Path::new("src/run/mod.rs")),
        Path::new("src/run")
    );
    assert_eq!(
        module_dir(Path::new("src/run/workflow.rs")),
        Path::new("src/run/workflow")
    );
}
