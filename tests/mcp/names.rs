//! aw-mcp and the registry's name index: a `channel_send` resolves its mentions without
//! opening `agents.json`, and the workers `spawn_agent` registers and `close_agent` closes
//! leave the index exact.

use crate::common;
use crate::mcp_common;

use std::time::{Duration, Instant};

use common::agent_index::{Opens, assert_exact, indexed};
use mcp_common::{GUARD, Team};
use serde_json::json;

#[tokio::test]
async fn a_send_resolves_its_mentions_from_the_name_index() {
    let team = Team::new();
    team.register("amy");
    team.register("bob");
    let amy = team.join("amy").await;
    assert_exact(&team.inst());
    let opens = Opens::watch(&team.inst().join("_state/agents.json"));
    let r = amy
        .ok("channel_send", json!({"message": "@bob and @amy, @bob"}))
        .await;
    assert_eq!(r.data["mentions"], json!(["bob", "amy"]), "{}", r.text);
    assert_eq!(opens.count(), 0, "agents.json was opened");
    amy.quit().await;
}

#[tokio::test]
async fn spawned_and_closed_workers_leave_the_index_exact() {
    let team = Team::new();
    let lead = team.join_with("lead", &["--collab"]).await;
    let r = lead
        .ok("spawn_agent", json!({"prompt": "look", "backend": "mock"}))
        .await;
    assert_eq!(r.data["name"], "worker-1", "{}", r.text);
    assert_exact(&team.inst());
    let c = lead.ok("close_agent", json!({"agent": "worker-1"})).await;
    assert!(
        ["closed", "closing"].contains(&c.data["state"].as_str().unwrap()),
        "{}",
        c.text
    );
    assert_exact(&team.inst());
    let record = indexed(&team.inst(), "worker-1").unwrap();
    assert_eq!(record["closed"], true, "{record}");
    // The server started for the worker ends once it serves nobody.
    let end = Instant::now() + GUARD;
    while team.ctl_ok(&["ps", "--json"]).contains("worker-1") {
        assert!(Instant::now() < end, "the worker is still served");
        std::thread::sleep(Duration::from_millis(10));
    }
    lead.quit().await;
}
