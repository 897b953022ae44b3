//! Property test: random schema evolutions (fields added with defaults or
//! INITs, types widened, fields replaced by a converting INIT; up to six
//! versions) over random records written under each version. Reading any
//! record under the newest version equals applying the INIT chain to its
//! original values in a plain model; nothing stored is rewritten; a record
//! projected to the first version and written back keeps the fields that
//! version does not know. Seeded: proptest prints the failing case.
#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_precision_loss,
    reason = "small generated test values"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use varve_log::{MemoryStore, Namespace, Store};
use varve_schema::{Field, FieldType, Record, Schemas, Spec, Value};

type Row = BTreeMap<String, Value>;

#[derive(Clone, Debug)]
enum Step {
    AddDefault(FieldType),
    AddInit(FieldType),
    Widen(usize),
    Replace(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        prop::sample::select(vec![FieldType::I64, FieldType::String, FieldType::F64, FieldType::Bool])
            .prop_map(Step::AddDefault),
        prop::sample::select(vec![FieldType::I64, FieldType::String, FieldType::F64]).prop_map(Step::AddInit),
        (0usize..8).prop_map(Step::Widen),
        (0usize..8).prop_map(Step::Replace),
    ]
}

fn value_of(ty: FieldType, seed: i64) -> Value {
    match ty {
        FieldType::Bool => Value::Bool(seed % 2 == 0),
        FieldType::I32 | FieldType::I64 => Value::Int(seed % 100_000),
        FieldType::U32 | FieldType::U64 => Value::UInt(seed.unsigned_abs() % 100_000),
        FieldType::F32 => Value::Float(f64::from(i32::try_from(seed % 1000).unwrap_or(0)) / 4.0),
        FieldType::F64 => Value::Float((seed % 100_000) as f64 / 8.0),
        FieldType::String => Value::Text(format!("s{seed}")),
        FieldType::Bytes => Value::Bytes(seed.to_le_bytes().to_vec()),
    }
}

/// The INIT every added-by-INIT field uses, on a plain row: a digest of
/// the old row's values, so order and shape of the input matter.
fn init_model(row: &Row, ty: FieldType, salt: i64) -> Value {
    let mut acc = salt;
    for (name, value) in row {
        let v = match value {
            Value::Int(i) => *i,
            Value::UInt(u) => i64::try_from(*u % 1_000_000).unwrap_or(0),
            Value::Float(x) => *x as i64,
            Value::Bool(b) => i64::from(*b),
            Value::Text(s) => s.len() as i64,
            Value::Bytes(b) => b.len() as i64,
        };
        acc = acc.wrapping_mul(31).wrapping_add(v).wrapping_add(name.len() as i64) % 1_000_003;
    }
    value_of(ty, acc)
}

fn row_of(record: &Record) -> Row {
    record.version().fields.iter().filter_map(|f| record.get(&f.name).map(|v| (f.name.clone(), v))).collect()
}

/// An INIT of the model: its salt and the fields it sets (name, type).
type Init = (i64, Vec<(String, FieldType)>);

struct Evolution {
    versions: Vec<Vec<Field>>,
    /// Per version: the INIT's salt and the fields it sets, or the
    /// replaced (old name, new type) pair.
    inits: Vec<Option<Init>>,
}

/// Apply one version's step to a row in the previous version's shape.
fn upgrade(row: &Row, prev: &[Field], next: &[Field], init: Option<&(i64, Vec<(String, FieldType)>)>) -> Row {
    let mut out = Row::new();
    for field in next {
        if let Some(old) = prev.iter().find(|f| f.number == field.number) {
            if let Some(v) = row.get(&old.name) {
                out.insert(field.name.clone(), v.coerce(field.ty).expect("promotion"));
            }
        } else if let Some(default) = field.default_value() {
            out.insert(field.name.clone(), default);
        }
    }
    if let Some((salt, fields)) = init {
        for (name, ty) in fields {
            out.insert(name.clone(), init_model(row, *ty, *salt));
        }
    }
    out
}

