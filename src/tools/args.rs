//! Reading a tool call's arguments: a JSON object whose values the model may give loosely (a
//! number as a string of digits, a boolean as `"true"`). A wrong type is an invalid-argument
//! error naming the argument.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// A tool call's arguments.
pub type Args = Map<String, Value>;

pub fn str_arg<'a>(a: &'a Args, key: &str) -> Result<Option<&'a str>> {
    match a.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::invalid(format!("'{key}' must be a string"))),
    }
}

pub fn req_str<'a>(a: &'a Args, key: &str) -> Result<&'a str> {
    str_arg(a, key)?.ok_or_else(|| Error::invalid(format!("missing required parameter '{key}'")))
}

pub fn bool_arg(a: &Args, key: &str) -> Result<Option<bool>> {
    match a.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
        Some(_) => Err(Error::invalid(format!("'{key}' must be true or false"))),
    }
}

/// A non-negative integer, given as a JSON number or a string of digits.
pub fn uint_arg(a: &Args, key: &str) -> Result<Option<u64>> {
    match a.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| Error::invalid(format!("'{key}' must be a non-negative integer"))),
        Some(Value::String(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s
            .parse()
            .map(Some)
            .map_err(|_| Error::invalid(format!("'{key}' is out of range"))),
        Some(_) => Err(Error::invalid(format!(
            "'{key}' must be a non-negative integer (an entry id)"
        ))),
    }
}

