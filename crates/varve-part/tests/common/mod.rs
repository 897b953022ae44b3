//! Helpers shared by the integration tests of this crate.

/// The seed of a randomized test: `VARVE_SEED` when set (to replay a
/// failure), else fresh from the clock. Callers print it.
pub fn seed_from_env() -> u64 {
    std::env::var("VARVE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            u64::from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .expect("clock")
                    .subsec_nanos(),
            )
        })
}
