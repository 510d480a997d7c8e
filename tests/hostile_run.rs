//! aw-run against misbehaving programs and API servers: a background child that keeps an
//! exec program's stdout open, programs and setup tasks that print without end, API answers
//! that are huge, trickle, are not UTF-8 or call a tool thousands of times, and an inbox far
//! larger than a prompt. Memory is measured as the peak RSS of the real aw-run process.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};

use common::runner::*;

/// What a measured run gave: exit code, stdout, stderr, and aw-run's peak RSS in bytes.
struct Measured {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    peak_rss: u64,
}

/// Run `cmd` to its end and read its peak RSS from wait4(2) (its own rusage, not that of the
/// other children of this test process). Killed if it hangs or grows past 1.5 GB (bounds
/// that only stop a failing test from taking the machine).
// Reaped by wait4 below, which Child::wait cannot stand in for (it gives no rusage).
#[allow(clippy::zombie_processes)]
fn run_measured(mut cmd: Command) -> Measured {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start aw-run");
    let pid = child.id() as i32;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let guard = {
        let done = done.clone();
        std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                if t0.elapsed() > std::time::Duration::from_secs(60) || rss(pid) > 1500 * MB {
                    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        })
    };
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let mut status = 0;
    // SAFETY: wait4 fills the status and the rusage of the child it reaps.
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { nix::libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = guard.join();
    let code = nix::libc::WIFEXITED(status).then(|| nix::libc::WEXITSTATUS(status));
    Measured {
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        // Linux gives kilobytes.
        peak_rss: usage.ru_maxrss as u64 * 1024,
    }
}

const MB: u64 = 1_000_000;

/// The resident set of a running process, in bytes (0 once it is gone).
fn rss(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?.to_string();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// Kill the process whose pid a script wrote to `file` in the working directory, if any.
fn kill_pid_in(s: &Setup, file: &str) {
    if let Ok(t) = std::fs::read_to_string(s.dir().join(file))
        && let Ok(pid) = t.trim().parse::<i32>()
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

// ---------------------------------------------------------------------------------------
// exec programs and shell tasks

/// An exec program that exits at once, leaving a child of its own session (out of its
/// process group) that writes to the inherited stdout every 0.2 s forever.
#[test]
fn a_background_child_holding_stdout_does_not_hold_the_run() {
    let s = Setup::new();
    s.script(
        "agent.sh",
        "cat > /dev/null\n\
         setsid sh -c 'echo $$ > ticker.pid; while :; do echo tick; sleep 0.2; done' &\n\
         while [ ! -s ticker.pid ]; do sleep 0.05; done\n\
         echo done\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  bob:\n    command: [./agent.sh]\nkickoff: '@bob go'\n",
    );
    let out = run_measured(s.cmd(&["-q"]));
    kill_pid_in(&s, "ticker.pid");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let entries = s.entries();
    let (from, reply) = entries.last().unwrap();
    assert_eq!(from, "bob");
    assert!(reply.lines().any(|l| l == "done"), "{reply}");
    assert_eq!(s.unread("bob"), 0);
    assert_eq!(s.transcript("bob", 1)["status"], "ok");
}

/// The same with a child that writes as fast as it can: what is kept is bounded.
#[test]
fn a_background_yes_is_cut_off_and_not_kept() {
    let s = Setup::new();
    s.script(
        "agent.sh",
        "cat > /dev/null\nsetsid sh -c 'echo $$ > yes.pid; exec yes' &\n\
         while [ ! -s yes.pid ]; do sleep 0.05; done\nsleep 0.2\nexit 0\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  bob:\n    command: [./agent.sh]\nkickoff: '@bob go'\n",
    );
    let out = run_measured(s.cmd(&["-q"]));
    kill_pid_in(&s, "yes.pid");
    // Its reply (whatever `yes` wrote in the grace) is longer than a message, or was posted
    // whole: either way aw-run ended and kept little.
    assert!(out.code.is_some(), "{}", out.stderr);
    assert!(out.peak_rss < 200 * MB, "peak RSS {} MB", out.peak_rss / MB);
    assert!(s.transcript_path("bob", 1).exists());
}

/// 512 MiB on an exec program's stdout: at most a message's worth is kept.
#[test]
fn an_exec_program_printing_half_a_gigabyte_is_not_kept_in_memory() {
    let s = Setup::new();
    s.script("agent.sh", "cat > /dev/null\nyes | head -c 536870912\n");
    s.write(
        "wf.yaml",
        "agents:\n  bob:\n    command: [./agent.sh]\nkickoff: '@bob go'\n",
    );
    let out = run_measured(s.cmd(&["-q", "--retries", "1"]));
    assert!(out.peak_rss < 200 * MB, "peak RSS {} MB", out.peak_rss / MB);
    // The reply cannot be posted: it is longer than a message.
    let t = s.transcript("bob", 1);
    assert_eq!(t["status"], "failed", "{t}");
    assert!(
        t["reason"]
            .as_str()
            .unwrap()
            .contains("cannot post the reply"),
        "{t}"
    );
    assert_eq!(
        t["stdout_cut"].as_u64().unwrap() + t["stdout"].as_str().unwrap().len() as u64,
        536_870_912
    );
    assert_eq!(s.unread("bob"), 1);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
}

/// A setup task printing 512 MiB is stopped past the documented limit.
#[test]
fn a_setup_task_printing_without_end_fails_with_its_limit() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "setup:\n  - shell: yes | head -c 536870912\n    as: big\n\
         agents:\n  bob:\n    backend: mock\nkickoff: '@bob go'\n",
    );
    let out = run_measured(s.cmd(&["-q"]));
    assert!(out.peak_rss < 200 * MB, "peak RSS {} MB", out.peak_rss / MB);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("setup task 1") && out.stderr.contains("more than 16 MiB"),
        "{}",
        out.stderr
    );
    let _ = out.stdout;
}

/// A setup task that leaves a background job writing to its stdout still ends: its output
/// is what came before the grace ran out.
#[test]
fn a_setup_task_whose_background_job_keeps_stdout_open_ends() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "setup:\n  - shell: \"setsid sh -c 'echo $$ > job.pid; while :; do sleep 0.2; echo more; done' & while [ ! -s job.pid ]; do sleep 0.05; done; echo ready\"\n    as: state\n\
         agents:\n  bob:\n    backend: mock\nkickoff: '@bob ${{ state }}'\n",
    );
    let out = run_measured(s.cmd(&["-q"]));
    kill_pid_in(&s, "job.pid");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let entries = s.entries();
    assert!(entries[0].1.starts_with("@bob ready"), "{entries:?}");
}