fn build(first: &[FieldType], steps: &[Step]) -> Evolution {
    let mut fields: Vec<Field> =
        first.iter().enumerate().map(|(i, ty)| Field::new(i as u32 + 1, &format!("f{i}"), *ty)).collect();
    let mut next_number = fields.len() as u32 + 1;
    let mut versions = vec![fields.clone()];
    let mut inits = vec![None];
    for (i, step) in steps.iter().enumerate() {
        let salt = i as i64 + 7;
        let mut init = None;
        match step {
            Step::AddDefault(ty) => {
                let default = value_of(*ty, salt).to_json();
                fields.push(Field::new(next_number, &format!("d{next_number}"), *ty).with_default(default));
                next_number += 1;
            }
            Step::AddInit(ty) => {
                let name = format!("n{next_number}");
                fields.push(Field::new(next_number, &name, *ty));
                init = Some((salt, vec![(name, *ty)]));
                next_number += 1;
            }
            Step::Widen(k) => {
                let k = k % fields.len();
                let wider = match fields[k].ty {
                    FieldType::I32 => FieldType::I64,
                    FieldType::U32 => FieldType::U64,
                    FieldType::F32 | FieldType::I64 | FieldType::U64 => FieldType::F64,
                    other => other,
                };
                fields[k].ty = wider;
            }
            Step::Replace(k) => {
                let k = k % fields.len();
                let name = fields[k].name.clone();
                fields.remove(k);
                fields.push(Field::new(next_number, &name, FieldType::I64));
                init = Some((salt, vec![(name, FieldType::I64)]));
                next_number += 1;
            }
        }
        if versions.last() == Some(&fields) {
            continue; // widening a type that has no wider one changes nothing
        }
        versions.push(fields.clone());
        inits.push(init);
    }
    Evolution { versions, inits }
}

fn run(first: &[FieldType], steps: &[Step], per_version: &[u8]) -> Result<(), TestCaseError> {
    let ns: Arc<dyn Namespace> = MemoryStore::new().namespace("p").expect("ns");
    let schemas = Schemas::open(ns.clone()).expect("open");
    let evolution = build(first, steps);
    let mut written: Vec<(u64, usize, Row, bytes::Bytes)> = Vec::new();
    let mut seed = 1i64;
    for (v, fields) in evolution.versions.iter().enumerate() {
        let mut spec = Spec::new(fields.clone());
        if let Some((salt, set)) = &evolution.inits[v] {
            let name = format!("init{v}");
            let (salt, set) = (*salt, set.clone());
            schemas.define_init(&name, move |old| {
                Ok(set.iter().map(|(n, ty)| (n.clone().into(), init_model(&row_of(old), *ty, salt))).collect())
            });
            spec = spec.init(&name);
        }
        let registered = schemas.register("t", &spec).expect("register");
        prop_assert_eq!(registered.version.version as usize, v + 1);
        let log = schemas.log("t").expect("log");
        for _ in 0..per_version[v % per_version.len()] {
            let row: Row = fields
                .iter()
                .map(|f| {
                    seed += 7919;
                    (f.name.clone(), value_of(f.ty, seed))
                })
                .collect();
            let mut record = log.record().expect("record");
            for (name, value) in &row {
                record.set(name, value.clone()).expect("set");
            }
            let seq = log.append(&record).expect("append");
            written.push((seq, v, row, ns.get("t", seq).expect("bytes")));
        }
    }
    let log = schemas.log("t").expect("log");
    let last = evolution.versions.len() - 1;
    for (seq, v, row, bytes) in &written {
        let mut expected = row.clone();
        for next in v + 1..=last {
            expected = upgrade(
                &expected,
                &evolution.versions[next - 1],
                &evolution.versions[next],
                evolution.inits[next].as_ref(),
            );
        }
        let stored = log.get(*seq).expect("get");
        prop_assert_eq!(
            row_of(stored.record().expect("upgrade")),
            expected.clone(),
            "record {} written with v{}",
            seq,
            v + 1
        );
        // One field read lazily agrees too.
        let (name, value) = expected.iter().next().expect("a field");
        prop_assert_eq!(stored.get(name).expect("get"), Some(value.clone()));
        prop_assert_eq!(&ns.get("t", *seq).expect("bytes"), bytes, "record {} was rewritten", seq);
    }
    // An old program's round trip keeps what it does not know.
    if let Some((seq, _, _, _)) = written.iter().rev().find(|(_, v, _, _)| *v == last) {
        let current = log.get(*seq).expect("get").into_record().expect("record");
        let first_version = schemas.subject("t").expect("t").versions[0].clone();
        let as_old = current.project(first_version);
        let back = log.append(&as_old).expect("write back");
        let again = log.get(back).expect("get");
        let again = row_of(again.record().expect("upgrade"));
        let before = row_of(&current);
        for (name, value) in &before {
            // Fields the first version also has may have been narrowed
            // back and widened again; the others come back exactly.
            if evolution.versions[0].iter().all(|f| &f.name != name) {
                prop_assert_eq!(again.get(name), Some(value), "field {} lost in the round trip", name);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn reading_under_the_newest_version_equals_the_init_chain(
        first in prop::collection::vec(prop::sample::select(vec![FieldType::I32, FieldType::U32, FieldType::F32, FieldType::String, FieldType::I64]), 1..4),
        steps in prop::collection::vec(step(), 0..6),
        per_version in prop::collection::vec(0u8..6, 1..7),
    ) {
        run(&first, &steps, &per_version)?;
    }
}
