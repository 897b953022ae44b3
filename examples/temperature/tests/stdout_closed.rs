//! `temperature … | head`: when the reader of stdout goes away, the program
//! ends quietly with status 0 (as Unix tools do), not with a panic (a
//! closed pipe used to panic `println!`, status 101).

use std::process::{Command, Stdio};

#[test]
fn a_closed_stdout_ends_the_program_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let bin = env!("CARGO_BIN_EXE_temperature");
    let run = Command::new(bin).args(["run", "--days", "1", "--data"]).arg(&data).output().expect("run");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    // stdout is a pipe whose read end is closed before the program writes.
    let mut child = Command::new(bin)
        .args(["check", "--data"])
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("check");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "status {:?}: {stderr}", out.status.code());
}
