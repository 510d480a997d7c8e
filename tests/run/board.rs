//! The board in workflows: the cards of `board:` seeding a new instance (and not again on
//! a rerun), agents whose runs start from the next ready card, and the board example.

use crate::common;

use std::collections::BTreeMap;

use aw::board::{Card, State};
use common::runner::{INST, Setup, assert_code, stderr};

/// The cards of the run's instance, by id.
fn cards(s: &Setup) -> BTreeMap<u64, Card> {
    let inst = aw::instance::Root::new(s.root.path())
        .instance(INST)
        .expect("instance");
    aw::board::list(&inst).expect("the board")
}

const SEEDED: &str = "agents:
  lead: {mock: {replies: ['@user planned']}}
board:
  - name: docs
    title: Write the docs
    after: [code]
    for: lead
  - name: code
    title: Write the code
    body: In src/.
    labels: [rust]
  - title: Plan the work
kickoff: '@lead plan'
";

#[test]
fn the_board_of_a_workflow_seeds_a_new_instance_once() {
    let s = Setup::new();
    let out = s.run(SEEDED, &["-q"]);
    assert_code(&out, 0);
    let c = cards(&s);
    let got: Vec<(u64, &str, &[u64])> = c
        .values()
        .map(|c| (c.id, c.title.as_str(), c.after.as_slice()))
        .collect();
    // Each card is added after the cards it waits for.
    assert_eq!(
        got,
        [
            (1, "Write the code", &[][..]),
            (2, "Write the docs", &[1][..]),
            (3, "Plan the work", &[][..]),
        ]
    );
    assert_eq!(c[&1].body, "In src/.");
    assert_eq!(c[&1].labels, ["rust"]);
    assert_eq!(c[&2].assignee, ["lead"]);
    assert!(
        c.values()
            .all(|c| c.creator == "system" && c.state == State::Open)
    );

    // A rerun on the same instance finds the cards and adds none, even once they are done.
    let ctl = |args: &[&str]| {
        let mut c = s.tool_cmd("aw-ctl");
        c.args(["-i", INST]).args(args);
        assert_code(&common::runner::run_hang_guarded(c), 0);
    };
    ctl(&["board", "claim", "1", "--as", "lead"]);
    ctl(&["board", "done", "1", "--as", "lead"]);
    let out = s.run(SEEDED, &["-q"]);
    assert_code(&out, 0);
    assert_eq!(cards(&s).len(), 3, "{}", stderr(&out));
    assert_eq!(cards(&s)[&1].state, State::Done);
}

#[test]
fn a_board_with_a_cycle_is_refused_before_anything_is_written() {
    let s = Setup::new();
    let wf = "agents:\n  lead: {mock: {}}\nboard:\n  - {name: a, title: A, after: [b]}\n  \
              - {name: b, title: B, after: a}\nkickoff: '@lead go'\n";
    let out = s.run(wf, &["-q"]);
    assert_code(&out, 65);
    assert!(
        stderr(&out)
            .contains("wf.yaml:4:5: board[0].after: the cards wait for each other: a -> b -> a"),
        "{}",
        stderr(&out)
    );
    assert!(!s.root.inst_dir(INST).exists());
}

/// An exec agent that works the board: it finishes the card of its run with a note and
/// says so.
fn worker(name: &str) -> String {
    format!(
        "  {name}:\n    board: next\n    command: [sh, -c, 'cat >/dev/null; aw-ctl board done \
         \"$AW_CARD\" --note \"by $AW_AGENT\" >/dev/null && echo \"finished card $AW_CARD\"']\n"
    )
}

