//! A git worktree per agent (`isolation: worktree`): where it is, on which branch, made or
//! reused before each of the agent's runs, listed, and removed once its work is merged or
//! when the user asks.
//!
//! An agent's worktree is `<top>/.aw-worktrees/<instance>/<agent>`, where `<top>` is the top
//! of the work tree aw-run was started in, on the branch `aw/<instance>/<agent>` (the
//! branch the merge queue merges, [`crate::merge::branch_of`]). It lies outside the aw root,
//! where the file tools may work, and `.aw-worktrees/` holds a `.gitignore` of `*`, so that
//! the main work tree never shows it as untracked files. A new branch starts at the tip of
//! its target: the merge queue's target (`into` of `_state/merge.json`) when the instance
//! has merge settings, else the branch checked out at `<top>`.
//!
//! What aw knows of each worktree is in `_state/worktrees.json` (agent, path, branch,
//! target, the commit it started from, the repository), changed under the state lock;
//! making or removing one is done under `_state/worktree.lock`, so that two aw-run
//! processes that start the same agent at once make it once. A worktree removed by hand
//! (`rm -rf`) leaves a registration git refuses to reuse: it is pruned (`git worktree
//! prune`) and the worktree made again on the same branch, with the same commits.
//!
//! The work of a worktree is merged when its branch has commits of its own and every one
//! is in the target (the branch is an ancestor of the target, or `git cherry` finds each
//! commit's change there, as after a rebase). A merged worktree with no change to a file is
//! removed with its branch, after a run and before the next, so that the next run starts
//! afresh from the target; a worktree whose work is merged while its agent does not run
//! (its request queued without waiting) is removed by the aw-run that serves the queue,
//! while no run is under way, or when its work is done ([`tidy_merged`]).
//!
//! Every git command goes through [`crate::git::command`]: none runs a hook, filter or
//! signing program of the repository.

mod make;
mod record;
mod repo;
mod status;

pub use make::{Removed, Spec, remove, tidy_merged};
pub use record::{DIR, Record, STATE, get, path_of};
pub use repo::top_of;
pub use status::{Status, list};

crate::keyword_enum! {
    /// Where an agent of a workflow works.
    pub enum Isolation {
        /// In aw-run's working folder (or its `cwd`), with every other agent.
        None = "none",
        /// In a git worktree of its own, on a branch of its own.
        Worktree = "worktree",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .expect("git must be installed");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A repository on `main` with one commit, an instance `t` in a root beside it, and the
    /// worktree of agent `a`.
    fn setup() -> (tempfile::TempDir, Spec) {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        std::fs::create_dir(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("f.txt"), "1\n").unwrap();
        git(&repo, &["add", "f.txt"]);
        git(&repo, &["commit", "-q", "-m", "start"]);
        let inst = crate::instance::Root::new(tmp.path().join("aw"))
            .instance("t")
            .unwrap();
        let spec = Spec::new(&inst, &repo, "a").unwrap();
        (tmp, spec)
    }

    fn commit_in(dir: &Path, text: &str) {
        std::fs::write(dir.join("f.txt"), text).unwrap();
        git(dir, &["commit", "-q", "-a", "-m", text]);
    }

    #[test]
    fn isolation_names_round_trip() {
        crate::keyword::assert_round_trips(Isolation::ALL, |i| i.name(), Isolation::from_name);
    }

    #[test]
    fn processes_that_make_one_worktree_at_once_make_it_once() {
        let (_tmp, spec) = setup();
        let made: Vec<Record> = std::thread::scope(|s| {
            let all: Vec<_> = (0..4).map(|_| s.spawn(|| spec.ensure())).collect();
            all.into_iter()
                .map(|h| h.join().unwrap().unwrap())
                .collect()
        });
        assert!(made.iter().all(|r| *r == made[0]), "{made:?}");
        assert_eq!(made[0].branch, "aw/t/a");
        assert_eq!(made[0].target.as_deref(), Some("main"));
        let list = git(&spec.top, &["worktree", "list", "--porcelain"]);
        assert_eq!(list.matches("worktree ").count(), 2, "{list}");
        // The main work tree sees nothing of it.
        assert_eq!(
            git(
                &spec.top,
                &["status", "--porcelain", "--untracked-files=all"]
            ),
            ""
        );
        assert_eq!(list_paths(&spec), vec![spec.path.clone()]);
    }

    fn list_paths(spec: &Spec) -> Vec<PathBuf> {
        list(&spec.inst)
            .unwrap()
            .into_iter()
            .map(|s| s.record.path)
            .collect()
    }

    #[test]
    fn a_worktree_goes_once_its_work_is_merged_and_it_is_clean() {
        let (_tmp, spec) = setup();
        spec.ensure().unwrap();
        // No work of its own: kept.
        assert!(!spec.tidy().unwrap());
        commit_in(&spec.path, "2\n");
        assert!(!spec.tidy().unwrap(), "not merged");
        git(&spec.top, &["merge", "-q", "--ff-only", "aw/t/a"]);
        std::fs::write(spec.path.join("new.txt"), "x").unwrap();
        assert!(!spec.tidy().unwrap(), "a change to a file");
        std::fs::remove_file(spec.path.join("new.txt")).unwrap();
        assert!(spec.tidy().unwrap());
        assert!(!spec.path.exists());
        assert_eq!(git(&spec.top, &["branch", "--list", "aw/t/a"]), "");
        assert!(get(&spec.inst, "a").unwrap().is_none());
        // Made afresh from main.
        let r = spec.ensure().unwrap();
        assert_eq!(r.base, git(&spec.top, &["rev-parse", "main"]));
    }

    #[test]
    fn a_worktree_removed_by_hand_with_its_branch_is_made_afresh() {
        let (_tmp, spec) = setup();
        spec.ensure().unwrap();
        commit_in(&spec.path, "2\n");
        std::fs::remove_dir_all(&spec.path).unwrap();
        git(&spec.top, &["worktree", "prune"]);
        git(&spec.top, &["branch", "-D", "aw/t/a"]);
        let r = spec.ensure().unwrap();
        assert_eq!(r.base, git(&spec.top, &["rev-parse", "main"]));
        assert_eq!(
            std::fs::read_to_string(spec.path.join("f.txt")).unwrap(),
            "1\n"
        );
    }

    #[test]
    fn work_replayed_on_the_target_counts_as_merged() {
        let (_tmp, spec) = setup();
        spec.ensure().unwrap();
        commit_in(&spec.path, "2\n");
        // The target moved on, then took the change as a new commit (as a rebase does).
        std::fs::write(spec.top.join("g.txt"), "g\n").unwrap();
        git(&spec.top, &["add", "g.txt"]);
        git(&spec.top, &["commit", "-q", "-m", "g"]);
        git(&spec.top, &["cherry-pick", "aw/t/a"]);
        assert!(spec.tidy().unwrap());
        assert_eq!(git(&spec.top, &["branch", "--list", "aw/t/a"]), "");
    }
}
