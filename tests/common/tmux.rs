//! A terminal for tests of what the tools show on one: a detached tmux session of 80x24 on
//! a tmux server of its own, killed when dropped.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Columns and lines of the test terminal: what an ssh session gives by default.
pub const SIZE: (u32, u32) = (80, 24);

/// The line printed after the command ends, with its exit status.
const EXIT_MARK: &str = "aw-test-exit=";

pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// Run `command` (a `sh` command line) in `dir` in a new 80x24 terminal; after it ends,
    /// the terminal shows its exit status and stays open.
    pub fn start(dir: &Path, command: &str) -> Tmux {
        let socket = format!(
            "aw-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let t = Tmux { socket };
        let script = format!(
            "cd '{}' && {command}; echo {EXIT_MARK}$?; exec sleep 600",
            dir.display()
        );
        let out = t.tmux(&[
            "new-session",
            "-d",
            "-x",
            &SIZE.0.to_string(),
            "-y",
            &SIZE.1.to_string(),
            "sh",
            "-c",
            &script,
        ]);
        assert!(out.status.success(), "tmux: {out:?}");
        t
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux (scripts/test-deps.sh installs it)")
    }

    /// The screen as text, one line per terminal line, trailing blanks trimmed.
    pub fn screen(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Type `keys` (tmux key names, such as `q` or `Enter`).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys"];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success());
    }

    /// Wait (a bound that only stops a hung test) until the screen satisfies `f`; the
    /// screen then.
    pub fn wait_for(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if f(&s) {
                return s;
            }
            assert!(
                Instant::now() < end,
                "gave up waiting for {what}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until the command has ended; its exit status and the screen then.
    pub fn wait_exit(&self) -> (i32, String) {
        let s = self.wait_for("the command to end", |s| s.contains(EXIT_MARK));
        let code = s
            .lines()
            .find_map(|l| l.trim().strip_prefix(EXIT_MARK))
            .and_then(|c| c.trim().parse().ok())
            .expect("an exit status");
        (code, s)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// `s` quoted for `sh`.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
