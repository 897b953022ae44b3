//! Tamper tests: storage that returns altered bytes for one record (a
//! flipped value byte, parent link or delta) — `verify` names the version —
//! and forged ancestry proofs, every element of which the checker checks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use varve_log::{LogConfig, LogInfo, MemoryStore, Namespace, Result as LogResult, Scan, Seq, SeqRange, Store, Watch};
use varve_object::{ObjectError, ObjectOptions, ObjectStore, Storage, Version};

/// A namespace whose `get` flips one byte of chosen records, as storage
/// changed under the store would: reads go through it, the index built at
/// open time does not see the change.
struct Tampering {
    inner: Arc<dyn Namespace>,
    /// (log, seq) → byte offset to flip.
    flips: Mutex<HashMap<(String, Seq), usize>>,
}

impl Tampering {
    fn flip(&self, log: &str, seq: Seq, offset: usize) {
        self.flips.lock().expect("flips").insert((log.to_owned(), seq), offset);
    }
}

impl Namespace for Tampering {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn create_log(&self, log: &str, config: LogConfig) -> LogResult<()> {
        self.inner.create_log(log, config)
    }
    fn delete_log(&self, log: &str) -> LogResult<()> {
        self.inner.delete_log(log)
    }
    fn rename_logs(&self, renames: &[(&str, &str)]) -> LogResult<()> {
        self.inner.rename_logs(renames)
    }
    fn trim(&self, log: &str, before: varve_log::Seq) -> LogResult<varve_log::Seq> {
        self.inner.trim(log, before)
    }
    fn list_logs(&self) -> LogResult<Vec<LogInfo>> {
        self.inner.list_logs()
    }
    fn log_info(&self, log: &str) -> LogResult<LogInfo> {
        self.inner.log_info(log)
    }
    fn append_batch(&self, batch: &[(&str, &[u8])]) -> LogResult<Vec<Seq>> {
        self.inner.append_batch(batch)
    }
    fn append_if(&self, log: &str, expected_latest: Seq, value: &[u8]) -> LogResult<Seq> {
        self.inner.append_if(log, expected_latest, value)
    }
    fn append_batch_if(&self, batch: &[(&str, &[u8])], expected: &[(&str, Seq)]) -> LogResult<Vec<Seq>> {
        self.inner.append_batch_if(batch, expected)
    }
    fn get(&self, log: &str, seq: Seq) -> LogResult<Bytes> {
        let bytes = self.inner.get(log, seq)?;
        match self.flips.lock().expect("flips").get(&(log.to_owned(), seq)) {
            Some(&offset) => {
                let mut altered = bytes.to_vec();
                altered[offset] ^= 0x01;
                Ok(Bytes::from(altered))
            }
            None => Ok(bytes),
        }
    }
    fn scan(&self, log: &str, range: SeqRange) -> LogResult<Scan<'_>> {
        self.inner.scan(log, range)
    }
    fn watch(&self, log: &str, from: Seq) -> LogResult<Watch> {
        self.inner.watch(log, from)
    }
    fn sync(&self) -> LogResult<()> {
        self.inner.sync()
    }
}

fn document(step: usize) -> Vec<u8> {
    let mut doc: Vec<u8> = (0..4096).map(|i| b"abcdefghijklmnopqrstuvwxyz \n"[i % 28]).collect();
    for s in 0..=step {
        let at = (s * 977) % doc.len();
        doc[at] = b"0123456789"[s % 10];
    }
    doc
}

/// A chain of 6 versions of "doc" stored as deltas, and the store.
fn chain() -> (Arc<Tampering>, ObjectStore, Vec<Version>) {
    let ns = Arc::new(Tampering {
        inner: MemoryStore::new().namespace("t").expect("namespace"),
        flips: Mutex::new(HashMap::new()),
    });
    let store = ObjectStore::open(ns.clone(), "docs").expect("open");
    let mut versions: Vec<Version> = Vec::new();
    for step in 0..6 {
        let base = versions.last().map(|v| v.id);
        versions.push(store.put_with("doc", base.as_ref(), &document(step), Storage::Delta).expect("put"));
    }
    (ns, store, versions)
}

fn seq_of(store: &ObjectStore, v: &Version) -> Seq {
    store.info("doc", &v.id).expect("info").seq
}

fn assert_names(result: Result<varve_object::VerifyReport, ObjectError>, version: &Version, what: &str) {
    match result {
        Err(ObjectError::Tampered { version: named, reason, .. }) => {
            assert_eq!(named, version.id.to_hex(), "{what}: named the wrong version ({reason})");
        }
        other => panic!("{what}: expected Tampered naming {}, got {other:?}", version.id.short(12)),
    }
}

#[test]
fn an_untouched_chain_verifies_every_ancestor() {
    let (_, store, versions) = chain();
    assert_eq!(store.verify("doc", &versions[5].id).expect("verify").versions, 6);
    let info = store.info("doc", &versions[5].id).expect("info");
    assert!(matches!(info.encoding, varve_object::Encoding::Delta { .. }), "stored as {:?}", info.encoding);
    assert!(info.stored_bytes < 200, "a small edit stored in {} bytes", info.stored_bytes);
}

#[test]
fn a_flipped_value_byte_is_named() {
    let (ns, store, versions) = chain();
    // Version 0 is stored whole (compressed): flip the last byte of its payload.
    let seq = seq_of(&store, &versions[0]);
    let len = ns.inner.get(store.versions_log(), seq).expect("record").len();
    ns.flip(store.versions_log(), seq, len - 1);
    assert_names(store.verify("doc", &versions[0].id), &versions[0], "value byte");
    // Verifying from the head reaches it too (its descendants decode through it).
    assert!(matches!(store.verify("doc", &versions[5].id), Err(ObjectError::Tampered { .. })));
}

