//! The deterministic workload of the PEDaLS crash loop, shared by the child
//! (`tests/bin/crash_writer.rs`) and the test (`tests/crash_loop.rs`): the
//! value version `version` of run `seed` inserts, or deletes if present.

/// The value of version `version` of run `seed`, in 1..=40 (so deletes are common).
pub fn value_for(seed: u64, version: u64) -> u64 {
    let mut x = seed ^ version.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    x % 40 + 1
}
