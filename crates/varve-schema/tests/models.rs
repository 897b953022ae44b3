//! The three retention models end to end on real logs (memory and the
//! embedded journal), and the bad inputs each must refuse with a typed
//! error that names what was wrong.
#![allow(clippy::cast_precision_loss, reason = "small test values as floats")]

use std::sync::Arc;

use varve_log::{JournalOptions, JournalStore, MemoryStore, Namespace, Store};
use varve_schema::{
    Compat, Field, FieldType, Model, SchemaError, Schemas, Spec, TypeDef, Value, EAGER_MIGRATION, SCHEMA_LOG,
};

fn memory() -> Arc<dyn Namespace> {
    MemoryStore::new().namespace("app").expect("namespace")
}

fn v1_fields() -> Vec<Field> {
    vec![Field::new(1, "sensor", FieldType::String), Field::new(2, "celsius", FieldType::I32)]
}

fn c_to_f(old: &varve_schema::Record) -> Result<varve_schema::Fields, String> {
    match old.get("celsius") {
        Some(Value::Int(c)) => Ok(vec![("fahrenheit".into(), Value::Float(c as f64 * 1.8 + 32.0))]),
        other => Err(format!("celsius is {other:?}")),
    }
}

#[test]
fn automatic_upgrade_is_lazy_and_rewrites_nothing() {
    let ns = memory();
    let schemas = Schemas::open(ns.clone()).expect("open");
    schemas.register("readings", &Spec::new(v1_fields())).expect("v1");
    let log = schemas.log("readings").expect("log");
    let mut written = Vec::new();
    for (i, c) in [20, -5, 37].into_iter().enumerate() {
        let record = log
            .record()
            .expect("record")
            .with("sensor", format!("s{i}"))
            .expect("sensor")
            .with("celsius", c)
            .expect("c");
        let seq = log.append(&record).expect("append");
        written.push((seq, ns.get("readings", seq).expect("bytes")));
    }

    // v2: a field computed by an INIT; v3: a field with a constant default.
    schemas.define_init("c_to_f", c_to_f);
    let mut v2 = v1_fields();
    v2.push(Field::new(3, "fahrenheit", FieldType::F64));
    schemas.register("readings", &Spec::new(v2.clone()).init("c_to_f")).expect("v2");
    let mut v3 = v2;
    v3.push(Field::new(4, "site", FieldType::String).with_default(serde_json::json!("roof")));
    schemas.register("readings", &Spec::new(v3)).expect("v3");

    let first = log.get(1).expect("get");
    assert!(!first.is_current());
    assert_eq!(first.target().version, 3);
    // An old field is read without running the chain …
    assert_eq!(first.get("celsius").expect("celsius"), Some(Value::Int(20)));
    // … a new one runs it.
    assert_eq!(first.get("fahrenheit").expect("f"), Some(Value::Float(68.0)));
    assert_eq!(first.get("site").expect("site"), Some(Value::Text("roof".into())));
    assert_eq!(log.get(2).expect("get").get("fahrenheit").expect("f"), Some(Value::Float(23.0)));

    // Nothing was rewritten: same records, same bytes, no new ones.
    assert_eq!(ns.latest("readings").expect("latest"), 3);
    for (seq, bytes) in &written {
        assert_eq!(&ns.get("readings", *seq).expect("bytes"), bytes, "record {seq} is untouched");
    }

    // Writing an old record back materialises the upgrade (as v3).
    let upgraded = log.get(3).expect("get").into_record().expect("upgrade");
    let seq = log.append(&upgraded).expect("append");
    let again = log.get(seq).expect("get");
    assert!(again.is_current());
    assert_eq!(again.original().get("fahrenheit"), Some(Value::Float(98.600_000_000_000_01)));
    // A new record written with v3 needs the INIT'd field set by the program.
    let fresh = log.record().expect("record").with("sensor", "n").expect("s").with("celsius", 1).expect("c");
    let err = log.append(&fresh).expect_err("fahrenheit unset");
    assert!(err.to_string().contains("'fahrenheit' is not set"), "{err}");
}

