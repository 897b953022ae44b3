//! What the repair tests' applications share: their handlers' output is a
//! hash of every input, so a run whose inputs change writes different records.

/// FNV-1a over the parts: deterministic, and different inputs give different outputs.
pub fn hash(parts: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.to_le_bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// A record of the test applications: one `u64`, little-endian.
pub fn value(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().expect("8-byte records"))
}
