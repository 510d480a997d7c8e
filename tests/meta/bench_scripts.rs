//! The benchmark scripts (bench/agents.sh, bench/chain.sh, bench/mentions.sh,
//! bench/names.sh, bench/board.sh, bench/merge.sh, bench/wake.sh) as a user runs them: usage
//! errors, a small real run on the binaries under test, the cap, and no server left behind. Figures are printed, never asserted on.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::runner::{assert_code, run_hang_guarded, stderr};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn bin_dir() -> PathBuf {
    common::bin("aw-run")
        .parent()
        .expect("bin dir")
        .to_path_buf()
}

/// `bash bench/SCRIPT ARGS...` in the repository, with TMPDIR set to `tmp` (where the
/// script makes its scratch directory and its servers' roots).
fn script(name: &str, args: &[&str], tmp: &Path) -> Output {
    let mut c = Command::new("bash");
    c.current_dir(repo())
        .arg(format!("bench/{name}"))
        .args(args)
        .env("TMPDIR", tmp);
    for v in ["AW_ROOT", "AW_INSTANCE", "AW_AGENT", "AW_SYNC"] {
        c.env_remove(v);
    }
    run_hang_guarded(c)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The cells of the table row that starts with `| SIZE | BUILD |`.
fn row(out: &Output, size: &str, build: &str) -> Vec<String> {
    let head = format!("| {size} | {build} |");
    let text = stdout(out);
    let line = text
        .lines()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no row {head} in:\n{text}"));
    line.trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

/// Live processes whose command line names a path under `dir`.
fn processes_under(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if e.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(&needle) {
            found.push(cmd);
        }
    }
    found
}

/// The scratch directories (`mktemp -d`: tmp.XXXXXXXXXX) left in `dir`. aw keeps records of
/// its own there too (`aw-UID/`), which are not the script's.
fn scratch_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tmp."))
        .collect()
}

/// A number at the start of a cell ("12.5 ms", "16").
fn number(cell: &str) -> f64 {
    cell.split_whitespace()
        .next()
        .and_then(|n| n.replace(',', "").parse().ok())
        .unwrap_or_else(|| panic!("not a figure: {cell:?}"))
}

#[test]
fn growth_curve_scripts_refuse_bad_arguments_with_64_and_a_missing_build_with_66() {
    let tmp = tempfile::tempdir().unwrap();
    let scripts = ["agents.sh", "chain.sh", "mentions.sh", "names.sh"];
    for s in scripts {
        let out = script(s, &["--bogus"], tmp.path());
        assert_code(&out, 64);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{s}: {err}");
        assert!(err.contains("unknown argument '--bogus'"), "{s}: {err}");

        let out = script(s, &["--sizes"], tmp.path());
        assert_code(&out, 64);
        assert!(stderr(&out).contains("--sizes needs a value"), "{s}");

        let out = script(s, &["--before", "/nonexistent/aw-bins"], tmp.path());
        assert_code(&out, 66);
        assert!(stderr(&out).contains("/nonexistent/aw-bins"), "{s}");

        let out = script(s, &["--help"], tmp.path());
        assert_code(&out, 0);
        assert!(
            stdout(&out).contains(&format!("Usage: bash bench/{s}")),
            "{s}: {}",
            stdout(&out)
        );
    }
    let out = script("names.sh", &["--reps", "0"], tmp.path());
    assert_code(&out, 64);
    assert!(stderr(&out).contains("is not a positive whole number"));
    for s in ["agents.sh", "chain.sh"] {
        for bad in [["--reps", "0"], ["--cap", "5s"], ["--sizes", "10 x"]] {
            let out = script(s, &bad, tmp.path());
            assert_code(&out, 64);
            assert!(
                stderr(&out).contains("is not a positive whole number"),
                "{s} {bad:?}: {}",
                stderr(&out)
            );
        }
    }
    // Nothing was started, and every scratch directory is gone.
    assert_eq!(scratch_dirs(tmp.path()), Vec::<String>::new());
}

/// `bash bench/SCRIPT --after BINS ARGS...` (the binaries under test), in a new TMPDIR; its
/// row of SIZE once it has exited 0, having left no process and no scratch directory.
fn measured(name: &str, size: &str, args: &[&str]) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let bins = bin_dir();
    let mut all = vec![
        "--after",
        bins.to_str().unwrap(),
        "--sizes",
        size,
        "--reps",
        "1",
    ];
    all.extend_from_slice(args);
    let out = script(name, &all, tmp.path());
    assert_code(&out, 0);
    assert_eq!(processes_under(tmp.path()), Vec::<String>::new());
    assert_eq!(scratch_dirs(tmp.path()), Vec::<String>::new());
    row(&out, size, "after")
}

