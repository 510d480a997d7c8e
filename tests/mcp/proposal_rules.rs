//! The rules a proposal must follow before it is stored: who may take document ownership
//! through a binding `doc-owner` election, and how large a proposal, a vote reason and the
//! set of active proposals may grow. Every case goes through the real binaries: `aw-mcp`
//! (an rmcp client per agent) and `aw-ctl`.
//!
//! A refusal must leave the instance directory exactly as it was. Nothing here judges speed.

use crate::common;
use crate::mcp_common;

use std::time::Duration;

use common::{assert_error, assert_same_tree, snapshot};
use mcp_common::{Agent, Team};
use serde_json::{Value, json};

const MAX_OPTIONS: usize = 20;
const MAX_OPTION_ID: usize = 64;
const MAX_LABEL: usize = 200;
const MAX_TITLE: usize = 200;
const MAX_DESCRIPTION: usize = 4096;
const MAX_REASON: usize = 1000;
const MAX_ACTIVE: usize = 50;

async fn trio(team: &Team) -> [Agent; 3] {
    [
        team.join("alice").await,
        team.join("bob").await,
        team.join("carol").await,
    ]
}

async fn quit_all<const N: usize>(agents: [Agent; N]) {
    for a in agents {
        a.quit().await;
    }
}

/// Three agents, and @carol owns the documents.
async fn trio_owned_by_carol(team: &Team) -> [Agent; 3] {
    let agents = trio(team).await;
    team.ctl_ok(&["doc", "owner", "carol"]);
    agents
}

/// The one `[KIND:doc-owner-1]` announcement, which must say that the owner stays.
fn ownership_stays(team: &Team, kind: &str) -> String {
    let ann = team.entries_starting(&format!("[{kind}:doc-owner-1]"));
    assert_eq!(ann.len(), 1, "{kind} announced once");
    let msg = ann[0]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("Document ownership stays as it was."), "{msg}");
    msg
}

fn owner(team: &Team) -> String {
    team.ctl_ok(&["doc", "owner"]).trim().to_string()
}

fn proposal(team: &Team, id: &str) -> Value {
    team.proposals()
        .into_iter()
        .find(|p| p["id"] == id)
        .unwrap_or_else(|| panic!("no proposal {id}"))
}

async fn vote(a: &Agent, id: &str, choice: &str) -> Value {
    a.ok("team_vote", json!({"proposal": id, "choice": choice}))
        .await
        .data
}

/// Run `aw-ctl ARGS`, which must fail with `code` and a one-line error containing every
/// needle, changing nothing stored.
fn ctl_refused(team: &Team, args: &[&str], code: i32, needles: &[&str]) -> String {
    let before = snapshot(&team.inst());
    let out = team.run("aw-ctl", args);
    let line = assert_error(&out, "aw-ctl", code, &format!("aw-ctl {args:?}"));
    for n in needles {
        assert!(line.contains(n), "error {line:?} should mention {n:?}");
    }
    assert_same_tree(
        &before,
        &snapshot(&team.inst()),
        &format!("aw-ctl {args:?}"),
    );
    line
}

/// Call a tool that must fail naming every needle, changing nothing stored.
async fn mcp_refused(team: &Team, a: &Agent, tool: &str, args: Value, needles: &[&str]) -> String {
    let before = snapshot(&team.inst());
    let e = a.fail_with(tool, args, needles).await;
    assert_same_tree(&before, &snapshot(&team.inst()), &format!("refused {tool}"));
    e
}

// ---------------------------------------------------------------------------------------------
// Expiry

