//! Documents and resources stay inside the instance under attack: a folder swapped for a
//! symlink while the tools run, special files (FIFOs, devices) under document names, files
//! over the size limit, and writers interrupted by signals.

use crate::common;
use crate::mcp_common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Rng, assert_error};
use mcp_common::{INSTANCE, Raw, Team, command};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

const DATAERR: i32 = 65;
const NOPERM: i32 = 77;

/// Guard against a hung tool; never used to judge speed.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// How long the race test keeps the tools running against the swapping folder.
const RACE_TIME: Duration = Duration::from_secs(3);

const SECRET: &str = "SECRET outside the instance";

/// Run `tool ARGS` against `team` with `input` on stdin, killing it (and failing the test)
/// if it does not end within [`HANG_GUARD`].
fn run_guarded(team: &Team, tool: &str, args: &[&str], input: Option<&[u8]>) -> Output {
    let mut c = command(tool);
    c.arg("--root").arg(&team.root).args(args);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap_or_else(|e| panic!("spawn {tool}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let data = input.unwrap_or_default().to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + HANG_GUARD;
            while !done.load(Ordering::Relaxed) {
                if Instant::now() > until {
                    let pid = nix::unistd::Pid::from_raw(pid as i32);
                    let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
                    return true;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            false
        })
    };
    let out = child.wait_with_output().expect("wait");
    done.store(true, Ordering::Relaxed);
    assert!(
        !watchdog.join().unwrap(),
        "{tool} {args:?} hung and was killed"
    );
    feeder.join().unwrap();
    out
}

fn call(raw: &mut Raw, id: u64, tool: &str, args: Value) -> Value {
    raw.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": args}}));
    raw.response(id)["result"].clone()
}

/// The text of a tool result and whether it is an error.
fn outcome(result: &Value) -> (String, bool) {
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string();
    (text, result["isError"] == json!(true))
}

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Swap the folder `documents/d` and the symlink `documents/link` (to a folder outside the
/// instance) with `renameat2(RENAME_EXCHANGE)` until `stop` is set; return how many swaps.
fn swapper(docs: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    use nix::fcntl::{RenameFlags, renameat2};
    std::thread::spawn(move || {
        let dir = std::fs::File::open(&docs).unwrap();
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            renameat2(&dir, "d", &dir, "link", RenameFlags::RENAME_EXCHANGE).unwrap();
            n += 1;
        }
        // Leave the real folder under its own name.
        if std::fs::symlink_metadata(docs.join("d"))
            .unwrap()
            .file_type()
            .is_symlink()
        {
            renameat2(&dir, "d", &dir, "link", RenameFlags::RENAME_EXCHANGE).unwrap();
        }
        n
    })
}

#[test]
fn a_folder_swapped_for_a_symlink_never_leads_outside() {
    let team = Team::new();
    team.ctl_ok(&["doc", "write", "d/x.md"]);
    let docs = team.docs();
    std::fs::write(docs.join("d/x.md"), "inside\n").unwrap();
    let outside = team.base.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("x.md"), SECRET).unwrap();
    std::os::unix::fs::symlink(&outside, docs.join("link")).unwrap();

    let mut raw = Raw::start(&team, "alice");
    raw.initialize();
    let mut id = 10;

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = swapper(docs.clone(), stop.clone());
    let (mut reads, mut writes, mut refused) = (0u64, 0u64, 0u64);
    let (mut leaks, mut odd) = (Vec::new(), Vec::new());
    let start = Instant::now();
    let mut round = 0u64;
    while start.elapsed() < RACE_TIME {
        round += 1;
        let body = format!("written {round}\n");
        for (tool, args, input) in [
            ("aw-ctl", vec!["doc", "read", "d/x.md"], None),
            (
                "aw-ctl",
                vec!["doc", "write", "d/x.md"],
                Some(body.as_bytes()),
            ),
            ("aw-peek", vec!["--doc", "d/x.md"], None),
            (
                "aw-ctl",
                vec!["doc", "append", "d/x.md"],
                Some(b"".as_slice()),
            ),
        ] {
            let out = run_guarded(&team, tool, &args, input);
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            if stdout.contains("SECRET") {
                leaks.push(format!("{tool} {args:?}: {stdout}"));
            }
            match out.status.code() {
                Some(0) if input.is_some() => writes += 1,
                Some(0) => reads += 1,
                Some(NOPERM) => {
                    refused += 1;
                    assert_error(&out, tool, NOPERM, "a symlink in the way");
                }
                other => odd.push(format!(
                    "{tool} {args:?}: exit {other:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                )),
            }
        }
        for (tool, args) in [
            ("team_doc_read", json!({"file": "d/x.md"})),
            ("team_doc_write", json!({"file": "d/x.md", "content": body})),
            ("team_doc_append", json!({"file": "d/x.md", "content": "+"})),
        ] {
            id += 1;
            let (text, is_error) = outcome(&call(&mut raw, id, tool, args));
            if text.contains("SECRET") {
                leaks.push(format!("{tool}: {text}"));
            }
            if is_error {
                if !text.contains("symbolic link") {
                    odd.push(format!("{tool}: {text}"));
                }
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swaps.join().unwrap();
    drop(raw);

    assert!(leaks.is_empty(), "read outside the instance: {leaks:?}");
    assert_eq!(names(&outside), ["x.md"], "files created outside");
    assert_eq!(
        std::fs::read_to_string(outside.join("x.md")).unwrap(),
        SECRET
    );
    assert!(
        odd.is_empty(),
        "{} unexpected outcomes, the first: {:?}",
        odd.len(),
        &odd[..odd.len().min(5)]
    );
    assert!(swaps > 0 && reads + writes + refused > 0);
    eprintln!("{swaps} swaps, {reads} reads, {writes} writes, {refused} refused");
    // Inside, the document is one of the versions written.
    let text = std::fs::read_to_string(docs.join("d/x.md")).unwrap();
    assert!(
        text.starts_with("inside\n") || text.starts_with("written "),
        "document is {text:?}"
    );
    assert!(
        names(&docs.join("d")).iter().all(|n| !n.starts_with('.')),
        "temporary files left: {:?}",
        names(&docs.join("d"))
    );
}

#[test]
fn symlinks_inside_documents_are_refused_and_not_listed() {
    let team = Team::new();
    team.ctl_ok(&["doc", "write", "sub/real.md"]);
    let docs = team.docs();
    std::os::unix::fs::symlink("sub", docs.join("alias")).unwrap();
    std::os::unix::fs::symlink("sub/real.md", docs.join("same.md")).unwrap();
    let before = tree(&team.base);
    for file in ["alias/real.md", "same.md"] {
        let out = run_guarded(&team, "aw-ctl", &["doc", "read", file], None);
        let e = assert_error(&out, "aw-ctl", NOPERM, file);
        assert!(e.contains("symbolic link"), "{e}");
        for sub in ["write", "append"] {
            let out = run_guarded(&team, "aw-ctl", &["doc", sub, file], Some(b"x"));
            assert_error(&out, "aw-ctl", NOPERM, file);
        }
        let out = run_guarded(&team, "aw-ctl", &["doc", "rm", file], None);
        assert_error(&out, "aw-ctl", NOPERM, file);
        let out = run_guarded(&team, "aw-peek", &["--doc", file], None);
        assert_error(&out, "aw-peek", NOPERM, file);
    }
    assert_eq!(
        tree(&team.base),
        before,
        "refused symlinks changed something"
    );
    assert_eq!(team.ctl_ok(&["doc", "list"]), "sub/real.md\n");
}

/// Every path under `dir` with what it is: a folder, a symlink and its target, a regular
/// file and its content, or another kind of file (never opened).
fn tree(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for de in std::fs::read_dir(&d).unwrap() {
            let p = de.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let ft = meta.file_type();
            let what = if ft.is_symlink() {
                format!("link {}", std::fs::read_link(&p).unwrap().display())
            } else if ft.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else if ft.is_file() {
                format!("file {:?}", std::fs::read(&p).unwrap())
            } else {
                format!("special {:o}", std::os::unix::fs::MetadataExt::mode(&meta))
            };
            out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), what);
        }
    }
    out
}

/// Make `documents/NAME` a FIFO.
fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
}

/// Make `path` a character device like /dev/zero, which only root may do.
fn mkzero(path: &Path) {
    use nix::sys::stat::{Mode, SFlag, makedev, mknod};
    mknod(
        path,
        SFlag::S_IFCHR,
        Mode::from_bits_truncate(0o644),
        makedev(1, 5),
    )
    .unwrap_or_else(|e| {
        panic!(
            "cannot make a character device {} ({e}): run the tests as root",
            path.display()
        )
    });
}

#[test]
fn special_files_are_refused_at_once_and_not_listed() {
    let team = Team::new();
    team.ctl_ok(&["doc", "write", "real.md"]);
    let docs = team.docs();
    let specials = ["fifo.md", "zero.md", "sub/pipe.md"];
    mkfifo(&docs.join("fifo.md"));
    mkzero(&docs.join("zero.md"));
    std::fs::create_dir(docs.join("sub")).unwrap();
    mkfifo(&docs.join("sub/pipe.md"));

    let mut raw = Raw::start(&team, "alice");
    raw.initialize();
    let mut id = 10;
    let before = tree(&team.base);
    for file in &specials {
        let want = format!("document '{file}' is not a regular file");
        let out = run_guarded(&team, "aw-ctl", &["doc", "read", file], None);
        let e = assert_error(&out, "aw-ctl", DATAERR, file);
        assert!(e.contains(&want), "{e}");
        for sub in ["write", "append"] {
            let out = run_guarded(&team, "aw-ctl", &["doc", sub, file], Some(b"x"));
            let e = assert_error(&out, "aw-ctl", DATAERR, file);
            assert!(e.contains(&want), "{sub}: {e}");
        }
        let out = run_guarded(&team, "aw-ctl", &["doc", "rm", file], None);
        assert_error(&out, "aw-ctl", DATAERR, file);
        let out = run_guarded(&team, "aw-peek", &["--doc", file], None);
        let e = assert_error(&out, "aw-peek", DATAERR, file);
        assert!(e.contains(&want), "{e}");
        for (tool, args) in [
            ("team_doc_read", json!({ "file": file })),
            ("team_doc_write", json!({"file": file, "content": "x"})),
            ("team_doc_append", json!({"file": file, "content": "x"})),
        ] {
            id += 1;
            let (text, is_error) = outcome(&call(&mut raw, id, tool, args));
            assert!(is_error && text.contains(&want), "{tool} {file}: {text}");
        }
    }
    assert_eq!(tree(&team.base), before, "refusals changed something");
    // The lock is free: another writer is not kept waiting.
    team.ctl_ok(&["doc", "append", "real.md"]);
    assert_eq!(team.ctl_ok(&["doc", "list"]), "real.md\n");
    assert_eq!(
        run_guarded(&team, "aw-peek", &["--docs"], None).stdout,
        b"real.md\n"
    );
    id += 1;
    let list = call(&mut raw, id, "team_doc_list", json!({}));
    assert_eq!(list["structuredContent"]["files"], json!(["real.md"]));
}

#[test]
fn a_document_over_the_limit_is_refused_not_read_whole() {
    let team = Team::new();
    team.ctl_ok(&["doc", "write", "big.md"]);
    let limit = aw::document::MAX_DOCUMENT as u64;
    // Sparse: a file far over the limit costs no disk space.
    let f = std::fs::File::create(team.docs().join("big.md")).unwrap();
    f.set_len(limit * 64).unwrap();
    let out = run_guarded(&team, "aw-ctl", &["doc", "read", "big.md"], None);
    let e = assert_error(&out, "aw-ctl", DATAERR, "huge document");
    assert!(e.contains("over the limit"), "{e}");
    let out = run_guarded(&team, "aw-ctl", &["doc", "append", "big.md"], Some(b"x"));
    let e = assert_error(&out, "aw-ctl", DATAERR, "append to a huge document");
    assert!(e.contains("over the limit"), "{e}");
    // The limit itself is fine.
    f.set_len(limit).unwrap();
    let out = run_guarded(&team, "aw-peek", &["--doc", "big.md"], None);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout.len() as u64, limit);
}