#[test]
fn a_flipped_parent_link_is_named() {
    let (ns, store, versions) = chain();
    let seq = seq_of(&store, &versions[3]);
    // format, len("doc"), "doc", parent count: the parent's id starts at byte 6.
    ns.flip(store.versions_log(), seq, 6 + 5);
    assert_names(store.verify("doc", &versions[3].id), &versions[3], "parent link");
    assert_names(store.verify("doc", &versions[5].id), &versions[3], "parent link from the head");
}

#[test]
fn a_flipped_delta_is_named() {
    let (ns, store, versions) = chain();
    let seq = seq_of(&store, &versions[4]);
    let len = ns.inner.get(store.versions_log(), seq).expect("record").len();
    ns.flip(store.versions_log(), seq, len - 3);
    assert_names(store.verify("doc", &versions[4].id), &versions[4], "delta");
}

#[test]
fn a_record_corrupt_at_open_is_reported_with_its_seq() {
    let inner = MemoryStore::new().namespace("t").expect("namespace");
    let store = ObjectStore::open(inner.clone(), "docs").expect("open");
    let v = store.put("doc", None, b"one").expect("put");
    store.put("doc", Some(&v.id), b"two").expect("put");
    // A forged record naming a parent that does not exist.
    let mut forged = inner.get(store.versions_log(), 2).expect("record").to_vec();
    forged[6] ^= 0xff; // its parent's id
    forged[41] ^= 0xff; // its own claimed id, so it is not a copy of version 2
    inner.append(store.versions_log(), &forged).expect("append");
    let err = ObjectStore::open(inner, "docs").expect_err("open must refuse");
    assert!(matches!(err, ObjectError::Corrupt { seq: 3, .. }), "{err}");
}

#[test]
fn a_proof_checks_and_every_forged_element_is_refused() {
    let (_, store, versions) = chain();
    // A merge in the path, so a step follows the second parent.
    let side = store.put("doc", Some(&versions[1].id), b"side branch").expect("put");
    let merged = store.merge("doc", &versions[5].id, &side.id, b"merged").expect("merge");
    let head = merged.id;
    let ancestor = versions[1].id;
    for (proof, via) in [
        (store.prove("doc", &ancestor, &head).expect("prove"), "any path"),
        (store.prove("doc", &versions[0].id, &head).expect("prove"), "to the root"),
    ] {
        let target =
            proof.steps.last().map(|_| if via == "any path" { ancestor } else { versions[0].id }).expect("steps");
        assert_eq!(proof.check("doc", &head, &target).expect("a true proof checks").id, target);
        // Through JSON, as a client elsewhere receives it.
        let round = varve_object::AncestryProof::from_json(&proof.to_json()).expect("json");
        assert_eq!(round, proof);

        let mut forgeries = Vec::new();
        for i in 0..proof.steps.len() {
            let mut p = proof.clone();
            p.steps[i].digest[0] ^= 1;
            forgeries.push((format!("digest of step {i}"), p));
            if !proof.steps[i].parents.is_empty() {
                let mut p = proof.clone();
                p.steps[i].parents[0].id.0[31] ^= 1;
                forgeries.push((format!("parent id of step {i}"), p));
                let mut p = proof.clone();
                p.steps[i].parents[0].depth += 1;
                forgeries.push((format!("parent depth of step {i}"), p));
                let mut p = proof.clone();
                p.steps[i].follow = 2;
                forgeries.push((format!("follow of step {i}"), p));
            }
        }
        let mut p = proof.clone();
        p.steps.pop();
        forgeries.push(("a step dropped".to_owned(), p));
        let mut p = proof.clone();
        p.key = "other".to_owned();
        forgeries.push(("another key".to_owned(), p));
        let mut p = proof.clone();
        p.steps.clear();
        forgeries.push(("no steps".to_owned(), p));
        for (what, forged) in forgeries {
            assert!(
                matches!(forged.check("doc", &head, &target), Err(ObjectError::ProofInvalid { .. })),
                "{via}: forged {what} was accepted"
            );
        }
        // A true proof does not prove another ancestor or another head.
        assert!(proof.check("doc", &head, &versions[2].id).is_err());
        assert!(proof.check("doc", &versions[5].id, &target).is_err());
    }
    // Not an ancestor: no proof.
    assert!(store.prove("doc", &side.id, &versions[5].id).is_err());
}

#[test]
fn a_store_opened_with_another_codec_refuses_to_decode() {
    struct Other;
    impl varve_object::Codec for Other {
        fn id(&self) -> u8 {
            9
        }
        fn encode(&self, value: &[u8]) -> std::io::Result<Vec<u8>> {
            Ok(value.to_vec())
        }
        fn decode(&self, stored: &[u8], _: usize) -> std::io::Result<Vec<u8>> {
            Ok(stored.to_vec())
        }
        fn encode_delta(&self, _: &[u8], value: &[u8]) -> std::io::Result<Vec<u8>> {
            Ok(value.to_vec())
        }
        fn decode_delta(&self, _: &[u8], stored: &[u8], _: usize) -> std::io::Result<Vec<u8>> {
            Ok(stored.to_vec())
        }
    }
    let (ns, _, versions) = chain();
    let other =
        ObjectStore::open_with(ns, "docs", ObjectOptions { codec: Arc::new(Other), ..ObjectOptions::default() })
            .expect("open");
    let err = other.get("doc", &versions[5].id).expect_err("another codec's values");
    assert!(err.to_string().contains("codec 1"), "{err}");
}
