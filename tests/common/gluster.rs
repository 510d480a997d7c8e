//! A real GlusterFS volume for the several-hosts tests: one brick in a temporary directory,
//! mounted twice through FUSE ("host A" and "host B"). Host B's commands run in their own
//! pid and UTS namespace (`unshare`), with a host name of their own, so that two hosts
//! share the volume the way two machines would.
//!
//! Everything is torn down on drop, also when the test panics: both mounts unmounted, the
//! volume stopped and deleted, the brick removed. A missing `/dev/fuse` or GlusterFS binary
//! is a failure with a message saying what to install (`scripts/test-deps.sh`), never a skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Host name seen by the commands of host B.
pub const HOST_B: &str = "aw-host-b";

static SERIAL: AtomicUsize = AtomicUsize::new(0);

/// The volume options every volume of the tests is made with (README "Several hosts and
/// containers").
pub const VOLUME_OPTIONS: [(&str, &str); 2] = [
    ("performance.stat-prefetch", "off"),
    ("performance.quick-read", "off"),
];

/// A GlusterFS volume mounted twice; see the module documentation.
pub struct Volume {
    name: String,
    dir: Option<tempfile::TempDir>,
    a: PathBuf,
    b: PathBuf,
    mounted: Vec<PathBuf>,
    created: bool,
}

fn need(what: &str, ok: bool) {
    assert!(
        ok,
        "several-hosts tests: {what}; run `sh scripts/test-deps.sh` as root (it installs \
         glusterfs-server and glusterfs-client and checks /dev/fuse)"
    );
}