#[test]
fn resources_that_are_special_or_too_big_are_refused() {
    let team = Team::new();
    let inst = aw::instance::Root::new(&team.root)
        .instance(INSTANCE)
        .unwrap();
    let id = aw::resource::create(&inst, "# r\n", None).unwrap();
    let dir = team.inst().join("resources");
    let code = |id: &str| aw::resource::read(&inst, id).map_err(|e| (e.exit_code(), e.to_string()));
    mkfifo(&dir.join("res-00000000000000f1.md"));
    let (c, e) = code("res-00000000000000f1").unwrap_err();
    assert_eq!(c, DATAERR as u8, "{e}");
    assert!(e.contains("not a regular file"), "{e}");
    mkzero(&dir.join("res-00000000000000f2.txt"));
    let (c, e) = code("res-00000000000000f2").unwrap_err();
    assert_eq!(c, DATAERR as u8, "{e}");
    let f = std::fs::File::create(dir.join("res-00000000000000f3.json")).unwrap();
    f.set_len(aw::resource::MAX_RESOURCE as u64 * 8).unwrap();
    let (c, e) = code("res-00000000000000f3").unwrap_err();
    assert_eq!(c, DATAERR as u8, "{e}");
    assert!(e.contains("over the limit"), "{e}");
    std::os::unix::fs::symlink(
        dir.join(format!("{id}.md")),
        dir.join("res-00000000000000f4.md"),
    )
    .unwrap();
    let (c, e) = code("res-00000000000000f4").unwrap_err();
    assert_eq!(c, NOPERM as u8, "{e}");
    assert_eq!(code(&id).unwrap().0, "# r\n");
}

