//! `vgit` end to end: commits, log, checkout of an old commit, branches and
//! merges (clean and conflicting), run as the real binary on a temp directory.

mod common;

use std::fs;
use std::path::Path;

use common::{fails, id_after, ok};

const VGIT: &str = env!("CARGO_BIN_EXE_vgit");

fn vgit(root: &Path, args: &[&str]) -> String {
    let dir = root.join("work");
    let mut full = vec!["--dir", dir.to_str().expect("a UTF-8 temp path")];
    full.extend_from_slice(args);
    ok(VGIT, &root.join("store"), &full)
}

fn vgit_fails(root: &Path, args: &[&str]) -> String {
    let dir = root.join("work");
    let mut full = vec!["--dir", dir.to_str().expect("a UTF-8 temp path")];
    full.extend_from_slice(args);
    fails(VGIT, &root.join("store"), &full)
}

fn write(root: &Path, path: &str, content: &[u8]) {
    let full = root.join("work").join(path);
    fs::create_dir_all(full.parent().expect("a parent")).expect("create the directory");
    fs::write(full, content).expect("write the file");
}

fn read(root: &Path, path: &str) -> Vec<u8> {
    fs::read(root.join("work").join(path)).expect("read the file")
}

#[test]
fn checkout_of_an_old_commit_restores_its_exact_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    vgit(root, &["init"]);
    let binary: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    write(root, "readme.txt", b"version one\n");
    write(root, "data/blob.bin", &binary);
    write(root, "data/deep/old.txt", b"removed later\n");
    let first = id_after(&vgit(root, &["commit", "-m", "first"]), "[main ");
    assert!(vgit(root, &["status"]).contains("nothing to commit"));

    write(root, "readme.txt", b"version two\n");
    fs::remove_file(root.join("work/data/deep/old.txt")).unwrap();
    write(root, "new.txt", b"added\n");
    let status = vgit(root, &["status"]);
    for line in ["modified: readme.txt", "deleted: data/deep/old.txt", "new: new.txt"] {
        assert!(status.contains(line), "{status}");
    }
    let second = id_after(&vgit(root, &["commit", "-m", "second"]), "[main ");
    assert!(vgit_fails(root, &["commit", "-m", "again"]).contains("nothing to commit"));

    let log = vgit(root, &["log"]);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(lines[0].starts_with(&second) && lines[0].ends_with("second") && lines[0].contains("(main)"), "{log}");
    assert!(lines[1].starts_with(&first) && lines[1].ends_with("first"), "{log}");
    assert_eq!(vgit(root, &["log", "-n", "1"]).lines().count(), 1);

    // Into an empty directory: exactly the first commit's files and bytes.
    let out = root.join("restored");
    vgit(root, &["checkout", &first, "--to", out.to_str().unwrap()]);
    assert_eq!(fs::read(out.join("readme.txt")).unwrap(), b"version one\n");
    assert_eq!(fs::read(out.join("data/blob.bin")).unwrap(), binary);
    assert_eq!(fs::read(out.join("data/deep/old.txt")).unwrap(), b"removed later\n");
    assert!(!out.join("new.txt").exists());
    assert!(vgit_fails(root, &["checkout", &first, "--to", out.to_str().unwrap()]).contains("not empty"));

    // In place: the working directory goes back, detached; then back to main.
    vgit(root, &["checkout", &first]);
    assert_eq!(read(root, "readme.txt"), b"version one\n");
    assert_eq!(read(root, "data/deep/old.txt"), b"removed later\n");
    assert!(!root.join("work/new.txt").exists());
    assert!(vgit(root, &["status"]).contains(&format!("HEAD detached at {first}")));
    vgit(root, &["checkout", "main"]);
    assert_eq!(read(root, "readme.txt"), b"version two\n");
    assert!(root.join("work/new.txt").exists());

    // An edit is not lost to a checkout.
    write(root, "readme.txt", b"unsaved\n");
    assert!(vgit_fails(root, &["checkout", &first]).contains("uncommitted changes in readme.txt"));
}

