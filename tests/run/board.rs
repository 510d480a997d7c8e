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
    assert_eq!(c[&2].assignee.as_deref(), Some("lead"));
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
