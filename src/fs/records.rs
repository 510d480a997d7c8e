//! Folders of numbered JSON records, `<folder>/<id>.json`, each holding its own id: the
//! cards of the board, approval requests, merge requests. Reading one by id, reading them
//! all, and reading an id as a user gives it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// A record of such a folder.
pub trait Record: DeserializeOwned {
    /// What it is called in messages: `card`, `approval`.
    const NOUN: &'static str;
    /// What a file of it must be to be valid: `card`, `approval request`.
    const VALID: &'static str;
    /// An id to show as an example.
    const EXAMPLE: u64;

    /// The id it holds.
    fn id(&self) -> u64;
}

/// The file of record `id` in `folder`.
pub fn path(folder: &Path, id: u64) -> PathBuf {
    folder.join(format!("{id}.json"))
}

/// Read the id of a `T` as a user gives it (`7`, or `#7`); 65 when it is none.
pub fn parse_id<T: Record>(text: &str) -> Result<u64> {
    let t = text.trim().trim_start_matches('#');
    match t.parse::<u64>() {
        Ok(n) if n > 0 && t.chars().all(|c| c.is_ascii_digit()) => Ok(n),
        _ => Err(Error::invalid(format!(
            "{} id '{}': expected a number such as {}",
            T::NOUN,
            crate::names::sanitize(text),
            T::EXAMPLE
        ))),
    }
}

/// Record `id` of `folder`, as stored; `None` when there is no such file, corrupt when it
/// is not a valid `T` or holds another id.
pub fn read<T: Record>(folder: &Path, id: u64) -> Result<Option<T>> {
    let p = path(folder, id);
    let bytes = match crate::fs::owned::read_fresh(&p) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&p, e)),
    };
    let r = serde_json::from_slice::<T>(&bytes).map_err(|e| Error::Corrupt {
        path: p.clone(),
        why: format!("not a valid {}: {e}", T::VALID),
    })?;
    match r.id() == id {
        true => Ok(Some(r)),
        false => Err(Error::Corrupt {
            path: p,
            why: format!("holds {} {}", T::NOUN, r.id()),
        }),
    }
}

/// Every record of `folder`, by id, as stored (none when the folder is not there); files
/// not named by an id are not records.
pub fn read_all<T: Record>(folder: &Path) -> Result<BTreeMap<u64, T>> {
    let names = match crate::fs::owned::files(folder) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(Error::io(folder, e)),
    };
    let mut all = BTreeMap::new();
    for n in names {
        let Some(id) = n
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| parse_id::<T>(n).ok())
        else {
            continue;
        };
        if let Some(r) = read(folder, id)? {
            all.insert(id, r);
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Note {
        id: u64,
        text: String,
    }

    impl Record for Note {
        const NOUN: &'static str = "note";
        const VALID: &'static str = "note file";
        const EXAMPLE: u64 = 4;

        fn id(&self) -> u64 {
            self.id
        }
    }

    #[test]
    fn records_are_read_by_id_or_all_and_a_wrong_file_is_corrupt() {
        assert_eq!(parse_id::<Note>(" #12 ").unwrap(), 12);
        for bad in ["0", "+3", "x", "", "1.5"] {
            let e = parse_id::<Note>(bad).unwrap_err();
            assert_eq!(e.exit_code(), 65, "{bad}");
            assert!(
                e.to_string().ends_with("': expected a number such as 4"),
                "{e}"
            );
        }
        let d = tempfile::tempdir().unwrap();
        let folder = d.path().join("notes");
        assert!(read_all::<Note>(&folder).unwrap().is_empty());
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(path(&folder, 1), r#"{"id": 1, "text": "a"}"#).unwrap();
        std::fs::write(path(&folder, 2), r#"{"id": 2, "text": "b"}"#).unwrap();
        std::fs::write(folder.join(".lock"), "").unwrap();
        std::fs::write(folder.join("2.json.tmp"), "").unwrap();
        let all = read_all::<Note>(&folder).unwrap();
        assert_eq!(all.keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(all[&2].text, "b");
        assert_eq!(read::<Note>(&folder, 3).unwrap(), None);
        std::fs::write(path(&folder, 3), r#"{"id": 1, "text": "c"}"#).unwrap();
        let e = read::<Note>(&folder, 3).unwrap_err();
        assert!(e.to_string().contains("holds note 1"), "{e}");
        std::fs::write(path(&folder, 3), "{").unwrap();
        let e = read_all::<Note>(&folder).unwrap_err();
        assert!(e.to_string().contains("not a valid note file"), "{e}");
    }
}
