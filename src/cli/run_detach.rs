//! `aw-run --detach`: the starter, which runs the same command again in the background and
//! waits until it serves, and the background server's side of it (the readiness protocol is
//! in [`crate::spawn`]).
//!
//! The starter reads nothing but its command line: the background server reads the
//! workflow, finds the instance and checks what there is to check, its output going to the
//! starter (which prints it on its stderr) until it knows the instance. From then on its
//! output goes to that instance's `_state/aw-run.log`, and it tells the starter where and
//! from which offset (`L`), so that the starter can show what it logged there if it ends
//! before serving. A workflow is read once, not once by each.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

use crate::cli::Out;
use crate::error::{Error, Result, exit};
use crate::instance::Instance;
use crate::spawn::READY_FD;

/// The descriptor the background server reports on.
const CHILD_FD: i32 = 3;

/// The readiness pipe handed down by `--detach`, if this process is the background server.
pub(super) fn ready_pipe() -> Result<Option<Arc<File>>> {
    let Some(v) = std::env::var_os(READY_FD) else {
        return Ok(None);
    };
    let fd: i32 = v
        .to_str()
        .and_then(|s| s.parse().ok())
        .filter(|fd| *fd > 2)
        .ok_or_else(|| Error::Usage(format!("{READY_FD}: not a descriptor number")))?;
    // Only a descriptor that is open and not close-on-exec was handed down on purpose.
    let flags = nix::fcntl::fcntl(
        unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) },
        nix::fcntl::FcntlArg::F_GETFD,
    );
    match flags {
        Ok(f) if f & nix::libc::FD_CLOEXEC == 0 => {
            // SAFETY: the descriptor is open, and nothing else in this process owns it.
            let file = unsafe { File::from_raw_fd(fd) };
            // Backends must not inherit it.
            let _ = nix::fcntl::fcntl(
                &file,
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
            );
            Ok(Some(Arc::new(file)))
        }
        _ => Ok(None),
    }
}

/// In the background server, once it knows its instance: send its output (stdout and
/// stderr) to `inst`'s `_state/aw-run.log` from now on, and tell the starter (`ready`)
/// where, from which offset, and what to say once it serves.
pub(super) fn to_log(inst: &Instance, ready: &File) -> Result<()> {
    use nix::fcntl::OFlag;
    let log_path = inst.state_file("aw-run.log");
    let flags = OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CREAT;
    let mode = nix::sys::stat::Mode::from_bits_truncate(0o600);
    let mut log =
        crate::fs::owned::open(&log_path, flags, mode).map_err(|e| Error::create(&log_path, e))?;
    // Private, whatever the umask: the log holds what the agents said.
    crate::fs::make_private(&log, &log_path)?;
    let start = log.seek(std::io::SeekFrom::End(0)).unwrap_or(0);
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    for fd in [1, 2] {
        // SAFETY: dup2 onto the standard descriptors, which this process keeps open.
        if unsafe { nix::libc::dup2(log.as_raw_fd(), fd) } < 0 {
            return Err(Error::io(&log_path, std::io::Error::last_os_error()));
        }
    }
    // Where it logs and how to stop it, for the person who started it.
    let pid = std::process::id();
    let shown = std::path::absolute(&log_path).unwrap_or(log_path);
    let root = inst.dir().parent().unwrap_or(inst.dir());
    let root = std::path::absolute(root).unwrap_or(root.to_path_buf());
    let note = format!(
        "serving in the background as pid {pid}; log: {}; stop it with aw-ctl --root {} \
         stop @{} (or kill {pid})",
        shown.display(),
        root.display(),
        inst.name()
    );
    let mut msg = format!("L{start}\0").into_bytes();
    msg.extend(shown.into_os_string().into_vec());
    msg.push(0);
    msg.extend(note.as_bytes());
    msg.push(0);
    (&*ready)
        .write_all(&msg)
        .map_err(|e| Error::io("<readiness pipe>", e))
}

/// Start this same command again in the background (its own session), show what it says
/// until it logs, wait until it serves its agents, and print its pid.
pub(super) fn detach(out: &mut Out) -> Result<u8> {
    let (reader, writer) = std::io::pipe().map_err(|e| Error::io("<pipe>", e))?;
    let (said, says) = std::io::pipe().map_err(|e| Error::io("<pipe>", e))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("<aw-run>", e))?;
    let args: Vec<OsString> = std::env::args_os()
        .skip(1)
        .filter(|a| a != "--detach")
        .collect();
    let wfd = writer.as_raw_fd();
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env(READY_FD, CHILD_FD.to_string())
        .stdin(Stdio::null())
        .stdout(says.try_clone().map_err(|e| Error::io("<pipe>", e))?)
        .stderr(says);
    // The server raises the limit of open files itself when it needs to.
    let open_files = crate::process::open_files_at_start();
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            crate::process::give_back_open_files(open_files)?;
            if nix::libc::dup2(wfd, CHILD_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if wfd == CHILD_FD {
                nix::libc::fcntl(CHILD_FD, nix::libc::F_SETFD, 0);
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| Error::io("<aw-run>", e))?;
    drop(writer);
    drop(cmd);
    // What it says before it logs, on this stderr as it comes.
    let mut relay = Some(std::thread::spawn(move || {
        let _ = std::io::copy(&mut { said }, &mut std::io::stderr());
    }));
    let mut relayed = || {
        if let Some(r) = relay.take() {
            let _ = r.join();
        }
    };
    let mut log: Option<(u64, PathBuf)> = None;
    let mut note = String::new();
    // Warnings for the user who started it (`!` and a line), where it logs (`L`), then `1`
    // once it serves.
    let mut reader = std::io::BufReader::new(reader);
    loop {
        let mut byte = [0u8; 1];
        match reader.read(&mut byte) {
            Ok(1) if byte[0] == b'1' => {
                relayed();
                out.line(&child.id().to_string())?;
                // The pid alone on stdout (for `pid=$(aw-run --detach ...)`); where it logs
                // and how to stop it on stderr.
                crate::warn::warn_note("aw-run", &note);
                return Ok(0);
            }
            Ok(1) if byte[0] == b'!' => {
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                eprintln!("{}", line.trim_end());
            }
            Ok(1) if byte[0] == b'L' => {
                let mut field = || {
                    let mut f = Vec::new();
                    let _ = reader.read_until(0, &mut f);
                    f.pop();
                    f
                };
                let start = String::from_utf8_lossy(&field()).parse().unwrap_or(0);
                let path = PathBuf::from(OsString::from_vec(field()));
                note = String::from_utf8_lossy(&field()).into_owned();
                log = Some((start, path));
                // Its output now goes to the log: what it said before is all shown.
                relayed();
            }
            _ => break,
        }
    }
    // It ended before serving: show what it logged.
    relayed();
    let status = child.wait().map_err(|e| Error::io("<aw-run>", e))?;
    if let Some((start, path)) = log
        && let Ok(mut f) = crate::fs::owned::open_read(&path)
        && f.seek(std::io::SeekFrom::Start(start)).is_ok()
    {
        let mut said = String::new();
        let _ = f.read_to_string(&mut said);
        eprint!("{said}");
    }
    Ok(status.code().map_or(exit::NO, |c| c as u8))
}
