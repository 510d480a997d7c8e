//! The only code that renames, locks and watches: everything else calls these.

pub mod atomic;
pub mod beneath;
pub mod identity;
pub mod kept;
pub mod lock;
pub mod netfs;
pub mod owned;
pub mod records;
pub mod watch;

pub use atomic::{
    atomic_write, atomic_write_at, atomic_write_in, atomic_write_private,
    atomic_write_private_unsynced, atomic_write_unswept, atomic_write_unsynced,
    create_or_replace_in, ensure_private_unsynced, fsync_dir, make_private, private_dir,
    sweep_folder, sweep_once,
};
pub use beneath::Dir;
pub use lock::Lock;
