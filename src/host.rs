//! Who this process is, beyond its pid: the host it runs on.
//!
//! A pid names a process only within one pid namespace of one running kernel. Several hosts
//! sharing an instance over a network file system, or several containers of one kernel
//! sharing a bind-mounted `.workflow`, can each have a process of the same pid. So every
//! record that names a process also names its host:
//!
//! - `host`: the host name (`uname -n`, of this UTS namespace), for people;
//! - `host_id`: 16 hex digits, the FNV-1a hash of the kernel's boot id
//!   (`/proc/sys/kernel/random/boot_id`, new at every boot, different on every machine)
//!   and of the inode of this process's pid namespace (`/proc/self/ns/pid`, different in
//!   every container of one kernel). Two processes have the same `host_id` exactly when a
//!   pid of one means the same process to the other (up to a hash collision), and only then
//!   may one signal or probe the other by pid.
//!
//! Where `/proc` does not tell (not Linux, or hidden), the host name stands in for the boot id
//! and 0 for the namespace.

use std::sync::OnceLock;

/// This process's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The host name, for people.
    pub name: String,
    /// What tells pid namespaces apart: 16 lowercase hex digits.
    pub id: String,
}

/// The host of this process (read once).
pub fn this() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        let name = hostname();
        let boot = boot_id().unwrap_or(&name).to_string();
        let ns = pid_namespace().unwrap_or(0);
        Host {
            id: format!(
                "{:016x}",
                crate::hash::fnv1a(format!("{boot}\n{ns}").as_bytes())
            ),
            name,
        }
    })
}

/// The kernel's boot id, new at every boot (read once); `None` where `/proc` does not tell.
pub fn boot_id() -> Option<&'static str> {
    static BOOT: OnceLock<Option<String>> = OnceLock::new();
    BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_string())
    })
    .as_deref()
}

/// Is `id` (a record's `host_id`) this process's host? A record without one was written by
/// a version of aw that knew no hosts, on this host: `None` is this host.
pub fn is_this(id: Option<&str>) -> bool {
    id.is_none_or(|id| id == this().id)
}

/// Is `s` written like a `host_id`: 16 lowercase hex digits?
pub fn valid_id(s: &str) -> bool {
    s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The host name of this UTS namespace; `localhost` when it cannot be read.
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
    let r = unsafe { nix::libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name = if r == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).trim().to_string()
    } else {
        String::new()
    };
    // Shown in one column of a table: no blanks or control characters.
    let name: String = name
        .chars()
        .filter(|c| !c.is_whitespace() && !c.is_control())
        .collect();
    if name.is_empty() {
        "localhost".to_string()
    } else {
        name
    }
}

/// The inode of this process's pid namespace.
fn pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_host_has_a_name_and_a_valid_id() {
        let h = this();
        assert!(!h.name.is_empty());
        assert!(valid_id(&h.id), "{}", h.id);
        assert!(is_this(None));
        assert!(is_this(Some(&h.id)));
        assert!(!is_this(Some("0000000000000000")) || h.id == "0000000000000000");
        assert!(!valid_id("0123456789ABCDEF"));
        assert!(!valid_id("../x"));
    }
}
