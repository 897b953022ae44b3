//! Varve on a small disk, as on an edge device: a store on a real 20 MiB
//! filesystem (a tmpfs mounted in a mount namespace of its own, so the test
//! needs `unshare` and the right to mount, as CI has) fills it, fails with a
//! clear "no space" error that changes nothing, stays readable, and frees
//! space when a log is deleted.

use std::process::Command;

const SCRIPT: &str = r#"
set -u
mount -t tmpfs -o size=20m varve-test "$MOUNT" || { echo "mount failed"; exit 3; }
data="$MOUNT/data"
v() { "$VARVE" --data "$data" --segment-bytes-max 1MiB "$@"; }
v log create t >/dev/null || exit 4
echo "fresh: $(du -sk "$data" | cut -f1)"
head -c 76800 /dev/urandom | base64 -w 0 > "$WORK/record"  # 100 KiB of text
ok=0
for i in $(seq 1 400); do
    if ! v log append t --file "$WORK/record" >/dev/null 2>"$WORK/err"; then
        echo "failed after: $ok"
        echo "error: $(cat "$WORK/err")"
        break
    fi
    ok=$((ok + 1))
done
echo "latest: $(v --json log latest t)"
[ "$(v log get t "$ok")" = "$(cat "$WORK/record")" ] && echo "last record reads back"
v fsck >/dev/null && echo "fsck clean"
v log rm t >/dev/null && echo "deleted t"
v log create again >/dev/null && v log append again --file "$WORK/record" >/dev/null && echo "space is back"
echo "end: $(du -sk "$data" | cut -f1)"
"#;

#[test]
fn a_store_fills_a_small_disk_then_says_so_and_recovers() {
    let work = tempfile::tempdir().expect("tempdir");
    let mount = work.path().join("mnt");
    std::fs::create_dir(&mount).expect("mkdir");
    let output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "bash", "-c", SCRIPT])
        .env("VARVE", env!("CARGO_BIN_EXE_varve"))
        .env("MOUNT", &mount)
        .env("WORK", work.path())
        .output()
        .expect("run unshare (util-linux)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the script failed:\n{stdout}\n{stderr}");
    let field = |name: &str| -> String {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name:?} in:\n{stdout}"))
            .trim()
            .to_owned()
    };
    let fresh_kib: u64 = field("fresh:").parse().expect("KiB");
    assert!(fresh_kib < 512, "a new store takes {fresh_kib} KiB: it must fit a small disk\n{stdout}");
    let appended: u64 = field("failed after:").parse().expect("count");
    assert!(appended > 150, "a 20 MiB disk holds more than 150 records of 100 KiB ({appended})\n{stdout}");
    let error = field("error:");
    assert!(error.starts_with("error: no space left on the device"), "{error}");
    assert!(error.contains("nothing was written"), "{error}");
    assert_eq!(error.lines().count(), 1);
    assert!(field("latest:").contains(&format!("\"latest\":{appended}")), "{stdout}");
    for line in ["last record reads back", "fsck clean", "deleted t", "space is back"] {
        assert!(stdout.lines().any(|l| l == line), "missing {line:?} in:\n{stdout}\n{stderr}");
    }
}
