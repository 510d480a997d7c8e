//! The front door of the repository: `make demo` (scripts/demo.sh) on a fresh instance each
//! time with its channel shown once, and `make test`'s total line (scripts/test-total.sh),
//! run as make runs them.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::runner::{assert_code, path_with_bins, run_hang_guarded, stderr};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_demo_shows_the_channel_once_on_a_fresh_instance_each_time() {
    let root = tempfile::tempdir().unwrap();
    let demo = || {
        let mut c = Command::new("sh");
        c.arg(repo().join("scripts/demo.sh"))
            .env("PATH", path_with_bins())
            .env("AW_ROOT", root.path());
        run_hang_guarded(c)
    };
    let mut instances = Vec::new();
    for _ in 0..2 {
        let out = demo();
        assert_code(&out, 0);
        let shown = String::from_utf8_lossy(&out.stdout).into_owned();
        for line in [
            "@system: @alice please find out the answer from bob.",
            "@alice: @bob what is the answer?",
            "@bob: @alice the answer is 42.",
            "@alice: Thanks, done.",
        ] {
            assert_eq!(shown.matches(line).count(), 1, "{line}: {shown}");
        }
        assert_eq!(shown.lines().count(), 4, "{shown}");
        let err = stderr(&out);
        let last = err.lines().last().unwrap_or_default().to_string();
        let inst = last
            .strip_prefix("demo: a new instance '")
            .and_then(|r| r.split('\'').next())
            .unwrap_or_else(|| panic!("{err}"))
            .to_string();
        assert!(
            last.ends_with(&format!("aw-peek -i {inst} -n 0 shows its channel again")),
            "{last}"
        );
        instances.push(inst);
    }
    assert_ne!(instances[0], instances[1]);
    for inst in &instances {
        let channel = std::fs::read_to_string(root.path().join(inst).join("channel.md")).unwrap();
        assert_eq!(channel.matches("Thanks, done.").count(), 1, "{channel}");
    }
}

/// A stand-in for `cargo` or `fuzz/run.sh` that prints `text` and exits with `code`.
fn fake(dir: &Path, name: &str, text: &str, code: i32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!("#!/bin/sh\ncat <<'END'\n{text}END\nexit {code}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// scripts/test-total.sh with a cargo and a fuzz run that print `tests` and `fuzz`.
fn total(tests: (&str, i32), fuzz: (&str, i32)) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let cargo = fake(dir.path(), "cargo", tests.0, tests.1);
    let fuzz = fake(dir.path(), "fuzz.sh", fuzz.0, fuzz.1);
    let mut c = Command::new("sh");
    c.arg(repo().join("scripts/test-total.sh"))
        .arg("--release")
        .env("CARGO", cargo)
        .env("FUZZ_RUN", fuzz)
        .env("FUZZ_SMOKE_TIME", "1");
    run_hang_guarded(c)
}

fn last_line(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().last().unwrap_or_default().to_string()
}

const PASSED: &str = "\
running 3 tests
test a ... ok
test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.10s
test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 1.00s
";
const FUZZED: &str = "\
fuzz/run.sh: building the fuzz targets
fuzz/run.sh: workflow for 1s
fuzz/run.sh: channel for 1s
fuzz/run.sh: every target ran 1s without a failure
";

#[test]
fn make_test_ends_with_one_total_line_and_fails_when_anything_fails() {
    let out = total((PASSED, 0), (FUZZED, 0));
    assert_code(&out, 0);
    assert_eq!(last_line(&out), "17 passed, 0 failed");
    // The output is shown as well as counted.
    assert!(String::from_utf8_lossy(&out.stdout).contains("test a ... ok"));

    // A failing test: counted, the fuzz run skipped, the status kept.
    let failing = PASSED.replace("ok. 12 passed; 0 failed", "FAILED. 10 passed; 2 failed");
    let out = total((&failing, 101), (FUZZED, 0));
    assert_code(&out, 101);
    assert_eq!(last_line(&out), "13 passed, 2 failed");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("fuzz/run.sh"));

    // Nothing compiled: no test counted, and the line says why.
    let out = total(("error[E0425]: cannot find value `x`\n", 101), (FUZZED, 0));
    assert_code(&out, 101);
    assert_eq!(
        last_line(&out),
        "0 passed, 0 failed (cargo test exited with status 101)"
    );

    // A fuzz target that fails fails the whole.
    let crashed = "fuzz/run.sh: workflow for 1s\nfuzz/run.sh: workflow: FAILED, see fuzz/artifacts/workflow/:\n";
    let out = total((PASSED, 0), (crashed, 1));
    assert_code(&out, 1);
    assert_eq!(last_line(&out), "15 passed, 1 failed");
}

