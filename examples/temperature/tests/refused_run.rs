//! A refused `temperature run` leaves its data directory as it was: the
//! arguments are checked before anything is written, so a mistyped
//! `--devices` does not leave a `temperature.json` behind that makes every
//! later run in that directory refuse to resume.

use std::path::Path;
use std::process::{Command, Output};

fn temperature(args: &[&str], data: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_temperature"))
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .expect("run temperature")
}

/// The directory's entries, sorted (empty if it does not exist).
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

#[test]
fn refused_runs_write_nothing_and_a_valid_run_follows() {
    let temp = tempfile::tempdir().expect("temp dir");
    let fresh = temp.path().join("fresh");
    let existing = temp.path().join("existing");
    std::fs::create_dir(&existing).expect("create dir");
    std::fs::write(existing.join("notes.txt"), "kept").expect("write");
    let refusals: [(&[&str], &str); 3] = [
        (&["run", "--days", "1", "--devices", "8"], "--devices"),
        (&["run", "--days", "0", "--devices", "1"], "--days"),
        (&["run", "--days", "1", "--devices", "1", "--alerts-with", "/nonexistent/varve"], "--alerts-with"),
    ];
    for (args, named) in refusals {
        for dir in [&fresh, &existing] {
            let before = entries(dir);
            let out = temperature(args, dir);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{args:?} on {} was accepted", dir.display());
            assert!(stderr.contains(named), "{args:?}: the error names {named}: {stderr}");
            assert_eq!(entries(dir), before, "{args:?} changed {}", dir.display());
        }
    }
    assert!(!fresh.exists(), "a refused run does not create the data directory");
    let out = temperature(&["run", "--days", "1", "--devices", "1"], &existing);
    assert!(out.status.success(), "a valid run after refused ones: {}", String::from_utf8_lossy(&out.stderr));
}