#[test]
fn a_type_change_is_an_extension_with_a_converting_init() {
    // The paper's Layout-Change: a 32-bit key becomes a 64-bit key.
    let schemas = Schemas::open(memory()).expect("open");
    let def = TypeDef::new("nodes")
        .version(vec![Field::new(1, "key", FieldType::I32), Field::new(2, "value", FieldType::String)])
        .replace(&["key"], vec![Field::new(3, "key", FieldType::I64)], "widen_key", |old| match old.get("key") {
            Some(Value::Int(k)) => Ok(vec![("key".into(), Value::Int(k << 8))]),
            other => Err(format!("key is {other:?}")),
        });
    // Register v1 only, write, then declare the whole type.
    schemas.register("nodes", def.specs()[0]).expect("v1");
    let log = schemas.log("nodes").expect("log");
    log.append_json(&serde_json::json!({"key": 7, "value": "seven"})).expect("append");
    let registered = schemas.declare(&def).expect("declare");
    assert_eq!(registered.len(), 1, "only v2 was new");
    let old = log.get(1).expect("get");
    assert_eq!(old.get("key").expect("key"), Some(Value::Int(7 << 8)));
    assert_eq!(old.to_json().expect("json"), serde_json::json!({"key": 1792, "value": "seven"}));
    // Declaring again is a no-op; declaring a changed history is refused.
    assert!(schemas.declare(&def).expect("again").is_empty());
    let changed = TypeDef::new("nodes").version(vec![Field::new(1, "key", FieldType::I64)]);
    let err = schemas.declare(&changed).expect_err("history changed");
    assert!(err.to_string().contains("registered versions never change"), "{err}");
}

#[test]
fn a_widened_field_reads_old_records_in_the_wider_type() {
    let schemas = Schemas::open(memory()).expect("open");
    schemas
        .register("m", &Spec::new(vec![Field::new(1, "x", FieldType::F32), Field::new(2, "n", FieldType::U32)]))
        .expect("v1");
    let log = schemas.log("m").expect("log");
    log.append_json(&serde_json::json!({"x": 1.5, "n": 4_000_000_000u64})).expect("append");
    schemas
        .register("m", &Spec::new(vec![Field::new(1, "x", FieldType::F64), Field::new(2, "n", FieldType::I64)]))
        .expect("v2");
    let old = log.get(1).expect("get");
    assert_eq!(old.get("x").expect("x"), Some(Value::Float(1.5)));
    assert_eq!(old.get("n").expect("n"), Some(Value::Int(4_000_000_000)));
}

#[test]
fn fields_a_reader_does_not_know_survive_its_round_trip() {
    let schemas = Schemas::open(memory()).expect("open");
    schemas.register("r", &Spec::new(v1_fields())).expect("v1");
    let v1 = schemas.write_version("r").expect("v1");
    schemas.define_init("c_to_f", c_to_f);
    let mut v2 = v1_fields();
    v2.push(Field::new(3, "fahrenheit", FieldType::F64));
    v2.push(Field::new(4, "note", FieldType::Bytes).with_default(serde_json::json!("0x")));
    schemas.register("r", &Spec::new(v2).init("c_to_f").compat(Compat::Full)).expect("v2");
    let log = schemas.log("r").expect("log");
    // A new writer stores a fahrenheit that is not the INIT's (a correction)
    // and a note.
    let seq = log
        .append_json(&serde_json::json!({"sensor": "a", "celsius": 10, "fahrenheit": 51.0, "note": "0x0102"}))
        .expect("append");
    // An old program reads it in v1's shape, changes the sensor, writes back.
    let as_old = log.get(seq).expect("get").record().expect("record").project(v1.clone());
    assert_eq!(as_old.version().version, 1);
    assert!(!as_old.unknown_fields().is_empty(), "fields 3 and 4 are kept raw");
    let mut changed = as_old;
    changed.set("sensor", "b").expect("set");
    let back = log.append(&changed).expect("write back");
    let read = log.get(back).expect("get");
    assert_eq!(read.get("sensor").expect("s"), Some(Value::Text("b".into())));
    // The kept value wins over the INIT's 50.0, and the note survived.
    assert_eq!(read.get("fahrenheit").expect("f"), Some(Value::Float(51.0)));
    assert_eq!(read.get("note").expect("note"), Some(Value::Bytes(vec![1, 2])));
}

