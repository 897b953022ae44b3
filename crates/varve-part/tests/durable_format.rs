//! The `DurableMap` byte format (docs/design.md "PART checkpoints") is
//! frozen by a committed fixture: this build must write exactly the records
//! of `tests/fixtures/durable-v1.txt` for the same operations, and open the
//! fixture's records as the same map. Changing the format is a conscious
//! act: bump `FORMAT_VERSION`, describe it in `docs/design.md`, keep the old
//! fixture (and its reader), and write the new one with
//! `VARVE_WRITE_FIXTURES=1 cargo test -p varve-part --test durable_format`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::Arc;

use varve_log::{LogConfig, MemoryStore, Namespace, OnFull, SeqRange, Store};
use varve_part::durable::{DurableMap, DurableOptions};
use varve_part::BatchOp;

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/durable-v1.txt")
}

fn put(key: &[u8], value: &[u8]) -> BatchOp<Vec<u8>> {
    BatchOp::Put(key.to_vec(), value.to_vec())
}

/// The operations the fixture records: a full checkpoint, an incremental
/// one with reused and delta blobs, and a batch after it. Every record kind,
/// node flag and child tag appears (empty key, keys that are prefixes of
/// others, a full Node256, a removal in a delta).
fn write_map(ns: &Arc<dyn Namespace>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let options = DurableOptions { depth_threshold: 2, full_every: 8 };
    let mut map = DurableMap::<Vec<u8>>::open(ns.clone(), "fx", options).expect("open");
    let mut batches: Vec<Vec<BatchOp<Vec<u8>>>> = vec![
        vec![put(b"", b"empty key"), put(b"app", b"1"), put(b"apple", b"2"), put(b"apricot", b"3")],
        (0..=255u8).map(|b| put(&[b'n', b], &[b])).collect(),
        (0..40u8).flat_map(|i| (0..12u8).map(move |j| put(&[b'g', i, j, 0], &[i, j]))).collect(),
    ];
    for batch in batches.drain(..) {
        map.apply(batch).expect("apply");
    }
    let full = map.checkpoint().expect("full checkpoint");
    assert!(full.full);
    map.apply(vec![
        put(&[b'g', 3, 4, 0], b"changed"),
        BatchOp::Delete(vec![b'g', 7, 1, 0]),
        put(&[b'g', 9, 200, 0], b"added"),
        BatchOp::Delete(b"apple".to_vec()),
    ])
    .expect("apply");
    let incremental = map.checkpoint().expect("incremental checkpoint");
    assert!(!incremental.full && incremental.deltas >= 2 && incremental.reused > 0, "{incremental:?}");
    map.apply(vec![put(b"after", b"replayed")]).expect("apply");
    map.iter().map(|(k, v)| (k, v.clone())).collect()
}

/// Every log and record of the namespace, as text: `log NAME CONFIG`, then
/// `SEQ HEX` per record.
fn dump(ns: &dyn Namespace) -> String {
    let mut out = String::new();
    for info in ns.list_logs().expect("list") {
        writeln!(out, "log {} {}", info.name, config_word(info.config)).expect("write");
        for record in ns.scan(&info.name, SeqRange::from_bounds(..)).expect("scan") {
            let record = record.expect("record");
            write!(out, "{} ", record.seq).expect("write");
            for b in &record.value {
                write!(out, "{b:02x}").expect("write");
            }
            out.push('\n');
        }
    }
    out
}

fn config_word(config: LogConfig) -> &'static str {
    if config == LogConfig::unbounded() {
        "unbounded"
    } else if config == LogConfig::keep(8, OnFull::Overwrite) {
        "keep8"
    } else {
        panic!("unexpected log config {config:?}")
    }
}

fn load(text: &str) -> Arc<dyn Namespace> {
    let ns = MemoryStore::new().namespace("fixture").expect("namespace");
    let mut log = String::new();
    for line in text.lines() {
        let mut words = line.split(' ');
        match (words.next(), words.next(), words.next()) {
            (Some("log"), Some(name), Some(config)) => {
                let config =
                    if config == "keep8" { LogConfig::keep(8, OnFull::Overwrite) } else { LogConfig::unbounded() };
                ns.create_log(name, config).expect("create");
                name.clone_into(&mut log);
            }
            (Some(seq), Some(hex), None) => {
                let bytes: Vec<u8> =
                    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect();
                let got = ns.append(&log, &bytes).expect("append");
                assert_eq!(got.to_string(), seq, "fixture seqs are dense from 1");
            }
            _ => panic!("bad fixture line {line:?}"),
        }
    }
    ns
}

#[test]
fn format_matches_the_committed_fixture() {
    let ns = MemoryStore::new().namespace("fixture").expect("namespace");
    let model = write_map(&ns);
    let written = dump(ns.as_ref());
    if std::env::var_os("VARVE_WRITE_FIXTURES").is_some() {
        std::fs::create_dir_all(fixture_path().parent().expect("dir")).expect("mkdir");
        std::fs::write(fixture_path(), &written).expect("write fixture");
    }
    let fixture = std::fs::read_to_string(fixture_path()).expect("fixture (VARVE_WRITE_FIXTURES=1 writes it)");
    assert!(written == fixture, "this build writes different bytes than tests/fixtures/durable-v1.txt");
    // The fixture opens as the same map (checkpoint chain + replay).
    let map = DurableMap::<Vec<u8>>::open(load(&fixture), "fx", DurableOptions::default()).expect("open fixture");
    assert!(map.iter().map(|(k, v)| (k, v.clone())).eq(model), "fixture map differs");
}
