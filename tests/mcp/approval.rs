//! The `approve` and `reject` tools: every agent has them, and only an approver of a
//! request may use them on it; a refusal is a tool error that names the approvers.

use crate::mcp_common::*;

use serde_json::json;

/// The request file `approvals/<id>.json` of the team's instance.
fn request(team: &Team, id: u64) -> serde_json::Value {
    let path = team.inst().join(format!("approvals/{id}.json"));
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

#[tokio::test]
async fn only_an_approver_decides_a_request_through_the_tools() {
    let team = Team::new();
    let lead = team.join("lead").await;
    let coder = team.join("coder").await;
    let id = team.ctl_ok(&[
        "approvals",
        "ask",
        "merge the auth branch",
        "--by",
        "lead",
        "--kind",
        "merge",
        "--as",
        "coder",
    ]);
    assert_eq!(id.trim(), "1");
    let before = request(&team, 1);

    // coder is no approver: refused, and the request is as it was.
    let msg = coder
        .fail_with(
            "approve",
            json!({"id": 1}),
            &["coder may not decide approval 1", "only lead"],
        )
        .await;
    assert!(!msg.contains("--as"), "{msg}");
    assert_eq!(request(&team, 1), before);

    // lead rejects with a reason; the decision is posted, mentioning the asker.
    let r = lead
        .ok("reject", json!({"id": 1, "reason": "tests fail on main"}))
        .await;
    assert!(r.text.starts_with("Approval #1 rejected"), "{}", r.text);
    assert_eq!(r.data["state"], "rejected");
    let stored = request(&team, 1);
    assert_eq!(stored["state"], "rejected");
    assert_eq!(stored["decision"]["by"], "lead");
    assert_eq!(stored["decision"]["reason"], "tests fail on main");
    let posted = team.entries_starting("@coder [APPROVAL #1] rejected by lead");
    assert_eq!(posted.len(), 1, "{:?}", team.channel());

    // Decided already: refused, nothing changed.
    lead.fail_with("approve", json!({"id": 1}), &["rejected already"])
        .await;
    assert_eq!(request(&team, 1), stored);
    lead.fail_with("approve", json!({"id": 7}), &["no approval 7"])
        .await;
    for a in [lead, coder] {
        a.quit().await;
    }
}
