//! The collab tools of `aw-mcp --collab` (spawn_agent, send_input, wait, close_agent) and
//! delegate mode, through rmcp's client against real `aw-mcp` and `aw-run` processes.

use crate::mcp_common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use mcp_common::{GUARD, INSTANCE, Team, bin, command};
use serde_json::{Value, json};

/// Poll `cond` until it holds; a test that waits longer than [`GUARD`] fails. Never used to
/// judge speed.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + GUARD;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}

/// The agents `aw-ctl ps --json` shows as served, with their pids.
fn served(team: &Team) -> Vec<(String, u32)> {
    mcp_common::json_lines(team.ctl_ok(&["ps", "--json"]).as_bytes())
        .iter()
        .map(|s| {
            (
                s["agent"].as_str().unwrap_or_default().to_string(),
                s["pid"].as_u64().unwrap_or_default() as u32,
            )
        })
        .collect()
}

/// The registry entry of `name`.
fn registered(team: &Team, name: &str) -> Value {
    team.state("agents.json")["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn spawned_workers_run_answer_follow_up_and_close() {
    let team = Team::new();
    let lead = team.join_with("lead", &["--collab"]).await;
    let mut pids = Vec::new();
    for (i, task) in ["look at auth", "look at the API", "look at the database"]
        .iter()
        .enumerate()
    {
        let r = lead
            .ok("spawn_agent", json!({"prompt": task, "backend": "mock"}))
            .await;
        let name = format!("worker-{}", i + 1);
        assert_eq!(r.data["name"], name, "{}", r.text);
        assert_eq!(r.data["backend"], "mock");
        // The first one had no server: one was started for it; it takes the others.
        assert_eq!(r.data["started_server"], i == 0, "{}", r.text);
        pids.push(r.data["served_by"].as_u64().expect("served") as u32);
        let reg = registered(&team, &name);
        assert_eq!(reg["spawned_by"], "lead");
        assert_eq!(reg["depth"], 1);
    }
    assert!(pids.iter().all(|p| *p == pids[0]), "{pids:?}");
    let server = pids[0];
    // The prompts are channel messages from the lead that mention each worker.
    let asks: Vec<Value> = team
        .channel()
        .into_iter()
        .filter(|e| e["from"] == "lead")
        .collect();
    assert_eq!(asks.len(), 3);
    assert_eq!(asks[1]["mentions"], json!(["worker-2"]));
    assert!(
        asks[1]["message"]
            .as_str()
            .unwrap()
            .ends_with("look at the API")
    );

    let all = json!(["worker-1", "worker-2", "worker-3"]);
    let w = lead
        .ok("wait", json!({"agents": all, "timeout_seconds": 60}))
        .await;
    assert_eq!(w.data["done"], true, "{}", w.text);
    let agents = w.data["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 3);
    for (i, a) in agents.iter().enumerate() {
        let name = format!("worker-{}", i + 1);
        assert_eq!(a["agent"], name);
        assert_eq!(a["state"], "idle", "{}", w.text);
        assert_eq!(a["unread"], 0);
        assert_eq!(
            names(&a["replies"]),
            [format!("{name}: handled 1 message(s)")],
            "{}",
            w.text
        );
    }
    // Every worker is an ordinary agent: served, with its runs recorded.
    let ps = served(&team);
    for n in ["worker-1", "worker-2", "worker-3"] {
        assert!(ps.contains(&(n.to_string(), server)), "{ps:?}");
        let runs = team.ctl_ok(&["runs", n, "--json"]);
        assert!(runs.contains("\"ok\""), "{n}: {runs}");
    }

    // A follow-up: only what came after it is returned.
    let s = lead
        .ok(
            "send_input",
            json!({"agent": "worker-2", "message": "now the error paths"}),
        )
        .await;
    assert_eq!(s.data["mentions"], json!(["worker-2"]));
    let w = lead
        .ok(
            "wait",
            json!({"agents": ["worker-2"], "timeout_seconds": 60}),
        )
        .await;
    assert_eq!(w.data["done"], true);
    assert_eq!(
        names(&w.data["agents"][0]["replies"]),
        ["worker-2: handled 1 message(s)"]
    );
    let from_w2 = team
        .channel()
        .into_iter()
        .filter(|e| e["from"] == "worker-2")
        .count();
    assert_eq!(from_w2, 2);

    // Closing: not served any more, history kept; the server started for them ends.
    for n in ["worker-1", "worker-2", "worker-3"] {
        let c = lead.ok("close_agent", json!({"agent": n})).await;
        assert_eq!(c.data["state"], "closed", "{}", c.text);
        assert_eq!(registered(&team, n)["closed"], true);
    }
    let again = lead.ok("close_agent", json!({"agent": "worker-1"})).await;
    assert_eq!(again.data["state"], "already closed");
    wait_for("the started aw-run to end", || !alive(server));
    assert!(served(&team).is_empty());
    lead.fail_with(
        "send_input",
        json!({"agent": "worker-1", "message": "more"}),
        &["closed"],
    )
    .await;
    let w = lead.ok("wait", json!({"agents": ["worker-1"]})).await;
    assert_eq!(w.data["agents"][0]["state"], "closed");
    lead.quit().await;
}

#[tokio::test]
async fn limits_depth_and_who_may_close() {
    let team = Team::new();
    // Without --collab there are no collab tools.
    let plain = team.join("plain").await;
    plain
        .fail_with(
            "spawn_agent",
            json!({"prompt": "x", "backend": "mock"}),
            &[
                "not given",
                "the collab tools are given only to an agent started with them",
            ],
        )
        .await;
    let lead = team
        .join_with("lead", &["--collab", "--max-workers", "2"])
        .await;
    for _ in 0..2 {
        lead.ok("spawn_agent", json!({"prompt": "work", "backend": "mock"}))
            .await;
    }
    // The workers' replies may land at any time; only the lead's own posts are counted.
    let from_lead = |team: &Team| {
        team.channel()
            .into_iter()
            .filter(|e| e["from"] == "lead")
            .collect::<Vec<_>>()
    };
    let before = from_lead(&team);
    assert_eq!(before.len(), 2, "{before:?}");
    lead.fail_with(
        "spawn_agent",
        json!({"prompt": "work", "backend": "mock"}),
        &["worker limit", "at most 2"],
    )
    .await;
    assert_eq!(from_lead(&team), before, "a refused spawn posts nothing");
    assert!(
        !team.channel().iter().any(|e| e["mentions"]
            .as_array()
            .is_some_and(|m| m.contains(&json!("worker-3")))),
        "nothing mentions a refused worker"
    );
    assert!(registered(&team, "worker-3").is_null());

    // A worker cannot spawn (depth 1), even when its server offers the tools.
    let worker = team.join_with("worker-1", &["--collab"]).await;
    worker
        .fail_with(
            "spawn_agent",
            json!({"prompt": "sub-work", "backend": "mock"}),
            &["spawn depth", "may not spawn"],
        )
        .await;
    // Only the spawner closes.
    let other = team.join_with("other", &["--collab"]).await;
    other
        .fail_with(
            "close_agent",
            json!({"agent": "worker-1"}),
            &["spawned by lead", "only lead"],
        )
        .await;
    other
        .fail_with(
            "close_agent",
            json!({"agent": "lead"}),
            &["not a spawned worker"],
        )
        .await;
    assert_ne!(registered(&team, "worker-1")["closed"], true);
    // Bad requests name what was wrong.
    lead.fail_with(
        "spawn_agent",
        json!({"prompt": "x", "backend": "teleport"}),
        &["unknown worker backend 'teleport'"],
    )
    .await;
    lead.fail_with(
        "spawn_agent",
        json!({"prompt": "x", "backend": "anthropic"}),
        &["needs a 'model'"],
    )
    .await;
    lead.fail_with(
        "wait",
        json!({"agents": ["nobody"]}),
        &["no agent 'nobody'"],
    )
    .await;
    // Closing one makes room for another.
    lead.ok("close_agent", json!({"agent": "worker-2"})).await;
    lead.fail_with(
        "spawn_agent",
        json!({"prompt": "x", "backend": "mock", "name": "worker-1"}),
        &["exists"],
    )
    .await;
    let r = lead
        .ok(
            "spawn_agent",
            json!({"prompt": "more work", "backend": "mock", "name": "helper"}),
        )
        .await;
    assert_eq!(r.data["name"], "helper");
    // With a deeper limit, a worker's own server offers the tools and it may spawn.
    let deep = team
        .join_with(
            "deep",
            &["--collab", "--max-workers", "8", "--spawn-depth", "2"],
        )
        .await;
    let r = deep
        .ok(
            "spawn_agent",
            json!({"prompt": "sub-lead", "backend": "mock"}),
        )
        .await;
    let sub = r.data["name"].as_str().unwrap().to_string();
    assert_eq!(registered(&team, &sub)["collab"]["max_depth"], 2);
    let sub_mcp = team
        .join_with(&sub, &["--collab", "--spawn-depth", "2"])
        .await;
    let r = sub_mcp
        .ok("spawn_agent", json!({"prompt": "leaf", "backend": "mock"}))
        .await;
    let leaf = r.data["name"].as_str().unwrap().to_string();
    assert_eq!(registered(&team, &leaf)["depth"], 2);
    assert!(registered(&team, &leaf).get("collab").is_none());
    for a in ["worker-1", "helper"] {
        lead.ok("close_agent", json!({"agent": a})).await;
    }
    sub_mcp.ok("close_agent", json!({"agent": leaf})).await;
    deep.ok("close_agent", json!({"agent": sub})).await;
    wait_for("every worker to be let go", || served(&team).is_empty());
    for a in [plain, lead, worker, other, deep, sub_mcp] {
        a.quit().await;
    }
}

/// Start `aw-run --keep` on `wf`; it must report itself ready.
fn keep_run(team: &Team, wf: &str) -> Child {
    let path = team.base.join("wf.yaml");
    std::fs::write(&path, wf).unwrap();
    let child = command("aw-run")
        .arg("--root")
        .arg(&team.root)
        .args(["-i", INSTANCE, "--keep", "-q"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn aw-run");
    wait_for("aw-run to serve the lead", || {
        served(team).iter().any(|(a, _)| a == "lead")
    });
    child
}

#[tokio::test]
async fn workers_are_served_by_the_leads_aw_run_and_stop_with_it() {
    let team = Team::new();
    let mut run = keep_run(
        &team,
        "agents:\n  lead:\n    mock: {}\n    collab: true\n    max_workers: 4\n",
    );
    // The lead's MCP configuration, written before its run, gives it the collab tools.
    let cfg_path = team.inst().join("_state/mcp/lead.json");
    let sent = command("aw-send")
        .arg("--root")
        .arg(&team.root)
        .args(["-i", INSTANCE, "--from", "user", "@lead hello"])
        .status()
        .unwrap();
    assert!(sent.success());
    wait_for("the lead's MCP configuration", || cfg_path.exists());
    let cfg = std::fs::read_to_string(&cfg_path).unwrap();
    let cfg: Value = serde_json::from_str(&cfg).unwrap();
    assert_eq!(
        cfg["mcpServers"]["aw"]["args"],
        json!(["--agent", "lead@default", "--collab", "--max-workers", "4"])
    );
    let lead = team
        .join_with("lead", &["--collab", "--max-workers", "4"])
        .await;
    for _ in 0..2 {
        let r = lead
            .ok("spawn_agent", json!({"prompt": "go", "backend": "mock"}))
            .await;
        assert_eq!(r.data["served_by"], run.id(), "{}", r.text);
        // The host of that pid: this one.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(r.data["served_on"], host.trim(), "{}", r.text);
        assert_eq!(r.data["started_server"], false);
    }
    let w = lead
        .ok("wait", json!({"agents": ["worker-1", "worker-2"]}))
        .await;
    assert_eq!(w.data["done"], true, "{}", w.text);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let st = run.wait().unwrap();
    assert_eq!(st.code(), Some(0));
    assert!(served(&team).is_empty(), "{:?}", served(&team));
    lead.quit().await;
}

#[tokio::test]
async fn delegate_mode_gives_only_the_coordinating_tools() {
    let team = Team::new();
    let listed = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools.iter().map(|t| t.name.to_string()).collect()
    };
    let plain = team.join("plain").await;
    let tools = listed(plain.client.list_all_tools().await.unwrap());
    assert_eq!(tools.len(), 28);
    assert!(!tools.iter().any(|t| t == "spawn_agent"));
    let collab = team.join_with("lead", &["--collab"]).await;
    let tools = listed(collab.client.list_all_tools().await.unwrap());
    assert_eq!(tools.len(), 32);
    assert_eq!(
        &tools[25..29],
        ["spawn_agent", "send_input", "wait", "close_agent"]
    );
    let delegate = team.join_with("boss", &["--delegate"]).await;
    let tools = listed(delegate.client.list_all_tools().await.unwrap());
    assert_eq!(tools.len(), 29, "{tools:?}");
    for t in ["team_doc_write", "team_doc_append", "team_doc_create"] {
        assert!(!tools.iter().any(|x| x == t), "{t} in {tools:?}");
        delegate
            .fail_with(t, json!({"file": "x.md", "content": "x"}), &["not given"])
            .await;
    }
    for t in [
        "channel_send",
        "my_inbox",
        "team_doc_read",
        "team_vote",
        "wait",
    ] {
        assert!(tools.iter().any(|x| x == t), "{t} not in {tools:?}");
    }
    assert!(!team.docs().join("x.md").exists());
    for a in [plain, collab, delegate] {
        a.quit().await;
    }
}

#[test]
fn workflow_keys_reach_the_backends() {
    let team = Team::new();
    // A stand-in `claude` that records its arguments.
    let fake = team.base.join("bin");
    std::fs::create_dir(&fake).unwrap();
    let claude = fake.join("claude");
    std::fs::write(
        &claude,
        "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done > \"$ARGS_OUT\"\ncat >/dev/null\n\
         echo '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"ok\"}'\n",
    )
    .unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&claude).unwrap().permissions(),
        0o755,
    );
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let wf = team.base.join("wf.yaml");
    std::fs::write(
        &wf,
        "agents:\n  boss:\n    backend: claude\n    delegate: true\nkickoff: '@boss plan it'\n",
    )
    .unwrap();
    let args_out = team.base.join("args");
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = command("aw-run")
        .arg("--root")
        .arg(&team.root)
        .args(["-i", INSTANCE])
        .arg(&wf)
        .env("PATH", path)
        .env("ARGS_OUT", &args_out)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let args = std::fs::read_to_string(&args_out).unwrap();
    assert!(args.contains("[--tools]\n[]\n"), "{args}");
    let cfg = std::fs::read_to_string(team.inst().join("_state/mcp/boss.json")).unwrap();
    assert!(cfg.contains("\"--delegate\""), "{cfg}");
    assert_eq!(registered(&team, "boss")["delegate"], true);

    // Limits without collab, and tools for an agent that only coordinates, are refused.
    std::fs::write(
        &wf,
        "agents:\n  a:\n    mock: {}\n    max_workers: 3\n  b:\n    backend: claude\n    delegate: true\n    tools: [Bash]\n",
    )
    .unwrap();
    let out = command("aw-run").arg("--check").arg(&wf).output().unwrap();
    assert_eq!(out.status.code(), Some(65));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("wf.yaml:4:5: agents.a.max_workers: max_workers goes with collab: true"),
        "{err}"
    );
    assert!(
        err.contains("agents.b.tools: an agent with delegate: true only coordinates"),
        "{err}"
    );
    let _ = bin("aw-mcp");
}

