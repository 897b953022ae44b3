//! `ledger` end to end: transfers, balances as of an old block, overdrafts,
//! and `verify` naming a forged version, run as the real binary.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{fails, id_after, ok};
use varve_log::{JournalOptions, JournalStore, Namespace, Store};
use varve_object::record::{Encoding, ParentLink, VersionRecord};
use varve_object::{value_digest, version_of, ObjectStore};

const LEDGER: &str = env!("CARGO_BIN_EXE_ledger");

/// The ledger's namespace and object store, opened the way the binary opens them.
fn objects(store: &Path) -> (Arc<dyn Namespace>, ObjectStore) {
    let journal = JournalStore::open(store, JournalOptions::default()).expect("open the journal");
    let ns = journal.namespace("ledger").expect("open the namespace");
    (Arc::clone(&ns), ObjectStore::open(ns, "ledger").expect("open the object store"))
}

fn three_blocks(store: &Path) -> [String; 3] {
    let b1 = id_after(&ok(LEDGER, store, &["deposit", "alice", "100"]), "block 1 ");
    let b2 = id_after(&ok(LEDGER, store, &["transfer", "alice", "bob", "30"]), "block 2 ");
    let b3 = id_after(&ok(LEDGER, store, &["transfer", "bob", "carol", "10"]), "block 3 ");
    [b1, b2, b3]
}

#[test]
fn transfers_move_balances_and_old_blocks_keep_theirs() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    let [b1, b2, b3] = three_blocks(store);
    assert!(ok(LEDGER, store, &["balance", "alice"]).starts_with("alice: 70 as of block 3"));
    assert!(ok(LEDGER, store, &["balance", "bob"]).starts_with("bob: 20 as of block 3"));
    assert!(ok(LEDGER, store, &["balance", "carol"]).starts_with("carol: 10 as of block 3"));
    // As of an old block, by height or by id.
    assert!(
        ok(LEDGER, store, &["balance", "alice", "--at", "1"]).starts_with(&format!("alice: 100 as of block 1 {b1}"))
    );
    assert!(ok(LEDGER, store, &["balance", "bob", "--at", &b2]).starts_with("bob: 30 as of block 2"));
    assert!(ok(LEDGER, store, &["balance", "carol", "--at", "2"]).starts_with("carol: 0 as of block 2"));
    assert!(fails(LEDGER, store, &["balance", "alice", "--at", "9"]).contains("no block at height 9"));
    let history = ok(LEDGER, store, &["history", "bob"]);
    let balances: Vec<&str> = history.lines().map(|l| l.split(' ').nth(1).unwrap()).collect();
    assert_eq!(balances, ["20", "30"], "{history}");
    let blocks = ok(LEDGER, store, &["blocks"]);
    assert!(blocks.lines().next().unwrap().starts_with(&format!("3 {b3} bob -> carol 10")), "{blocks}");
    assert!(ok(LEDGER, store, &["verify"]).starts_with("verified: 3 blocks"));
}

#[test]
fn an_overdraft_is_refused_and_appends_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    three_blocks(store);
    let err = fails(LEDGER, store, &["transfer", "carol", "alice", "11"]);
    assert!(err.contains("overdraft refused: carol has 10, the transfer needs 11"), "{err}");
    assert!(fails(LEDGER, store, &["transfer", "nobody", "alice", "1"]).contains("nobody has 0"));
    assert!(fails(LEDGER, store, &["transfer", "alice", "bob", "0"]).contains("1 or more"));
    assert!(fails(LEDGER, store, &["deposit", "no/slash", "1"]).contains("account name"));
    assert_eq!(ok(LEDGER, store, &["blocks"]).lines().count(), 3);
    assert!(ok(LEDGER, store, &["transfer", "carol", "alice", "10"]).contains("carol 0, alice 80"));
    assert!(ok(LEDGER, store, &["verify"]).starts_with("verified: 4 blocks"));
}

#[test]
fn verify_names_a_block_whose_bytes_are_not_what_its_id_says() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    three_blocks(store);
    // A forger with write access to the log appends block 4: it claims the
    // id of an honest block (a transfer of 1) but stores another (1000 to mallory).
    let forged = {
        let (ns, objects) = objects(store);
        let head = objects.refs("chain").unwrap()["head"].version;
        let seq = objects.info("chain", &head.id).unwrap().seq;
        let honest = br#"{"accounts":{},"transfers":[{"amount":1,"from":"alice","to":"bob"}]}"#;
        let stored = br#"{"accounts":{},"transfers":[{"amount":1000,"from":null,"to":"mallory"}]}"#;
        let version = version_of("chain", &[head], &value_digest(honest));
        let record = VersionRecord {
            key: "chain",
            parents: vec![ParentLink { version: head, seq }],
            version,
            digest: value_digest(honest),
            value_len: stored.len() as u64,
            encoding: Encoding::Raw,
            author: "",
            payload: stored,
        };
        ns.append("obj.ledger.versions", &record.encode()).unwrap();
        version.id.to_hex()
    };
    let err = fails(LEDGER, store, &["verify"]);
    assert!(err.contains(&format!("version {forged} of key \"chain\" does not verify")), "{err}");
    assert!(err.contains("BLAKE3"), "{err}");
}

#[test]
fn verify_names_an_account_version_no_block_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    three_blocks(store);
    // A well-formed version, hashes and all, written beside the ledger's rules.
    let forged = {
        let (_, objects) = objects(store);
        let bob = objects.heads("acct/bob").unwrap()[0];
        objects.put("acct/bob", Some(&bob.id), b"1000000").unwrap().id.to_hex()
    };
    let err = fails(LEDGER, store, &["verify"]);
    assert!(err.contains(&format!("account version {forged} of bob is recorded by no block")), "{err}");
}
