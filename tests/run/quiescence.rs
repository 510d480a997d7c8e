//! aw-run knows when the work is done: every controller idle, the process groups of their
//! runs ended, nothing unread. No quiet time is waited for: what the attempts posted is
//! handled before the exit, and a message that comes after the end stays unread for the
//! next run.

use crate::common;

use common::runner::*;

/// The two-agent example: alice asks bob, bob answers, alice thanks.
fn hello(s: &Setup, args: &[&str]) -> std::process::Output {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello.yaml");
    run_hang_guarded(s.cmd_file(args, &file))
}

#[test]
fn a_debounce_is_accepted_and_changes_nothing() {
    // --debounce is accepted (for the scripts that pass it) and ignored.
    let s = Setup::new();
    let out = hello(&s, &["--debounce", "10s", "--timeout", "5s"]);
    assert_code(&out, 0);
    let got: Vec<(String, String)> = s.entries();
    let want = [
        ("system", "@alice please find out the answer from bob."),
        ("alice", "@bob what is the answer?"),
        ("bob", "@alice the answer is 42."),
        ("alice", "Thanks, done."),
    ];
    assert_eq!(
        got.iter()
            .map(|(f, m)| (f.as_str(), m.as_str()))
            .collect::<Vec<_>>(),
        want
    );
    assert_eq!(s.unread("alice"), 0);
    assert_eq!(s.unread("bob"), 0);
    let err = stderr(&out);
    assert!(!err.contains("timeout"), "{err}");
    assert!(err.contains("alice: run 2 ok"), "{err}");
}

#[test]
fn the_last_entry_is_printed_though_the_end_comes_at_once() {
    // The work is done as soon as alice's thanks is posted; the watch may not have told of
    // it yet, and it is printed all the same.
    for _ in 0..5 {
        let s = Setup::new();
        let out = hello(&s, &[]);
        assert_code(&out, 0);
        let printed = String::from_utf8_lossy(&out.stdout);
        assert_eq!(printed.lines().count(), 4, "{printed}");
        assert!(printed.contains("Thanks, done."), "{printed}");
    }
}

#[test]
fn a_post_by_a_child_of_the_attempt_is_handled_before_the_exit() {
    // alice's and bob's programs post through background children in their process
    // groups (bob's 100 ms after it started); bob's answer starts alice again, and so on
    // for three rounds. Each post is handled before aw-run exits.
    let s = Setup::new();
    s.script(
        "alice.sh",
        "cat > /dev/null\n\
         if [ \"$AW_RUN\" -le 3 ]; then\n\
           aw-send \"@bob round $AW_RUN\" > /dev/null &\n\
           wait\n\
         fi\n",
    );
    s.script(
        "bob.sh",
        "cat > /dev/null\n\
         ( sleep 0.1; aw-send \"@alice heard, from a child\" > /dev/null ) &\n\
         wait\n",
    );
    let wf = "\
agents:
  alice:
    command: [./alice.sh]
  bob:
    command: [./bob.sh]
kickoff: '@alice go'
";
    let out = s.run(wf, &[]);
    assert_code(&out, 0);
    let from = |who: &str| s.entries().iter().filter(|(f, _)| f == who).count();
    assert_eq!(from("alice"), 3, "{:?}", s.entries());
    assert_eq!(from("bob"), 3, "{:?}", s.entries());
    assert_eq!(s.unread("alice"), 0);
    assert_eq!(s.unread("bob"), 0);
    // alice's fourth run read bob's last message and posted nothing.
    assert_eq!(s.transcript("alice", 4)["status"], "ok");
}

#[test]
fn a_post_after_the_end_stays_unread_for_the_next_run() {
    // alice's program leaves a detached child (setsid, out of the run's process
    // group) that posts for bob once aw-run has exited (or after 20 s at the latest): the
    // message is kept, unread, and the next run handles it. No quiet time is waited for,
    // however long --debounce says: the post comes after the end.
    let s = Setup::new();
    s.script(
        "alice.sh",
        "cat > /dev/null\n\
         run=$PPID\n\
         setsid sh -c \"touch detached; i=0; \
         while kill -0 $run 2>/dev/null && [ \\$i -lt 2000 ]; do sleep 0.01; i=\\$((i+1)); done; \
         aw-send '@bob late news' > /dev/null\" < /dev/null > /dev/null 2>&1 &\n\
         while [ ! -e detached ]; do sleep 0.01; done\n\
         echo 'started'\n",
    );
    let wf = "\
agents:
  alice:
    command: [./alice.sh]
  bob:
    mock:
      replies: ['thanks for the news']
kickoff: '@alice go'
";
    let out = s.run(wf, &["--debounce", "60s", "--timeout", "25s"]);
    assert_code(&out, 0);
    wait_for("the late post", || {
        s.entries().iter().any(|(_, m)| m == "@bob late news")
    });
    assert_eq!(s.unread("bob"), 1);
    assert!(!s.entries().iter().any(|(f, _)| f == "bob"));
    // The next run (no kickoff) handles it.
    s.write(
        "next.yaml",
        "agents:\n  bob:\n    mock:\n      replies: ['thanks for the news']\n",
    );
    let out = run_hang_guarded(s.cmd_file(&[], std::path::Path::new("next.yaml")));
    assert_code(&out, 0);
    assert_eq!(s.unread("bob"), 0);
    assert_eq!(
        s.entries().last(),
        Some(&("bob".to_string(), "thanks for the news".to_string()))
    );
}

#[test]
fn a_post_begun_by_a_child_when_its_group_is_killed_is_handled_or_never_made() {
    // alice's program starts a post in the background and exits at once: the rest of its
    // group is killed then. The post is made or not, never made after aw-run ended.
    for _ in 0..3 {
        let s = Setup::new();
        s.script(
            "alice.sh",
            "cat > /dev/null\n\
             [ \"$AW_RUN\" = 1 ] && aw-send '@bob from a child' > /dev/null &\n\
             exit 0\n",
        );
        let wf = "\
agents:
  alice:
    command: [./alice.sh]
  bob:
    mock:
      replies: ['got it']
kickoff: '@alice go'
";
        let out = s.run(wf, &[]);
        assert_code(&out, 0);
        let posted = s.entries().iter().any(|(f, _)| f == "alice");
        let answered = s.entries().iter().any(|(f, _)| f == "bob");
        assert_eq!(posted, answered, "{:?}", s.entries());
        assert_eq!(s.unread("bob"), 0);
    }
}
