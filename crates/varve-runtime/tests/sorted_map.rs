//! Sorted maps that handlers build (`HandlerContext::sorted_map`): the map
//! at every version equals the ops folded in memory; the structure catches
//! up with ops it has not applied (appended without it, or cut off by a
//! crash between the structure and its version index); bad op records and
//! op logs that drop records are typed errors naming them. Repairs of such
//! maps are tested in varve-repair (`tests/sorted_map.rs`).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{fast_retry, IDLE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use varve_log::{JournalOptions, JournalStore, LogConfig, MemoryStore, Namespace, OnFull, Store, SyncPolicy};
use varve_pds::{Options, SortedMap};
use varve_runtime::{HandlerContext, MapOp, Runtime, RuntimeBuilder, RuntimeError};

/// `build` (on `in`): each input record is a list of ops for `m`.
fn build(ctx: &mut HandlerContext<'_>) -> varve_runtime::HandlerResult {
    let op = MapOp::decode("in", ctx.seq(), ctx.record())?;
    let map = ctx.sorted_map("m");
    match op {
        MapOp::Put { key, value } => map.put(&key, &value)?,
        MapOp::Delete { key } => map.delete(&key)?,
    };
    // A read after the write sees it.
    let now = map.get(match &MapOp::decode("in", ctx.seq(), ctx.record())? {
        MapOp::Put { key, .. } | MapOp::Delete { key } => key,
    })?;
    ctx.append("seen", now.as_deref().unwrap_or(b"-"))?;
    Ok(())
}

fn start(ns: &Arc<dyn Namespace>) -> Runtime {
    RuntimeBuilder::new(Arc::clone(ns))
        .concurrency(1)
        .log("in", LogConfig::unbounded())
        .log("m", LogConfig::unbounded())
        .log("seen", LogConfig::unbounded())
        .handler("build", fast_retry(1), build)
        .subscribe("in", "build")
        .start()
        .expect("runtime")
}

fn seed() -> u64 {
    let seed = std::env::var("VARVE_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(rand::random);
    println!("VARVE_SEED={seed}");
    seed
}

fn random_op(rng: &mut StdRng) -> MapOp {
    let key = vec![b'k', rng.gen_range(b'a'..=b'p')];
    if rng.gen_bool(0.25) {
        MapOp::Delete { key }
    } else {
        MapOp::Put { key, value: rng.gen::<u32>().to_le_bytes().to_vec() }
    }
}

type Folded = BTreeMap<Vec<u8>, Vec<u8>>;

fn read_all(runtime: &Runtime, at: u64) -> Folded {
    let map = runtime.sorted_map("m").expect("map");
    map.range(None, None, Some(at)).expect("range").into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
}

#[test]
fn every_version_of_the_map_is_the_ops_before_it_folded() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    let runtime = start(&ns);
    let mut ops = Vec::new();
    for _ in 0..120 {
        let op = random_op(&mut rng);
        runtime.append("in", &op.encode()).expect("append");
        ops.push(op);
    }
    assert!(runtime.wait_idle(IDLE), "seed {seed}");
    let map = runtime.sorted_map("m").expect("map");
    assert_eq!(map.latest().expect("latest"), 120, "one version per op, deletes of absent keys too");
    let mut folded = Folded::new();
    assert!(read_all(&runtime, 0).is_empty());
    for (i, op) in ops.iter().enumerate() {
        match op.clone() {
            MapOp::Put { key, value } => {
                folded.insert(key, value);
            }
            MapOp::Delete { key } => {
                folded.remove(&key);
            }
        }
        let at = i as u64 + 1;
        assert_eq!(read_all(&runtime, at), folded, "seed {seed}: version {at}");
        let key = [b'k', b'c'];
        assert_eq!(map.get(&key, Some(at)).expect("get").map(|v| v.to_vec()), folded.get(&key[..]).cloned());
    }
    // Half-open key ranges.
    let some: Vec<_> = map.range(Some(b"kc"), Some(b"kf"), None).expect("range").into_iter().map(|(k, _)| k).collect();
    assert!(some.iter().all(|k| k[..] >= b"kc"[..] && k[..] < b"kf"[..]), "{some:?}");
    assert_eq!(some.len(), folded.range(b"kc".to_vec()..b"kf".to_vec()).count());
    let error = map.get(b"ka", Some(121)).expect_err("no version 121");
    assert!(error.to_string().contains("versions 0..=120"), "{error}");
    runtime.stop(IDLE);
}

