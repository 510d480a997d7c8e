//! The events a workflow's hooks are named for, and one event as its hook is given it: a
//! JSON object on stdin, and the same fields as `AW_*` variables in the environment.

use serde_json::{Map, Value};

crate::keyword_enum! {
    /// What happened: the keys of `hooks:` in a workflow, and the `event` field of what a
    /// hook is given.
    pub enum Kind {
        /// An agent's run ended and nothing is due for it.
        Idle = "on_idle",
        /// A run of an agent ended, ok or failed.
        RunEnd = "on_run_end",
        /// A card of the board that a run started from is done.
        CardDone = "on_card_done",
        /// A merge request reached merged, conflict or failed.
        Merge = "on_merge",
        /// A budget was passed: every agent stops.
        Budget = "on_budget",
        /// An approval was asked.
        Approval = "on_approval",
        /// The instance went quiet: no run due, nothing running.
        Quiet = "on_quiet",
    }
}

impl Kind {
    /// Whether exit 2 of its hook is a "not yet" posted to the event's agent, so that it
    /// runs again; for the others it is posted as it is (it wakes whom it mentions).
    pub fn for_an_agent(self) -> bool {
        matches!(
            self,
            Kind::Idle | Kind::RunEnd | Kind::CardDone | Kind::Merge
        )
    }
}

/// One event: its kind, and its fields in order (`event`, `instance`, `time` first).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: Kind,
    fields: Map<String, Value>,
}

impl Event {
    /// An event of `kind` in `instance`, now.
    pub fn new(kind: Kind, instance: &str) -> Event {
        let mut fields = Map::new();
        fields.insert("event".into(), kind.name().into());
        fields.insert("instance".into(), instance.into());
        fields.insert("time".into(), crate::time::now().into());
        Event { kind, fields }
    }

    /// With field `key` set to `value` (a `null` leaves it out).
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Event {
        match value.into() {
            Value::Null => {}
            v => {
                self.fields.insert(key.to_string(), v);
            }
        }
        self
    }

    /// A field, when it is set.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// The agent it is about, when there is one.
    pub fn agent(&self) -> Option<&str> {
        self.fields.get("agent").and_then(Value::as_str)
    }

    /// The JSON object, on one line.
    pub fn json(&self) -> String {
        Value::Object(self.fields.clone()).to_string()
    }

    /// The fields as environment variables: `AW_` and the key in capitals; a list is its
    /// items joined by commas, a string as it is, a number or a boolean as JSON writes it.
    pub fn env(&self) -> Vec<(String, String)> {
        self.fields
            .iter()
            .map(|(k, v)| (format!("AW_{}", k.to_ascii_uppercase()), plain(v)))
            .collect()
    }
}

/// A value as an environment variable holds it.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip() {
        crate::keyword::assert_round_trips(Kind::ALL, |k| k.name(), Kind::from_name);
    }

    #[test]
    fn an_event_is_the_same_fields_as_json_and_as_environment() {
        let ev = Event::new(Kind::RunEnd, "demo")
            .with("agent", "coder")
            .with("run", 3)
            .with("card", Value::Null)
            .with("by", vec!["ann", "bob"]);
        let json: Value = serde_json::from_str(&ev.json()).unwrap();
        assert_eq!(json["event"], "on_run_end");
        assert_eq!(json["agent"], "coder");
        assert_eq!(json["run"], 3);
        assert!(json.get("card").is_none());
        let env = ev.env();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("AW_EVENT"), Some("on_run_end"));
        assert_eq!(get("AW_INSTANCE"), Some("demo"));
        assert_eq!(get("AW_RUN"), Some("3"));
        assert_eq!(get("AW_BY"), Some("ann,bob"));
        assert_eq!(get("AW_CARD"), None);
        assert_eq!(ev.agent(), Some("coder"));
    }
}