#[test]
fn a_clean_merge_combines_both_branches_in_a_commit_with_two_parents() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    vgit(root, &["init"]);
    write(root, "poem.txt", b"one\ntwo\nthree\nfour\n");
    write(root, "gone.txt", b"delete me on dev\n");
    vgit(root, &["commit", "-m", "base"]);
    vgit(root, &["branch", "dev"]);
    assert!(vgit_fails(root, &["branch", "dev"]).contains("exists"));
    vgit(root, &["checkout", "dev"]);
    write(root, "poem.txt", b"one\ntwo\nthree\nFOUR\n");
    fs::remove_file(root.join("work/gone.txt")).unwrap();
    let dev = id_after(&vgit(root, &["commit", "-m", "dev edits"]), "[dev ");
    vgit(root, &["checkout", "main"]);
    assert_eq!(read(root, "poem.txt"), b"one\ntwo\nthree\nfour\n");
    write(root, "poem.txt", b"ONE\ntwo\nthree\nfour\n");
    write(root, "main.txt", b"main only\n");
    let main = id_after(&vgit(root, &["commit", "-m", "main edits"]), "[main ");

    let merged = vgit(root, &["merge", "dev"]);
    assert!(merged.contains("merge commit"), "{merged}");
    assert_eq!(read(root, "poem.txt"), b"ONE\ntwo\nthree\nFOUR\n");
    assert!(!root.join("work/gone.txt").exists());
    assert_eq!(read(root, "main.txt"), b"main only\n");
    assert!(vgit(root, &["status"]).contains("nothing to commit"));
    let log = vgit(root, &["log"]);
    let top = log.lines().next().unwrap();
    assert!(top.contains(&format!("[merge of {main} and {dev}]")), "{log}");
    assert!(vgit(root, &["merge", "dev"]).contains("already up to date"));

    // dev catches up by fast-forward.
    vgit(root, &["checkout", "dev"]);
    assert!(vgit(root, &["merge", "main"]).contains("fast-forward"));
    assert_eq!(read(root, "poem.txt"), b"ONE\ntwo\nthree\nFOUR\n");
}

#[test]
fn a_conflicting_merge_names_the_files_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    vgit(root, &["init"]);
    write(root, "a.txt", b"x\n");
    write(root, "b.txt", b"y\n");
    write(root, "c.txt", b"z\n");
    vgit(root, &["commit", "-m", "base"]);
    vgit(root, &["branch", "other"]);
    write(root, "a.txt", b"main\n");
    write(root, "b.txt", b"main\n");
    let main = id_after(&vgit(root, &["commit", "-m", "main"]), "[main ");
    vgit(root, &["checkout", "other"]);
    write(root, "a.txt", b"other\n");
    write(root, "b.txt", b"other\n");
    write(root, "c.txt", b"other\n");
    vgit(root, &["commit", "-m", "other"]);
    vgit(root, &["checkout", "main"]);

    let err = vgit_fails(root, &["merge", "other"]);
    assert!(err.contains("merge conflict in 2 file(s)") && err.contains("a.txt") && err.contains("b.txt"), "{err}");
    assert!(!err.contains("c.txt"), "{err}");
    assert_eq!(read(root, "a.txt"), b"main\n");
    assert_eq!(read(root, "c.txt"), b"z\n");
    let branches = vgit(root, &["branch"]);
    assert!(branches.contains(&format!("* main {main}")), "{branches}");
}

#[test]
fn bad_input_is_a_one_line_error() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    assert!(vgit_fails(root, &["status"]).contains("vgit init"));
    vgit(root, &["init"]);
    assert!(vgit_fails(root, &["init"]).contains("already"));
    assert!(vgit_fails(root, &["log"]).contains("no commits"));
    assert!(vgit_fails(root, &["checkout", "nothing"]).contains("no version"));
    assert!(vgit_fails(root, &["merge", "nothing"]).contains("no commits"));
    fails(VGIT, &root.join("store"), &["--dir", "/nonexistent/dir", "commit", "-m", "x"]);
}

#[test]
fn a_detached_head_commits_only_to_a_named_branch() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    vgit(root, &["init"]);
    write(root, "a.txt", b"1\n");
    let first = id_after(&vgit(root, &["commit", "-m", "one"]), "[main ");
    write(root, "a.txt", b"2\n");
    vgit(root, &["commit", "-m", "two"]);
    vgit(root, &["checkout", &first]);
    write(root, "b.txt", b"side\n");
    assert!(vgit_fails(root, &["commit", "-m", "side"]).contains("detached"));
    assert!(vgit_fails(root, &["commit", "-m", "side", "--branch", "main"]).contains("check it out first"));
    let side = id_after(&vgit(root, &["commit", "-m", "side", "--branch", "feature"]), "[feature ");
    let log = vgit(root, &["log"]);
    assert!(log.starts_with(&format!("{side} (feature) side\n{first} one")), "{log}");
    assert!(vgit(root, &["status"]).starts_with("on branch feature"));
}
