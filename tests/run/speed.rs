//! What aw-run does not spend: no guard process for a run that starts no program, and the
//! network-file-system check told once per directory yet right on both kinds of mount.

use crate::common;

use common::runner::{Server, Setup, spawn, wait_for};

/// Live guard processes whose parent is `pid` (the guard's `argv[0]` is `aw-run-guard`).
fn guards_of(pid: u32) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if e.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let (Ok(stat), Ok(cmdline)) = (
            std::fs::read_to_string(e.path().join("stat")),
            std::fs::read(e.path().join("cmdline")),
        ) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) && cmdline.split(|&b| b == 0).next() == Some(b"aw-run-guard") {
            n += 1;
        }
    }
    n
}

/// Two mock agents: alice asks bob, bob answers, alice thanks; `more` agents besides.
fn hello(more: &str) -> String {
    format!(
        "name: w
agents:
  alice:
    mock:
      replies: ['@bob what is the answer?', 'Thanks, done.']
  bob:
    mock:
      replies: ['@alice the answer is 42.']
{more}kickoff: '@alice please find out the answer from bob.'
"
    )
}

#[test]
fn the_guard_starts_with_the_first_program_and_not_before() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        &hello("  carol:\n    command: [sh, -c, 'cat >/dev/null; echo pong']\n"),
    );
    let server = Server::new(spawn(s.cmd(&["--keep", "-q"])));
    let channel = s.root.channel(common::runner::INST);
    let from = |who: &str| {
        if !channel.exists() {
            return 0;
        }
        s.entries().iter().filter(|(f, _)| f == who).count()
    };
    // The mock agents' exchange: four entries, no program started, no guard.
    wait_for("the mock exchange", || {
        from("alice") == 2 && from("bob") == 1
    });
    assert_eq!(guards_of(server.pid()), 0, "a guard before any program ran");
    // The first program: the guard is there while aw-run lives.
    let sent = s
        .tool_cmd("aw-send")
        .args(["-i", common::runner::INST, "--from", "dave", "@carol ping"])
        .output()
        .expect("aw-send");
    assert!(sent.status.success(), "{sent:?}");
    wait_for("carol's answer", || from("carol") == 1);
    assert_eq!(guards_of(server.pid()), 1, "one guard once a program ran");
    let entries = s.entries();
    assert_eq!(entries.len(), 6, "{entries:?}");
    assert!(entries[5].1.contains("pong"), "{entries:?}");
    let out = server.term();
    assert!(out.status.code().is_some(), "{out:?}");
}

/// The calls of each system call `strace -f -c` counted in its summary file `out`.
fn syscall_counts(out: &std::path::Path) -> std::collections::BTreeMap<String, u64> {
    let text = std::fs::read_to_string(out).expect("strace summary");
    let mut counts = std::collections::BTreeMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        // % time, seconds, usecs/call, calls, [errors,] syscall
        if words.len() >= 5
            && let (Ok(calls), Some(name)) = (words[3].parse::<u64>(), words.last())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && *name != "total"
        {
            counts.insert(name.to_string(), calls);
        }
    }
    counts
}

/// Most directories a two-agent run works in (the instance, `_state` and its folders): the
/// network check is made once for each.
const STATFS_BOUND: u64 = 12;

#[test]
fn a_two_agent_mock_run_asks_the_file_system_kind_once_per_folder_and_starts_no_guard() {
    let counts = traced_run(
        "trace=statfs,fstatfs,execve,fsync,fdatasync,rename,renameat,renameat2",
        None,
    );
    let n = |name: &str| counts.get(name).copied().unwrap_or(0);
    assert_eq!(n("execve"), 1, "aw-run alone, no guard: {counts:?}");
    assert!(
        n("statfs") + n("fstatfs") <= STATFS_BOUND,
        "the file system kind asked too often: {counts:?}"
    );
    // What must stay durable is still synced: the registry, a file and its folder. Not the
    // MCP configurations; the cursors and the transcripts only where asked (see the test
    // below).
    assert_eq!(n("fsync") + n("fdatasync"), 2, "{counts:?}");
}

