//! The seed of a randomized test. Every Varve test that draws random inputs
//! or kill times takes its seed from [`SEED_VAR`] when it is set, and prints
//! the seed it used (with [`replay_hint`]) so a failure can be replayed
//! exactly: `VARVE_SEED=1234 cargo test -p … --test …`.

/// The variable that fixes the seed of a randomized test.
pub const SEED_VAR: &str = "VARVE_SEED";

/// An older name of [`SEED_VAR`], still read (after it) so seeds printed by
/// earlier versions of the crash loops replay.
pub const SEED_VAR_ALIAS: &str = "VARVE_TEST_SEED";

/// The seed in [`SEED_VAR`] (or [`SEED_VAR_ALIAS`]), if one is set.
///
/// Panics if the variable is set but is not a number: a replay that silently
/// ran another seed would mislead.
#[must_use]
pub fn from_env() -> Option<u64> {
    [SEED_VAR, SEED_VAR_ALIAS].into_iter().find_map(|name| {
        let value = std::env::var(name).ok()?;
        Some(value.trim().parse().unwrap_or_else(|_| panic!("{name}={value:?} is not a seed (a u64)")))
    })
}

/// The seed in [`SEED_VAR`], else a fresh one from the clock. Callers print
/// it (see [`replay_hint`]).
#[must_use]
pub fn from_env_or_clock() -> u64 {
    from_env().unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("the clock is after 1970");
        u64::from(now.subsec_nanos()) ^ now.as_secs().rotate_left(32)
    })
}

/// `replay with VARVE_SEED=<seed>`, for the line a test prints first.
#[must_use]
pub fn replay_hint(seed: u64) -> String {
    format!("replay with {SEED_VAR}={seed}")
}