#[test]
fn manual_migration_writes_a_new_generation_and_keeps_the_old_readable() {
    let ns = memory();
    let schemas = Schemas::open(ns.clone()).expect("open");
    schemas
        .register(
            "orders",
            &Spec::new(vec![Field::new(1, "id", FieldType::U32), Field::new(2, "cents", FieldType::I64)]),
        )
        .expect("v1");
    let log = schemas.log("orders").expect("log");
    for i in 0..1500u32 {
        log.append_json(&serde_json::json!({"id": i, "cents": i64::from(i) * 100})).expect("append");
    }
    schemas.define_migration("to_decimal", |old| {
        let Some(Value::UInt(id)) = old.get("id") else { return Err("no id".into()) };
        let Some(Value::Int(cents)) = old.get("cents") else { return Err("no cents".into()) };
        Ok(vec![
            ("order".into(), Value::Text(format!("o-{id}"))),
            ("amount".into(), Value::Float(cents as f64 / 100.0)),
        ])
    });
    let manual = Spec::new(vec![Field::new(3, "order", FieldType::String), Field::new(4, "amount", FieldType::F64)])
        .migration("to_decimal");
    let registered = schemas.register("orders", &manual).expect("v2");
    assert!(registered.warnings[0].contains("migration of 1500 records"), "{:?}", registered.warnings);
    // Until the migration finishes, writers keep v1 in generation 1.
    assert_eq!(schemas.write_version("orders").expect("write").version, 1);
    log.append_json(&serde_json::json!({"id": 1500, "cents": 150_000})).expect("append during");
    let err = schemas
        .register("orders", &Spec::new(vec![Field::new(5, "x", FieldType::Bool)]).model(Model::Reset))
        .expect_err("pending");
    assert!(err.to_string().contains("waiting for its migration"), "{err}");

    let mut calls = Vec::new();
    let report = schemas.migrate("orders", &mut |done, total| calls.push((done, total))).expect("migrate");
    assert_eq!(report.migrated, 1501);
    assert_eq!(report.source_through, 1501);
    assert_eq!(calls.last(), Some(&(1501, 1501)));
    assert_eq!(log.current_log().expect("log"), "orders.gen2");
    let new = log.get(1501).expect("get");
    assert_eq!(new.get("order").expect("order"), Some(Value::Text("o-1500".into())));
    assert_eq!(new.get("amount").expect("amount"), Some(Value::Float(1500.0)));
    // The old generation is intact and readable in its own shape.
    let old = log.get_in(1, 1501).expect("old");
    assert_eq!(old.get("cents").expect("cents"), Some(Value::Int(150_000)));
    assert_eq!(ns.latest("orders").expect("latest"), 1501);
    // Writers now use v2.
    let seq = log.append_json(&serde_json::json!({"order": "o-x", "amount": 1.25})).expect("append v2");
    assert_eq!(seq, 1502);
    let err = schemas.migrate("orders", &mut |_, _| {}).expect_err("none pending");
    assert!(err.to_string().contains("no migration is pending"), "{err}");
}

#[test]
fn eager_upgrade_materialises_every_record_into_a_new_generation() {
    let schemas = Schemas::open(memory()).expect("open");
    schemas.register("r", &Spec::new(v1_fields())).expect("v1");
    let log = schemas.log("r").expect("log");
    log.append_json(&serde_json::json!({"sensor": "a", "celsius": 0})).expect("append");
    schemas.define_init("c_to_f", c_to_f);
    let mut v2 = v1_fields();
    v2.push(Field::new(3, "fahrenheit", FieldType::F64));
    schemas.register("r", &Spec::new(v2).init("c_to_f")).expect("v2");
    let eager = schemas.upgrade_eager("r").expect("eager");
    assert_eq!(eager.version.migration.as_deref(), Some(EAGER_MIGRATION));
    schemas.migrate("r", &mut |_, _| {}).expect("migrate");
    let record = log.get(1).expect("get");
    assert!(record.is_current(), "written with the newest version");
    assert_eq!(record.original().get("fahrenheit"), Some(Value::Float(32.0)));
}

