//! How requests are served unless a request says otherwise: the workflow's `merge:`, which
//! aw-run keeps in `_state/merge.json` for the scripts and commands of the instance.

use serde::{Deserialize, Serialize};

use crate::approval::Then;
use crate::error::{Error, Result};
use crate::instance::Instance;

/// The file of the instance's merge settings, under `_state/`.
pub const CONFIG: &str = "merge.json";

crate::keyword_enum! {
    /// How a branch is brought onto the target.
    pub enum How {
        /// Its commits replayed on the target's tip: a straight history.
        Rebase = "rebase",
        /// A merge commit (`git merge --no-ff`).
        Merge = "merge",
    }
}

impl std::str::FromStr for How {
    type Err = Error;
    fn from_str(s: &str) -> Result<How> {
        How::from_name(s).ok_or_else(|| {
            Error::invalid(format!(
                "merge method '{}': expected {}",
                crate::names::sanitize(s),
                How::NAMES.join(" or ")
            ))
        })
    }
}

/// The approval a request waits for once its result is verified, before the target moves
/// (`needs:` of the workflow's `merge:`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Needs {
    /// Who may approve.
    pub by: Vec<String>,
    /// How long they have, in seconds; none: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// What then: the request fails, is not merged (`skip`), or is asked of someone else.
    #[serde(default = "fail")]
    pub then: Then,
    /// An approver may also answer by a reply in the channel.
    #[serde(default)]
    pub replies: bool,
}

fn fail() -> Then {
    Then::Fail
}

/// The merge settings: the target branch, how, the verify command and its time limit, the
/// approval a result waits for, and whether the `merge_request` tool waits for the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The branch requests are merged into.
    pub into: String,
    pub how: How,
    /// A shell command run on the result in the scratch work tree; it must exit 0 for the
    /// target to move. None: nothing to run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<String>,
    /// How long the verify command may run, in seconds, before it is killed (and fails).
    pub timeout: u64,
    /// The approval each request waits for before the target moves; none: no approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs: Option<Needs>,
    /// Whether the `merge_request` tool waits for the result unless told: false when an
    /// aw-run serves the queue (the workflow's `merge:`), which posts the result.
    pub wait: bool,
}

/// How long a verify command may run unless told: 30 minutes.
pub const DEFAULT_TIMEOUT: u64 = 30 * 60;

impl Default for Config {
    fn default() -> Config {
        Config {
            into: "main".into(),
            how: How::Rebase,
            verify: None,
            timeout: DEFAULT_TIMEOUT,
            needs: None,
            wait: true,
        }
    }
}

impl Config {
    /// The settings of `inst` (`_state/merge.json`), the defaults where it says nothing or
    /// is missing.
    pub fn load(inst: &Instance) -> Result<Config> {
        crate::state::load(&inst.state_file(CONFIG))
    }

    /// Keep these as the settings of `inst`.
    pub fn store(&self, inst: &Instance) -> Result<()> {
        let _lock = crate::state::lock(inst)?;
        crate::state::store(&inst.state_file(CONFIG), self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_says_little_takes_the_defaults_and_a_typo_is_refused() {
        crate::keyword::assert_round_trips(How::ALL, |h| h.name(), How::from_name);
        let dir = tempfile::tempdir().unwrap();
        let inst = crate::instance::Root::new(dir.path())
            .instance("t")
            .unwrap();
        assert_eq!(Config::load(&inst).unwrap(), Config::default());
        std::fs::create_dir_all(inst.state_dir()).unwrap();
        let file = inst.state_file(CONFIG);
        std::fs::write(&file, r#"{"verify": "make test", "how": "merge"}"#).unwrap();
        let c = Config::load(&inst).unwrap();
        assert_eq!(
            (c.into.as_str(), c.how, c.verify.as_deref(), c.timeout),
            ("main", How::Merge, Some("make test"), DEFAULT_TIMEOUT)
        );
        std::fs::write(&file, r#"{"verfy": "make test"}"#).unwrap();
        assert_eq!(Config::load(&inst).unwrap_err().exit_code(), 65);
        let e = "squash".parse::<How>().unwrap_err();
        assert_eq!(e.exit_code(), 65);
        assert!(e.to_string().contains("expected rebase or merge"), "{e}");
    }
}
