//! Reading `merge:`: the target branch, how a branch is brought onto it, the verify command
//! and its time, the approval a verified result waits for, and whether the `merge_request`
//! tool waits for the result.

use crate::merge::{Config, DEFAULT_TIMEOUT, How, Needs};
use crate::names::sanitize;
use crate::run::diagnostic::Spanned;
use crate::run::reader::{Reader, join};
use crate::run::yaml::Node;

const MERGE_KEYS: [&str; 6] = ["into", "how", "verify", "timeout", "needs", "wait"];

/// `merge: {into: BRANCH, how: rebase|merge, verify: COMMAND, timeout: DURATION, needs:
/// approval, wait: BOOL}`, every key optional; `None` after an error.
pub(super) fn read_merge(r: &mut Reader, node: &Node) -> Option<Spanned<Config>> {
    let path = "merge";
    let f = r.fields(node, path, &MERGE_KEYS)?;
    let p = |key: &str| join(path, key);
    // aw-run serves the queue and posts each result: the tool returns at once unless told.
    let mut c = Config {
        wait: false,
        timeout: DEFAULT_TIMEOUT,
        ..Config::default()
    };
    let mut ok = true;
    if let Some(n) = f.get("into") {
        match r.name(n, &p("into")) {
            Some(b) => match crate::merge::check_branch_name("target branch", &b) {
                Ok(()) => c.into = b.value,
                Err(e) => {
                    r.error(n.pos, &p("into"), &e.to_string());
                    ok = false;
                }
            },
            None => ok = false,
        }
    }
    if let Some(n) = f.get("how") {
        match r.string(n, &p("how")) {
            Some(h) => match How::from_name(&h) {
                Some(how) => c.how = how,
                None => {
                    let msg = format!(
                        "expected {}, found '{}'",
                        How::NAMES.join(" or "),
                        sanitize(&h)
                    );
                    r.error(n.pos, &p("how"), &msg);
                    ok = false;
                }
            },
            None => ok = false,
        }
    }
    if let Some(n) = f.get("verify") {
        match r.name(n, &p("verify")) {
            Some(v) => c.verify = Some(v.value),
            None => ok = false,
        }
    }
    if let Some((k, n)) = f.entry("timeout") {
        match r.duration(n, &p("timeout")) {
            Some(d) => c.timeout = d.value.as_secs_f64().ceil() as u64,
            None => ok = false,
        }
        if c.verify.is_none() && ok {
            r.error(
                k.pos,
                &p("timeout"),
                "the time of the verify command: name it (verify: COMMAND)",
            );
            ok = false;
        }
    }
    if let Some(n) = f.get("needs") {
        match super::tasks::read_needs(r, n, &p("needs")) {
            Some(g) => {
                c.needs = Some(Needs {
                    by: g.value.by,
                    timeout: g.value.timeout.map(|t| t.as_secs_f64().ceil() as u64),
                    then: g.value.then,
                    replies: g.value.replies,
                })
            }
            None => ok = false,
        }
    }
    if let Some(n) = f.get("wait") {
        match r.boolean(n, &p("wait")) {
            Some(w) => c.wait = w,
            None => ok = false,
        }
    }
    ok.then(|| Spanned::new(c, node.pos))
}
