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
