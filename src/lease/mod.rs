//! Leases on files of the work tree: who is editing which paths, until when, and why.

pub mod glob;
