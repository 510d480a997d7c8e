//! The names `spawn_agent` gives to unnamed workers, through a real `aw-mcp --collab` and the
//! `aw-run` servers it starts.

mod mcp_common;

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