/// Hidden temporary files (`.NAME.tmp.PID.N`) in `dir`.
fn temp_files(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.starts_with('.') && n.contains(".tmp."))
        .collect()
}

const BIG: usize = 8 << 20;

/// Start `aw-ctl doc write big.md`, feed it `BIG` bytes of `fill`, and send it `sig` at a
/// point chosen by `strategy`. Returns once the process is gone.
fn interrupt_a_write(team: &Team, rng: &mut Rng, strategy: usize, fill: u8, sig: Signal) {
    use std::os::unix::process::CommandExt;
    let mut cmd = command("aw-ctl");
    cmd.arg("--root")
        .arg(&team.root)
        .args(["doc", "write", "big.md"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // The signals as a terminal would deliver them, even when the tests run in the
    // background of a shell (which starts them with SIGINT ignored, and so the writer).
    // SAFETY: between fork and exec only signal(2) is called, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            for s in [Signal::SIGINT, Signal::SIGTERM] {
                nix::sys::signal::signal(s, nix::sys::signal::SigHandler::SigDfl)
                    .map_err(std::io::Error::from)?;
            }
            Ok(())
        });
    }
    let mut child: Child = cmd.spawn().unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut stdin = child.stdin.take().unwrap();
    let data = vec![fill; BIG];
    // Where to stop: part-way through stdin, as soon as a temporary file shows up (or the
    // writer is done), or after a few random moments past the end of stdin.
    let part = match strategy {
        0 => rng.below(BIG as u64) as usize,
        _ => BIG,
    };
    let _ = stdin.write_all(&data[..part]);
    if part == BIG {
        drop(stdin);
        let docs = team.docs();
        let spins = if strategy == 1 {
            u64::MAX
        } else {
            rng.range(0, 2000)
        };
        let until = Instant::now() + HANG_GUARD;
        for _ in 0..spins {
            if !temp_files(&docs).is_empty()
                || child.try_wait().unwrap().is_some()
                || Instant::now() > until
            {
                break;
            }
        }
    } else {
        std::thread::sleep(Duration::from_millis(rng.range(0, 5)));
    }
    let _ = nix::sys::signal::kill(pid, sig);
    let until = Instant::now() + HANG_GUARD;
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < until, "aw-ctl did not end after {sig}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn interrupted_writes_leave_no_temporary_files() {
    let team = Team::new();
    team.ctl_ok(&["doc", "write", "small.md"]);
    let docs = team.docs();
    let mut rng = Rng::new(0x5eed_d0c5);
    let mut fills = Vec::new();
    for (round, sig) in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGKILL]
        .into_iter()
        .cycle()
        .take(12)
        .enumerate()
    {
        let fill = b'a' + round as u8;
        fills.push(fill);
        interrupt_a_write(&team, &mut rng, (round / 3) % 3, fill, sig);
        if sig != Signal::SIGKILL {
            assert_eq!(temp_files(&docs), Vec::<String>::new(), "after {sig}");
        }
        // big.md is absent or one whole version.
        if let Ok(b) = std::fs::read(docs.join("big.md")) {
            assert_eq!(b.len(), BIG, "after {sig}: big.md is torn");
            assert!(fills.contains(&b[0]) && b.iter().all(|&c| c == b[0]));
        }
        // One more write into the folder sweeps what a killed writer left.
        team.ctl_ok(&["doc", "append", "small.md"]);
        assert_eq!(temp_files(&docs), Vec::<String>::new(), "after {sig}");
    }
}

