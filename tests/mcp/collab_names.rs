//! The names `spawn_agent` gives to unnamed workers, through a real `aw-mcp --collab` and the
//! `aw-run` servers it starts.

use crate::mcp_common;

use mcp_common::Team;
use serde_json::json;

/// A worker named by hand `worker-18446744073709551615` does not make the next unnamed
/// spawns overflow into one name: each gets a free one.
#[tokio::test]
async fn unnamed_workers_after_the_largest_number_get_free_names() {
    let team = Team::new();
    let lead = team
        .join_with("lead", &["--collab", "--max-workers", "4"])
        .await;
    let big = format!("worker-{}", u64::MAX);
    let r = lead
        .ok(
            "spawn_agent",
            json!({"prompt": "first", "backend": "mock", "name": big}),
        )
        .await;
    assert_eq!(r.data["name"], big.as_str(), "{}", r.text);
    let mut names = Vec::new();
    for task in ["second", "third"] {
        let r = lead
            .ok("spawn_agent", json!({"prompt": task, "backend": "mock"}))
            .await;
        names.push(r.data["name"].as_str().unwrap().to_string());
    }
    assert_eq!(names, ["worker-1", "worker-2"]);
    let reg = team.state("agents.json");
    let mut all: Vec<String> = reg["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect();
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "a name registered twice: {reg}");
    for a in [big.as_str(), "worker-1", "worker-2"] {
        lead.ok("close_agent", json!({"agent": a})).await;
    }
    lead.quit().await;
}

/// A name that ends in `-` could never be mentioned (`@bob-` mentions `bob`): `aw-ctl new`,
/// a workflow file and `spawn_agent` all refuse it, with one line that says why, and nothing
/// is registered.
#[tokio::test]
async fn a_name_ending_in_a_dash_is_refused_wherever_an_agent_is_named() {
    let team = Team::new();
    let why = "invalid agent name 'bob-': a name ending in '-' could never be mentioned \
               (@bob- mentions bob)";
    let out = team.run("aw-ctl", &["new", "bob-", "--backend", "mock"]);
    assert_eq!(out.status.code(), Some(65));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.lines().next(),
        Some(&*format!("aw-ctl: {why}")),
        "{err}"
    );
    let wf = team.base.join("wf.yaml");
    std::fs::write(&wf, "agents:\n  bob-:\n    mock: {}\n").unwrap();
    let wf = wf.to_str().unwrap();
    let out = team.run("aw-run", &["--check", wf]);
    assert_eq!(out.status.code(), Some(65));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("wf.yaml:2:3: agents: {why}")),
        "{err}"
    );
    let lead = team.join_with("lead", &["--collab"]).await;
    let text = lead
        .fail(
            "spawn_agent",
            json!({"prompt": "go", "backend": "mock", "name": "bob-"}),
        )
        .await;
    assert!(text.contains(why), "{text}");
    assert!(
        !team.state("agents.json").to_string().contains("bob-"),
        "{}",
        team.state("agents.json")
    );
    lead.quit().await;
}