/// Three agents, and an approval by @alice that timed out unvoted while other tool calls
/// went by: they leave it alone, active in the file and unannounced. Its id.
async fn lapsed() -> (Team, [Agent; 3], String) {
    let team = Team::new();
    let [alice, bob, carol] = trio(&team).await;
    let p = alice
        .ok(
            "team_proposal_create",
            json!({"type": "approval", "title": "Ship?", "timeoutSeconds": 1}),
        )
        .await
        .data;
    let id = p["id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    alice.ok("channel_read", json!({"limit": 1})).await;
    bob.ok("my_inbox", json!({})).await;
    bob.ok("team_members", json!({})).await;
    bob.ok("team_doc_list", json!({})).await;
    let stored = team.state("proposals.json")["proposals"][0].clone();
    assert_eq!(
        (&stored["id"], &stored["status"]),
        (&json!(id), &json!("active"))
    );
    assert!(team.entries_starting(&format!("[EXPIRED:{id}]")).is_empty());
    (team, [alice, bob, carol], id)
}

/// The one `[EXPIRED:id]` announcement, from the system.
fn expired_once(team: &Team, id: &str) {
    let ann = team.entries_starting(&format!("[EXPIRED:{id}]"));
    assert_eq!(ann.len(), 1, "{ann:?}");
    assert_eq!(ann[0]["from"], "system");
    let stored = team.state("proposals.json")["proposals"][0].clone();
    assert_eq!(stored["status"], "expired");
}

#[tokio::test]
async fn a_lapsed_proposal_is_expired_to_aw_ctl_proposals() {
    let (team, agents, id) = lapsed().await;
    assert_eq!(team.ctl_ok(&["proposals"]), "");
    let all = team.proposals();
    assert_eq!(all.len(), 1);
    assert_eq!(
        (&all[0]["id"], &all[0]["status"]),
        (&json!(id), &json!("expired"))
    );
    assert_eq!(all[0]["resolvedBy"], "no-votes");
    expired_once(&team, &id);
    quit_all(agents).await;
}

#[tokio::test]
async fn a_lapsed_proposal_is_expired_to_the_agent_tool_that_lists_them() {
    let (team, agents, id) = lapsed().await;
    let active = agents[2].ok("team_proposal_status", json!({})).await;
    assert_eq!(active.data["proposals"], json!([]));
    expired_once(&team, &id);
    let one = agents[2]
        .ok("team_proposal_status", json!({ "proposal": id }))
        .await;
    assert_eq!(one.data["status"], "expired");
    quit_all(agents).await;
}

#[tokio::test]
async fn a_lapsed_proposal_is_expired_to_a_vote() {
    let (team, agents, id) = lapsed().await;
    agents[2]
        .fail_with(
            "team_vote",
            json!({"proposal": id, "choice": "yes"}),
            &[&id, "expired", "takes no more votes"],
        )
        .await;
    expired_once(&team, &id);
    // And to a vote through aw-ctl.
    ctl_refused(
        &team,
        &["vote", &id, "yes", "--as", "bob"],
        77,
        &["expired", "takes no more votes"],
    );
    let stored = team.state("proposals.json")["proposals"][0].clone();
    assert_eq!(stored["votes"], json!([]));
    quit_all(agents).await;
}

// ---------------------------------------------------------------------------------------------
// Document ownership

fn owner_election(extra: Value) -> Value {
    let mut v = json!({
        "type": "election",
        "title": "Who owns the documents?",
        "binding": true,
        "id": "doc-owner-1"
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

#[tokio::test]
async fn one_agent_cannot_take_document_ownership_in_two_calls() {
    let team = Team::new();
    let [alice, bob, carol] = trio_owned_by_carol(&team).await;

    // Quorum 1, then a vote for itself: refused at the first call.
    let e = mcp_refused(
        &team,
        &bob,
        "team_proposal_create",
        owner_election(
            json!({"resolution": {"quorum": 1}, "options": [{"id": "bob"}, {"id": "alice"}]}),
        ),
        &["quorum", "majority", "2"],
    )
    .await;
    assert!(e.contains("3 registered agents"), "{e}");
    bob.fail_with(
        "team_vote",
        json!({"proposal": "doc-owner-1", "choice": "bob"}),
        &["no proposal"],
    )
    .await;
    // A quorum nobody can reach is refused too: it would block document writes until it
    // times out.
    mcp_refused(
        &team,
        &bob,
        "team_proposal_create",
        owner_election(json!({"resolution": {"quorum": 4}})),
        &["quorum", "3"],
    )
    .await;
    assert_eq!(owner(&team), "carol");
    assert!(team.proposals().is_empty());
    assert!(team.entries_starting("[PROPOSAL:").is_empty());
    quit_all([alice, bob, carol]).await;
}

#[tokio::test]
async fn one_agent_cannot_take_document_ownership_through_aw_ctl() {
    let team = Team::new();
    for n in ["alice", "bob", "carol"] {
        team.register(n);
    }
    team.ctl_ok(&["doc", "owner", "carol"]);
    let base = [
        "propose",
        "election",
        "Owner",
        "--binding",
        "--id",
        "doc-owner-1",
        "--as",
        "bob",
    ];
    for quorum in ["1", "4"] {
        let args: Vec<&str> = base
            .iter()
            .copied()
            .chain(["--option", "bob", "--option", "alice", "--quorum", quorum])
            .collect();
        ctl_refused(&team, &args, 65, &["quorum", "3 registered agents"]);
    }
    assert_eq!(owner(&team), "carol");
    assert!(team.proposals().is_empty());
}

#[tokio::test]
async fn electing_a_name_that_is_no_agent_is_refused() {
    let team = Team::new();
    let [alice, bob, carol] = trio(&team).await;

    let e = mcp_refused(
        &team,
        &alice,
        "team_proposal_create",
        owner_election(json!({"options": [{"id": "ghost"}, {"id": "alice"}]})),
        &["'ghost'", "registered agent"],
    )
    .await;
    assert!(e.contains("alice, bob, carol"), "names the agents: {e}");
    // The reserved senders are no agents either.
    for who in ["user", "system"] {
        ctl_refused(
            &team,
            &[
                "propose",
                "election",
                "Owner",
                "--binding",
                "--id",
                "doc-owner-1",
                "--option",
                who,
                "--option",
                "bob",
                "--as",
                "alice",
            ],
            65,
            &[&format!("'{who}'"), "registered agent"],
        );
    }
    // Only the ownership election is held to it: an advisory one may name anything.
    let p = alice
        .ok(
            "team_proposal_create",
            json!({"type": "election", "title": "Mascot", "id": "doc-owner-fun", "options": [{"id": "ghost"}, {"id": "alice"}]}),
        )
        .await
        .data;
    assert_eq!(p["binding"], false);
    assert_eq!(team.state("config.json")["documentOwner"], Value::Null);
    quit_all([alice, bob, carol]).await;
}

#[tokio::test]
async fn a_timed_out_owner_election_short_of_its_quorum_changes_nothing() {
    let team = Team::new();
    let [alice, bob, carol] = trio_owned_by_carol(&team).await;
    bob.ok(
        "team_proposal_create",
        owner_election(json!({"timeoutSeconds": 1})),
    )
    .await;
    vote(&bob, "doc-owner-1", "bob").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // Whoever reads the proposals next applies the timeout.
    let p = proposal(&team, "doc-owner-1");
    assert_eq!(p["status"], "expired");
    assert_eq!(p["resolvedBy"], "no-quorum");
    assert_eq!(p["winner"], Value::Null);
    assert_eq!(owner(&team), "carol");
    let msg = ownership_stays(&team, "EXPIRED");
    assert!(msg.contains("1 of 3 votes"), "{msg}");
    assert!(team.entries_starting("[RESOLVED:doc-owner-1]").is_empty());
    // Writes are open again, for the owner.
    carol.ok("team_doc_write", json!({"content": "x"})).await;
    quit_all([alice, bob, carol]).await;
}

#[tokio::test]
async fn a_tie_in_an_owner_election_changes_nothing() {
    let team = Team::new();
    let [alice, bob, carol] = trio_owned_by_carol(&team).await;
    alice
        .ok(
            "team_proposal_create",
            owner_election(json!({"resolution": {"quorum": 2, "tieBreaker": "creator-decides"}})),
        )
        .await;
    vote(&alice, "doc-owner-1", "alice").await;
    let p = vote(&bob, "doc-owner-1", "bob").await;
    assert_eq!(p["status"], "resolved");
    assert_eq!(p["winner"], Value::Null);
    assert_eq!(p["resolvedBy"], "tie");
    assert_eq!(owner(&team), "carol");
    ownership_stays(&team, "RESOLVED");
    quit_all([alice, bob, carol]).await;
}

#[tokio::test]
async fn only_registered_agents_vote_in_an_owner_election() {
    let team = Team::new();
    let [alice, bob, carol] = trio(&team).await;
    alice
        .ok(
            "team_proposal_create",
            owner_election(json!({"resolution": {"quorum": 2}})),
        )
        .await;
    vote(&alice, "doc-owner-1", "alice").await;
    for who in ["dave", "user"] {
        ctl_refused(
            &team,
            &["vote", "doc-owner-1", "alice", "--as", who],
            77,
            &[&format!("@{who}"), "registered agents"],
        );
    }
    assert_eq!(
        proposal(&team, "doc-owner-1")["votes"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(team.state("config.json")["documentOwner"], Value::Null);
    // A registered agent votes through aw-ctl like through aw-mcp.
    team.ctl_ok(&["vote", "doc-owner-1", "alice", "--as", "bob"]);
    assert_eq!(owner(&team), "alice");
    quit_all([alice, bob, carol]).await;
}

#[tokio::test]
async fn an_owner_that_left_before_the_result_is_not_installed() {
    let team = Team::new();
    let [alice, bob, carol] = trio_owned_by_carol(&team).await;
    team.register("dave");
    alice
        .ok(
            "team_proposal_create",
            owner_election(
                json!({"options": [{"id": "dave"}, {"id": "alice"}], "resolution": {"quorum": 3}}),
            ),
        )
        .await;
    team.ctl_ok(&["rm", "dave"]);
    for a in [&alice, &bob] {
        vote(a, "doc-owner-1", "dave").await;
    }
    let p = vote(&carol, "doc-owner-1", "dave").await;
    assert_eq!(p["status"], "resolved");
    assert_eq!(owner(&team), "carol");
    let msg = ownership_stays(&team, "RESOLVED");
    assert!(msg.contains("@dave is not a registered agent"), "{msg}");
    quit_all([alice, bob, carol]).await;
}

#[tokio::test]
async fn a_legitimate_owner_election_still_works() {
    let team = Team::new();
    let [alice, bob, carol] = trio(&team).await;

    // The smallest quorum allowed: a majority of the three agents.
    let p = bob
        .ok(
            "team_proposal_create",
            owner_election(json!({"resolution": {"quorum": 2}})),
        )
        .await
        .data;
    assert_eq!(p["quorum"], 2);
    vote(&bob, "doc-owner-1", "carol").await;
    assert_eq!(team.state("config.json")["documentOwner"], Value::Null);
    let p = vote(&alice, "doc-owner-1", "carol").await;
    assert_eq!(p["winner"], "carol");
    assert_eq!(owner(&team), "carol");

    // A person starts one with aw-ctl; the default quorum is every agent.
    team.ctl_ok(&[
        "propose",
        "election",
        "Owner again",
        "--binding",
        "--id",
        "doc-owner-2",
        "--option",
        "alice",
        "--option",
        "bob",
    ]);
    vote(&alice, "doc-owner-2", "alice").await;
    vote(&bob, "doc-owner-2", "bob").await;
    team.ctl_ok(&["vote", "doc-owner-2", "alice", "--as", "carol"]);
    let p = proposal(&team, "doc-owner-2");
    assert_eq!(
        (p["winner"].as_str(), p["resolvedBy"].as_str()),
        (Some("alice"), Some("quorum"))
    );
    assert_eq!(owner(&team), "alice");
    alice.ok("team_doc_write", json!({"content": "mine"})).await;
    quit_all([alice, bob, carol]).await;
}

// ---------------------------------------------------------------------------------------------
// Size limits

/// A decision as both front ends take it.
#[derive(Clone)]
struct Draft {
    title: String,
    description: Option<String>,
    options: Vec<(String, String)>,
}

impl Draft {
    fn new() -> Draft {
        Draft {
            title: "Pick one".into(),
            description: None,
            options: vec![("a".into(), "a".into()), ("b".into(), "b".into())],
        }
    }

    fn options(n: usize) -> Draft {
        let mut d = Draft::new();
        d.options = (0..n).map(|i| (format!("o{i}"), format!("o{i}"))).collect();
        d
    }

    fn ctl_args(&self, id: &str) -> Vec<String> {
        let mut v: Vec<String> = [
            "propose",
            "decision",
            &self.title,
            "--id",
            id,
            "--as",
            "alice",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(d) = &self.description {
            v.extend(["--description".to_string(), d.clone()]);
        }
        for (oid, label) in &self.options {
            v.extend(["--option".to_string(), format!("{oid}={label}")]);
        }
        v
    }

    fn mcp_args(&self, id: &str) -> Value {
        let opts: Vec<Value> = self
            .options
            .iter()
            .map(|(i, l)| json!({"id": i, "label": l}))
            .collect();
        let mut v = json!({"type": "decision", "title": self.title, "id": id, "options": opts});
        if let Some(d) = &self.description {
            v["description"] = json!(d);
        }
        v
    }
}

/// Each limit: a draft exactly at it, one just over it, and words the refusal must contain.
fn limit_cases() -> Vec<(&'static str, Draft, Draft, Vec<String>)> {
    let with = |f: &dyn Fn(&mut Draft, usize), n: usize| {
        let mut d = Draft::new();
        f(&mut d, n);
        d
    };
    let title = |d: &mut Draft, n: usize| d.title = "t".repeat(n);
    let desc = |d: &mut Draft, n: usize| d.description = Some("d".repeat(n));
    let oid = |d: &mut Draft, n: usize| d.options[0] = ("i".repeat(n), "x".into());
    let label = |d: &mut Draft, n: usize| d.options[0].1 = "l".repeat(n);
    vec![
        (
            "options",
            Draft::options(MAX_OPTIONS),
            Draft::options(MAX_OPTIONS + 1),
            vec![format!("at most {MAX_OPTIONS} options"), "21".into()],
        ),
        (
            "title",
            with(&title, MAX_TITLE),
            with(&title, MAX_TITLE + 1),
            vec!["title".into(), format!("{MAX_TITLE} bytes")],
        ),
        (
            "description",
            with(&desc, MAX_DESCRIPTION),
            with(&desc, MAX_DESCRIPTION + 1),
            vec!["description".into(), format!("{MAX_DESCRIPTION} bytes")],
        ),
        (
            "option id",
            with(&oid, MAX_OPTION_ID),
            with(&oid, MAX_OPTION_ID + 1),
            vec!["option id".into(), format!("{MAX_OPTION_ID}")],
        ),
        (
            "label",
            with(&label, MAX_LABEL),
            with(&label, MAX_LABEL + 1),
            vec!["label".into(), format!("{MAX_LABEL} bytes")],
        ),
    ]
}

#[test]
fn proposal_size_limits_through_aw_ctl() {
    let team = Team::new();
    team.register("alice");
    team.register("bob");
    for (i, (what, at, over, needles)) in limit_cases().into_iter().enumerate() {
        let id = format!("at-{i}");
        let args = at.ctl_args(&id);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(team.ctl_ok(&args).trim(), id, "{what} at the limit");
        let p = proposal(&team, &id);
        assert_eq!(p["options"].as_array().unwrap().len(), at.options.len());
        assert_eq!(p["title"], at.title);

        let args = over.ctl_args(&format!("over-{i}"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        ctl_refused(&team, &args, 65, &needles);
    }
    assert_eq!(team.proposals().len(), limit_cases().len());
    assert_eq!(
        team.entries_starting("[PROPOSAL:").len(),
        limit_cases().len()
    );
}

#[tokio::test]
async fn proposal_size_limits_through_aw_mcp() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let bob = team.join("bob").await;
    for (i, (what, at, over, needles)) in limit_cases().into_iter().enumerate() {
        let id = format!("at-{i}");
        let p = alice
            .ok("team_proposal_create", at.mcp_args(&id))
            .await
            .data;
        assert_eq!(p["id"], id, "{what} at the limit");
        assert_eq!(p["options"].as_array().unwrap().len(), at.options.len());
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        mcp_refused(
            &team,
            &alice,
            "team_proposal_create",
            over.mcp_args(&format!("over-{i}")),
            &needles,
        )
        .await;
    }
    assert_eq!(team.proposals().len(), limit_cases().len());
    // A hundred thousand options: refused at once, nothing written.
    let huge = Draft::options(100_000);
    mcp_refused(
        &team,
        &bob,
        "team_proposal_create",
        huge.mcp_args("huge"),
        &["100000", "at most 20 options"],
    )
    .await;
    quit_all([alice, bob]).await;
}

#[tokio::test]
async fn an_election_of_more_agents_than_options_allowed_says_so() {
    let team = Team::new();
    for i in 0..=MAX_OPTIONS {
        team.register(&format!("agent{i:02}"));
    }
    let a = team.join("agent00").await;
    mcp_refused(
        &team,
        &a,
        "team_proposal_create",
        json!({"type": "election", "title": "Lead"}),
        &["at most 20 options", "21 registered agents", "options"],
    )
    .await;
    // Naming twenty of them works.
    let opts: Vec<Value> = (0..MAX_OPTIONS)
        .map(|i| json!({"id": format!("agent{i:02}")}))
        .collect();
    a.ok(
        "team_proposal_create",
        json!({"type": "election", "title": "Lead", "options": opts}),
    )
    .await;
    a.quit().await;
}

#[tokio::test]
async fn vote_reasons_have_a_size_limit() {
    let team = Team::new();
    let [alice, bob, carol] = trio(&team).await;
    team.register("dave");
    alice
        .ok(
            "team_proposal_create",
            json!({"type": "approval", "title": "Ship it?", "id": "ship"}),
        )
        .await;
    let at = "r".repeat(MAX_REASON);
    let over = "r".repeat(MAX_REASON + 1);
    mcp_refused(
        &team,
        &alice,
        "team_vote",
        json!({"proposal": "ship", "choice": "yes", "reason": over}),
        &["reason", &format!("{MAX_REASON} bytes")],
    )
    .await;
    ctl_refused(
        &team,
        &["vote", "ship", "yes", "--as", "bob", "--reason", &over],
        65,
        &["reason", &format!("{MAX_REASON} bytes")],
    );
    let p = alice
        .ok(
            "team_vote",
            json!({"proposal": "ship", "choice": "yes", "reason": at}),
        )
        .await
        .data;
    assert_eq!(p["votes"][0]["reason"].as_str().unwrap().len(), MAX_REASON);
    team.ctl_ok(&["vote", "ship", "no", "--as", "bob", "--reason", &at]);
    assert_eq!(team.entries_starting("[VOTE:ship]").len(), 2);
    quit_all([alice, bob, carol]).await;
}

#[tokio::test]
async fn active_proposals_per_instance_are_capped() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let bob = team.join("bob").await;
    let approval = |id: String| json!({"type": "approval", "title": "Yes?", "id": id});
    for i in 0..MAX_ACTIVE {
        alice
            .ok("team_proposal_create", approval(format!("p{i}")))
            .await;
    }
    mcp_refused(
        &team,
        &bob,
        "team_proposal_create",
        approval("one-more".into()),
        &[&format!("{MAX_ACTIVE} active proposals")],
    )
    .await;
    ctl_refused(
        &team,
        &[
            "propose", "approval", "Yes?", "--id", "one-more", "--as", "bob",
        ],
        77,
        &[&format!("{MAX_ACTIVE} active proposals")],
    );
    // Once one closes there is room again.
    alice
        .ok("team_proposal_cancel", json!({"proposal": "p0"}))
        .await;
    bob.ok("team_proposal_create", approval("one-more".into()))
        .await;
    assert_eq!(team.proposals().len(), MAX_ACTIVE + 1);
    quit_all([alice, bob]).await;
}
