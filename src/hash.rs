//! A small checksum every layer may use.

/// FNV-1a, 64 bits: cheap, and enough to tell a torn or zero-filled body from a whole one.
pub fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}