#[test]
fn mcp_config_starts_the_server_with_the_collab_or_delegate_tools() {
    let team = Team::new();
    let json: Value =
        serde_json::from_str(&team.ctl_ok(&["mcp-config", "lead@default", "--collab"])).unwrap();
    assert_eq!(
        json["mcpServers"]["aw"]["args"],
        json!(["--agent", "lead@default", "--collab"])
    );
    let toml = team.ctl_ok(&["mcp-config", "boss@default", "--delegate", "--codex-toml"]);
    assert!(
        toml.contains(r#"args = ["--agent", "boss@default", "--delegate"]"#),
        "{toml}"
    );
    let plain: Value = serde_json::from_str(&team.ctl_ok(&["mcp-config", "lead@default"])).unwrap();
    assert_eq!(
        plain["mcpServers"]["aw"]["args"],
        json!(["--agent", "lead@default"])
    );
    let out = team.run(
        "aw-ctl",
        &["mcp-config", "lead@default", "--collab", "--delegate"],
    );
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--collab and --delegate do not go together"),
        "{err}"
    );
}

#[tokio::test]
async fn a_worker_closed_by_an_edit_in_place_of_the_registry_is_let_go() {
    // agents.json rewritten in place, the same size, its modification time put back: only
    // its change time tells that it changed, and the worker closed in it is let go all the
    // same.
    let team = Team::new();
    let mut run = keep_run(
        &team,
        "agents:\n  lead:\n    mock: {}\n    collab: true\n    max_workers: 4\n",
    );
    let lead = team
        .join_with("lead", &["--collab", "--max-workers", "4"])
        .await;
    let r = lead
        .ok("spawn_agent", json!({"prompt": "go", "backend": "mock"}))
        .await;
    assert_eq!(r.data["served_by"], run.id(), "{}", r.text);
    let runs = team.inst().join("_state/runs/worker-1");
    let transcripts = || {
        std::fs::read_dir(&runs).map_or(0, |d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .count()
        })
    };
    wait_for("the worker's first run", || transcripts() == 1);
    // A message to the worker: the server has looked at the registry as it is now.
    let send = |text: &str| {
        let sent = command("aw-send")
            .arg("--root")
            .arg(&team.root)
            .args(["-i", INSTANCE, "--from", "user", text])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    send("@worker-1 one");
    wait_for("the worker's second run", || transcripts() == 2);
    // Past the granularity of the clock of the change times.
    std::thread::sleep(Duration::from_millis(20));
    let file = team.inst().join("_state/agents.json");
    let before = std::fs::metadata(&file).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let from = "\"spawned_by\": \"lead\"";
    assert_eq!(text.matches(from).count(), 1, "{text}");
    let mut edited = text.replace(from, &format!("{from}, \"closed\": true"));
    // As many bytes of indentation out as went in: a space of each indented line.
    let extra = edited.len() - text.len();
    let mut from_line = 0;
    for _ in 0..extra {
        let at = from_line + edited[from_line..].find("\n  ").unwrap() + 1;
        edited.remove(at);
        from_line = at;
    }
    assert_eq!(edited.len(), text.len());
    assert!(serde_json::from_str::<Value>(&edited).is_ok(), "{edited}");
    {
        use std::io::{Seek, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.write_all(edited.as_bytes()).unwrap();
        f.set_modified(before.modified().unwrap()).unwrap();
    }
    let after = std::fs::metadata(&file).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap()),
        (before.len(), before.modified().unwrap())
    );
    {
        use std::os::unix::fs::MetadataExt;
        assert_ne!(
            (after.ctime(), after.ctime_nsec()),
            (before.ctime(), before.ctime_nsec())
        );
    }
    assert_eq!(registered(&team, "worker-1")["closed"], true);
    // A change of the channel makes the server look at the registry again.
    send("@worker-1 more");
    wait_for("the worker to be let go", || {
        !served(&team).iter().any(|(a, _)| a == "worker-1")
    });
    assert_eq!(transcripts(), 2);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(run.wait().unwrap().code(), Some(0));
    lead.quit().await;
}