/// A whole number of at least 1, given as a JSON number or a string of digits.
pub fn whole(args: &Args, key: &str) -> Result<Option<u64>> {
    let n = match args.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse().ok(),
        Some(_) => None,
    };
    match n {
        Some(n) if n >= 1 => Ok(Some(n)),
        _ => Err(Error::invalid(format!(
            "'{key}' must be a whole number of at least 1"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::error::Error;
    use crate::instance::Root;
    use crate::tools::{Caller, Reply, Toolset, call};

    /// A caller with the collab tools, in a fresh instance.
    fn caller(d: &tempfile::TempDir) -> Caller {
        let inst = Root::new(d.path()).instance("t").unwrap();
        let mut s = Caller::new(inst, "alice");
        s.tools = Toolset {
            collab: Some(Default::default()),
            delegate: false,
        };
        s
    }

    fn run(s: &Caller, tool: &str, a: Value) -> crate::error::Result<Reply> {
        let Value::Object(a) = a else { panic!("{a}") };
        call(s, tool, &a)
    }

    fn ok(s: &Caller, tool: &str, a: Value) -> Reply {
        run(s, tool, a.clone()).unwrap_or_else(|e| panic!("{tool} {a}: {e}"))
    }

    /// The message of the invalid-argument error `tool` gives for `a`.
    fn refused(s: &Caller, tool: &str, a: Value) -> String {
        match run(s, tool, a.clone()) {
            Err(Error::Invalid(m)) => m,
            Err(e) => panic!("{tool} {a}: not an invalid argument: {e:?}"),
            Ok(r) => panic!("{tool} {a}: accepted: {}", r.text),
        }
    }

    #[test]
    fn numbers_may_be_given_as_digits_and_booleans_as_words() {
        let d = tempfile::tempdir().unwrap();
        let s = caller(&d);
        for name in ["alice", "bob"] {
            let agent = crate::registry::Agent {
                name: name.into(),
                backend: "external".into(),
                ..Default::default()
            };
            crate::registry::register(&s.inst, agent, false).unwrap();
        }
        let bob = Caller::new(s.inst.clone(), "bob");
        for m in ["one", "two @alice", "three @alice"] {
            ok(&bob, "channel_send", json!({ "message": m }));
        }
        let r = ok(&s, "channel_read", json!({"limit": "2"}));
        assert_eq!(
            r.structured.unwrap()["entries"].as_array().unwrap().len(),
            2
        );
        let r = ok(&s, "channel_read", json!({"since": "2", "limit": 5}));
        assert_eq!(r.structured.unwrap()["entries"][0]["id"], 3);
        let r = ok(&s, "channel_read", json!({"since": 1}));
        assert_eq!(r.structured.unwrap()["entries"][0]["id"], 2);
        let r = ok(&s, "my_inbox", json!({"wait_seconds": "0"}));
        assert_eq!(r.structured.unwrap()["count"], 2);
        let r = ok(&s, "my_inbox_ack", json!({"until": "2"}));
        assert_eq!(r.structured.unwrap()["cursor"], 2);
        let r = ok(&s, "team_members", json!({"includeStatus": "true"}));
        assert!(r.structured.unwrap()["agents"].is_array());
        ok(&s, "team_members", json!({"includeStatus": "false"}));
        ok(&s, "team_members", json!({"includeStatus": true}));
        let r = ok(
            &s,
            "team_proposal_create",
            json!({"type": "decision", "title": "T", "id": "p1", "binding": "false",
                   "timeoutSeconds": "60", "options": ["a", {"id": "b", "label": "Bee"}]}),
        );
        let p = r.structured.unwrap();
        assert_eq!(
            p["options"][0]["label"], "a",
            "a bare option is its own label"
        );
        assert_eq!(p["options"][1]["label"], "Bee");
        // A label that is not a string falls back to the id.
        let r = ok(
            &s,
            "team_proposal_create",
            json!({"type": "decision", "title": "T", "id": "p2", "binding": true,
                   "options": [{"id": "x", "label": 5}, {"id": "y"}],
                   "resolution": {"type": "majority", "quorum": 1, "tieBreaker": null}}),
        );
        let p = r.structured.unwrap();
        assert_eq!(p["options"][0]["label"], "x");
        assert_eq!(p["options"][1]["label"], "y");
    }

    #[test]
    fn null_is_as_if_the_argument_were_not_given() {
        let d = tempfile::tempdir().unwrap();
        let s = caller(&d);
        let r = ok(
            &s,
            "channel_send",
            json!({"message": "hi", "wait_for": null, "wait_seconds": null}),
        );
        assert_eq!(r.structured.unwrap()["id"], 1);
        ok(&s, "channel_read", json!({"since": null, "limit": null}));
        ok(&s, "my_inbox", json!({"wait_seconds": null}));
        ok(&s, "team_members", json!({"includeStatus": null}));
        ok(
            &s,
            "my_status_set",
            json!({"state": null, "task": null, "metadata": null}),
        );
        ok(&s, "team_doc_write", json!({"content": "x", "file": null}));
        assert_eq!(ok(&s, "team_doc_read", json!({"file": null})).text, "x");
        ok(
            &s,
            "team_proposal_create",
            json!({"type": "approval", "title": "T", "options": null, "resolution": null,
                   "binding": null, "timeoutSeconds": null, "id": null, "description": null}),
        );
        ok(&s, "team_proposal_status", json!({"proposal": null}));
        assert_eq!(
            refused(&s, "channel_send", json!({"message": null})),
            "missing required parameter 'message'"
        );
        assert_eq!(
            refused(&s, "my_inbox_ack", json!({"until": null})),
            "missing required parameter 'until' (an entry id)"
        );
    }

    #[test]
    fn wait_takes_one_name_for_a_list() {
        let d = tempfile::tempdir().unwrap();
        let s = caller(&d);
        // Not one of the caller's workers either way: the list was read.
        let one = run(&s, "wait", json!({"agents": "bob", "timeout_seconds": "1"}));
        let list = run(&s, "wait", json!({"agents": ["bob"], "timeout_seconds": 1}));
        assert_eq!(
            one.map(|r| r.text).map_err(|e| e.to_string()),
            list.map(|r| r.text).map_err(|e| e.to_string())
        );
        assert_eq!(
            refused(&s, "wait", json!({})),
            "missing required parameter 'agents'"
        );
        assert_eq!(
            refused(&s, "wait", json!({"agents": [1]})),
            "'agents' must be an array of agent names"
        );
        assert_eq!(
            refused(&s, "wait", json!({"agents": 1})),
            "'agents' must be an array of agent names"
        );
    }

    #[test]
    fn a_wrong_type_names_the_argument() {
        let d = tempfile::tempdir().unwrap();
        let s = caller(&d);
        for (tool, a, want) in [
            (
                "channel_send",
                json!({"message": 42}),
                "'message' must be a string",
            ),
            (
                "channel_send",
                json!({"message": "m", "wait_for": true}),
                "'wait_for' must be a string",
            ),
            (
                "channel_read",
                json!({"limit": "many"}),
                "'limit' must be a non-negative integer (an entry id)",
            ),
            (
                "channel_read",
                json!({"limit": -1}),
                "'limit' must be a non-negative integer",
            ),
            (
                "channel_read",
                json!({"limit": "99999999999999999999999"}),
                "'limit' is out of range",
            ),
            (
                "channel_read",
                json!({"since": "yesterday"}),
                "'since' must be a non-negative integer (an entry id)",
            ),
            (
                "channel_read",
                json!({"since": "2024-13-01T00:00:00Z"}),
                "'since' is neither an entry id nor an ISO 8601 timestamp: 2024-13-01T00:00:00Z",
            ),
            (
                "team_members",
                json!({"includeStatus": 3}),
                "'includeStatus' must be true or false",
            ),
            (
                "team_members",
                json!({"includeStatus": "yes"}),
                "'includeStatus' must be true or false",
            ),
            (
                "team_vote",
                json!({"proposal": "p"}),
                "missing required parameter 'choice'",
            ),
            (
                "team_proposal_create",
                json!({"type": "decision", "title": "T", "options": "a,b"}),
                "'options' must be an array of {id, label}",
            ),
            (
                "team_proposal_create",
                json!({"type": "decision", "title": "T", "options": [1, 2]}),
                "options must be {id, label} objects",
            ),
            (
                "team_proposal_create",
                json!({"type": "decision", "title": "T", "options": [{"label": "A"}]}),
                "every option needs a string 'id'",
            ),
            (
                "team_proposal_create",
                json!({"type": "decision", "title": "T", "resolution": "majority"}),
                "'resolution' must be an object {type, quorum, tieBreaker}",
            ),
            (
                "team_proposal_create",
                json!({"type": "decision", "title": "T", "resolution": {"type": 1}}),
                "resolution.type must be a string",
            ),
            (
                "team_proposal_create",
                json!({"type": "decision", "title": "T", "resolution": {"quorum": -2}}),
                "resolution.quorum must be a positive integer",
            ),
        ] {
            assert_eq!(refused(&s, tool, a.clone()), want, "{tool} {a}");
        }
        assert_eq!(ok(&s, "channel_read", json!({})).text, "No entries.");
    }
}
