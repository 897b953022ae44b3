#![allow(clippy::map_entry, reason = "the model mirrors the store: insert only what the store did not have")]
//! Property test against a plain in-memory model of version DAGs: random
//! puts (roots, extensions, branches), merges, ref moves and reopens of a
//! real journal. After every case, every version reads back with its value
//! and parents, `history` equals a walk of the model, `heads` are the model's
//! versions without children, and `merge_bases` equals the closest common
//! ancestors computed by brute force.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use proptest::prelude::*;
use varve_log::{JournalOptions, JournalStore, Namespace};
use varve_object::{ObjectOptions, ObjectStore, Storage, VersionId};

#[derive(Clone, Debug)]
enum Op {
    /// Put under key `key % 3`, on version `base % n` of that key (or a new root if `root`).
    Put { key: u8, base: u16, root: bool, edit: u16, complete: bool },
    /// Merge two versions of a key.
    Merge { key: u8, a: u16, b: u16 },
    /// Move branch `main` of a key to one of its versions, expecting where the model has it.
    Branch { key: u8, to: u16 },
    /// Close and reopen the journal.
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u8>(), any::<u16>(), prop::bool::weighted(0.1), any::<u16>(), any::<bool>())
            .prop_map(|(key, base, root, edit, complete)| Op::Put { key, base, root, edit, complete }),
        2 => (any::<u8>(), any::<u16>(), any::<u16>()).prop_map(|(key, a, b)| Op::Merge { key, a, b }),
        1 => (any::<u8>(), any::<u16>()).prop_map(|(key, to)| Op::Branch { key, to }),
        1 => Just(Op::Reopen),
    ]
}

struct ModelVersion {
    key: String,
    parents: Vec<VersionId>,
    value: Vec<u8>,
}

#[derive(Default)]
struct Model {
    versions: HashMap<VersionId, ModelVersion>,
    /// Per key, its versions in the order first stored.
    order: HashMap<String, Vec<VersionId>>,
    branch: HashMap<String, VersionId>,
}

impl Model {
    fn ancestors(&self, id: VersionId) -> BTreeSet<VersionId> {
        let mut out = BTreeSet::new();
        let mut stack = vec![id];
        while let Some(v) = stack.pop() {
            if out.insert(v) {
                stack.extend(self.versions[&v].parents.iter().copied());
            }
        }
        out
    }

    fn merge_bases(&self, a: VersionId, b: VersionId) -> BTreeSet<VersionId> {
        let common: BTreeSet<VersionId> = self.ancestors(a).intersection(&self.ancestors(b)).copied().collect();
        common.iter().copied().filter(|&c| !common.iter().any(|&d| d != c && self.ancestors(d).contains(&c))).collect()
    }

    fn history(&self, id: VersionId, m: usize) -> Vec<VersionId> {
        let mut out = Vec::new();
        let mut at = id;
        while out.len() < m {
            let parents = &self.versions[&at].parents;
            if parents.len() != 1 {
                break;
            }
            at = parents[0];
            out.push(at);
        }
        out
    }
}

fn value_for(key: &str, seed: u16, base: Option<&[u8]>) -> Vec<u8> {
    // Values like a document's versions: the base with a small edit, so deltas happen.
    let mut value = base.map_or_else(|| format!("{key}:{seed}:").repeat(12).into_bytes(), <[u8]>::to_vec);
    if !value.is_empty() {
        let at = usize::from(seed) % value.len();
        value[at] = b'a' + (seed % 26) as u8;
    }
    value.extend_from_slice(&seed.to_le_bytes()[..usize::from(seed % 3)]);
    value
}

fn open(dir: &std::path::Path) -> ObjectStore {
    let store = JournalStore::open(dir, JournalOptions::default()).expect("journal");
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("objects").expect("namespace"));
    ObjectStore::open_with(ns, "m", ObjectOptions { chain_max: 3, ..ObjectOptions::default() }).expect("open")
}

