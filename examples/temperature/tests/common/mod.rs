//! What the example's tests share: running the `temperature` binary.

use std::process::Command;

/// Run `temperature ARGS`; its stdout. Panics with its output if it fails.
pub fn temperature(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_temperature")).args(args).output().expect("run temperature");
    assert!(
        output.status.success(),
        "temperature {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
