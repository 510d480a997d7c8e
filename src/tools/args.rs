//! Reading a tool call's arguments into the tool's typed argument struct: a JSON object
//! whose values the model may give loosely (a number as a string of digits, a boolean as
//! `"true"`, `null` for an argument not given). An argument the struct does not name is
//! refused with the near one; a wrong type is an invalid-argument error naming the argument.

use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, DeserializeOwned, Deserializer, Expected, Unexpected};
use serde::{Deserialize, forward_to_deserialize_any};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// A tool call's arguments, as they come.
pub type Args = Map<String, Value>;

/// Read `a`, the arguments of a call of `tool`, into its argument struct.
pub fn parse<T: DeserializeOwned>(tool: &str, a: &Args) -> Result<T> {
    T::deserialize(Node::Map(a)).map_err(|e| e.into_error(tool))
}

/// The JSON Schema of `T`'s arguments, for the model: an object schema, subschemas inline,
/// without the `null` that an optional argument may also be, descriptions on one line, and
/// `properties` and `required` even when empty.
pub fn schema<T: JsonSchema>() -> Value {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let mut v = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Value::Object(root) = &mut v {
        root.remove("title");
        root.remove("description");
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        root.entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
    }
    tidy(&mut v);
    v
}

/// Drop `null` from the types of `v` and its subschemas, and join descriptions' lines.
fn tidy(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(Value::Array(types)) = o.get_mut("type") {
                types.retain(|t| t != "null");
                if let [one] = types.as_slice() {
                    let one = one.clone();
                    o.insert("type".into(), one);
                }
            }
            if let Some(Value::String(d)) = o.get_mut("description") {
                *d = d.lines().map(str::trim).collect::<Vec<_>>().join(" ");
            }
            if let Some(Value::Array(e)) = o.get_mut("enum") {
                e.retain(|x| !x.is_null());
            }
            for (k, x) in o.iter_mut() {
                if k != "enum" && k != "required" {
                    tidy(x);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// Why arguments were refused, and where (`resolution.quorum` is `["resolution", "quorum"]`).
#[derive(Debug)]
pub struct ArgError {
    path: Vec<String>,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// A key the struct at `path` does not name; the names it does.
    Unknown {
        field: String,
        known: &'static [&'static str],
    },
    /// A required argument not given (or given as `null`): `field` below `path`, or `path`.
    Missing(Option<String>),
    /// What is wrong with the argument at `path`: "must be a string".
    Says(String),
    /// A message said as it is.
    Message(String),
}

impl ArgError {
    fn says(what: impl Into<String>) -> ArgError {
        ArgError {
            path: Vec::new(),
            kind: Kind::Says(what.into()),
        }
    }

    fn under(mut self, key: &str) -> ArgError {
        self.path.insert(0, key.to_string());
        self
    }

    fn name(&self, field: Option<&str>) -> String {
        let mut parts: Vec<&str> = self.path.iter().map(String::as_str).collect();
        parts.extend(field);
        crate::names::sanitize(&parts.join("."))
    }

    fn into_error(self, tool: &str) -> Error {
        Error::invalid(self.text(tool))
    }

    /// The message, for a call of `tool`.
    fn text(&self, tool: &str) -> String {
        match &self.kind {
            Kind::Unknown { field, known } => {
                let near = crate::suggest::suggestion(field, known.iter().copied());
                let list = match known.is_empty() {
                    true => "none".to_string(),
                    false => known.join(", "),
                };
                let of = match self.path.is_empty() {
                    true => String::new(),
                    false => format!(" of {}", self.name(None)),
                };
                format!(
                    "{tool}: unknown argument '{}'{near} (arguments{of}: {list}); nothing was done",
                    self.name(Some(field))
                )
            }
            Kind::Missing(field) => {
                format!(
                    "missing required parameter '{}'",
                    self.name(field.as_deref())
                )
            }
            Kind::Says(what) => format!("'{}' {what}", self.name(None)),
            Kind::Message(m) => m.clone(),
        }
    }
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text("arguments"))
    }
}

impl std::error::Error for ArgError {}