#[test]
fn agents_that_work_the_board_take_every_ready_card_and_the_run_ends_when_none_is_left() {
    let s = Setup::new();
    let wf = format!(
        "agents:\n{}{}board:\n  - {{name: a, title: A, for: w1}}\n  \
         - {{name: b, title: B, body: the body of B, for: w2, after: [a]}}\n  \
         - {{title: C, after: [a, b]}}\n  - D\n",
        worker("w1"),
        worker("w2")
    );
    let out = s.run(&wf, &["-q"]);
    assert_code(&out, 0);
    let c = cards(&s);
    assert_eq!(c.len(), 4);
    for card in c.values() {
        assert_eq!(card.state, State::Done, "{card:?}\n{}", stderr(&out));
        let by = card.history.last().unwrap().by.clone();
        assert_eq!(card.note.as_deref(), Some(format!("by {by}").as_str()));
        // Claimed by the agent that finished it, and never by another.
        let claims: Vec<&str> = card
            .history
            .iter()
            .filter(|e| e.event == "claimed")
            .map(|e| e.by.as_str())
            .collect();
        assert_eq!(claims, [by.as_str()], "{card:?}");
    }
    let by = |id: u64| c[&id].history.last().unwrap().by.clone();
    // Cards meant for an agent went to it.
    assert_eq!((by(1), by(2)), ("w1".to_string(), "w2".to_string()));
    // B waited for A, and C for both.
    let at = |id: u64, ev: &str| {
        c[&id]
            .history
            .iter()
            .find(|e| e.event == ev)
            .unwrap()
            .at
            .clone()
    };
    assert!(at(2, "claimed") >= at(1, "done"));
    assert!(at(3, "claimed") >= at(2, "done"));
    // Each run said what it finished, in the channel.
    let mut said: Vec<String> = s
        .entries()
        .into_iter()
        .filter(|(from, _)| from == "w1" || from == "w2")
        .map(|(_, m)| m)
        .collect();
    said.sort();
    assert_eq!(
        said,
        [
            "finished card 1",
            "finished card 2",
            "finished card 3",
            "finished card 4"
        ]
    );
    // The prompt of B's run showed the card and how to finish it.
    let runs = |agent: &str| {
        (1..)
            .take_while(|n| s.transcript_path(agent, *n).exists())
            .map(|n| s.transcript(agent, n))
            .collect::<Vec<_>>()
    };
    let w2 = runs("w2");
    let b = w2
        .iter()
        .find(|t| {
            t["prompt"]
                .as_str()
                .unwrap_or("")
                .contains("You hold card 2 ")
        })
        .unwrap_or_else(|| panic!("no run of w2 on card 2: {w2:?}"));
    let prompt = b["prompt"].as_str().unwrap();
    assert!(prompt.contains("## Your card"), "{prompt}");
    assert!(prompt.contains("the body of B"), "{prompt}");
    assert!(prompt.contains("aw-ctl board done 2 --note"), "{prompt}");
    assert_eq!(runs("w1").len() + w2.len(), 4, "one run per card");
}

#[test]
fn a_kept_server_wakes_an_idle_agent_that_works_the_board_when_a_card_is_added() {
    use common::runner::{Server, alive, spawn, wait_for};
    let s = Setup::new();
    s.write("wf.yaml", &format!("agents:\n{}", worker("w1")));
    let server = Server::new(spawn(s.cmd(&["--keep"])));
    wait_for("the server", || {
        common::runner::shown(s.root.path(), INST, "w1")
    });
    // Nothing in the channel mentions w1: the board alone wakes it.
    let mut add = s.tool_cmd("aw-ctl");
    add.args(["-i", INST, "board", "add", "late card", "--as", "lead"]);
    assert_code(&common::runner::run_hang_guarded(add), 0);
    wait_for("w1 to finish the card", || {
        cards(&s).get(&1).is_some_and(|c| c.state == State::Done)
    });
    let c = &cards(&s)[&1];
    assert_eq!(c.note.as_deref(), Some("by w1"));
    let said = ("w1".to_string(), "finished card 1".to_string());
    wait_for("w1's reply", || s.entries().contains(&said));
    assert!(alive(server.pid()));
    assert_code(&server.term(), 0);
}

#[test]
fn a_card_left_unfinished_is_given_back_and_the_run_limit_ends_the_run() {
    let s = Setup::new();
    let wf = "agents:\n  w1:\n    board: next\n    max_runs: 2\n    \
              command: [sh, -c, 'cat >/dev/null; echo \"not done $AW_CARD\"']\nboard:\n  - A\n";
    let out = s.run(wf, &[]);
    assert_code(&out, 1);
    for n in [1, 2] {
        let started = format!("aw-run: w1: run {n} started on card 1\n");
        assert!(stderr(&out).contains(&started), "{}", stderr(&out));
    }
    assert!(
        stderr(&out).contains("w1 reached the run limit or failed with cards still ready"),
        "{}",
        stderr(&out)
    );
    let c = &cards(&s)[&1];
    assert_eq!(c.state, State::Open);
    assert!(c.holder.is_none());
    let events: Vec<&str> = c.history.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        events,
        ["added", "claimed", "released", "claimed", "released"]
    );
}

