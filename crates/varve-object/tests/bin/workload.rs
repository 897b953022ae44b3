//! The crash loop's deterministic workload, shared by the child and the test.

/// The value of step `step` (1-based): a 4 KiB document edited a little at
/// every step, so most versions are stored as deltas.
pub fn value_for(seed: u64, step: u64) -> Vec<u8> {
    let mut doc: Vec<u8> =
        (0..4096u64).map(|i| b"the quick brown fox jumps over the lazy dog\n"[(i % 44) as usize]).collect();
    let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
    for s in 0..=step {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let at = usize::try_from((x >> 33) % 4096).expect("fits");
        doc[at] = b'A' + u8::try_from(s % 26).expect("fits");
    }
    doc.extend_from_slice(&step.to_le_bytes());
    doc
}

/// What step `step` does, given how many versions exist: `None` extends the
/// newest version, `Some(i)` branches from version `i` (in store order).
pub fn base_choice(step: u64, existing: usize) -> Option<usize> {
    (step.is_multiple_of(7) && existing > 2).then(|| usize::try_from(step * 31).expect("fits") % existing)
}
