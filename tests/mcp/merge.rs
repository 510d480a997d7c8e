//! The `merge_request` tool: an agent asks to merge its own branch (that of its worktree,
//! `aw/<instance>/<agent>`) with the instance's target and verify command, and gets the
//! outcome: merged, or a conflict with its paths; with the settings of an aw-run that serves
//! the queue, it returns at once unless told to wait.

use crate::common::git;
use crate::mcp_common;

use std::path::Path;

use mcp_common::Team;
use serde_json::json;

/// Commit `text` as `file` on a new branch `name` made from `trunk`.
fn commit_on(repo: &Path, name: &str, file: &str, text: &str) {
    git(repo, &["checkout", "-q", "-b", name, "trunk"]);
    std::fs::write(repo.join(file), text).unwrap();
    git(repo, &["add", file]);
    git(repo, &["commit", "-q", "-m", name]);
    git(repo, &["checkout", "-q", "--detach", "trunk"]);
}

#[tokio::test]
async fn an_agent_merges_its_own_branch_with_the_instance_settings_and_hears_of_a_conflict() {
    let team = Team::new();
    let repo = team.base.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "trunk"]);
    git(&repo, &["config", "user.name", "t"]);
    git(&repo, &["config", "user.email", "t@example.com"]);
    std::fs::write(repo.join("f.txt"), "one\n").unwrap();
    git(&repo, &["add", "f.txt"]);
    git(&repo, &["commit", "-q", "-m", "start"]);
    commit_on(&repo, "aw/default/coder", "f.txt", "coder\n");
    commit_on(&repo, "other", "f.txt", "other\n");
    let before = git(&repo, &["rev-parse", "trunk"]);
    // The settings aw-run keeps from the workflow's merge: key.
    std::fs::create_dir_all(team.inst().join("_state")).unwrap();
    std::fs::write(
        team.inst().join("_state/merge.json"),
        r#"{"into": "trunk", "how": "rebase", "verify": "grep -q coder f.txt"}"#,
    )
    .unwrap();

    let coder = team.join_in("coder", &repo).await;
    let r = coder.ok("merge_request", json!({})).await;
    assert!(
        r.text.contains("aw/default/coder into trunk: merged"),
        "{}",
        r.text
    );
    assert_eq!(r.data["state"], "merged");
    assert_eq!(r.data["asked_by"], "coder");
    assert_eq!(r.data["verify"], "grep -q coder f.txt");
    assert_eq!(git(&repo, &["rev-parse", "trunk~1"]), before);
    assert_eq!(git(&repo, &["show", "trunk:f.txt"]), "coder");

    let r = coder.ok("merge_request", json!({"branch": "other"})).await;
    assert!(r.text.contains("conflict in f.txt"), "{}", r.text);
    assert_eq!(r.data["state"], "conflict");
    let r = coder
        .ok("merge_request", json!({"branch": "other", "wait": false}))
        .await;
    assert!(
        r.text.contains("#3") && r.text.contains("queued"),
        "{}",
        r.text
    );
    assert_eq!(r.data["state"], "queued");
    // With the settings of an aw-run that serves the queue, it returns at once unless told.
    let settings = r#"{"into": "trunk", "verify": "grep -q coder f.txt", "wait": false}"#;
    std::fs::write(team.inst().join("_state/merge.json"), settings).unwrap();
    let r = coder.ok("merge_request", json!({"branch": "other"})).await;
    assert_eq!(r.data["state"], "queued", "{}", r.text);
    let r = coder
        .ok("merge_request", json!({"branch": "other", "wait": true}))
        .await;
    assert_eq!(r.data["id"], 5, "{}", r.text);
    assert_eq!(r.data["state"], "conflict", "{}", r.text);
    coder
        .fail_with(
            "merge_request",
            json!({"branch": "nope"}),
            &["no such branch"],
        )
        .await;
    coder.quit().await;
}