#[test]
fn agents_sh_measures_a_kept_server_of_n_agents_and_stops_it() {
    let cells = measured("agents.sh", "3", &["--msgs", "2", "--idle", "1"]);
    assert_eq!(cells.len(), 11, "{cells:?}");
    assert!(
        !cells.iter().any(|c| c.contains("cap")),
        "nothing is past the cap: {cells:?}"
    );
    // Threads and descriptors of a live server were read; the wake has a median and a mean.
    assert!(
        number(&cells[5]) >= 1.0 && number(&cells[6]) >= 3.0,
        "{cells:?}"
    );
    assert!(
        cells[10].ends_with(" ms") && cells[10].contains(" ms, "),
        "{cells:?}"
    );
}

#[test]
fn past_its_cap_a_case_shows_cap_and_its_server_is_stopped() {
    // The idle measurement alone (2 s) passes the cap (1 s): no message is sent.
    let args = ["--msgs", "2", "--idle", "2", "--cap", "1"];
    let cells = measured("agents.sh", "2", &args);
    assert_eq!(cells[8], "> cap", "CPU per message: {cells:?}");
    assert_eq!(cells[10], "> cap", "wake: {cells:?}");
}

#[test]
fn chain_sh_runs_a_chain_to_its_last_agent_and_stops_the_server() {
    let cells = measured("chain.sh", "4", &[]);
    assert_eq!(cells.len(), 8, "{cells:?}");
    assert!(
        !cells.iter().any(|c| c.contains("cap")),
        "the chain ended: {cells:?}"
    );
    // The total covers the hops, each counted from the entries' timestamps; aw-run's CPU
    // time over the chain was read, and divided by the hops.
    assert!(number(&cells[2]) >= number(&cells[3]), "{cells:?}");
    assert!(
        cells[6].ends_with(" ms") && cells[7].ends_with(" ms"),
        "{cells:?}"
    );
    assert!(number(&cells[6]) >= number(&cells[7]), "{cells:?}");
}

#[test]
fn names_sh_times_a_send_and_a_change_of_the_registry_of_n_agents() {
    let cells = measured("names.sh", "5", &[]);
    assert_eq!(cells.len(), 8, "{cells:?}");
    // The smallest size is its own base.
    assert_eq!(cells[3], "1.00", "{cells:?}");
    for c in [&cells[2], &cells[4], &cells[5], &cells[6], &cells[7]] {
        assert!(number(c) > 0.0, "{cells:?}");
    }
}

/// `bash bench/SCRIPT ARGS` exits with `code` and one line on stderr that says `says`, for
/// each of `cases`.
fn refuses(name: &str, cases: &[(&[&str], i32, &str)], tmp: &Path) {
    for (args, code, says) in cases {
        let out = script(name, args, tmp);
        assert_code(&out, *code);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{name} {args:?}: {err}");
        assert!(err.contains(says), "{name} {args:?}: {err}");
    }
}

