//! Typed values inside the versioned structures: a PEDaLS sorted map, a
//! PART durable map and UStore objects store encoded records as their
//! values; after the type gains a version, every past version of the
//! structure reads in the newest shape (upgraded lazily on read), and the
//! stored bytes of old versions are never rewritten.
#![allow(clippy::doc_markdown, reason = "the papers' terms and file names in prose")]
#![allow(clippy::cast_precision_loss, reason = "small test values as floats")]

use std::sync::Arc;

use varve_log::{JournalOptions, JournalStore, MemoryStore, Namespace, Store};
use varve_object::ObjectStore;
use varve_part::durable::{DurableMap, DurableOptions};
use varve_pds::{Options, SortedMap};
use varve_schema::{Field, FieldType, Schemas, Spec, Value};

const SUBJECT: &str = "price.values";

fn v1() -> Spec {
    Spec::new(vec![Field::new(1, "cents", FieldType::I32)])
}

/// v2 adds `euros` (INIT from cents) and v3 `currency` (a default).
fn evolve(schemas: &Schemas) {
    schemas.define_init("to_euros", |old| match old.get("cents") {
        Some(Value::Int(c)) => Ok(vec![("euros".into(), Value::Float(c as f64 / 100.0))]),
        other => Err(format!("cents is {other:?}")),
    });
    let mut fields = v1().fields;
    fields.push(Field::new(2, "euros", FieldType::F64));
    schemas.register(SUBJECT, &Spec::new(fields.clone()).init("to_euros")).expect("v2");
    fields.push(Field::new(3, "currency", FieldType::String).with_default(serde_json::json!("EUR")));
    schemas.register(SUBJECT, &Spec::new(fields)).expect("v3");
}

fn encode(schemas: &Schemas, json: &serde_json::Value) -> Vec<u8> {
    schemas.encode(&schemas.record_from_json(SUBJECT, json).expect("record")).expect("encode")
}

fn read(schemas: &Schemas, bytes: &[u8]) -> serde_json::Value {
    schemas.decode(bytes, "value").expect("decode").to_json().expect("upgrade")
}

#[test]
fn a_pedals_sorted_map_reads_every_past_version_in_the_new_shape() {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    let schemas = Schemas::open(ns.clone()).expect("schemas");
    schemas.register(SUBJECT, &v1()).expect("v1");
    let mut map = SortedMap::<u64, Vec<u8>>::open(ns.clone(), "prices", Options::default()).expect("map");
    let old_versions: Vec<_> = (1..=4u64)
        .map(|k| map.insert(&k, &encode(&schemas, &serde_json::json!({"cents": k * 150}))).expect("insert"))
        .collect();
    let stored_before = map.get(&2, Some(old_versions[1])).expect("get").expect("present");
    evolve(&schemas);
    let after = map
        .insert(&2, &encode(&schemas, &serde_json::json!({"cents": 999, "euros": 9.0, "currency": "USD"})))
        .expect("v3 value");
    // Key 2 as of the version that first wrote it: the old record, new shape.
    let at = map.get(&2, Some(old_versions[1])).expect("get").expect("present");
    assert_eq!(at, stored_before, "old versions are not rewritten");
    assert_eq!(read(&schemas, &at), serde_json::json!({"cents": 300, "euros": 3.0, "currency": "EUR"}));
    assert_eq!(
        read(&schemas, &map.get(&2, Some(after)).expect("get").expect("present")),
        serde_json::json!({"cents": 999, "euros": 9.0, "currency": "USD"})
    );
    // Every version, every key.
    for (i, version) in old_versions.iter().enumerate() {
        for k in 1..=(i as u64 + 1) {
            let value = map.get(&k, Some(*version)).expect("get").expect("present");
            assert_eq!(read(&schemas, &value)["euros"], serde_json::json!(k as f64 * 1.5), "key {k} at {version:?}");
        }
    }
}

#[test]
fn a_part_durable_map_reads_old_snapshots_and_reopened_values_in_the_new_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = || -> Arc<dyn Namespace> {
        let store = JournalStore::open(dir.path(), JournalOptions::default()).expect("store");
        Arc::new(store.journal_namespace("app").expect("ns"))
    };
    let ns = open();
    let schemas = Schemas::open(ns.clone()).expect("schemas");
    schemas.register(SUBJECT, &v1()).expect("v1");
    let mut map = DurableMap::<Vec<u8>>::open(ns.clone(), "prices", DurableOptions::default()).expect("map");
    for k in 0..50u32 {
        map.insert(format!("k{k:02}").as_bytes(), encode(&schemas, &serde_json::json!({"cents": k}))).expect("insert");
    }
    map.checkpoint().expect("checkpoint");
    let before = map.snapshot();
    evolve(&schemas);
    map.insert(b"k07", encode(&schemas, &serde_json::json!({"cents": 7, "euros": 0.5}))).expect("v3 value");
    let old = before.get(b"k07").expect("present");
    assert_eq!(read(&schemas, old), serde_json::json!({"cents": 7, "euros": 0.07, "currency": "EUR"}));
    assert_eq!(read(&schemas, map.get(b"k07").expect("present"))["euros"], serde_json::json!(0.5));
    drop((map, before, schemas, ns));
    // After a restart: values from the checkpoint and the replayed batch.
    let ns = open();
    let schemas = Schemas::open(ns.clone()).expect("schemas");
    evolve(&schemas); // the program defines its INITs again; registering is a no-op
    assert_eq!(schemas.subject(SUBJECT).expect("subject").versions.len(), 3);
    let map = DurableMap::<Vec<u8>>::open(ns, "prices", DurableOptions::default()).expect("reopen");
    assert_eq!(
        read(&schemas, map.get(b"k42").expect("present")),
        serde_json::json!({"cents": 42, "euros": 0.42, "currency": "EUR"})
    );
    assert_eq!(read(&schemas, map.get(b"k07").expect("present"))["euros"], serde_json::json!(0.5));
}

#[test]
fn ustore_object_history_reads_in_the_new_shape() {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    let schemas = Schemas::open(ns.clone()).expect("schemas");
    schemas.register(SUBJECT, &v1()).expect("v1");
    let objects = ObjectStore::open(ns, "prices").expect("objects");
    let first = objects.put("apple", None, &encode(&schemas, &serde_json::json!({"cents": 120}))).expect("put");
    let second =
        objects.put("apple", Some(&first.id), &encode(&schemas, &serde_json::json!({"cents": 130}))).expect("put");
    evolve(&schemas);
    let third = objects
        .put(
            "apple",
            Some(&second.id),
            &encode(&schemas, &serde_json::json!({"cents": 140, "euros": 1.4, "currency": "EUR"})),
        )
        .expect("put");
    let history = objects.history_values("apple", &third.id, 8).expect("history");
    let euros: Vec<_> = history.iter().map(|(_, bytes)| read(&schemas, bytes)["euros"].clone()).collect();
    assert_eq!(euros, vec![serde_json::json!(1.3), serde_json::json!(1.2)]);
    assert_eq!(read(&schemas, &objects.get("apple", &first.id).expect("get"))["currency"], serde_json::json!("EUR"));
    // Ids still verify: the stored bytes never changed.
    objects.verify("apple", &third.id).expect("verify");
}
