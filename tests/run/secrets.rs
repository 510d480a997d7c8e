//! Secrets and private files: an environment secret that an agent prints or posts is never
//! committed, recorded, echoed or logged by aw (`--iter` commits, iteration records, the
//! reply aw posts, aw-run's output and the `--detach` log), no head of one is kept where a
//! transcript's output is cut, and what may hold model output or secrets is created private
//! (0600 files, 0700 folders) whatever the umask.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use common::runner::{INST, Setup, alive, assert_code, path_with_bins, run_hang_guarded, wait_for};
use common::tool;

/// A secret by its name (`*_KEY`), unique to the test.
fn secret() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("sk-test-{nanos:x}{}", std::process::id())
}

/// Run `c` with `mask` as its umask.
fn with_umask(c: &mut Command, mask: u32) {
    // SAFETY: umask is async-signal-safe.
    unsafe {
        c.pre_exec(move || {
            nix::libc::umask(mask as nix::libc::mode_t);
            Ok(())
        });
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// Every file under `dir`, with its text.
fn files(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            let bytes = std::fs::read(&p).unwrap_or_default();
            out.push((
                p.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    out
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The iterating agent: run 1 changes a file and prints the secret as its reply; run 2
/// changes a file and posts a reply with the secret itself.
const ITER_AGENT: &str = r#"cat > /dev/null
k=$(( $(cat count 2>/dev/null || echo 0) + 1 ))
echo $k > count
echo "line $k" >> work.txt
if [ $k = 1 ]; then
  printf 'Used the key %s\nand more with %s\n' "$OPENAI_API_KEY" "$OPENAI_API_KEY"
else
  aw-send "Posted the key $OPENAI_API_KEY myself" > /dev/null
fi
"#;

#[test]
fn iter_never_commits_records_or_prints_a_secret_the_agent_printed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("wf.yaml"),
        "name: w\nagents:\n  coder:\n    command: [sh, agent.sh]\nkickoff: Write work.txt.\n",
    )
    .unwrap();
    std::fs::write(d.join("agent.sh"), ITER_AGENT).unwrap();
    git(d, &["init", "-q"]);
    for (k, v) in [
        ("user.name", "Test"),
        ("user.email", "test@example.org"),
        ("commit.gpgsign", "false"),
    ] {
        git(d, &["config", k, v]);
    }
    std::fs::write(d.join(".gitignore"), "count\n").unwrap();
    git(d, &["add", "wf.yaml", "agent.sh", ".gitignore"]);
    git(d, &["commit", "-q", "-m", "start"]);
    let key = secret();
    for json in [false, true] {
        let mut c = tool("aw-run");
        c.current_dir(d)
            .env("PATH", path_with_bins())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("OPENAI_API_KEY", &key)
            .args(["--retries", "1", "--iter", "2"]);
        if json {
            c.args(["--json", "--resume", "--iter", "4"]);
        }
        c.arg("wf.yaml");
        with_umask(&mut c, 0o002);
        if json {
            // Runs 3 and 4 do as runs 1 and 2.
            std::fs::write(d.join("count"), "0").unwrap();
        }
        let out = run_hang_guarded(c);
        assert_code(&out, 0);
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!printed.contains(&key), "printed: {printed}");
        assert!(printed.contains("[redacted]"), "printed: {printed}");
    }
    let log = git(d, &["log", "-p", "--all"]);
    assert!(!log.contains(&key), "{log}");
    assert_eq!(log.matches("Aw-Iteration: ").count(), 4, "{log}");
    assert!(log.contains("Used the key [redacted]"), "{log}");
    assert!(log.contains("Posted the key [redacted] myself"), "{log}");
    let state = d.join(".workflow/w/_state");
    let records = std::fs::read_to_string(state.join("iterations/coder.jsonl")).unwrap();
    assert_eq!(records.lines().count(), 4);
    assert!(!records.contains(&key), "{records}");
    for (path, text) in files(&state) {
        assert!(!text.contains(&key), "{path}: {text}");
    }
    // The reply aw posted is redacted; the one the agent posted itself is its own.
    let channel = std::fs::read_to_string(d.join(".workflow/w/channel.md")).unwrap();
    assert_eq!(channel.matches(key.as_str()).count(), 2, "{channel}");
    assert!(channel.contains("Used the key [redacted]"), "{channel}");
    assert!(
        !channel.contains(&format!("Used the key {key}")),
        "{channel}"
    );
    // Private whatever the umask.
    assert_eq!(mode(&state.join("iterations")), 0o700);
    assert_eq!(mode(&state.join("iterations/coder.jsonl")), 0o600);
}

#[test]
fn a_secret_across_the_transcript_cut_leaves_no_head() {
    let s = Setup::new();
    let key = secret();
    // 64 KiB less 6 bytes, then the secret: the cut goes through it.
    let filler = 64 * 1024 - 6;
    s.script(
        "agent.sh",
        &format!(
            "cat > /dev/null\nhead -c {filler} /dev/zero | tr '\\0' a\nprintf '%s\\n' \"$OPENAI_API_KEY\"\n"
        ),
    );
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    command: [./agent.sh]\nkickoff: '@alice go'\n",
    );
    let mut c = s.cmd(&["-q", "--retries", "1"]);
    c.env("OPENAI_API_KEY", &key);
    let out = run_hang_guarded(c);
    assert_code(&out, 0);
    let t = s.transcript("alice", 1);
    let stdout = t["stdout"].as_str().unwrap();
    assert!(
        !stdout.contains(&key[..6]),
        "{}",
        &stdout[stdout.len() - 20..]
    );
    assert!(stdout.ends_with('a'), "{}", &stdout[stdout.len() - 20..]);
    // What was dropped is counted as cut.
    let total = filler + key.len() + 1;
    assert_eq!(
        stdout.len() as u64 + t["stdout_cut"].as_u64().unwrap(),
        total as u64
    );
    // The reply aw posted for the agent, whole, is redacted.
    let entries = s.entries();
    assert!(entries[1].1.ends_with("a[redacted]"), "{}", entries.len());
    for (path, text) in files(&s.root.inst_dir(INST)) {
        assert!(!text.contains(&key), "{path}");
    }
}

/// Kill a detached server if the test ends without it.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-9", &self.0.to_string()])
            .status();
    }
}

