//! Serving locks taken by real `aw-run --serve` processes started together, and the names
//! given to unnamed workers.

use crate::common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::runner::*;

/// `aw-run --serve --keep` of `agents` in the instance, not waited for.
fn start_serve(s: &Setup, agents: &[&str]) -> Child {
    let mut c = s.tool_cmd("aw-run");
    c.args(["-i", INST, "--serve", "--keep", "-q"])
        .args(agents)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c.spawn().expect("spawn aw-run")
}

/// Servers not waited for yet, killed if the test ends (or panics) before.
struct Kids([Option<Child>; 2]);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in self.0.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Two servers naming the same agents in opposite orders, started together, 50 times: one
/// serves both agents, the other says they are served (exit 75), never both.
#[test]
fn servers_naming_the_same_agents_in_opposite_orders_never_both_give_up() {
    let s = Setup::new();
    for a in ["a", "b", "c"] {
        let mut c = s.tool_cmd("aw-ctl");
        c.args(["-i", INST, "new", a, "--backend", "mock"]);
        assert_code(&common::run_with(c, None), 0);
    }
    for round in 0..50 {
        let (x, y): (&[&str], &[&str]) = if round % 2 == 0 {
            (&["a", "b", "c"], &["c", "b", "a"])
        } else {
            (&["b", "a"], &["a", "b"])
        };
        let mut kids = Kids([Some(start_serve(&s, x)), Some(start_serve(&s, y))]);
        let pids = [
            kids.0[0].as_ref().unwrap().id(),
            kids.0[1].as_ref().unwrap().id(),
        ];
        // Wait (hang guard only) for one of them to give up.
        let end = Instant::now() + Duration::from_secs(30);
        let (lost, code) = loop {
            let mut done = None;
            for (i, k) in kids.0.iter_mut().enumerate() {
                if let Some(st) = k.as_mut().unwrap().try_wait().unwrap() {
                    done = Some((i, st.code()));
                    break;
                }
            }
            if let Some(d) = done {
                break d;
            }
            assert!(
                Instant::now() < end,
                "round {round}: neither server gave up"
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        let loser = kids.0[lost].take().unwrap().wait_with_output().unwrap();
        assert_eq!(code, Some(75), "round {round}: {}", stderr(&loser));
        let winner = 1 - lost;
        let err = stderr(&loser);
        assert_eq!(err.lines().count(), 1, "round {round}: {err}");
        assert!(
            err.contains(&format!("already served by aw-run pid {}", pids[winner])),
            "round {round}: {err}"
        );
        // The other serves every agent it named.
        let names = if winner == 0 { x } else { y };
        wait_for("the other server to serve its agents", || {
            let ps = serving(&s);
            names
                .iter()
                .all(|n| ps.contains(&(n.to_string(), u64::from(pids[winner]))))
        });
        let mut w = kids.0[winner].take().unwrap();
        let gone = w.try_wait().unwrap();
        assert!(gone.is_none(), "round {round}: both gave up ({gone:?})");
        let server = Server::new(w);
        let out = server.term();
        assert_code(&out, 0);
    }
}
