//! A file of the name index: the records of the agents whose names fall in one bucket.
//!
//! `_state/agents/B.json` (B in decimal, below the stamp's `buckets`, a power of two) is
//! one JSON object: for every agent whose name's FNV-1a hash (64 bits, of the name's UTF-8
//! bytes) is B modulo `buckets`, its name and its record as `agents.json` has it (the first
//! of that name), sorted by name, indented, with a final newline. A bucket of no agent has
//! no file. The number of buckets grows with the registry (about [`PER_BUCKET`] agents to
//! a file), so that a lookup reads one small file whatever the number of agents, and a
//! registry of 10,000 agents makes a few hundred files, not 10,000.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use super::agent::Agent;
use crate::state;

/// Agents per file the index aims at.
const PER_BUCKET: usize = 32;

/// The number of buckets for a registry of `n` agents: a power of two, at least one.
pub(super) fn count(n: usize) -> u32 {
    let n = n.div_ceil(PER_BUCKET).max(1).next_power_of_two();
    u32::try_from(n).unwrap_or(1 << 31)
}

/// The bucket of `name` among `buckets` (a power of two).
pub(super) fn of(name: &str, buckets: u32) -> u32 {
    let mask = u64::from(buckets.max(1) - 1);
    (crate::hash::fnv1a(name.as_bytes()) & mask) as u32
}

/// The name of the file of `bucket`.
pub(super) fn file_name(bucket: u32) -> String {
    format!("{bucket}.json")
}

/// The bucket a file's name says, if it is the name of a bucket's file, spelt as
/// [`file_name`] spells it.
pub(super) fn number(file: &str) -> Option<u32> {
    let n: u32 = file.strip_suffix(".json")?.parse().ok()?;
    (file_name(n) == file).then_some(n)
}

/// The bytes of a bucket's file holding `records` (name → record).
pub(super) fn encode(records: &BTreeMap<&str, &Agent>) -> Vec<u8> {
    state::encode(records)
}

/// What the file of `bucket` (among `buckets`), whose bytes are `bytes`, says of `name`:
/// its record, or none. `None` when the file is no such bucket's: not a JSON object of
/// records, a record under a name not its own, a name of another bucket, a name twice.
pub(super) fn find(bytes: &[u8], name: &str, bucket: u32, buckets: u32) -> Option<Option<Agent>> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let found = Find {
        name,
        bucket,
        buckets,
    }
    .deserialize(&mut de)
    .ok()?;
    de.end().ok()?;
    Some(found)
}

/// Reads a bucket's object, parsing the record of one name and skimming the others.
struct Find<'a> {
    name: &'a str,
    bucket: u32,
    buckets: u32,
}

impl<'de> DeserializeSeed<'de> for Find<'_> {
    type Value = Option<Agent>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<Agent>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Find<'_> {
    type Value = Option<Agent>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of agents' records by name")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Agent>, A::Error> {
        let mut found = None;
        let mut last: Option<String> = None;
        while let Some(key) = map.next_key::<String>()? {
            if of(&key, self.buckets) != self.bucket {
                return Err(de::Error::custom("a name of another bucket"));
            }
            // Sorted as written: a name twice, or out of order, is not aw's.
            if last.as_ref().is_some_and(|l| *l >= key) {
                return Err(de::Error::custom("names out of order"));
            }
            if key == self.name {
                let agent: Agent = map.next_value()?;
                if agent.name != key {
                    return Err(de::Error::custom("a record under a name not its own"));
                }
                found = Some(agent);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
            last = Some(key);
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str) -> Agent {
        Agent {
            name: name.to_string(),
            backend: "external".into(),
            ..Agent::default()
        }
    }

    #[test]
    fn the_count_of_buckets_grows_by_powers_of_two_with_the_agents() {
        assert_eq!(count(0), 1);
        assert_eq!(count(32), 1);
        assert_eq!(count(33), 2);
        assert_eq!(count(10_000), 512);
        assert_eq!(count(100_000), 4096);
        assert_eq!(of("anyone", 1), 0);
        // FNV-1a of "a": 0xaf63dc4c8601ec8c.
        assert_eq!(of("a", 512), 0x08c);
    }

    #[test]
    fn a_file_name_is_a_bucket_only_as_written() {
        assert_eq!(number("17.json"), Some(17));
        assert_eq!(number("0.json"), Some(0));
        for no in [
            "017.json",
            "+1.json",
            "1.json.tmp",
            "alice.json",
            ".json",
            "1",
        ] {
            assert_eq!(number(no), None, "{no}");
        }
    }

    #[test]
    fn a_bucket_gives_its_records_and_refuses_what_aw_never_writes() {
        let buckets = 1;
        let (a, b) = (agent("alice"), agent("bob"));
        let both = encode(&BTreeMap::from([("alice", &a), ("bob", &b)]));
        assert_eq!(find(&both, "bob", 0, buckets), Some(Some(b.clone())));
        assert_eq!(find(&both, "carol", 0, buckets), Some(None));
        // Bob's name over alice's record; out of order; cut short; not an object.
        let wrong = encode(&BTreeMap::from([("alice", &a), ("bob", &a)]));
        assert_eq!(find(&wrong, "bob", 0, buckets), None);
        let json = |a: &Agent| serde_json::to_string(a).unwrap();
        let swapped = format!("{{\"bob\":{},\"alice\":{}}}", json(&b), json(&a));
        assert_eq!(
            find(swapped.as_bytes(), "bob", 0, buckets),
            None,
            "{swapped}"
        );
        let twice = format!("{{\"bob\":{},\"bob\":{}}}", json(&b), json(&b));
        assert_eq!(find(twice.as_bytes(), "bob", 0, buckets), None, "{twice}");
        assert_eq!(find(&both[..both.len() / 2], "alice", 0, buckets), None);
        assert_eq!(find(b"[]", "alice", 0, buckets), None);
        // A name that belongs to another bucket of two.
        let other = 1 - of("alice", 2);
        assert_eq!(find(&both, "alice", other, 2), None);
    }
}