#[test]
fn the_network_check_is_right_on_a_gluster_mount_and_a_local_disk_alike() {
    use aw::fs::netfs::{is_network_fd, is_network_fs};
    let vol = common::gluster::Volume::new();
    let local = tempfile::tempdir().expect("local directory");
    let sub = vol.a().join("sub");
    std::fs::create_dir(&sub).expect("a folder on the volume");
    let fd = |p: &std::path::Path| {
        let f = std::fs::File::open(p).expect("open a folder");
        is_network_fd(std::os::fd::AsFd::as_fd(&f))
    };
    // Asked again and again, in both orders: every answer the kernel's.
    for _ in 0..3 {
        for (dir, network) in [
            (local.path(), false),
            (vol.a(), true),
            (sub.as_path(), true),
            (vol.b(), true),
            (std::path::Path::new("/proc"), false),
        ] {
            assert_eq!(is_network_fs(dir), network, "{}", dir.display());
            assert_eq!(fd(dir), network, "{}", dir.display());
        }
    }
    // Through the tools: a send and a read on the mount and on the local disk.
    for root in [vol.a().join("root"), local.path().join("root")] {
        let send = common::tool("aw-send")
            .arg("--root")
            .arg(&root)
            .args(["-i", "x", "--from", "alice", "@bob hello"])
            .output()
            .expect("aw-send");
        assert!(send.status.success(), "{send:?}");
        let peek = common::tool("aw-peek")
            .arg("--root")
            .arg(&root)
            .args(["-i", "x"])
            .output()
            .expect("aw-peek");
        assert!(
            String::from_utf8_lossy(&peek.stdout).contains("@bob hello"),
            "{peek:?}"
        );
    }
}

#[test]
fn a_server_takes_its_entry_out_of_the_users_registry_when_it_ends() {
    let s = Setup::new();
    s.write("wf.yaml", &hello(""));
    let runtime = s.dir().join("runtime");
    std::fs::create_dir(&runtime).expect("a runtime directory");
    let registry = runtime.join("aw/servers");
    let listed = || -> Vec<String> {
        match std::fs::read_dir(&registry) {
            Ok(rd) => rd
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        }
    };
    // A run that ends by itself leaves nothing (every run used to leave its entry, and
    // every later write there read them all).
    let mut run = s.cmd(&["-q"]);
    run.env("XDG_RUNTIME_DIR", &runtime);
    let out = common::runner::run_hang_guarded(run);
    common::runner::assert_code(&out, 0);
    assert_eq!(s.entries().len(), 4, "{:?}", s.entries());
    assert_eq!(listed(), Vec::<String>::new());
    // A kept server is listed while it serves, and found from anywhere; gone once stopped.
    let mut keep = s.cmd(&["--keep", "-q"]);
    keep.env("XDG_RUNTIME_DIR", &runtime);
    let server = Server::new(spawn(keep));
    let mine = format!("{}.{}", server.pid(), common::runner::INST);
    wait_for("the server's entry", || listed() == [mine.clone()]);
    // Once it serves (the exchange done), `ps --all-roots` finds it through the entry.
    wait_for("the mock exchange", || s.entries().len() == 8);
    let ps = common::tool("aw-ctl")
        .args(["ps", "--all-roots", "--json"])
        .env("XDG_RUNTIME_DIR", &runtime)
        .current_dir(s.dir())
        .output()
        .expect("aw-ctl ps");
    assert!(ps.status.success(), "{ps:?}");
    assert!(
        String::from_utf8_lossy(&ps.stdout).contains("\"alice\""),
        "{ps:?}"
    );
    assert_eq!(listed(), std::slice::from_ref(&mine));
    let out = server.term();
    assert!(out.status.code().is_some(), "{out:?}");
    assert_eq!(listed(), Vec::<String>::new());
}

