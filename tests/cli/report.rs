//! `aw-ctl report`: one self-contained HTML page of what happened in an instance or in one
//! run of it, read as text, as JSON, and in a real headless browser (Debian's chromium).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::runner::{INST, Setup, assert_code, run_hang_guarded};
use crate::common::{assert_error, git, run_with};

/// A run of `examples/hello.yaml` on instance `w`: alice asks bob, bob answers.
fn hello(s: &Setup) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello.yaml");
    assert_code(&run_hang_guarded(s.cmd_file(&[], &file)), 0);
}

/// `aw-ctl -i w report ARGS`, which must succeed: its stdout.
fn report(s: &Setup, args: &[&str]) -> String {
    let out = run_with(ctl(s, args), None);
    assert_code(&out, 0);
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn ctl(s: &Setup, args: &[&str]) -> Command {
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "report"]).args(args);
    c
}

/// Nothing in `html` is fetched: no external script, style, font or image, and no script.
fn self_contained(html: &str) {
    for bad in [
        "src=\"http",
        "href=\"http",
        "@import",
        "url(http",
        "src='http",
        "href='http",
        "<script",
        "<link",
        "<iframe",
        "@font-face",
    ] {
        assert!(!html.contains(bad), "the page holds {bad:?}");
    }
}

/// The rows of the totals table: (agent, attempts, ok, failed).
fn totals(html: &str) -> Vec<(String, u64, u64, u64)> {
    let table = html
        .split("<table class=\"totals\">")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .expect("a totals table");
    table
        .split("<tr class=")
        .skip(1)
        .map(|row| {
            let cells: Vec<&str> = row
                .split("<td")
                .skip(1)
                .map(|c| {
                    let c = &c[c.find('>').unwrap() + 1..];
                    &c[..c.find("</td>").unwrap()]
                })
                .collect();
            let n = |i: usize| cells[i].parse::<u64>().unwrap();
            (cells[0].to_string(), n(2), n(3), n(4))
        })
        .collect()
}

#[test]
fn a_run_of_hello_is_reported_with_every_agent_its_totals_and_who_woke_whom() {
    let s = Setup::new();
    hello(&s);
    let html = report(&s, &[]);
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..80]);
    assert!(html.trim_end().ends_with("</html>"));
    self_contained(&html);
    assert_eq!(
        totals(&html),
        [
            ("alice".to_string(), 2, 2, 0),
            ("bob".to_string(), 1, 1, 0),
            ("system".to_string(), 0, 0, 0),
            ("total".to_string(), 3, 3, 0),
        ]
    );
    // A lane and bars for each agent; an arrow for each wake; four messages.
    assert_eq!(html.matches("<rect class=\"bar ok\"").count(), 3);
    assert_eq!(html.matches("<line class=\"wake\"").count(), 3);
    for (from, to, entry) in [
        ("system", "alice", 1),
        ("alice", "bob", 2),
        ("bob", "alice", 3),
    ] {
        assert!(
            html.contains(&format!("#{entry} from {from} woke {to}")),
            "no arrow #{entry} {from} -> {to}"
        );
    }
    assert!(html.contains("4 messages."), "message count");
    assert!(html.contains("@alice the answer is 42."));
    assert!(html.contains("0 of 3 attempts did not succeed."));

    // -o writes the same page, atomically and privately; stdout stays empty.
    let file = s.dir().join("report.html");
    let out = run_with(ctl(&s, &["-o", file.to_str().unwrap()]), None);
    assert_code(&out, 0);
    assert!(out.stdout.is_empty());
    let written = std::fs::read_to_string(&file).unwrap();
    let strip = |t: &str| {
        t.lines()
            .filter(|l| !l.contains("made "))
            .collect::<String>()
    };
    assert_eq!(strip(&written), strip(&html));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let names: Vec<String> = std::fs::read_dir(s.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("report"))
        .collect();
    assert_eq!(names, ["report.html"], "no temporary file is left");
}