#[test]
fn the_detached_log_and_the_state_files_are_private_and_hold_no_secret() {
    let s = Setup::new();
    let key = secret();
    // alice posts the secret herself; bob prints it as his reply.
    s.script(
        "alice.sh",
        "cat > /dev/null\naw-send \"@user alice has $OPENAI_API_KEY\" > /dev/null\n",
    );
    s.script(
        "bob.sh",
        "cat > /dev/null\necho \"@user bob has $OPENAI_API_KEY\"\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    command: [./alice.sh]\n  bob:\n    command: [./bob.sh]\n\
         kickoff: '@alice @bob go'\n",
    );
    for mask in [0o002, 0o022] {
        let mut c = s.cmd(&["--keep", "--detach", "--retries", "1"]);
        c.env("OPENAI_API_KEY", &key);
        with_umask(&mut c, mask);
        let out = run_hang_guarded(c);
        assert_code(&out, 0);
        let pid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let _guard = KillOnDrop(pid);
        let runs = |a: &str| s.transcript_path(a, 1).exists();
        wait_for("both runs", || runs("alice") && runs("bob"));
        wait_for("both replies", || {
            s.entries().iter().filter(|(f, _)| f != "system").count() == 2
        });
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        wait_for("the server to end", || !alive(pid));
        let state = s.root.inst_dir(INST).join("_state");
        let log = std::fs::read_to_string(state.join("aw-run.log")).unwrap();
        assert!(!log.contains(&key), "{log}");
        assert!(log.contains("alice has [redacted]"), "{log}");
        assert!(log.contains("bob has [redacted]"), "{log}");
        for (p, want) in [
            ("aw-run.log", 0o600),
            ("runs", 0o700),
            ("runs/alice", 0o700),
            ("runs/alice/1.json", 0o600),
            ("runs/bob/1.json", 0o600),
            ("mcp", 0o700),
            ("mcp/alice.json", 0o600),
            ("mcp/bob.json", 0o600),
        ] {
            assert_eq!(mode(&state.join(p)), want, "{p} under umask {mask:o}");
        }
        for (path, text) in files(&state) {
            assert!(!text.contains(&key), "{path}");
        }
        // The next round starts afresh.
        std::fs::remove_dir_all(s.root.inst_dir(INST)).unwrap();
    }
}

#[test]
fn the_result_of_tasks_shows_no_secret_of_a_reply() {
    let s = Setup::new();
    let key = secret();
    // The agent posts its reply itself: aw's own post would be redacted already.
    s.script(
        "alice.sh",
        "cat > /dev/null\naw-send \"@user alice has $OPENAI_API_KEY\" > /dev/null\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    command: [./alice.sh]\ntasks:\n  - send: go\n    to: alice\n    as: r\n",
    );
    for json in [false, true] {
        let mut args = vec!["-q", "--retries", "1"];
        if json {
            args.push("--json");
        }
        let mut c = s.cmd(&args);
        c.env("OPENAI_API_KEY", &key);
        let out = run_hang_guarded(c);
        assert_code(&out, 0);
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(!printed.contains(&key), "{printed}");
        assert!(printed.contains("alice has [redacted]"), "{printed}");
    }
}

#[test]
fn ordinary_env_values_are_shown_and_only_secrets_redacted() {
    let s = Setup::new();
    let key = secret();
    // Every value of the agent's env, and a password inside a URL of aw-run's environment.
    s.script(
        "alice.sh",
        "cat > /dev/null\n\
         echo \"@user $GREETING world, the mode is $MODE, base $OPENAI_BASE_URL, \
         token $GH_TOKEN, own $PLAIN_WORDS, proxy $MY_PROXY\"\n",
    );
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    command: [./alice.sh]\n    env:\n      GREETING: hello\n\
         \x20     MODE: fast\n      OPENAI_BASE_URL: http://127.0.0.1:9/v1\n\
         \x20     GH_TOKEN: ghp-tok-123\n      PLAIN_WORDS: not for anyone\n\
         \x20   secrets: [PLAIN_WORDS]\nkickoff: '@alice go'\n",
    );
    let mut c = s.cmd(&["-q", "--retries", "1"]);
    c.env("MY_PROXY", format!("https://bob:{key}@proxy.example:3128/"));
    let out = run_hang_guarded(c);
    assert_code(&out, 0);
    let entries = s.entries();
    let reply = &entries[1].1;
    assert!(
        reply.contains(
            "hello world, the mode is fast, base http://127.0.0.1:9/v1, token [redacted], \
             own [redacted], proxy https://bob:[redacted]@proxy.example:3128/"
        ),
        "{reply}"
    );
    let t = s.transcript("alice", 1);
    let stdout = t["stdout"].as_str().unwrap();
    assert!(stdout.contains("hello world, the mode is fast"), "{stdout}");
    for (path, text) in files(&s.root.inst_dir(INST)) {
        for secret in [key.as_str(), "ghp-tok-123", "not for anyone"] {
            assert!(!text.contains(secret), "{path}: {secret}");
        }
    }
}
