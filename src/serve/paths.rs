//! Where the files of the serving family are: all of them in `_state/serve/`.

use std::path::PathBuf;

use crate::instance::Instance;

/// `_state/serve`.
pub fn dir(inst: &Instance) -> PathBuf {
    inst.state_dir().join("serve")
}

/// `<agent>.lock`, the agent's claim.
pub(super) fn lock_path(inst: &Instance, agent: &str) -> PathBuf {
    dir(inst).join(lock_name(agent))
}

/// The name of [`lock_path`] in [`dir`].
pub(super) fn lock_name(agent: &str) -> String {
    format!("{agent}.lock")
}

/// `<agent>.json`, the record of the agent's controller.
pub(super) fn state_path(inst: &Instance, agent: &str) -> PathBuf {
    dir(inst).join(state_name(agent))
}

/// The name of [`state_path`] in [`dir`].
fn state_name(agent: &str) -> String {
    format!("{agent}.json")
}

/// The stop request to the server `pid` of host `host_id`.
pub(super) fn stop_path(inst: &Instance, host_id: &str, pid: u32) -> PathBuf {
    dir(inst).join(format!("stop.{host_id}.{pid}"))
}