#[test]
fn each_aw_run_is_a_run_of_its_own() {
    let s = Setup::new();
    hello(&s);
    // Idle for longer than 2 s: the whole timeline cuts the idle time out, once.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    hello(&s);
    let whole = report(&s, &[]);
    assert_eq!(whole.matches("<rect class=\"idle\"").count(), 1);
    assert!(whole.contains("<title>idle for 2."));
    let all: Value = serde_json::from_str(&report(&s, &["--json"])).unwrap();
    let runs = all["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_ne!(runs[0]["pid"], runs[1]["pid"]);
    assert_eq!(all["totals"]["attempts"], 6);
    assert_eq!(all["messages"].as_array().unwrap().len(), 8);
    for n in [1u64, 2] {
        let one: Value =
            serde_json::from_str(&report(&s, &["--json", "--run", &n.to_string()])).unwrap();
        assert_eq!(one["run"], n);
        assert_eq!(one["totals"]["attempts"], 3, "run {n}");
        let ids: Vec<u64> = one["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_u64().unwrap())
            .collect();
        let first = (n - 1) * 4 + 1;
        assert_eq!(ids, (first..first + 4).collect::<Vec<_>>(), "run {n}");
        assert!(
            one["attempts"]
                .as_array()
                .unwrap()
                .iter()
                .all(|a| a["server_run"] == n)
        );
        let html = report(&s, &["--run", &n.to_string()]);
        assert!(html.contains(&format!("<title>aw report: w, run {n}</title>")));
        assert!(!html.contains("<rect class=\"idle\""));
        self_contained(&html);
    }
    // A run the instance does not have: 65, one line naming it and what there is.
    for bad in ["3", "0"] {
        let out = run_with(ctl(&s, &["--run", bad]), None);
        let line = assert_error(&out, "aw-ctl", 65, "unknown run");
        assert!(
            line.contains(&format!(
                "no run {bad} in instance 'w' (it has runs 1 to 2)"
            )),
            "{line}"
        );
    }
    let out = run_with(ctl(&s, &["--run", "two"]), None);
    assert_error(&out, "aw-ctl", 64, "a run that is no number");
    // No such instance: 66.
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", "nowhere", "report"]);
    assert_error(&run_with(c, None), "aw-ctl", 66, "no instance");
}

#[test]
fn hostile_message_text_comes_out_escaped() {
    let s = Setup::new();
    hello(&s);
    let hostile = "<script>alert(1)</script> \"><img src=x onerror=alert(2)> & 'q'";
    s.root.send(INST, &["-f", "mallory"], hostile);
    let html = report(&s, &[]);
    self_contained(&html);
    assert!(!html.contains("<script>alert(1)</script>"));
    assert!(!html.contains("<img"));
    assert!(html.contains(
        "&lt;script&gt;alert(1)&lt;/script&gt; &quot;&gt;&lt;img src=x onerror=alert(2)&gt; \
         &amp; &#39;q&#39;"
    ));
    // The sender is a lane of its own, and the channel is as it was.
    assert!(html.contains("<td>mallory</td>"));
    assert_eq!(s.root.entries(INST).len(), 5);
}

#[test]
fn json_holds_the_gathered_data() {
    let s = Setup::new();
    hello(&s);
    let out = report(&s, &["--json"]);
    assert_eq!(out.lines().count(), 1, "one JSON object on one line");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["instance"], "w");
    assert_eq!(r["run"], Value::Null);
    let agents: Vec<(&str, u64, u64)> = r["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap(),
                a["attempts"].as_u64().unwrap(),
                a["sent"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(agents, [("alice", 2, 2), ("bob", 1, 1), ("system", 0, 1)]);
    assert_eq!(r["agents"][0]["backend"], "mock");
    assert_eq!(r["agents"][2]["backend"], Value::Null);
    assert_eq!(r["totals"]["attempts"], 3);
    assert_eq!(r["totals"]["ok"], 3);
    assert_eq!(r["totals"]["messages"], 4);
    assert_eq!(
        r["totals"]["usage"],
        Value::Null,
        "the mock reports no usage"
    );
    let wakes: Vec<(&str, &str, u64)> = r["wakes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["from"].as_str().unwrap(),
                w["to"].as_str().unwrap(),
                w["entry"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        wakes,
        [
            ("system", "alice", 1),
            ("alice", "bob", 2),
            ("bob", "alice", 3)
        ]
    );
    let a = &r["attempts"][0];
    assert_eq!(
        (a["agent"].as_str(), a["status"].as_str()),
        (Some("alice"), Some("ok"))
    );
    assert_eq!(a["reply"], serde_json::json!([2]));
    assert_eq!(r["messages"][1]["text"], "@bob what is the answer?");
    assert_eq!(r["messages"][1]["mentions"], serde_json::json!(["bob"]));
    // The -o file holds the same object.
    let file = s.dir().join("r.json");
    assert_code(
        &run_with(ctl(&s, &["--json", "-o", file.to_str().unwrap()]), None),
        0,
    );
    let written: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written["attempts"], r["attempts"]);
}

#[test]
fn a_failed_attempt_is_shown_with_its_last_lines() {
    let s = Setup::new();
    s.script(
        "fail.sh",
        "for i in $(seq 1 30); do echo \"line $i <of> 30\" >&2; done\nexit 3\n",
    );
    s.write(
        "wf.yaml",
        "name: f\nagents:\n  breaker:\n    command: [./fail.sh]\nkickoff: \"@breaker go\"\n",
    );
    let out = run_hang_guarded(s.cmd(&["--retries", "2"]));
    assert_ne!(out.status.code(), Some(0));
    let r: Value = serde_json::from_str(&report(&s, &["--json"])).unwrap();
    assert_eq!(r["totals"]["failed"], 2);
    let last = r["attempts"][0]["last_lines"].as_str().unwrap();
    let want: Vec<String> = (19..=30).map(|i| format!("line {i} <of> 30")).collect();
    assert_eq!(last, want.join("\n"));
    let html = report(&s, &[]);
    assert!(html.contains("2 of 2 attempts did not succeed."));
    assert!(html.contains("line 30 &lt;of&gt; 30"));
    assert!(!html.contains("line 18 &lt;of&gt; 30"));
    assert_eq!(html.matches("<rect class=\"bar failed\"").count(), 2);
    assert!(totals(&html).contains(&("breaker".to_string(), 2, 0, 2)));
}

#[test]
fn cards_and_approvals_are_listed() {
    let s = Setup::new();
    hello(&s);
    let ctl_ok = |args: &[&str]| {
        let mut c = s.tool_cmd("aw-ctl");
        c.args(["-i", INST]).args(args);
        let out = run_with(c, None);
        assert_code(&out, 0);
    };
    ctl_ok(&["board", "add", "Fix the <b>parser</b>", "--as", "alice"]);
    ctl_ok(&[
        "approvals",
        "ask",
        "deploy to prod",
        "--by",
        "bob",
        "--as",
        "alice",
    ]);
    let html = report(&s, &[]);
    assert!(html.contains("<h2 id=\"cards\">Cards</h2>"));
    assert!(html.contains("Fix the &lt;b&gt;parser&lt;/b&gt;"));
    assert!(html.contains("<h2 id=\"approvals\">Approvals</h2>"));
    assert!(html.contains("deploy to prod"));
    let r: Value = serde_json::from_str(&report(&s, &["--json"])).unwrap();
    assert_eq!(r["cards"][0]["state"], "open");
    assert_eq!(r["approvals"][0]["state"], "pending");
    assert_eq!(r["merges"], serde_json::json!([]));
    // A run's report holds what happened while it ran: these came after.
    let one: Value = serde_json::from_str(&report(&s, &["--json", "--run", "1"])).unwrap();
    assert_eq!(one["cards"], serde_json::json!([]));
    assert_eq!(one["approvals"], serde_json::json!([]));
}

#[test]
fn tokens_and_cost_are_summed_per_agent_and_in_total() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:
  alice:
    mock:
      replies: ['@bob your turn', 'done']
      usage: {input_tokens: 1200, output_tokens: 50, cache_read_tokens: 7, cost_usd: 0.25}
  bob:
    mock:
      replies: ['@alice back to you']
      usage: {input_tokens: 300, output_tokens: 20, cost_usd: 0.125}
kickoff: '@alice go'
",
    );
    assert_code(&run_hang_guarded(s.cmd(&[])), 0);
    let r: Value = serde_json::from_str(&report(&s, &["--json"])).unwrap();
    let usage = |v: &Value| {
        (
            v["input_tokens"].as_u64().unwrap(),
            v["output_tokens"].as_u64().unwrap(),
            v["cache_read_tokens"].as_u64().unwrap(),
            v["cost_usd"].as_f64().unwrap(),
        )
    };
    assert_eq!(usage(&r["agents"][0]["usage"]), (2400, 100, 14, 0.5));
    assert_eq!(usage(&r["agents"][1]["usage"]), (300, 20, 0, 0.125));
    assert_eq!(usage(&r["totals"]["usage"]), (2700, 120, 14, 0.625));
    // What budget.json recorded is said too.
    assert_eq!(r["ledger"]["spent"]["input_tokens"], 2700);
    let html = report(&s, &[]);
    assert!(html.contains(
        "<td class=\"n\">2\u{202f}400</td><td class=\"n\">100</td><td class=\"n\">14</td>\
         <td class=\"n\">0</td><td class=\"n\">$0.5000</td>"
    ));
    assert!(html.contains(
        "<td class=\"n\">2\u{202f}700</td><td class=\"n\">120</td><td class=\"n\">14</td>\
         <td class=\"n\">0</td><td class=\"n\">$0.6250</td></tr>"
    ));
    assert!(html.contains("2\u{202f}820 tokens and $0.6250 spent since"));
}

#[test]
fn a_merge_is_listed_with_its_result() {
    let s = Setup::new();
    hello(&s);
    let repo = s.dir().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.name", "t"]);
    git(&repo, &["config", "user.email", "t@example.com"]);
    std::fs::write(repo.join("f.txt"), "one\n").unwrap();
    git(&repo, &["add", "f.txt"]);
    git(&repo, &["commit", "-q", "-m", "one"]);
    git(&repo, &["checkout", "-q", "-b", "aw/w/alice"]);
    std::fs::write(repo.join("g.txt"), "two\n").unwrap();
    git(&repo, &["add", "g.txt"]);
    git(&repo, &["commit", "-q", "-m", "two"]);
    git(&repo, &["checkout", "-q", "--detach"]);
    let mut c = s.tool_cmd("aw-ctl");
    c.current_dir(&repo)
        .args(["-i", INST, "merge", "request", "alice", "--as", "alice"]);
    assert_code(&run_with(c, None), 0);
    let merged = git(&repo, &["rev-parse", "main"]);
    let r: Value = serde_json::from_str(&report(&s, &["--json"])).unwrap();
    let m = &r["merges"][0];
    assert_eq!(
        (
            m["branch"].as_str(),
            m["into"].as_str(),
            m["state"].as_str()
        ),
        (Some("aw/w/alice"), Some("main"), Some("merged"))
    );
    assert_eq!(m["outcome"].as_str(), Some(&merged[..12]));
    let html = report(&s, &[]);
    assert!(html.contains("<h2 id=\"merges\">Merges</h2>"));
    assert!(html.contains("<td>merged</td><td>alice</td><td>aw/w/alice</td><td>main</td>"));
    assert!(html.contains(&merged[..12]));
}

/// Write 1,000 messages to the instance with one `aw-send --lines`.
fn thousand(s: &Setup) {
    let lines: String = (1..=1000)
        .map(|i| format!("note {i} for @bob <i>{i}</i>\n"))
        .collect();
    let mut c = s.tool_cmd("aw-send");
    c.args(["-i", INST, "-f", "carol", "--lines"]);
    assert_code(&run_with(c, Some(lines.as_bytes())), 0);
}

#[test]
fn a_thousand_entries_make_a_bounded_page_that_says_what_it_left_out() {
    let s = Setup::new();
    hello(&s);
    thousand(&s);
    let html = report(&s, &[]);
    self_contained(&html);
    assert!(html.contains("1\u{202f}004 messages."));
    // 400 rows of messages: the first 200 and the last 200, and a row saying what is left.
    assert_eq!(html.matches("<td class=\"msg\">").count(), 400);
    assert!(
        html.contains(
            "604 messages left out, #201 to #804 (aw-peek --since 200 -n 604 shows them)"
        )
    );
    assert!(html.contains("note 996 for @bob &lt;i&gt;996&lt;/i&gt;"));
    assert!(!html.contains("note 500 for"));
    // Ticks are grouped by pixel column: far fewer than the messages.
    let ticks = html.matches("<line class=\"tick\"").count();
    assert!(ticks > 1 && ticks < 900, "{ticks} ticks");
    assert!(html.len() < 400_000, "{} bytes", html.len());
    let t = totals(&html);
    assert_eq!(t.last().unwrap(), &("total".to_string(), 3, 3, 0));
    let r: Value = serde_json::from_str(&report(&s, &["--json"])).unwrap();
    assert_eq!(r["messages"].as_array().unwrap().len(), 1004);
    let carol = r["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "carol")
        .unwrap();
    assert_eq!(carol["sent"], 1000);
    let bob = &r["agents"][1];
    assert_eq!(
        (bob["name"].as_str(), bob["mentioned"].as_u64()),
        (Some("bob"), Some(1001))
    );
}

/// Debian's chromium; its absence fails the test (scripts/test-deps.sh installs it).
fn chromium(profile: &Path) -> Command {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("chromium").is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "chromium is not installed: run scripts/test-deps.sh (apt-get install -y chromium)"
    );
    let mut c = Command::new("chromium");
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .env("HOME", profile);
    c
}

/// Open `page` in headless chromium: its rendered DOM, and the distinct colours of a
/// 1200x900 screenshot.
fn in_browser(s: &Setup, page: &Path) -> (String, BTreeSet<[u8; 3]>) {
    let profile = s.dir().join("chromium-profile");
    let url = format!("file://{}", page.display());
    let out = chromium(&profile)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium --dump-dom: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8(out.stdout).expect("UTF-8");
    let png = s.dir().join("shot.png");
    let out = chromium(&profile)
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,900")
        .arg(&url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium --screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (w, h, pixels) = png::decode(&std::fs::read(&png).expect("a screenshot"));
    assert_eq!((w, h), (1200, 900));
    (dom, pixels.into_iter().collect())
}

/// The rendered page holds every agent and the totals, and the screenshot shows the bars.
fn rendered(s: &Setup, page: &Path, agents: &[&str], total: &str) {
    let (dom, colours) = in_browser(s, page);
    for a in agents {
        assert!(dom.contains(&format!("<td>{a}</td>")), "no {a} in the DOM");
    }
    assert!(dom.contains(total), "no {total:?} in the DOM");
    assert!(
        colours.len() > 16,
        "a blank screenshot: {} colours",
        colours.len()
    );
    // The green of a successful attempt (#2e9d4f) is on the screen: the timeline is drawn.
    assert!(colours.contains(&[0x2e, 0x9d, 0x4f]), "no bar is drawn");
}

#[test]
fn a_headless_browser_renders_the_page_of_hello_and_of_a_thousand_entries() {
    let s = Setup::new();
    hello(&s);
    let page = s.dir().join("hello.html");
    assert_code(&run_with(ctl(&s, &["-o", page.to_str().unwrap()]), None), 0);
    let total = "<tr class=\"total\"><td>total</td><td></td><td class=\"n\">3</td>";
    rendered(&s, &page, &["alice", "bob", "system"], total);
    thousand(&s);
    let page = s.dir().join("thousand.html");
    assert_code(&run_with(ctl(&s, &["-o", page.to_str().unwrap()]), None), 0);
    rendered(&s, &page, &["alice", "bob", "system", "carol"], total);
    let (dom, _) = in_browser(&s, &page);
    assert!(dom.contains("604 messages left out"));
}

/// A reader of the PNG files chromium writes: 8-bit RGB or RGBA, not interlaced.
mod png {
    /// Width, height and the RGB of every pixel.
    pub fn decode(data: &[u8]) -> (u32, u32, Vec<[u8; 3]>) {
        assert_eq!(&data[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
        let (mut w, mut h, mut channels) = (0, 0, 0);
        let mut idat = Vec::new();
        let mut at = 8;
        while at + 8 <= data.len() {
            let len = u32::from_be_bytes(data[at..at + 4].try_into().unwrap()) as usize;
            let kind = &data[at + 4..at + 8];
            let body = &data[at + 8..at + 8 + len];
            match kind {
                b"IHDR" => {
                    w = u32::from_be_bytes(body[0..4].try_into().unwrap());
                    h = u32::from_be_bytes(body[4..8].try_into().unwrap());
                    assert_eq!(body[8], 8, "bit depth");
                    assert_eq!(body[12], 0, "interlaced");
                    channels = match body[9] {
                        2 => 3,
                        6 => 4,
                        t => panic!("colour type {t}"),
                    };
                }
                b"IDAT" => idat.extend_from_slice(body),
                b"IEND" => break,
                _ => {}
            }
            at += 12 + len;
        }
        // zlib: a two-byte header, deflate, a checksum.
        let raw = inflate(&idat[2..]);
        let stride = w as usize * channels;
        assert_eq!(raw.len(), (stride + 1) * h as usize, "image size");
        let mut prev = vec![0u8; stride];
        let mut pixels = Vec::with_capacity((w * h) as usize);
        for row in raw.chunks(stride + 1) {
            let (filter, line) = (row[0], &row[1..]);
            let mut cur = vec![0u8; stride];
            for i in 0..stride {
                let a = if i >= channels { cur[i - channels] } else { 0 } as i16;
                let b = prev[i] as i16;
                let c = if i >= channels { prev[i - channels] } else { 0 } as i16;
                let pred = match filter {
                    0 => 0,
                    1 => a,
                    2 => b,
                    3 => (a + b) / 2,
                    4 => {
                        let p = a + b - c;
                        let (pa, pb, pc) = ((p - a).abs(), (p - b).abs(), (p - c).abs());
                        if pa <= pb && pa <= pc {
                            a
                        } else if pb <= pc {
                            b
                        } else {
                            c
                        }
                    }
                    f => panic!("filter {f}"),
                };
                cur[i] = line[i].wrapping_add(pred as u8);
            }
            pixels.extend(cur.chunks(channels).map(|p| [p[0], p[1], p[2]]));
            prev = cur;
        }
        (w, h, pixels)
    }

    /// Bits of a deflate stream, least significant first.
    struct Bits<'a> {
        data: &'a [u8],
        at: usize,
    }

    impl Bits<'_> {
        fn bit(&mut self) -> u32 {
            let b = (self.data[self.at / 8] >> (self.at % 8)) & 1;
            self.at += 1;
            b as u32
        }

        fn bits(&mut self, n: u32) -> u32 {
            (0..n).fold(0, |v, i| v | self.bit() << i)
        }
    }

    /// A canonical Huffman code: the count of codes of each length, and the symbols in
    /// order.
    struct Huffman {
        counts: [u16; 16],
        symbols: Vec<u16>,
    }

    impl Huffman {
        fn new(lengths: &[u8]) -> Huffman {
            let mut counts = [0u16; 16];
            for &l in lengths {
                counts[l as usize] += 1;
            }
            counts[0] = 0;
            let mut offs = [0u16; 16];
            for i in 1..16 {
                offs[i] = offs[i - 1] + counts[i - 1];
            }
            let mut symbols = vec![0; lengths.len()];
            for (s, &l) in lengths.iter().enumerate() {
                if l != 0 {
                    symbols[offs[l as usize] as usize] = s as u16;
                    offs[l as usize] += 1;
                }
            }
            Huffman { counts, symbols }
        }

        fn decode(&self, b: &mut Bits) -> u16 {
            let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
            for len in 1..16 {
                code |= b.bit() as i32;
                let count = self.counts[len] as i32;
                if code - count < first {
                    return self.symbols[(index + code - first) as usize];
                }
                index += count;
                first = (first + count) << 1;
                code <<= 1;
            }
            panic!("bad Huffman code");
        }
    }

    const LEN_BASE: [u16; 29] = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115,
        131, 163, 195, 227, 258,
    ];
    const LEN_EXTRA: [u8; 29] = [
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
    ];
    const DIST_BASE: [u16; 30] = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
        2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
    ];
    const DIST_EXTRA: [u8; 30] = [
        0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12,
        13, 13,
    ];

    /// A raw deflate stream, inflated (RFC 1951).
    fn inflate(data: &[u8]) -> Vec<u8> {
        let mut b = Bits { data, at: 0 };
        let mut out = Vec::new();
        loop {
            let last = b.bit();
            match b.bits(2) {
                0 => {
                    b.at = b.at.div_ceil(8) * 8;
                    let p = b.at / 8;
                    let len = u16::from_le_bytes([data[p], data[p + 1]]) as usize;
                    out.extend_from_slice(&data[p + 4..p + 4 + len]);
                    b.at = (p + 4 + len) * 8;
                }
                1 => {
                    let mut l = [8u8; 288];
                    l[144..256].fill(9);
                    l[256..280].fill(7);
                    block(&mut b, &mut out, &Huffman::new(&l), &Huffman::new(&[5; 30]));
                }
                2 => {
                    let hlit = b.bits(5) as usize + 257;
                    let hdist = b.bits(5) as usize + 1;
                    let hclen = b.bits(4) as usize + 4;
                    const ORDER: [usize; 19] = [
                        16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
                    ];
                    let mut cl = [0u8; 19];
                    for &i in &ORDER[..hclen] {
                        cl[i] = b.bits(3) as u8;
                    }
                    let code = Huffman::new(&cl);
                    let mut lengths = Vec::with_capacity(hlit + hdist);
                    while lengths.len() < hlit + hdist {
                        match code.decode(&mut b) {
                            s @ 0..=15 => lengths.push(s as u8),
                            16 => {
                                let prev = *lengths.last().unwrap();
                                let n = 3 + b.bits(2);
                                lengths.extend((0..n).map(|_| prev));
                            }
                            17 => {
                                let n = 3 + b.bits(3);
                                lengths.extend((0..n).map(|_| 0));
                            }
                            _ => {
                                let n = 11 + b.bits(7);
                                lengths.extend((0..n).map(|_| 0));
                            }
                        }
                    }
                    let lit = Huffman::new(&lengths[..hlit]);
                    let dist = Huffman::new(&lengths[hlit..]);
                    block(&mut b, &mut out, &lit, &dist);
                }
                t => panic!("block type {t}"),
            }
            if last == 1 {
                return out;
            }
        }
    }

    /// One compressed block.
    fn block(b: &mut Bits, out: &mut Vec<u8>, lit: &Huffman, dist: &Huffman) {
        loop {
            let s = lit.decode(b) as usize;
            if s < 256 {
                out.push(s as u8);
                continue;
            }
            if s == 256 {
                return;
            }
            let i = s - 257;
            let len = LEN_BASE[i] as usize + b.bits(LEN_EXTRA[i] as u32) as usize;
            let d = dist.decode(b) as usize;
            let back = DIST_BASE[d] as usize + b.bits(DIST_EXTRA[d] as u32) as usize;
            let from = out.len() - back;
            for k in 0..len {
                out.push(out[from + k]);
            }
        }
    }
}
