//! Manifests: a good one starts a runtime; malformed ones fail before
//! anything starts, naming the line.

mod common;

use common::{memory_ns, IDLE};
use varve_log::SyncPolicy;
use varve_runtime::{Builtins, Manifest, RuntimeError};

const GOOD: &str = r#"
[runtime]
namespace = "app"
concurrency = 2
sync = "group"
group_commit_delay_ms = 3
events_keep = 5000
events_keep_for = "7d 12h"

[[log]]
name = "readings"
keep = 100
on_full = "overwrite"

[[log]]
name = "copies"

[[topic]]
name = "alerts"

[[handler]]
name = "copy"
log = "readings"
builtin = "copy"
attempts = 2

[[handler]]
name = "shout"
topic = "alerts"
command = ["sh", "-c", "cat >/dev/null"]
timeout_ms = 0
"#;

#[test]
fn a_good_manifest_builds_a_runtime() {
    let manifest = Manifest::parse(GOOD, None).unwrap();
    assert_eq!(manifest.namespace, "app");
    assert_eq!(manifest.sync, SyncPolicy::Group(std::time::Duration::from_millis(3)));
    assert_eq!(manifest.handlers[1].retry.timeout, None);
    let options = manifest.options();
    assert_eq!((options.concurrency, options.events_keep), (2, Some(5000)));
    assert_eq!(options.events_keep_for, Some(std::time::Duration::from_secs(7 * 86_400 + 12 * 3_600)));
    let builtins = Builtins::new().with("copy", |ctx| {
        ctx.append("copies", ctx.record())?;
        Ok(())
    });
    let rt = manifest.builder(memory_ns("app"), &builtins).unwrap().start().unwrap();
    rt.append("readings", b"1").unwrap();
    rt.publish("alerts", b"!").unwrap();
    assert!(rt.wait_idle(IDLE));
    assert_eq!(&rt.get("copies", 1).unwrap()[..], b"1");
    assert!(rt.subscriptions()["alerts"].contains("shout"));
}

fn error_of(text: &str) -> String {
    match Manifest::parse(text, Some(std::path::Path::new("APP.toml"))) {
        Ok(_) => panic!("should not parse:\n{text}"),
        Err(e) => {
            assert!(matches!(e, RuntimeError::Manifest { .. }));
            e.to_string()
        }
    }
}

#[test]
fn malformed_manifests_are_rejected_with_the_line() {
    let cases: &[(&str, &str)] = &[
        ("[runtime]\nnamspace = \"x\"\n", "APP.toml:2: unknown field `namspace`"),
        ("[runtime]\nconcurrency = 0\n", "APP.toml:2: runtime.concurrency must be between 1"),
        ("[runtime]\nsync = \"sometimes\"\n", "APP.toml:2: runtime.sync is \"sometimes\""),
        (
            "[runtime]\nevents_keep_for = \"a week\"\n",
            "APP.toml:2: runtime.events_keep_for is \"a week\", not a duration",
        ),
        ("[runtime]\nevents_keep_for = \"0s\"\n", "APP.toml:2: runtime.events_keep_for must be longer than 0"),
        ("[[log]]\nname = \"_x\"\n", "APP.toml:2: log name: invalid name"),
        ("[[log]]\nname = \"a\"\n[[log]]\nname = \"a\"\n", "APP.toml:4: log \"a\" is declared twice"),
        ("[[log]]\nname = \"a\"\nkeep = 0\n", "APP.toml:3: keep must be at least 1"),
        (
            "[[log]]\nname = \"a\"\n\n[[handler]]\nname = \"h\"\nlog = \"b\"\nbuiltin = \"x\"\n",
            "APP.toml:6: handler \"h\" subscribes to \"b\", which is not declared",
        ),
        (
            "[[log]]\nname = \"a\"\n[[handler]]\nname = \"h\"\nlog = \"a\"\ncommand = [\"no-such-program-varve\"]\n",
            "APP.toml:6: handler \"h\": command \"no-such-program-varve\" is not an executable",
        ),
        ("[[log]]\nname = \"a\"\n[[handler]]\nname = \"h\"\nlog = \"a\"\n", "APP.toml:4: handler \"h\" needs command"),
        (
            "[[log]]\nname = \"a\"\n[[handler]]\nname = \"h\"\nlog = \"a\"\nbuiltin = \"x\"\nretries = 3\n",
            "APP.toml:7: unknown field `retries`",
        ),
        ("[[log]\nname = \"a\"\n", "APP.toml:1:"),
    ];
    for (text, expected) in cases {
        let error = error_of(text);
        assert!(error.starts_with(expected), "for\n{text}\nexpected {expected:?}\ngot      {error:?}");
    }
}

#[test]
fn an_unknown_builtin_is_rejected_before_start() {
    let text = "[[log]]\nname = \"a\"\n[[handler]]\nname = \"h\"\nlog = \"a\"\nbuiltin = \"nope\"\n";
    let manifest = Manifest::parse(text, None).unwrap();
    let builtins = Builtins::new().with("noop", |_| Ok(()));
    let Err(error) = manifest.builder(memory_ns("b"), &builtins) else { panic!("must fail") };
    assert_eq!(
        error.to_string(),
        "manifest:4: handler \"h\": builtin \"nope\" is not offered by this program (offered: noop)"
    );
}
