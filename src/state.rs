//! JSON state files under `_state/`: read without a lock, changed by read-modify-write under
//! the instance's state lock, replaced atomically (temp + fsync + rename; the ack cursors
//! without the fsync where nothing asks for it, see [`crate::inbox::ack`]).

use std::path::Path;

use serde::{Serialize, de::DeserializeOwned};

use crate::error::{Error, Result};
use crate::fs::{Lock, atomic_write, atomic_write_unsynced};
use crate::instance::Instance;

/// Load a state file; a missing file is the default value.
pub fn load<T: DeserializeOwned + Default>(path: &Path) -> Result<T> {
    match crate::fs::owned::read_fresh(path) {
        Ok(bytes) => crate::fs::kept::parse(path, &bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Store a state file atomically (the caller holds the state lock).
pub fn store<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    store_with(path, value, true)
}

/// [`store`], flushed to stable storage only when `durable`.
pub fn store_with<T: Serialize>(path: &Path, value: &T, durable: bool) -> Result<()> {
    let bytes = encode(value);
    if durable {
        atomic_write(path, &bytes)
    } else {
        atomic_write_unsynced(path, &bytes)
    }
}

/// A state file's bytes: `value` as indented JSON with a final newline.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("state serializes");
    bytes.push(b'\n');
    bytes
}

/// Take the instance's state lock (creating the instance if needed).
pub fn lock(inst: &Instance) -> Result<Lock> {
    inst.create()?;
    Lock::exclusive(&inst.state_file("state.lock"))
}

/// Read-modify-write `_state/<file>` under the state lock. `f` may refuse with an error, in
/// which case nothing is written. The file is rewritten only when the value changed.
pub fn update<T, R>(inst: &Instance, file: &str, f: impl FnOnce(&mut T) -> Result<R>) -> Result<R>
where
    T: Serialize + DeserializeOwned + Default + PartialEq + Clone,
{
    update_with(inst, file, true, f)
}

/// [`update`], the file flushed to stable storage only when `durable` (otherwise a crash
/// may lose the change; readers still see the old value or the new, never a mix).
pub fn update_with<T, R>(
    inst: &Instance,
    file: &str,
    durable: bool,
    f: impl FnOnce(&mut T) -> Result<R>,
) -> Result<R>
where
    T: Serialize + DeserializeOwned + Default + PartialEq + Clone,
{
    let _lock = lock(inst)?;
    change(inst, file, durable, f)
}

/// [`update`] for a caller that already holds the state lock (a second `flock` on the lock
/// file from the same process would wait for itself).
pub fn update_locked<T, R>(
    inst: &Instance,
    file: &str,
    f: impl FnOnce(&mut T) -> Result<R>,
) -> Result<R>
where
    T: Serialize + DeserializeOwned + Default + PartialEq + Clone,
{
    change(inst, file, true, f)
}

/// The read-modify-write of [`update_with`], under the lock the caller holds.
fn change<T, R>(
    inst: &Instance,
    file: &str,
    durable: bool,
    f: impl FnOnce(&mut T) -> Result<R>,
) -> Result<R>
where
    T: Serialize + DeserializeOwned + Default + PartialEq + Clone,
{
    let path = inst.state_file(file);
    let mut value: T = load(&path)?;
    let before = value.clone();
    let r = f(&mut value)?;
    if value != before {
        store_with(&path, &value, durable)?;
    }
    Ok(r)
}