#[test]
fn reset_starts_a_new_generation_and_warns() {
    let ns = memory();
    let schemas = Schemas::open(ns.clone()).expect("open");
    schemas.register("r", &Spec::new(v1_fields())).expect("v1");
    let log = schemas.log("r").expect("log");
    log.append_json(&serde_json::json!({"sensor": "a", "celsius": 1})).expect("append");
    let reset = Spec::new(vec![Field::new(5, "kelvin", FieldType::F64)]).model(Model::Reset);
    let registered = schemas.register("r", &reset).expect("reset");
    assert!(
        registered.warnings[0].starts_with("reset: 'r' starts over empty in generation 2"),
        "{:?}",
        registered.warnings
    );
    assert_eq!(log.latest().expect("latest"), 0, "the new generation is empty");
    assert_eq!(log.append_json(&serde_json::json!({"kelvin": 3.5})).expect("append"), 1);
    assert_eq!(log.get_in(1, 1).expect("old").get("celsius").expect("c"), Some(Value::Int(1)));
    assert!(ns.list_logs().expect("logs").iter().any(|l| l.name == "r.gen2"));
    // A reset to v1's fields is not v1 again: it is a new version, refused
    // here because v1's numbers are retired.
    let err = schemas.register("r", &Spec::new(v1_fields()).model(Model::Reset)).expect_err("numbers retired");
    assert!(err.to_string().contains("retired since v2"), "{err}");
}

#[test]
fn incompatible_versions_are_refused_naming_the_field_and_rule() {
    let schemas = Schemas::open(memory()).expect("open");
    schemas.register("r", &Spec::new(v1_fields())).expect("v1");
    let cases: Vec<(Spec, &str, &str)> = vec![
        (
            Spec::new({
                let mut f = v1_fields();
                f.push(Field::new(3, "name", FieldType::String));
                f
            }),
            "BACKWARD",
            "field 'name' is added without a default or an INIT",
        ),
        (
            Spec::new(vec![Field::new(1, "sensor", FieldType::String), Field::new(2, "celsius", FieldType::String)]),
            "FIELD_NUMBER",
            "field 'celsius' changes type from i32 to string",
        ),
        (
            Spec::new(vec![Field::new(1, "sensor", FieldType::String), Field::new(2, "kelvin", FieldType::I32)]),
            "FIELD_NUMBER",
            "takes number 2 from field 'celsius'",
        ),
        (
            Spec::new(vec![Field::new(1, "sensor", FieldType::String)]).compat(Compat::Forward),
            "FORWARD",
            "field 'celsius' is dropped, but has no default in v1",
        ),
        (
            Spec::new(vec![Field::new(1, "sensor", FieldType::String), Field::new(2, "celsius", FieldType::I64)])
                .compat(Compat::Full),
            "FORWARD",
            "field 'celsius' would have to be read as i32 from i64",
        ),
    ];
    for (spec, rule, text) in cases {
        let err = schemas.check("r", &spec).expect_err(text);
        match &err {
            SchemaError::Incompatible { rule: found, .. } => assert_eq!(*found, rule, "{err}"),
            other => panic!("expected Incompatible, got {other}"),
        }
        assert!(err.to_string().contains(text), "{err}");
        assert!(schemas.register("r", &spec).is_err());
    }
    assert_eq!(schemas.subject("r").expect("r").versions.len(), 1, "nothing was registered");

    // A retired number never comes back, whatever the mode.
    schemas
        .register("r", &Spec::new(vec![Field::new(1, "sensor", FieldType::String)]).compat(Compat::None))
        .expect("v2 drops 2");
    // (v1's own spec names v1: registering it again appends nothing.)
    assert!(!schemas.register("r", &Spec::new(v1_fields())).expect("v1 again").created);
    let celsius_back = vec![
        Field::new(1, "sensor", FieldType::String),
        Field::new(2, "celsius", FieldType::I32).with_default(serde_json::json!(0)),
    ];
    let err = schemas.register("r", &Spec::new(celsius_back).compat(Compat::None)).expect_err("reuse");
    assert!(err.to_string().contains("retired since v2"), "{err}");
    // Transitive checks reach past the previous version.
    let mut gen = vec![Field::new(1, "sensor", FieldType::String)];
    gen.push(Field::new(6, "extra", FieldType::Bool).with_default(serde_json::json!(false)));
    schemas.register("r", &Spec::new(gen.clone()).compat(Compat::Backward)).expect("v3");
    let err = schemas.check("r", &Spec::new(gen).compat(Compat::ForwardTransitive).init("x")).expect_err("vs v1");
    assert!(err.to_string().contains("FORWARD compatible with v1"), "{err}");
}