fn run(cmd: &mut Command) -> Output {
    let shown = format!("{cmd:?}");
    match cmd.stdin(Stdio::null()).output() {
        Ok(out) => out,
        Err(e) => {
            need(&format!("cannot run {shown}: {e}"), false);
            unreachable!()
        }
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Run `gluster --mode=script ARGS`, retrying while another volume operation holds
/// glusterd's cluster lock (tests of one binary set up their volumes in parallel).
fn gluster(args: &[&str]) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = run(Command::new("gluster").arg("--mode=script").args(args));
        let said = text(&out);
        if out.status.success() {
            return Ok(said);
        }
        let busy = ["another transaction", "locking failed", "lock", "try again"]
            .iter()
            .any(|w| said.to_lowercase().contains(w));
        if !busy || Instant::now() > deadline {
            return Err(format!("gluster {}: {}", args.join(" "), said.trim()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Start glusterd unless it answers already, and wait until it does. Tests of one binary
/// run in parallel: the first one starts the daemon while the others wait for it (a second
/// `glusterd` would exit at once, silently, because the first holds its pid file).
fn ensure_glusterd() {
    static STARTED: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    if *started || gluster(&["volume", "list"]).is_ok() {
        *started = true;
        return;
    }
    // An exit status other than 0 may only mean that a daemon started by somebody else is
    // still coming up: what counts is whether it answers within the deadline.
    let out = run(&mut Command::new("glusterd"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match gluster(&["volume", "list"]) {
            Ok(_) => break,
            Err(e) if Instant::now() > deadline => need(
                &format!(
                    "glusterd does not answer: {e} (glusterd exited with {}: {})",
                    out.status,
                    text(&out).trim()
                ),
                false,
            ),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    *started = true;
}

fn host() -> String {
    let out = run(&mut Command::new("hostname"));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Volume {
    /// Create, start and mount a new volume (twice).
    pub fn new() -> Volume {
        Self::with_mount_options("")
    }

    /// [`Volume::new`], both mounts with these FUSE mount options (`-o`, when not empty),
    /// such as `attribute-timeout=600`.
    pub fn with_mount_options(options: &str) -> Volume {
        need("/dev/fuse is missing", Path::new("/dev/fuse").exists());
        need(
            "mount.glusterfs is missing",
            ["/sbin/mount.glusterfs", "/usr/sbin/mount.glusterfs"]
                .iter()
                .any(|p| Path::new(p).exists()),
        );
        ensure_glusterd();
        let dir = tempfile::Builder::new()
            .prefix("aw-gluster")
            .tempdir()
            .expect("temporary directory");
        let name = format!(
            "awtest{}x{}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::SeqCst)
        );
        let brick = dir.path().join("brick");
        let a = dir.path().join("host-a");
        let b = dir.path().join("host-b");
        for d in [&brick, &a, &b] {
            std::fs::create_dir(d).expect("volume directories");
        }
        let mut vol = Volume {
            name,
            dir: Some(dir),
            a,
            b,
            mounted: Vec::new(),
            created: false,
        };
        let spec = format!("{}:{}", host(), brick.display());
        if let Err(e) = gluster(&["volume", "create", &vol.name, &spec, "force"]) {
            panic!("{e}");
        }
        vol.created = true;
        // As README "Several hosts and containers" asks of a volume whose state files
        // several hosts replace: md-cache off (it may answer a listing with a file replaced
        // since, for seconds), and quick-read with it (which then answers small reads from
        // old content).
        let mut set = vec!["volume", "set", vol.name.as_str()];
        for (key, value) in VOLUME_OPTIONS {
            set.extend([key, value]);
        }
        if let Err(e) = gluster(&set) {
            panic!("{e}");
        }
        if let Err(e) = gluster(&["volume", "start", &vol.name]) {
            panic!("{e}");
        }
        let source = format!("{}:/{}", host(), vol.name);
        for at in [vol.a.clone(), vol.b.clone()] {
            let mut mount = Command::new("mount");
            mount.args(["-t", "glusterfs"]);
            if !options.is_empty() {
                mount.args(["-o", options]);
            }
            let out = run(mount.arg(&source).arg(&at));
            assert!(
                out.status.success(),
                "mount {source} on {}: {}",
                at.display(),
                text(&out).trim()
            );
            vol.mounted.push(at);
        }
        vol
    }

    /// The volume's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Set a volume option (`gluster volume set NAME KEY VALUE`).
    pub fn set(&self, key: &str, value: &str) {
        if let Err(e) = gluster(&["volume", "set", &self.name, key, value]) {
            panic!("{e}");
        }
    }

    /// Count the file operations the brick serves from now on (`gluster volume profile`:
    /// started, and its counts cleared).
    pub fn count_operations(&self) {
        // Started already: fine, the counts are cleared below.
        let _ = gluster(&["volume", "profile", &self.name, "start"]);
        if let Err(e) = gluster(&["volume", "profile", &self.name, "info", "clear"]) {
            panic!("{e}");
        }
    }

    /// How many times the brick served the operation `fop` (`OPENDIR`, `LOOKUP`, ...)
    /// since [`Volume::count_operations`].
    pub fn operations(&self, fop: &str) -> u64 {
        let said = gluster(&["volume", "profile", &self.name, "info", "cumulative"])
            .unwrap_or_else(|e| panic!("{e}"));
        // Rows end with the number of calls and the operation's name.
        said.lines()
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                match w.as_slice() {
                    [.., n, name] if *name == fop => n.parse::<u64>().ok(),
                    _ => None,
                }
            })
            .sum()
    }

    /// Host A's mount point.
    pub fn a(&self) -> &Path {
        &self.a
    }

    /// Host B's mount point.
    pub fn b(&self) -> &Path {
        &self.b
    }

    /// A command running `program` on host B: in a new pid and UTS namespace (host name
    /// [`HOST_B`], its own /proc), killed with the namespace. Arguments and environment
    /// added to the returned command reach `program`.
    pub fn on_b(program: &Path) -> Command {
        Self::on_host(HOST_B, program)
    }

    /// A command running `program` as pid 1 of a new pid and UTS namespace with host name
    /// `host` (see [`Volume::on_b`]): a third host, on either mount.
    pub fn on_host(host: &str, program: &Path) -> Command {
        let mut c = Command::new("unshare");
        c.args([
            "--pid",
            "--fork",
            "--kill-child",
            "--uts",
            "--mount-proc",
            "--",
            "sh",
            "-c",
            "hostname \"$0\" && exec \"$@\"",
            host,
        ])
        .arg(program);
        c
    }
}

/// The content of `path`, read through a mount of the volume: a file another mount replaced
/// by rename gives `ESTALE` on this one until its folder is listed again (or "not found"
/// while a `stat` of its name finds it), so then the folder is listed and the read tried
/// again (for up to 5 s).
pub fn read_listed(path: &Path) -> Vec<u8> {
    let dir = path.parent().expect("a file in a folder");
    for _ in 0..500 {
        match std::fs::read(path) {
            Ok(bytes) => return bytes,
            Err(e)
                if e.raw_os_error() == Some(nix::libc::ESTALE)
                    || (e.kind() == std::io::ErrorKind::NotFound
                        && std::fs::symlink_metadata(path).is_ok()) =>
            {
                let _ = std::fs::read_dir(dir).map(Iterator::count);
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
    panic!(
        "{}: still stale after its folder was listed for 5 s",
        path.display()
    )
}

impl Drop for Volume {
    fn drop(&mut self) {
        for at in self.mounted.drain(..).rev() {
            let out = Command::new("umount").arg(&at).output();
            if !matches!(out, Ok(ref o) if o.status.success()) {
                // Still busy (a process of a failed test): detach it so nothing stays
                // mounted, and so removing the temporary directory cannot reach the volume.
                let _ = Command::new("umount").arg("-l").arg(&at).output();
            }
        }
        if self.created {
            let _ = gluster(&["volume", "stop", &self.name, "force"]);
            let _ = gluster(&["volume", "delete", &self.name]);
        }
        if let Some(dir) = self.dir.take() {
            // The brick keeps extended attributes and a `.glusterfs` tree: plain removal.
            let _ = dir.close();
        }
    }
}
