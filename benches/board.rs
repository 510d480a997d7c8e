//! Figure 11: a claim and a lease, in process, as the board grows. On boards of 10, 1,000
//! and 100,000 cards (card 1 claimed, the others but the ready ones waiting in a chain
//! behind it, 20 ready — half of a smaller board), the time of `board::claim_next`,
//! `board::claim` of a given id, `board::done`, and `lease::take` with 10 leases of others
//! held: each a whole change, lock to durable files. Without the cost of starting a
//! process, which `bench/board.sh` measures with `aw-ctl`.
//!
//! Boards are made once with the library and cached under `target/bench-data/board-lib/N/`;
//! each size is measured on a copy.

mod common;

use std::process::Command;
use std::time::Duration;

use aw::board::{self, NewCard};
use aw::instance::{Instance, Root};
use aw::lease::{self, Request};
use common::{Opts, Stats, Table, time};

const SIZES: [u64; 3] = [10, 1_000, 100_000];
const HOUR: Duration = Duration::from_secs(3600);

fn main() {
    let opts = Opts::from_args();
    common::heading("The board and leases: one change, in process", &opts);
    let mut t = Table::new(&["cards", "operation", "n", "median", "p99"]);
    for n in SIZES {
        let cached = cached_board(n);
        let dir = common::scratch("board-");
        let copy = Command::new("cp")
            .arg("-a")
            .arg(cached.join("."))
            .arg(dir.path())
            .status()
            .expect("cp");
        assert!(copy.success(), "copy of the cached board");
        let inst = Root::new(dir.path()).instance("big").expect("instance");
        for (label, sample) in measure(&inst, opts.reps(300)) {
            let s = Stats::of(&sample);
            t.row(vec![
                n.to_string(),
                label.to_string(),
                s.n.to_string(),
                common::fmt(s.median),
                common::fmt(s.p99),
            ]);
        }
    }
    t.print();
}

/// How many cards of a board of `n` are ready.
fn ready(n: u64) -> u64 {
    if n >= 40 { 20 } else { n / 2 }
}

/// The board of `n` cards, made once.
fn cached_board(n: u64) -> std::path::PathBuf {
    let dir = common::data_dir().join(format!("board-lib/{n}"));
    if dir.join("READY").exists() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the board's folder");
    let inst = Root::new(&dir).instance("big").expect("instance");
    let card = |title: String, after: Vec<u64>| NewCard {
        title,
        after,
        ..NewCard::default()
    };
    board::add(&inst, "lead", card("the blocker".into(), vec![])).unwrap();
    board::claim(&inst, 1, "lead", 240 * HOUR).unwrap();
    for i in 2..=n - ready(n) {
        board::add(
            &inst,
            "lead",
            card(format!("waiting card {i}"), vec![i - 1]),
        )
        .unwrap();
    }
    for i in 1..=ready(n) {
        board::add(&inst, "lead", card(format!("ready card {i}"), vec![])).unwrap();
    }
    std::fs::write(dir.join("READY"), "").unwrap();
    dir
}

/// `reps` of each operation on the board of `inst`.
fn measure(inst: &Instance, reps: usize) -> Vec<(&'static str, Vec<Duration>)> {
    let (mut next, mut by_id, mut done, mut take) = (vec![], vec![], vec![], vec![]);
    for k in 1..=10 {
        let req = request(&format!("other{k}"), &format!("other/{k}/**"));
        lease::take(inst, &req).unwrap();
    }
    for i in 0..reps {
        let (d, c) = time(|| board::claim_next(inst, "w", HOUR).unwrap().unwrap());
        next.push(d);
        board::release(inst, c.id, "w").unwrap();
        let (d, _) = time(|| board::claim(inst, c.id, "w", HOUR).unwrap());
        by_id.push(d);
        board::release(inst, c.id, "w").unwrap();
        let (d, _) = time(|| lease::take(inst, &request("w", &format!("src/{i}.rs"))).unwrap());
        take.push(d);
        lease::release_holder(inst, "w", &[]).unwrap();
    }
    for i in 0..reps {
        let c = board::claim_next(inst, "w", HOUR).unwrap().unwrap();
        let (d, _) = time(|| board::done(inst, c.id, "w", None).unwrap());
        done.push(d);
        let again = NewCard {
            title: format!("ready again {i}"),
            ..NewCard::default()
        };
        board::add(inst, "lead", again).unwrap();
    }
    vec![
        ("claim the next card", next),
        ("claim a card by id", by_id),
        ("finish a card", done),
        ("take a lease", take),
    ]
}

fn request(holder: &str, path: &str) -> Request {
    Request {
        holder: holder.into(),
        paths: vec![path.into()],
        shared: false,
        ttl: HOUR,
        reason: String::new(),
        card: None,
    }
}
