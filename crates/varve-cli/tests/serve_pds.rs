//! `PEDaLS` with several clients (the seed's "multiple clients" promise): two
//! processes update the same sorted map through one `varve serve` at once.
//! Each update that loses the race for a version completes the winner's and
//! is planned again; every committed version is readable by both.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use serde_json::Value;

use common::Env;

const UPDATES_PER_WRITER: usize = 40;

fn varve(uri: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_varve"));
    command.arg("--store").arg(uri).arg("--json").args(args).env_remove("VARVE_DATA");
    command
}

fn json_lines(out: &std::process::Output, what: &str) -> Vec<Value> {
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect()
}

#[test]
fn two_processes_update_one_map_through_one_server() {
    let env = Env::new();
    let served = env.serve(&[]);
    let writers: Vec<_> = ["a", "b"]
        .iter()
        .map(|who| {
            let pairs: Vec<String> = (1..=UPDATES_PER_WRITER).map(|i| format!("{who}{i:02}={who}-value-{i}")).collect();
            let mut args = vec!["map", "put", "shared"];
            args.extend(pairs.iter().map(String::as_str));
            varve(&served.uri, &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn writer")
        })
        .collect();
    // version -> the key its update set, from both writers' answers.
    let mut committed: BTreeMap<u64, String> = BTreeMap::new();
    for (writer, child) in ["a", "b"].iter().zip(writers) {
        let out = child.wait_with_output().expect("writer ran");
        let answers = json_lines(&out, &format!("writer {writer}"));
        assert_eq!(answers.len(), UPDATES_PER_WRITER, "writer {writer} answered every update");
        let versions: Vec<u64> = answers.iter().map(|a| a["version"].as_u64().expect("version")).collect();
        assert!(versions.windows(2).all(|w| w[0] < w[1]), "writer {writer}'s versions rise: {versions:?}");
        println!("writer {writer} committed versions {versions:?}");
        for answer in answers {
            let key = answer["key"].as_str().expect("key").to_owned();
            let version = answer["version"].as_u64().expect("version");
            assert!(committed.insert(version, key).is_none(), "version {version} was committed twice");
        }
    }
    let total = (2 * UPDATES_PER_WRITER) as u64;
    assert_eq!(committed.keys().copied().collect::<Vec<_>>(), (1..=total).collect::<Vec<_>>(), "dense versions");

    // Every version, read by a third process: exactly the keys committed up to it.
    for version in [1, 2, total / 3, total / 2, total - 1, total] {
        let out = varve(&served.uri, &["map", "ls", "shared", "--at", &version.to_string()]).output().expect("ls");
        let listing = &json_lines(&out, "map ls")[0];
        let keys: Vec<&str> =
            listing["entries"].as_array().expect("entries").iter().map(|e| e[0].as_str().expect("key")).collect();
        let mut expected: Vec<&str> = committed.range(..=version).map(|(_, key)| key.as_str()).collect();
        expected.sort_unstable();
        assert_eq!(keys, expected, "map at version {version}");
    }
    // Each writer's own updates read back at their versions, from the other writer's side too.
    for (&version, key) in committed.iter().step_by(7) {
        let out =
            varve(&served.uri, &["map", "get", "shared", key, "--at", &version.to_string()]).output().expect("get");
        let value = &json_lines(&out, "map get")[0]["value"];
        let (who, i) = key.split_at(1);
        assert_eq!(value.as_str(), Some(format!("{who}-value-{}", i.trim_start_matches('0')).as_str()));
        if version > 1 {
            let before = varve(&served.uri, &["map", "get", "shared", key, "--at", &(version - 1).to_string()])
                .output()
                .expect("get before");
            assert!(!before.status.success(), "{key} is absent before version {version}");
        }
    }
}

/// `varve set`, `varve map versions|diff` work through the server as on an
/// embedded store; `varve part` refuses a shared store with one line.
#[test]
fn sets_versions_and_diffs_through_the_server() {
    let env = Env::new();
    let served = env.serve(&[]);
    let run = |args: &[&str]| {
        let out = varve(&served.uri, args).output().expect("run varve");
        json_lines(&out, &args.join(" "))
    };
    run(&["set", "add", "tags", "red", "green"]);
    run(&["set", "rm", "tags", "red"]);
    assert_eq!(run(&["set", "has", "tags", "red", "--at", "2"])[0]["present"], true);
    assert_eq!(run(&["set", "ls", "tags"])[0]["entries"], serde_json::json!(["green"]));
    assert_eq!(run(&["set", "diff", "tags", "2", "3"])[0]["removed"], serde_json::json!(["red"]));
    run(&["map", "put", "m", "a=1"]);
    run(&["map", "put", "m", "a=2"]);
    assert_eq!(run(&["map", "versions", "m"])[0]["versions"][1]["value"], "2");
    assert_eq!(run(&["map", "diff", "m", "1", "2"])[0]["changed"][0]["old"], "1");
    let out = varve(&served.uri, &["part", "put", "p", "a=1"]).output().expect("run varve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`varve part` works on an embedded store"), "{stderr}");
}