impl de::Error for ArgError {
    fn custom<T: fmt::Display>(msg: T) -> ArgError {
        ArgError {
            path: Vec::new(),
            kind: Kind::Message(msg.to_string()),
        }
    }

    fn invalid_type(unexp: Unexpected, exp: &dyn Expected) -> ArgError {
        match unexp {
            Unexpected::Unit => ArgError {
                path: Vec::new(),
                kind: Kind::Missing(None),
            },
            _ => ArgError::says(format!("must be {exp}")),
        }
    }

    /// `Unexpected::Other(what)` says what is wrong as it is ("is out of range").
    fn invalid_value(unexp: Unexpected, exp: &dyn Expected) -> ArgError {
        match unexp {
            Unexpected::Other(what) => ArgError::says(what),
            _ => ArgError::says(format!("must be {exp}")),
        }
    }

    fn unknown_field(field: &str, known: &'static [&'static str]) -> ArgError {
        ArgError {
            path: Vec::new(),
            kind: Kind::Unknown {
                field: field.to_string(),
                known,
            },
        }
    }

    fn missing_field(field: &'static str) -> ArgError {
        ArgError {
            path: Vec::new(),
            kind: Kind::Missing(Some(field.to_string())),
        }
    }
}

/// A value of the arguments, read by serde with [`ArgError`]s that name where it is.
#[derive(Clone, Copy)]
enum Node<'a> {
    Map(&'a Args),
    Value(&'a Value),
}

impl<'de> Deserializer<'de> for Node<'de> {
    type Error = ArgError;

    fn deserialize_any<V: de::Visitor<'de>>(self, v: V) -> Result<V::Value, ArgError> {
        let value = match self {
            Node::Map(m) => return v.visit_map(Entries::new(m)),
            Node::Value(value) => value,
        };
        match value {
            Value::Null => v.visit_unit(),
            Value::Bool(b) => v.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => v.visit_u64(u),
                (None, Some(i), _) => v.visit_i64(i),
                (None, None, f) => v.visit_f64(f.unwrap_or(f64::NAN)),
            },
            Value::String(s) => v.visit_borrowed_str(s),
            Value::Array(items) => v.visit_seq(Items(items.iter())),
            Value::Object(m) => v.visit_map(Entries::new(m)),
        }
    }

    fn deserialize_option<V: de::Visitor<'de>>(self, v: V) -> Result<V::Value, ArgError> {
        match self {
            Node::Value(Value::Null) => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

/// The entries of an object, each value's errors placed under its key.
struct Entries<'a> {
    entries: serde_json::map::Iter<'a>,
    key: &'a str,
    value: Option<&'a Value>,
}

impl<'a> Entries<'a> {
    fn new(m: &'a Args) -> Entries<'a> {
        Entries {
            entries: m.iter(),
            key: "",
            value: None,
        }
    }
}

impl<'de> de::MapAccess<'de> for Entries<'de> {
    type Error = ArgError;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ArgError> {
        let Some((k, v)) = self.entries.next() else {
            return Ok(None);
        };
        self.key = k;
        self.value = Some(v);
        seed.deserialize(de::value::BorrowedStrDeserializer::new(k))
            .map(Some)
    }

    fn next_value_seed<S: de::DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, ArgError> {
        let value = self.value.take().expect("a key before its value");
        seed.deserialize(Node::Value(value))
            .map_err(|e| e.under(self.key))
    }
}

/// The items of an array: an error in one is the array's.
struct Items<'a>(std::slice::Iter<'a, Value>);

impl<'de> de::SeqAccess<'de> for Items<'de> {
    type Error = ArgError;

    fn next_element_seed<S: de::DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, ArgError> {
        self.0
            .next()
            .map(|v| seed.deserialize(Node::Value(v)))
            .transpose()
    }
}

/// The error that the argument given as `v` must be `what`: a missing argument when `v` is
/// `null`.
pub fn must<E: de::Error>(v: &Value, what: &'static str) -> E {
    match v {
        Value::Null => E::invalid_type(Unexpected::Unit, &what),
        _ => E::invalid_type(Unexpected::Other("value"), &what),
    }
}

