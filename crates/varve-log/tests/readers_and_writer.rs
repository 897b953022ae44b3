//! Readers in other processes never report damage that is not there: a
//! writer process appends records of 0 B to 1 MiB (large ones written with
//! `pwrite`, small ones copied into the mapped segment) under each sync
//! policy, while reader processes tail, read the latest record with a fresh
//! open each time (loading the index checkpoints the writer saves as it
//! writes, and reading on from there), and scan — and check every byte they read.
//!
//! `VARVE_TEST_SEED=S` replays a run; `VARVE_STRESS_SECONDS` runs longer.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};

const ROLE: &str = env!("CARGO_BIN_EXE_varve-log-stress-role");

fn seed() -> u64 {
    std::env::var("VARVE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs())
}

fn spawn(args: &[&str]) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(ROLE).args(args).stdout(Stdio::piped()).spawn().expect("spawn");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    (child, stdout)
}

fn finish(name: &str, mut child: Child, mut stdout: BufReader<ChildStdout>, seed: u64) -> String {
    let mut out = String::new();
    stdout.read_to_string(&mut out).expect("read");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{name} failed (seed {seed}): {out}");
    out
}

#[test]
fn readers_in_other_processes_never_see_a_frame_in_flight_as_damage() {
    let seed = seed();
    let seconds = std::env::var("VARVE_STRESS_SECONDS").unwrap_or_else(|_| "3".into());
    println!("seed {seed}, {seconds} s per sync policy");
    let mut opens_from_checkpoints = 0;
    for sync in ["never", "group", "always"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().to_str().expect("utf-8 path");
        let seed_text = seed.to_string();
        let (writer, mut writer_out) = spawn(&["writer", path, &seed_text, sync, &seconds]);
        let mut line = String::new();
        writer_out.read_line(&mut line).expect("read");
        assert_eq!(line.trim(), "ready", "the writer started (seed {seed})");
        let readers: Vec<_> = ["tail", "latest", "scan"]
            .into_iter()
            .map(|mode| (mode, spawn(&["reader", mode, path, &seed_text, &seconds])))
            .collect();
        let done = finish("writer", writer, writer_out, seed);
        let appended: u64 = done.trim().strip_prefix("done ").and_then(|n| n.parse().ok()).expect("done N");
        assert!(appended > 10, "{sync}: the writer appended {appended} records");
        for (mode, (child, out)) in readers {
            let out = finish(mode, child, out, seed);
            let counts: Vec<u64> = out
                .trim()
                .strip_prefix("ok ")
                .map(|n| n.split(' ').filter_map(|n| n.parse().ok()).collect())
                .expect("ok CHECKED LOADED");
            let (checked, loaded) = (counts[0], counts[1]);
            assert!(checked > 0, "{sync}/{mode}: read nothing (seed {seed})");
            opens_from_checkpoints += loaded;
            println!("{sync}/{mode}: {checked} records checked of {appended}, {loaded} opens loaded a checkpoint");
        }
    }
    assert!(opens_from_checkpoints > 0, "no fresh open loaded a checkpoint the writer saved (seed {seed})");
}