#[test]
fn the_board_example_runs_every_card_to_done_and_releases_every_lease() {
    let s = Setup::new();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    for f in ["board.yaml", "board-lead.sh", "board-worker.sh"] {
        std::fs::copy(examples.join(f), s.dir().join(f)).unwrap();
    }
    let out =
        common::runner::run_hang_guarded(s.cmd_file(&["-q"], std::path::Path::new("board.yaml")));
    assert_code(&out, 0);
    let c = cards(&s);
    let titles: Vec<&str> = c.values().map(|c| c.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "write the parser",
            "write the checker",
            "test the parser",
            "document both"
        ]
    );
    assert_eq!(c[&4].after, [1, 2]);
    for card in c.values() {
        assert_eq!(card.state, State::Done, "{card:?}\n{}", stderr(&out));
        let by = card.history.last().unwrap().by.clone();
        assert!(by == "w1" || by == "w2", "{card:?}");
        let file = card.body.trim().strip_prefix("file: ").unwrap();
        assert_eq!(card.note.as_deref(), Some(format!("wrote {file}").as_str()));
        let text = std::fs::read_to_string(s.dir().join(file)).unwrap();
        assert_eq!(text, format!("written by {by} for card {}\n", card.id));
        assert!(
            s.entries()
                .contains(&(by.clone(), format!("Card {} done: wrote {file}.", card.id))),
            "{:?}",
            s.entries()
        );
    }
    // Each worker leased its file (four leases were given) and gave every lease back.
    let inst = aw::instance::Root::new(s.root.path())
        .instance(INST)
        .unwrap();
    assert_eq!(aw::lease::list(&inst).unwrap(), []);
    let next = std::fs::read_to_string(aw::lease::dir(&inst).join(".next")).unwrap();
    assert_eq!(next.trim(), "5");
}

#[test]
fn a_card_claimed_for_a_run_is_held_by_the_server_and_lapses_when_it_is_killed() {
    use common::runner::{Server, spawn, wait_for};
    let s = Setup::new();
    let wf = "agents:\n  w1:\n    board: next\n    \
              command: [sh, -c, 'cat >/dev/null; touch started; while [ ! -e go ]; do sleep 0.05; done']\n\
              board:\n  - A\n";
    s.write("wf.yaml", wf);
    let mut server = Server::new(spawn(s.cmd(&["--keep", "-q"])));
    wait_for("the run on card 1", || s.dir().join("started").exists());
    let c = &cards(&s)[&1];
    let h = c.holder.as_ref().expect("held");
    assert_eq!((c.state, h.agent.as_str()), (State::Claimed, "w1"));
    assert_eq!((h.pid, h.served), (server.pid(), true), "{h:?}");
    server.child().kill().unwrap();
    let _ = server.wait();
    // The agent's program outlives a server killed -9: let it end.
    std::fs::write(s.dir().join("go"), "").unwrap();
    // Its server gone, the claim has lapsed: the card is ready again.
    let c = &cards(&s)[&1];
    assert_eq!(c.state, State::Open, "{c:?}");
    assert!(c.holder.is_none());
}

/// An agent that works the board and needs an approval asks for each run before it
/// starts, naming the card the run is on; each card's run asks once, and the run ends
/// once every card is done.
#[test]
fn an_agent_that_works_the_board_and_needs_approval_asks_for_each_card() {
    use common::runner::{spawn, wait_for, wait_hang_guarded};
    let s = Setup::new();
    let wf = format!(
        "agents:\n{}    needs: {{approval: {{by: lead}}}}\nboard:\n  - A\n  - B\n",
        worker("w1")
    );
    s.write("wf.yaml", &wf);
    let request = |id: u64| -> serde_json::Value {
        let path = s.root.inst_dir(INST).join(format!("approvals/{id}.json"));
        wait_for("the approval request", || path.exists());
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    };
    let run = spawn(s.cmd(&["-q"]));
    for id in [1, 2] {
        let r = request(id);
        let what = format!("a run of w1 on card {id}");
        assert_eq!(r["what"].as_str(), Some(what.as_str()), "{r}");
        assert_eq!(r["kind"].as_str(), Some("run"), "{r}");
        // Not run before it is approved.
        assert_eq!(cards(&s)[&id].state, State::Claimed);
        let id = id.to_string();
        let args = ["-i", INST, "approve", id.as_str(), "--as", "lead"];
        s.root.ok("aw-ctl", &args, None);
    }
    let out = wait_hang_guarded(run);
    assert_code(&out, 0);
    let c = cards(&s);
    assert!(c.values().all(|c| c.state == State::Done), "{c:?}");
    let third = s.root.inst_dir(INST).join("approvals/3.json");
    assert!(!third.exists(), "asked again: {}", stderr(&out));
}
