//! Lifecycle hooks: the commands a workflow names for what happens in a run (`hooks:` in
//! its file, see `aw-workflow(5)`). An agent becomes idle, a run ends, a card is done, a
//! merge request reaches its end, a budget is passed, an approval is asked, the instance
//! goes quiet: the command named for it runs with `sh -c`, from the workflow file's
//! directory, with the event as one JSON object on its stdin and as `AW_*` variables in its
//! environment, in a process group of its own that is killed at its timeout. Exit 0 goes
//! on; exit 2 means "not yet" (the runner posts its stderr to the agent); anything else is
//! reported. Every hook run is one line of the instance's hook log.
//!
//! aw-run fires them (see `run::controller::hooks`); this module holds what does not depend
//! on a run:
//!
//! | module  | what it holds |
//! |---------|---------------|
//! | `event` | [`Kind`], the events, and [`Event`], one of them as JSON and as environment |
//! | `hook`  | [`Hook`], [`Hooks`]: what a workflow names; [`run`]: one hook's process and its [`Answer`] |
//! | `log`   | [`Record`]: the hook log, `_state/hooks.log` |
//! | `notice`| which channel entries tell of an approval asked or a merge ended |
//! | `state` | [`HookState`]: what a server's hooks keep between events |

mod event;
mod hook;
mod log;
mod notice;
mod state;

pub use event::{Event, Kind};
pub use hook::{Answer, DEFAULT_TIMEOUT, Hook, Hooks, MAX_STDERR, Ran, run};
pub use log::{LOG, Record, append};
pub use notice::{Notice, notice};
pub use state::HookState;
