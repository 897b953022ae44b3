//! Running the example binaries as a user would.

use std::path::Path;
use std::process::Command;

/// What a run printed and how it ended.
pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Run `bin --store STORE ARGS…`; panics (fails the test) if the binary panicked.
pub fn run(bin: &str, store: &Path, args: &[&str]) -> Output {
    let out = Command::new(bin).arg("--store").arg(store).args(args).output().expect("run the binary");
    let output = Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(!output.stderr.contains("panicked"), "{bin} {args:?} panicked:\n{}", output.stderr);
    if !output.ok {
        // A failure is one line, "error: …".
        assert!(
            output.stderr.starts_with("error: ") && output.stderr.trim_end().lines().count() == 1,
            "{}",
            output.stderr
        );
    }
    output
}

/// [`run`], which must succeed; its stdout.
pub fn ok(bin: &str, store: &Path, args: &[&str]) -> String {
    let out = run(bin, store, args);
    assert!(out.ok, "{bin} {args:?} failed:\n{}", out.stderr);
    out.stdout
}

/// [`run`], which must fail; its one-line error.
pub fn fails(bin: &str, store: &Path, args: &[&str]) -> String {
    let out = run(bin, store, args);
    assert!(!out.ok, "{bin} {args:?} succeeded:\n{}", out.stdout);
    out.stderr
}

/// The 12-hex-digit id that follows `after` in `text`.
pub fn id_after(text: &str, after: &str) -> String {
    let at = text.find(after).unwrap_or_else(|| panic!("{after:?} not in {text:?}")) + after.len();
    let id: String = text[at..].chars().take(12).collect();
    assert!(id.len() == 12 && id.bytes().all(|c| c.is_ascii_hexdigit()), "no id after {after:?} in {text:?}");
    id
}