/// The recipe of `target` in the Makefile: its lines, without the leading tab.
fn recipe(target: &str) -> Vec<String> {
    let make = std::fs::read_to_string(repo().join("Makefile")).unwrap();
    let head = format!("{target}:");
    make.lines()
        .skip_while(|l| !l.starts_with(&head))
        .skip(1)
        .take_while(|l| l.starts_with('\t'))
        .map(|l| l.trim_start_matches('\t').to_string())
        .collect()
}

#[test]
fn make_demo_and_make_test_run_these_scripts_with_make_builds_profile() {
    let demo = recipe("demo");
    assert_eq!(demo.len(), 1, "{demo:?}");
    assert!(demo[0].ends_with("sh scripts/demo.sh"), "{demo:?}");
    let test = recipe("test");
    assert_eq!(test[0], "sh scripts/test-deps.sh");
    assert!(
        test[1].starts_with("$(STATIC) ")
            && test[1].ends_with("sh scripts/test-total.sh --no-fail-fast $(PROFILE)"),
        "{test:?}"
    );
    assert_eq!(
        recipe("build"),
        ["$(STATIC) $(CARGO) build $(PROFILE) --bins"]
    );
}

#[test]
fn make_check_fails_on_a_dependency_named_nowhere() {
    // The script on a small crate of its own: one dependency used, one not.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for sub in ["scripts", "src", "tests", "benches"] {
        std::fs::create_dir(d.join(sub)).unwrap();
    }
    std::fs::copy(
        repo().join("scripts/unused-deps.sh"),
        d.join("scripts/unused-deps.sh"),
    )
    .unwrap();
    std::fs::write(
        d.join("Cargo.toml"),
        "[package]\nname = \"x\"\n\n[dependencies]\nserde = \"1\"\nglob = \"0.3\"\n\
         serde-json = \"1\"\n\n[dev-dependencies]\ntempfile = \"3\"\n",
    )
    .unwrap();
    std::fs::write(
        d.join("src/lib.rs"),
        "use serde::Serialize;\npub fn f() { serde_json::json!(1); }\n",
    )
    .unwrap();
    let script = || {
        let mut c = Command::new("sh");
        c.arg(d.join("scripts/unused-deps.sh"));
        run_hang_guarded(c)
    };
    let out = script();
    assert_code(&out, 1);
    assert_eq!(
        stderr(&out),
        "unused dependency: glob (named nowhere in src/, tests/ or benches/)\n"
    );
    std::fs::write(
        d.join("tests/t.rs"),
        "fn g() { let _ = glob::glob(\"*\"); }\n",
    )
    .unwrap();
    assert_code(&script(), 0);
    // The repository's own dependencies are all used, and `make check` runs the script.
    let mut c = Command::new("sh");
    c.arg(repo().join("scripts/unused-deps.sh"));
    let out = run_hang_guarded(c);
    assert_code(&out, 0);
    let makefile = std::fs::read_to_string(repo().join("Makefile")).unwrap();
    let check = makefile.split("\ncheck:\n").nth(1).unwrap();
    let check = check.split("\n\n").next().unwrap();
    assert!(check.contains("sh scripts/unused-deps.sh"), "{check}");
}
