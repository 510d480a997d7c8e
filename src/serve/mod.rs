//! Who serves which agent: the files an `aw-run` keeps under `_state/serve/` while it runs.
//!
//! - `<host_id>.<pid>.<stamp>.server`: the server's own lock, held (flock, exclusive) for its
//!   whole life, with its pid, host name and host id inside (one a line). It is created as
//!   a dotfile, locked, then renamed into place, so that it is never found free under its
//!   name while its server lives; the server removes it when it ends, and a file found free
//!   (its server died) is removed by the next server that starts there, as is one left under
//!   its temporary name by a server killed while it made it. One per server,
//!   whatever the number of agents it serves: a server's open descriptors do not grow with
//!   its agents. See `server.rs`.
//! - `<host_id>.<pid>.<stamp>.server.json`: the record ([`Served`]) of each agent the server
//!   serves that has none of its own, written once every agent it starts with is
//!   registered (until then they are served but not shown); removed with the server file.
//! - `<agent>.lock`: the agent's claim: pid, host name, host id and the name of the server
//!   file of the process that serves the agent, one a line. It is taken under a short
//!   exclusive flock (open, lock, read, write in place, close; never replaced by rename, so
//!   that another host reads it fresh) and let go by emptying it the same way. A claim is
//!   live while the server file it names is locked: a second server is refused at once,
//!   and a server that died (even by SIGKILL) frees its agents at once. See `claim.rs`.
//! - `<agent>.json`: that agent's controller as the server sees it ([`Served`]), naming its
//!   server file, written at its first change of state (an agent served later, by
//!   `aw-run --serve` or as a worker, at once) and replaced atomically (without fsync: it
//!   means nothing after a crash) at every other: a server of 10,000 agents starts without
//!   making 10,000 files. A record that names another server than the
//!   agent's claim does is stale. See `record.rs`.
//! - `stop.<host_id>.<pid>`: a request to the server `pid` of host `host_id` to finish
//!   ([`request_stop`]); the server watches for it and removes it when it has seen it.
//!   See `stop.rs`.
//!
//! An earlier version held the flock of `<agent>.lock` itself for its whole life and wrote
//! three lines (or the pid alone) in it. A claim that names no server file is of that kind:
//! it is live while its own flock is held, so a server of this version never takes an agent
//! from an older one. The other way round does not hold: an older version sees no flock on
//! this version's claims and takes them as free, so servers of both versions must not serve
//! one instance at once.
//!
//! flock holds across the clients of a network file system and across containers, so an
//! agent is served by one process wherever its servers run; a `.json` left by a server that
//! died is stale and ignored. A pid is never probed or signalled unless its record names
//! this host ([`crate::host`]), and never signalled when it is read from a file another
//! user owns ([`request_stop`]).
//!
//! Each server also leaves an entry in the user's registry of servers ([`user_dir`]): a
//! file `<pid>.<instance>` holding the instance directory, so that `aw-ctl ps --all-roots`
//! and `aw-ctl stop --all-roots` find servers of every root. It is written and read only
//! when it is private to the user (its directory and the one above are the user's, and
//! nobody else may write in them). The server removes its entry when it
//! ends ([`Listed`]); an entry whose process serves nothing there any more (it was killed)
//! is ignored and removed by whoever reads it. See `user.rs`.
//!
//! Where each file is: `paths.rs`.

mod claim;
mod paths;
mod record;
mod server;
mod stop;
mod user;

pub use claim::{Claim, is_served, wait_unserved};
pub use paths::dir;
pub use record::{Caps, ControllerState, Served, list, record, show_served, write};
pub use stop::{Asked, clear_stop, forget_stop, my_stop_path, request_stop};
pub use user::{Listed, user_dir, user_instances};

use crate::error::Result;
use crate::instance::Instance;

/// Claim each agent for this process, or say which process serves one (exit 75); the
/// claims in the order of `agents` (how, in `claim.rs`). The process is then listed in the
/// user's registry of servers ([`user_dir`]). It is here, not in `claim.rs`, because
/// reading that registry needs to know which agents are served: claims know nothing of it.
pub fn take(inst: &Instance, agents: &[&str]) -> Result<Vec<Claim>> {
    let claims = claim::take(inst, agents)?;
    // Best effort: a server that cannot be listed for the user still serves.
    let _ = user::enlist(inst);
    Ok(claims)
}
