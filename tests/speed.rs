//! What aw-run does not spend: no guard process for a run that starts no program, and the
//! network-file-system check told once per directory yet right on both kinds of mount.

mod common;

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

const MIXED: &str = "\
name: w
agents:
  alice:
    mock:
      replies: ['@bob what is the answer?', 'Thanks, done.']
  bob:
    mock:
      replies: ['@alice the answer is 42.']
  carol:
    command: [sh, -c, 'cat >/dev/null; echo pong']
kickoff: '@alice please ask bob.'
";

#[test]
fn the_guard_starts_with_the_first_program_and_not_before() {
    let s = Setup::new();
    s.write("wf.yaml", MIXED);
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