#[test]
fn bad_definitions_and_values_are_typed_errors() {
    let schemas = Schemas::open(memory()).expect("open");
    for (spec, text) in [
        (Spec::new(vec![]), "at least one field"),
        (
            Spec::new(vec![Field::new(1, "a", FieldType::I32), Field::new(1, "b", FieldType::I32)]),
            "share a name or number",
        ),
        (Spec::new(vec![Field::new(0, "a", FieldType::I32)]), "numbers run from 1"),
        (Spec::new(vec![Field::new(1, "a b", FieldType::I32)]), "letters, digits"),
        (Spec::new(vec![Field::new(1, "a", FieldType::I32).with_default(serde_json::json!("x"))]), "is not a i32"),
    ] {
        let err = schemas.register("bad", &spec).expect_err(text);
        assert!(matches!(err, SchemaError::Invalid { .. }) && err.to_string().contains(text), "{err}");
    }
    schemas.register("r", &Spec::new(v1_fields())).expect("v1");
    let log = schemas.log("r").expect("log");
    for (json, text) in [
        (serde_json::json!({"sensor": "a", "celsius": 3_000_000_000u64}), "is not a i32"),
        (serde_json::json!({"sensor": "a", "celsius": 1, "extra": 2}), "no field 'extra'"),
        (serde_json::json!({"sensor": "a"}), "'celsius' is not set"),
        (serde_json::json!([1, 2]), "expected a JSON object"),
    ] {
        let err = log.append_json(&json).expect_err(text);
        assert!(matches!(err, SchemaError::BadValue { .. }) && err.to_string().contains(text), "{err}");
    }
    assert_eq!(log.latest().expect("latest"), 0, "nothing was appended");
    assert!(matches!(schemas.log("nope"), Err(SchemaError::UnknownSubject(_))));
}

#[test]
fn a_failing_or_panicking_init_names_the_record_and_changes_nothing() {
    let ns = memory();
    let schemas = Schemas::open(ns.clone()).expect("open");
    schemas.register("r", &Spec::new(v1_fields())).expect("v1");
    let log = schemas.log("r").expect("log");
    for c in [1, 13, 2] {
        log.append_json(&serde_json::json!({"sensor": "s", "celsius": c})).expect("append");
    }
    schemas.define_init("picky", |old| match old.get("celsius") {
        Some(Value::Int(13)) => panic!("unlucky reading"),
        Some(Value::Int(2)) => Err("two is not allowed".into()),
        _ => Ok(vec![("f".into(), Value::Float(1.0))]),
    });
    let mut v2 = v1_fields();
    v2.push(Field::new(3, "f", FieldType::F64));
    schemas.register("r", &Spec::new(v2).init("picky")).expect("v2");
    let before: Vec<_> = (1..=3).map(|s| ns.get("r", s).expect("bytes")).collect();
    assert_eq!(log.get(1).expect("get").get("f").expect("f"), Some(Value::Float(1.0)));
    let err = log.get(2).expect("get").get("f").expect_err("panics");
    assert!(matches!(err, SchemaError::InitFailed { .. }), "{err}");
    assert!(err.to_string().contains("r@2") && err.to_string().contains("panicked: unlucky reading"), "{err}");
    let err = log.get(3).expect("get").get("f").expect_err("refuses");
    assert!(err.to_string().contains("r@3") && err.to_string().contains("two is not allowed"), "{err}");
    // The old fields still read; nothing stored changed.
    assert_eq!(log.get(2).expect("get").get("celsius").expect("c"), Some(Value::Int(13)));
    let after: Vec<_> = (1..=3).map(|s| ns.get("r", s).expect("bytes")).collect();
    assert_eq!(before, after);
    // A reader that never defined the INIT gets a clear error.
    let other = Schemas::open(ns).expect("open");
    let err = other.log("r").expect("log").get(1).expect("get").get("f").expect_err("undefined");
    assert!(matches!(err, SchemaError::MissingInit { .. }) && err.to_string().contains("'picky'"), "{err}");
}