fn check(store: &ObjectStore, model: &Model) {
    for (id, v) in &model.versions {
        assert_eq!(store.get(&v.key, id).expect("get"), v.value, "value of {id:?}");
        let info = store.info(&v.key, id).expect("info");
        assert_eq!(info.parents.iter().map(|p| p.id).collect::<Vec<_>>(), v.parents, "parents of {id:?}");
        let history: Vec<VersionId> = store.history(&v.key, id, 4).expect("history").iter().map(|v| v.id).collect();
        assert_eq!(history, model.history(*id, 4), "history of {id:?}");
    }
    for (key, order) in &model.order {
        let stored: Vec<VersionId> = store.versions(key).expect("versions").iter().map(|v| v.id).collect();
        assert_eq!(&stored, order, "versions of {key}");
        let with_children: BTreeSet<VersionId> =
            model.versions.values().filter(|v| &v.key == key).flat_map(|v| v.parents.iter().copied()).collect();
        let heads: BTreeSet<VersionId> = order.iter().copied().filter(|v| !with_children.contains(v)).collect();
        let stored_heads: BTreeSet<VersionId> = store.heads(key).expect("heads").iter().map(|v| v.id).collect();
        assert_eq!(stored_heads, heads, "heads of {key}");
        for (i, &a) in order.iter().enumerate().step_by(3) {
            for &b in order.iter().skip(i + 1).step_by(2) {
                let bases: BTreeSet<VersionId> =
                    store.merge_bases(key, &a, &b).expect("bases").iter().map(|v| v.id).collect();
                assert_eq!(bases, model.merge_bases(a, b), "merge bases of {a:?} and {b:?}");
            }
        }
        let refs = store.refs(key).expect("refs");
        assert_eq!(refs.get("main").map(|t| t.version.id), model.branch.get(key).copied(), "branch main of {key}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_store_agrees_with_a_model_of_version_dags(ops in prop::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = open(dir.path());
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Put { key, base, root, edit, complete } => {
                    let key = format!("k{}", key % 3);
                    let existing = model.order.get(&key).cloned().unwrap_or_default();
                    let base = (!root && !existing.is_empty()).then(|| existing[usize::from(base) % existing.len()]);
                    let value = value_for(&key, edit, base.map(|b| model.versions[&b].value.as_slice()));
                    let storage = if complete { Storage::Complete } else { Storage::Delta };
                    let v = store.put_with(&key, base.as_ref(), &value, storage).expect("put");
                    if !model.versions.contains_key(&v.id) {
                        model.versions.insert(v.id, ModelVersion { key: key.clone(), parents: base.into_iter().collect(), value });
                        model.order.entry(key).or_default().push(v.id);
                    }
                }
                Op::Merge { key, a, b } => {
                    let key = format!("k{}", key % 3);
                    let existing = model.order.get(&key).cloned().unwrap_or_default();
                    if existing.len() < 2 {
                        continue;
                    }
                    let (a, b) = (existing[usize::from(a) % existing.len()], existing[usize::from(b) % existing.len()]);
                    if a == b {
                        continue;
                    }
                    let value = value_for(&key, 7, Some(&model.versions[&a].value));
                    let v = store.merge(&key, &a, &b, &value).expect("merge");
                    if !model.versions.contains_key(&v.id) {
                        model.versions.insert(v.id, ModelVersion { key: key.clone(), parents: vec![a, b], value });
                        model.order.entry(key).or_default().push(v.id);
                    }
                }
                Op::Branch { key, to } => {
                    let key = format!("k{}", key % 3);
                    let existing = model.order.get(&key).cloned().unwrap_or_default();
                    if existing.is_empty() {
                        continue;
                    }
                    let to = existing[usize::from(to) % existing.len()];
                    let expected = model.branch.get(&key).copied();
                    store.set_branch(&key, "main", expected.as_ref(), &to).expect("move branch");
                    // A stale expectation is refused and changes nothing.
                    if expected != Some(existing[0]) && to != existing[0] {
                        let stale = store.set_branch(&key, "main", Some(&existing[0]), &existing[0]);
                        prop_assert!(stale.is_err(), "a branch moved with a stale expectation");
                    }
                    model.branch.insert(key, to);
                }
                Op::Reopen => {
                    drop(store);
                    store = open(dir.path());
                }
            }
        }
        check(&store, &model);
        drop(store);
        check(&open(dir.path()), &model);
    }
}