#[test]
fn an_entry_of_a_server_still_starting_is_kept_and_one_of_a_dead_process_removed() {
    let s = Setup::new();
    let runtime = s.dir().join("runtime");
    let registry = runtime.join("aw/servers");
    std::fs::create_dir_all(&registry).expect("the registry");
    // What a server writes before its agents' records exist: its pid, the instance.
    let inst = s.root.inst_dir(common::runner::INST);
    std::fs::create_dir_all(&inst).expect("the instance");
    let mut starting = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep");
    let entry = registry.join(format!("{}.{}", starting.id(), common::runner::INST));
    let mut text = inst.into_os_string().into_encoded_bytes();
    text.push(b'\n');
    std::fs::write(&entry, &text).expect("the entry");
    let ps = || {
        let out = common::tool("aw-ctl")
            .args(["ps", "--all-roots"])
            .env("XDG_RUNTIME_DIR", &runtime)
            .current_dir(s.dir())
            .output()
            .expect("aw-ctl ps");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(ps(), "");
    assert!(entry.exists(), "the entry of a live process was removed");
    starting.kill().expect("kill");
    starting.wait().expect("wait");
    assert_eq!(ps(), "");
    assert!(!entry.exists(), "the entry of a dead process was kept");
}

/// The system calls of a two-agent mock run (`strace -f -c`), with `AW_SYNC` set to `sync`
/// when given.
fn traced_run(trace: &str, sync: Option<&str>) -> std::collections::BTreeMap<String, u64> {
    let s = Setup::new();
    let wf = s.write("hello.yaml", &hello(""));
    let summary = s.dir().join("strace.txt");
    let mut c = std::process::Command::new("strace");
    c.current_dir(s.dir())
        .args(["-f", "-c", "-o"])
        .arg(&summary)
        .args(["-e", trace])
        .arg(common::bin("aw-run"))
        .arg("--root")
        .arg(s.root.path())
        .args(["-i", common::runner::INST, "-q"])
        .arg(&wf)
        .env_remove("AW_SYNC");
    if let Some(v) = sync {
        c.env("AW_SYNC", v);
    }
    let out = common::runner::run_hang_guarded(c);
    common::runner::assert_code(&out, 0);
    let senders: Vec<String> = s.entries().into_iter().map(|(f, _)| f).collect();
    assert_eq!(senders, ["system", "alice", "bob", "alice"]);
    syscall_counts(&summary)
}

#[test]
fn cursors_and_transcripts_are_flushed_where_the_channel_is_and_not_elsewhere_on_a_local_disk() {
    let flushes = |sync| {
        let counts = traced_run("trace=fsync,fdatasync", sync);
        counts.get("fsync").copied().unwrap_or(0) + counts.get("fdatasync").copied().unwrap_or(0)
    };
    // The registry once, a file and its folder; not the three moves of a cursor nor the
    // three transcripts (there were 14 flushes with them, 8 with the transcripts alone).
    let plain = flushes(None);
    assert_eq!(plain, 2, "{plain} flushes");
    // Asked for durability, the cursors and the transcripts are flushed with the channel's
    // appends: each move and each transcript a file and its folder, on top of the
    // channel's own.
    let synced = flushes(Some("1"));
    assert!(
        synced >= plain + 12,
        "{synced} flushes with AW_SYNC=1, {plain} without"
    );
}

#[test]
fn an_ack_is_flushed_on_a_network_file_system_and_not_on_a_local_disk() {
    let vol = common::gluster::Volume::new();
    let local = tempfile::tempdir().expect("local directory");
    let traces = tempfile::tempdir().expect("a folder for the traces");
    let flushes = |root: &std::path::Path| {
        // Tool `name` on `root`, which must succeed; its stdout.
        let ok = |name: &str, args: &[&str]| {
            let out = common::tool(name)
                .arg("--root")
                .arg(root)
                .args(args)
                .output()
                .expect("run a tool");
            assert!(out.status.success(), "{name} {args:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        ok("aw-ctl", &["-i", "x", "new", "bob", "--backend", "mock"]);
        ok("aw-send", &["-i", "x", "--from", "alice", "@bob hello"]);
        let summary = traces.path().join("strace.txt");
        let ack = std::process::Command::new("strace")
            .args(["-f", "-c", "-o"])
            .arg(&summary)
            .args(["-e", "trace=fsync,fdatasync"])
            .arg(common::bin("aw-ctl"))
            .arg("--root")
            .arg(root)
            .args(["-i", "x", "ack", "bob"])
            .env_remove("AW_SYNC")
            .output()
            .expect("strace aw-ctl ack");
        assert!(ack.status.success(), "{ack:?}");
        let unread = ok("aw-peek", &["-i", "x", "--inbox", "bob", "--json"]);
        assert_eq!(unread, "", "acknowledged");
        let counts = syscall_counts(&summary);
        counts.get("fsync").copied().unwrap_or(0) + counts.get("fdatasync").copied().unwrap_or(0)
    };
    // Another host's client reads the cursors: the file and its folder are flushed there.
    assert!(flushes(&vol.a().join("root")) >= 2);
    // On a local disk a crash may lose the move, which delivers the message again.
    assert_eq!(flushes(&local.path().join("root")), 0);
}
