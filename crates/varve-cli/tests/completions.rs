//! `varve completions SHELL`: the script each shell loads, checked by the
//! shell itself where it is installed (bash always is here).

use std::process::Command;

const VARVE: &str = env!("CARGO_BIN_EXE_varve");

fn script(shell: &str) -> String {
    let out = Command::new(VARVE).args(["completions", shell]).output().expect("run varve");
    assert!(out.status.success(), "{shell}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 script")
}

/// Bash, given the script, completes subcommands and options as a user
/// pressing Tab would see them.
#[test]
fn bash_completes_commands_and_options() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("varve.bash");
    std::fs::write(&path, script("bash")).expect("write script");
    let complete = |words: &[&str]| -> Vec<String> {
        let line = words.join(" ");
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let program = format!(
            "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT={}; \
             _varve varve '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            path.display(),
            quoted.join(" "),
            words.len() - 1,
            line.len(),
            words[words.len() - 1],
            words[words.len().saturating_sub(2)],
        );
        let out = Command::new("bash").args(["--norc", "-c", &program]).output().expect("run bash");
        assert!(out.status.success(), "bash: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8").lines().map(str::to_owned).collect()
    };
    assert_eq!(complete(&["varve", "lo"]), ["log"]);
    assert_eq!(complete(&["varve", "log", "app"]), ["append"]);
    let pds = complete(&["varve", "pds", ""]);
    for command in ["gen", "run", "demo"] {
        assert!(pds.iter().any(|c| c == command), "varve pds <Tab> offers {command}: {pds:?}");
    }
    let set = complete(&["varve", "set", ""]);
    for command in ["add", "rm", "has", "ls", "versions", "diff"] {
        assert!(set.iter().any(|c| c == command), "varve set <Tab> offers {command}: {set:?}");
    }
    let part = complete(&["varve", "part", ""]);
    for command in ["put", "rm", "get", "scan", "checkpoint", "info"] {
        assert!(part.iter().any(|c| c == command), "varve part <Tab> offers {command}: {part:?}");
    }
    assert!(complete(&["varve", "map", ""]).iter().any(|c| c == "versions"), "varve map <Tab> offers versions");
    assert_eq!(complete(&["varve", "completions", "fi"]), ["fish"]);
    assert!(complete(&["varve", "log", "scan", "--"]).iter().any(|c| c == "--json"), "global options complete too");
}

#[test]
fn every_shell_gets_a_script_naming_the_commands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let text = script(shell);
        for command in ["log", "map", "set", "part", "pds", "serve", "nats", "completions"] {
            assert!(text.contains(command), "{shell} script lacks {command}");
        }
    }
    let out = Command::new(VARVE).args(["completions", "tcsh"]).output().expect("run varve");
    assert_eq!(out.status.code(), Some(2), "an unknown shell is a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"), "it lists the shells");
}