#[test]
fn temporary_files_of_dead_writers_are_swept_and_nothing_else() {
    let team = Team::new();
    team.ctl_ok(&["doc", "write", "sub/x.md"]);
    let dir = team.docs().join("sub");
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let me = std::process::id();
    let stale = [
        format!(".x.md.tmp.{dead_pid}.1"),
        format!(".other.md.tmp.{dead_pid}.4294967296"),
        format!(".a.b.tmp.c.tmp.{dead_pid}.7"),
    ];
    let kept = [
        format!(".x.md.tmp.{me}.2"),
        format!("x.md.tmp.{dead_pid}.1"),
        format!(".x.md.tmp.{dead_pid}."),
        format!(".x.md.tmp.{dead_pid}.1.bak"),
        format!(".x.md.tmp.{dead_pid}x.1"),
        format!("..tmp.{dead_pid}.1"),
        ".x.md.tmp..1".to_string(),
        ".x.md.tmp.0.1".to_string(),
        ".notes.md".to_string(),
    ];
    for n in stale.iter().chain(&kept) {
        std::fs::write(dir.join(n), "left").unwrap();
    }
    team.ctl_ok(&["doc", "write", "sub/y.md"]);
    let mut want: Vec<String> = kept.to_vec();
    want.extend(["x.md".to_string(), "y.md".to_string()]);
    want.sort();
    assert_eq!(names(&dir), want);
}