/// bench/board.sh refuses bad arguments (64) and a missing build (66); a small real run on
/// the binaries under test prints a figure for each operation and each size, makes its
/// boards where it is told, and leaves no scratch directory behind.
#[test]
fn board_sh_measures_each_operation_on_each_size_and_refuses_bad_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], i32, &str)] = &[
        (&["--bogus"], 64, "unknown argument '--bogus'"),
        (&["--sizes"], 64, "--sizes needs a value"),
        (&["--sizes", "3"], 64, "a board of 3 cards: at least 4"),
        (&["--reps", "x"], 64, "'x' is not a whole number"),
        (
            &["--bin", "/nonexistent/aw-bins"],
            66,
            "/nonexistent/aw-bins",
        ),
    ];
    refuses("board.sh", cases, tmp.path());
    let data = tmp.path().join("data");
    let bins = bin_dir();
    let out = script(
        "board.sh",
        &[
            "--sizes",
            "4 6",
            "--reps",
            "3",
            "--bin",
            bins.to_str().unwrap(),
            "--data",
            data.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert_code(&out, 0);
    let text = stdout(&out);
    for size in ["4", "6"] {
        for op in ["start", "claim-next", "claim-id", "done", "lease-take"] {
            let row = text
                .lines()
                .find(|l| l.starts_with(&format!("{size} {op} ")))
                .unwrap_or_else(|| panic!("no row {size} {op} in:\n{text}"));
            let cells: Vec<&str> = row.split(' ').collect();
            assert_eq!(cells.len(), 4, "{row}");
            number(cells[2]);
        }
        let cards = std::fs::read_dir(data.join(size).join("big/board"))
            .unwrap()
            .count();
        assert_eq!(cards.to_string(), size, "the cached board of {size} cards");
    }
    assert_eq!(scratch_dirs(tmp.path()), Vec::<String>::new());
}

/// bench/merge.sh merges as many branches as it says, through aw and through git alone,
/// prints both figures and their difference, and leaves no scratch directory; it refuses
/// bad arguments with 64 and a missing build with 66.
#[test]
fn merge_sh_merges_each_branch_once_each_way_and_cleans_up() {
    let tmp = tempfile::tempdir().unwrap();
    let bins = bin_dir();
    let out = script(
        "merge.sh",
        &["--reps", "2", "--bin", bins.to_str().unwrap()],
        tmp.path(),
    );
    assert_code(&out, 0);
    let text = stdout(&out);
    for label in [
        "| aw-ctl --version |",
        "| the same git commands from a shell script |",
        "| aw-ctl merge request --verify true |",
    ] {
        let line = text.lines().find(|l| l.starts_with(label));
        let cell = line.unwrap_or_else(|| panic!("no {label} in:\n{text}"));
        number(cell.trim_end_matches('|').rsplit('|').next().unwrap());
    }
    assert!(text.contains("| overhead of aw | "), "{text}");
    assert_eq!(scratch_dirs(tmp.path()), Vec::<String>::new());

    for (args, code, said) in [
        (&["--reps", "0"][..], 64, "is not a positive whole number"),
        (&["--bogus"], 64, "unknown argument '--bogus'"),
        (
            &["--bin", "/nonexistent/aw-bins"],
            66,
            "/nonexistent/aw-bins",
        ),
    ] {
        let out = script("merge.sh", args, tmp.path());
        assert_code(&out, code);
        assert!(stderr(&out).contains(said), "{args:?}: {}", stderr(&out));
    }
}

/// bench/wake.sh builds its two helpers, serves an exec agent that stamps its start, and
/// prints a row of figures for the floor (the watcher spawning the program itself) and for
/// the build, each wake counted once per mention; it leaves no process and no scratch
/// directory, and refuses bad arguments with 64 and a missing build with 66.
#[test]
fn wake_sh_stamps_each_mention_of_an_exec_agent_and_cleans_up() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], i32, &str)] = &[
        (&["--bogus"], 64, "unknown argument '--bogus'"),
        (&["--count"], 64, "--count needs a value"),
        (&["--count", "0"], 64, "'0' is not a positive whole number"),
        (&["--rt", "maybe"], 64, "--rt takes yes or no, not 'maybe'"),
        (
            &["--after", "/nonexistent/aw-bins"],
            66,
            "/nonexistent/aw-bins",
        ),
    ];
    refuses("wake.sh", cases, tmp.path());
    let bins = bin_dir();
    let out = script(
        "wake.sh",
        &["--after", bins.to_str().unwrap(), "--count", "5"],
        tmp.path(),
    );
    assert_code(&out, 0);
    let text = stdout(&out);
    assert!(text.contains("5 mentions per run"), "{text}");
    for build in ["floor", "after"] {
        let head = format!("| {build} |");
        let line = text
            .lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("no row {head} in:\n{text}"));
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 6, "{line}");
        // p50 <= p90 <= p99 <= max, in ms (the watcher's stamp may come late on a busy
        // machine: a figure is not asserted on, only their order).
        let p: Vec<f64> = cells[1..5].iter().map(|c| number(c)).collect();
        assert!(p.windows(2).all(|w| w[0] <= w[1]), "{line}");
        assert!(cells[1].ends_with(" ms"), "{line}");
    }
    assert!(!text.contains("| before |"), "{text}");
    assert_eq!(processes_under(tmp.path()), Vec::<String>::new());
    assert_eq!(scratch_dirs(tmp.path()), Vec::<String>::new());
}