#[test]
fn the_structure_catches_up_with_ops_it_has_not_applied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = || -> Arc<dyn Namespace> {
        let store = JournalStore::open(dir.path(), JournalOptions { sync: SyncPolicy::Never, ..Default::default() })
            .expect("store");
        Arc::new(store.journal_namespace("app").expect("namespace"))
    };
    let put = |k: &[u8], v: &[u8]| MapOp::Put { key: k.to_vec(), value: v.to_vec() }.encode();
    {
        let ns = open();
        let runtime = start(&ns);
        runtime.append("in", &put(b"a", b"1")).expect("append");
        assert!(runtime.wait_idle(IDLE));
        // Ops appended to the op log without the map (a client of the
        // runtime, say): the next read applies them.
        runtime.append("m", &put(b"b", b"2")).expect("append");
        runtime.append("m", &MapOp::Delete { key: b"a".to_vec() }.encode()).expect("append");
        let map = runtime.sorted_map("m").expect("map");
        assert_eq!(map.latest().expect("latest"), 3);
        assert_eq!(map.get(b"a", Some(1)).expect("get").as_deref(), Some(&b"1"[..]));
        assert_eq!(map.get(b"a", None).expect("get"), None);
        runtime.append("m", &put(b"c", b"3")).expect("append");
        runtime.stop(IDLE);
    }
    {
        // As if the process died after the structure took op 4 but before
        // its version index did: the structure is a version ahead.
        let ns = open();
        let mut structure =
            SortedMap::<Vec<u8>, Vec<u8>>::open(Arc::clone(&ns), "map.m.g1", Options::default()).expect("structure");
        structure.insert(&b"c".to_vec(), &b"3".to_vec()).expect("insert");
        assert_eq!(ns.latest("map.m.g1.at").expect("index"), 3);
    }
    let ns = open();
    let runtime = start(&ns);
    let map = runtime.sorted_map("m").expect("map");
    assert_eq!(map.latest().expect("latest"), 4);
    let all = |at| -> Vec<(Vec<u8>, Vec<u8>)> {
        map.range(None, None, Some(at)).expect("range").into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
    };
    assert_eq!(all(3), vec![(b"b".to_vec(), b"2".to_vec())]);
    assert_eq!(all(4), vec![(b"b".to_vec(), b"2".to_vec()), (b"c".to_vec(), b"3".to_vec())]);
    // Re-applying op 4 changed nothing: the structure has one version per change.
    let structure =
        SortedMap::<Vec<u8>, Vec<u8>>::open(Arc::clone(&ns), "map.m.g1", Options::default()).expect("structure");
    assert_eq!(structure.latest().expect("latest"), 4);
    runtime.stop(IDLE);
}

#[test]
fn a_record_that_is_not_an_op_and_a_log_that_drops_records_are_errors_naming_them() {
    for (bytes, why) in [
        (&b""[..], "an empty record"),
        (&b"\x07abc"[..], "unknown kind 7"),
        (&b"\x01\x05\x00\x00\x00ab"[..], "key is cut short"),
        (&b"\x01\x05"[..], "without its key length"),
    ] {
        let error = MapOp::decode("m", 9, bytes).expect_err("not an op");
        assert!(error.to_string().contains("m:9 is not a sorted-map op") && error.to_string().contains(why), "{error}");
    }
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    let runtime = start(&ns);
    runtime.append("m", b"\x07junk").expect("append");
    let error = runtime.sorted_map("m").err().expect("a junk op");
    assert!(matches!(error, RuntimeError::InvalidArgument { .. }) && error.to_string().contains("m:1"), "{error}");
    runtime.create_log("ring", LogConfig::keep(4, OnFull::Overwrite)).expect("create");
    let error = runtime.sorted_map("ring").err().expect("a ring log");
    assert!(error.to_string().contains("drops its oldest records"), "{error}");
    runtime.stop(IDLE);
}