/// The error that the argument `says` something: "is out of range".
pub fn says<E: de::Error>(says: &'static str) -> E {
    E::invalid_value(Unexpected::Other(says), &"")
}

/// A non-negative integer given as a JSON number or a string of digits; else the argument
/// must be `what`.
pub fn uint<E: de::Error>(v: &Value, what: &'static str) -> Result<u64, E> {
    match v {
        Value::Number(n) => n.as_u64().ok_or_else(|| must(v, "a non-negative integer")),
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse().map_err(|_| says("is out of range"))
        }
        _ => Err(must(v, what)),
    }
}

/// Loose argument types: how each is read and its JSON Schema.
macro_rules! loose {
    ($(#[$doc:meta])* $name:ident($t:ty), $schema:tt, |$v:ident| $read:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub $t);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let $v = Value::deserialize(d)?;
                let $v = &$v;
                $read.map($name)
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!($schema)
            }
        }
    };
}

loose!(
    /// A count or a number of seconds: a non-negative integer, as a JSON number or a string of
    /// digits.
    Uint(u64),
    {"type": "integer", "minimum": 0},
    |v| uint(v, "a non-negative integer")
);

loose!(
    /// An entry id: a non-negative integer, as a JSON number or a string of digits.
    EntryId(u64),
    {"type": ["integer", "string"]},
    |v| uint(v, "a non-negative integer (an entry id)")
);

loose!(
    /// A whole number of at least 1, as a JSON number or a string of digits.
    Whole(u64),
    {"type": "integer", "minimum": 1},
    |v| {
        let n = match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        };
        n.filter(|&n| n >= 1)
            .ok_or_else(|| must(v, "a whole number of at least 1"))
    }
);

loose!(
    /// A boolean, as a JSON boolean or the string `"true"` or `"false"`.
    Flag(bool),
    {"type": "boolean"},
    |v| match v {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s == "true" || s == "false" => Ok(s == "true"),
        _ => Err(must(v, "true or false")),
    }
);

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
            "missing required parameter 'until'"
        );
    }

    #[test]
    fn an_unknown_argument_is_refused_at_any_depth_with_the_near_one() {
        let d = tempfile::tempdir().unwrap();
        let s = caller(&d);
        for (tool, a, want) in [
            (
                "channel_send",
                json!({"message": "@bob hi", "wiat_for": "bob"}),
                "channel_send: unknown argument 'wiat_for' (did you mean 'wait_for'?) \
                 (arguments: message, wait_for, wait_seconds); nothing was done",
            ),
            (
                "team_doc_list",
                json!({"pattern": null}),
                "team_doc_list: unknown argument 'pattern' (arguments: none); nothing was done",
            ),
            (
                "team_proposal_create",
                json!({"type": "decision", "title": "T", "resolution": {"quorom": 2}}),
                "team_proposal_create: unknown argument 'resolution.quorom' (did you mean \
                 'quorum'?) (arguments of resolution: type, quorum, tieBreaker); nothing was done",
            ),
            (
                "team_proposal_create",
                json!({"type": "decision", "title": "T", "options": [{"id": "a", "lable": "A"}]}),
                "team_proposal_create: unknown argument 'options.lable' (did you mean 'label'?) \
                 (arguments of options: id, label); nothing was done",
            ),
        ] {
            assert_eq!(refused(&s, tool, a.clone()), want, "{tool} {a}");
        }
        assert!(ok(&s, "channel_read", json!({})).text == "No entries.");
        assert_eq!(
            ok(&s, "team_proposal_status", json!({})).text,
            "No active proposals."
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
                "'limit' must be a non-negative integer",
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
                "'resolution.type' must be a string",
            ),
            (
                "team_proposal_create",
                json!({"type": "decision", "title": "T", "resolution": {"quorum": -2}}),
                "'resolution.quorum' must be a non-negative integer",
            ),
        ] {
            assert_eq!(refused(&s, tool, a.clone()), want, "{tool} {a}");
        }
        assert_eq!(ok(&s, "channel_read", json!({})).text, "No entries.");
    }
}
