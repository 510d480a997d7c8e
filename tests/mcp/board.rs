//! The board and lease tools through a real `aw-mcp`: cards added with dependencies,
//! claimed by the next-ready rule, finished with a note; leases that conflict, named.

use crate::mcp_common;

use mcp_common::Team;
use serde_json::{Value, json};

/// The card `id` as `aw-ctl board show --json` prints it.
fn card(team: &Team, id: u64) -> Value {
    let out = team.ctl_ok(&["board", "show", &id.to_string(), "--json"]);
    serde_json::from_str(out.trim()).expect("a card as JSON")
}

#[tokio::test]
async fn cards_added_with_dependencies_are_claimed_next_and_finished_with_a_note() {
    let team = Team::new();
    let lead = team.join("lead").await;
    let worker = team.join("worker").await;

    let add = |title: &str, after: Value| json!({"title": title, "body": format!("do {title}"), "after": after, "labels": ["x"]});
    let a = lead.ok("board_add", add("parse", json!([]))).await;
    let a = a.data["id"].as_u64().expect("id");
    let b = lead.ok("board_add", add("check", json!([a]))).await;
    let b = b.data["id"].as_u64().expect("id");
    assert_eq!((a, b), (1, 2));
    lead.fail_with("board_add", add("never", json!([9])), &["no card 9"])
        .await;

    let ready = worker.ok("board_list", json!({"ready": true})).await;
    let ids: Vec<u64> = ready.data["cards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [1], "{}", ready.text);

    // The next ready card is 1; card 2 waits for it.
    let got = worker.ok("board_claim", json!({})).await;
    assert_eq!(got.data["id"], 1, "{}", got.text);
    assert!(got.text.contains("do parse"), "{}", got.text);
    assert!(got.text.contains("board_done"), "{}", got.text);
    let none = lead.ok("board_claim", json!({"next": true})).await;
    assert_eq!(none.data["card"], Value::Null, "{}", none.text);
    assert!(none.text.starts_with("No card is ready"), "{}", none.text);
    lead.fail_with("board_claim", json!({"id": 2}), &["waits for card 1"])
        .await;
    lead.fail_with("board_claim", json!({"id": 1}), &["held by worker"])
        .await;
    lead.fail_with("board_done", json!({"id": 1}), &["held by worker"])
        .await;
    let mine = worker.ok("board_list", json!({"mine": true})).await;
    assert_eq!(mine.data["cards"].as_array().unwrap().len(), 1);
    assert_eq!(mine.data["cards"][0]["holder"], "worker");

    let done = worker
        .ok(
            "board_done",
            json!({"id": 1, "note": "parser in src/parse.rs"}),
        )
        .await;
    assert_eq!(done.data["ready"], json!([2]), "{}", done.text);
    let c = card(&team, 1);
    assert_eq!(c["state"], "done");
    assert_eq!(c["note"], "parser in src/parse.rs");
    assert_eq!(
        c["history"].as_array().unwrap().last().unwrap()["by"],
        "worker"
    );

    // The dependent card is now claimable, by the other agent.
    let next = lead.ok("board_claim", json!({"ttl_seconds": 60})).await;
    assert_eq!(next.data["id"], 2, "{}", next.text);
    assert_eq!(card(&team, 2)["holder"]["agent"], "lead");
    lead.fail_with("board_claim", json!({"id": 2, "next": true}), &["not both"])
        .await;
    lead.quit().await;
    worker.quit().await;
}

#[tokio::test]
async fn a_lease_conflict_names_holder_until_and_reason_and_done_releases_leases() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let bob = team.join("bob").await;
    // The leases alice takes while she holds a card are taken for it.
    let id = alice.ok("board_add", json!({"title": "t"})).await.data["id"].clone();
    alice.ok("board_claim", json!({ "id": id })).await;
    let l = alice
        .ok(
            "lease_take",
            json!({"paths": ["src/**"], "reason": "refactoring the parser"}),
        )
        .await;
    assert_eq!(l.data["agent"], "alice", "{}", l.text);
    assert_eq!(l.data["card"], id, "{}", l.text);
    assert_eq!(l.data["mode"], "exclusive");
    let until = l.data["until"].as_str().unwrap().to_string();
    let e = bob
        .fail_with(
            "lease_take",
            json!({"paths": ["src/a.rs"]}),
            &["alice", &until, "refactoring the parser", "src/a.rs"],
        )
        .await;
    assert!(
        e.contains("wait_seconds"),
        "the model is told what to do: {e}"
    );
    // Shared leases coexist; the list shows both holders.
    bob.ok("lease_take", json!({"paths": "docs/*.md", "shared": true}))
        .await;
    alice
        .ok(
            "lease_take",
            json!({"paths": ["docs/a.md"], "shared": true}),
        )
        .await;
    let list = bob.ok("lease_list", json!({})).await;
    let holders: Vec<&str> = list.data["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["agent"].as_str().unwrap())
        .collect();
    assert_eq!(holders, ["alice", "bob", "alice"], "{}", list.text);
    bob.fail_with("lease_release", json!({"id": "L1"}), &["held by alice"])
        .await;

    // Finishing the card gives alice's leases back: bob now takes the path.
    let done = alice.ok("board_done", json!({ "id": id })).await;
    assert_eq!(done.data["released"], json!(["L1", "L3"]), "{}", done.text);
    bob.ok("lease_take", json!({"paths": ["src/a.rs"]})).await;
    let r = bob.ok("lease_release", json!({})).await;
    assert_eq!(r.data["released"], json!(["L2", "L4"]), "{}", r.text);
    assert_eq!(bob.ok("lease_list", json!({})).await.text, "No leases.");
    alice.quit().await;
    bob.quit().await;
}