#[test]
fn unknown_schema_ids_and_damaged_records_are_reported() {
    let ns = memory();
    let schemas = Schemas::open(ns.clone()).expect("open");
    schemas.register("r", &Spec::new(v1_fields())).expect("v1");
    let err = schemas.decode(&[99, 0x08, 1], "x@1").expect_err("unknown id");
    assert!(matches!(err, SchemaError::UnknownSchemaId { id: 99, .. }), "{err}");
    assert!(err.to_string().contains("x@1"), "{err}");
    let id = schemas.write_version("r").expect("v").id;
    let mut bad = vec![u8::try_from(id).expect("small id")];
    bad.extend_from_slice(&[0x12, 10, b'a']); // field 2 declares 10 bytes, has 1
    let err = schemas.decode(&bad, "r@7").expect_err("damaged");
    assert!(matches!(err, SchemaError::Corrupt { .. }) && err.to_string().contains("r@7"), "{err}");
    assert!(matches!(schemas.decode(&[], "r@8"), Err(SchemaError::Corrupt { .. })));
    // A type may not take over a log that already holds untyped records.
    ns.create_log("raw", varve_log::LogConfig::default()).expect("create");
    ns.append("raw", b"opaque").expect("append");
    let err = schemas.register("raw", &Spec::new(v1_fields())).expect_err("untyped records");
    assert!(err.to_string().contains("already holds 1 untyped records"), "{err}");
}

#[test]
fn versions_registered_by_another_process_are_seen_on_the_journal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = JournalStore::open(dir.path(), JournalOptions::default()).expect("store");
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("app").expect("ns"));
    let writer = Schemas::open(ns.clone()).expect("open");
    writer.register("r", &Spec::new(v1_fields())).expect("v1");
    let reader = Schemas::open(ns.clone()).expect("reader");
    writer.log("r").expect("log").append_json(&serde_json::json!({"sensor": "a", "celsius": 5})).expect("append");
    let mut v2 = v1_fields();
    v2.push(Field::new(3, "fahrenheit", FieldType::F64).with_default(serde_json::json!(0.0)));
    writer.register("r", &Spec::new(v2)).expect("v2");
    writer
        .log("r")
        .expect("log")
        .append_json(&serde_json::json!({"sensor": "b", "celsius": 6, "fahrenheit": 42.8}))
        .expect("append v2");
    // The reader's registry predates v2: it picks it up on the unknown id.
    let second = reader.log("r").expect("log").get(2).expect("get");
    assert_eq!(second.get("fahrenheit").expect("f"), Some(Value::Float(42.8)));
    drop(reader);
    drop(writer);
    drop(ns);
    drop(store);
    // And after a restart, from _schema alone.
    let store = JournalStore::open(dir.path(), JournalOptions::default()).expect("reopen");
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("app").expect("ns"));
    let schemas = Schemas::open(ns.clone()).expect("open");
    assert_eq!(schemas.subjects(), vec!["r".to_owned()]);
    assert_eq!(
        schemas.log("r").expect("log").get(1).expect("get").get("fahrenheit").expect("f"),
        Some(Value::Float(0.0))
    );
    assert!(ns.list_logs().expect("logs").iter().any(|l| l.name == SCHEMA_LOG));
}
