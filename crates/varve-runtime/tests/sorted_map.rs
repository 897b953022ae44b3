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
            SortedMap::<Vec<u8>, Vec<u8>>::open(Arc::clone(&ns), "map.m.s1", Options::default()).expect("structure");
        structure.insert(&b"c".to_vec(), &b"3".to_vec()).expect("insert");
        assert_eq!(ns.latest("map.m.at").expect("index"), 1 + 3, "the header, then ops 1..=3");
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
        SortedMap::<Vec<u8>, Vec<u8>>::open(Arc::clone(&ns), "map.m.s1", Options::default()).expect("structure");
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

/// A repair's swap, as `varve-repair`'s commit makes it (through the
/// runtime's `rename_logs`, which moves the map's index along): the op
/// log becomes the first free `_gen.m.N`, a copy holding `ops` becomes `m`.
fn swap_in(runtime: &Runtime, ns: &Arc<dyn Namespace>, ops: &[MapOp]) {
    runtime.create_log("m.copy", LogConfig::unbounded()).expect("create");
    for op in ops {
        runtime.append("m.copy", &op.encode()).expect("append");
    }
    let n = (1..=1_000).find(|n| ns.latest(&format!("_gen.m.{n}")).is_err()).expect("a free generation");
    let generation = format!("_gen.m.{n}");
    runtime.rename_logs(&[("m", generation.as_str()), ("m.copy", "m")]).expect("swap");
}

fn put_a(value: &[u8]) -> MapOp {
    MapOp::Put { key: b"a".to_vec(), value: value.to_vec() }
}

fn a_now(runtime: &Runtime, log: &str) -> Option<Vec<u8>> {
    runtime.sorted_map(log).expect("map").get(b"a", None).expect("get").map(|v| v.to_vec())
}

/// From a review: a swap after an old generation was deleted (`varve log
/// rm _gen.m.1`, so the next swap reuses the name) is seen too, running
/// and after a restart — the index moves with its op log, whatever the names.
#[test]
fn swaps_are_seen_also_after_an_old_generation_was_deleted() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    {
        let runtime = start(&ns);
        runtime.append("in", &put_a(b"1").encode()).expect("append");
        assert!(runtime.wait_idle(IDLE));
        assert_eq!(a_now(&runtime, "m").as_deref(), Some(&b"1"[..]));
        swap_in(&runtime, &ns, &[put_a(b"2")]); // m -> _gen.m.1
        assert_eq!(a_now(&runtime, "m").as_deref(), Some(&b"2"[..]));
        assert_eq!(a_now(&runtime, "_gen.m.1").as_deref(), Some(&b"1"[..]), "the old history's map");
        ns.delete_log("_gen.m.1").expect("drop the old generation");
        swap_in(&runtime, &ns, &[put_a(b"3")]); // m -> _gen.m.1 again (its old index is an orphan)
        assert_eq!(a_now(&runtime, "m").as_deref(), Some(&b"3"[..]), "running");
        assert_eq!(a_now(&runtime, "_gen.m.1").as_deref(), Some(&b"2"[..]));
        runtime.stop(IDLE);
    }
    ns.delete_log("_gen.m.1").expect("drop the old generation, stopped");
    let runtime = start(&ns);
    assert_eq!(a_now(&runtime, "m").as_deref(), Some(&b"3"[..]), "after a restart");
    runtime.stop(IDLE);
}

/// From a review: an op log deleted and created again through the runtime
/// starts a new map (its index goes first); one replaced without the
/// runtime is found by the index's check of the last op it applied.
#[test]
fn an_op_log_deleted_and_created_again_is_a_new_map() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    let runtime = start(&ns);
    runtime.append("in", &put_a(b"1").encode()).expect("append");
    assert!(runtime.wait_idle(IDLE));
    assert_eq!(a_now(&runtime, "m").as_deref(), Some(&b"1"[..]));
    runtime.delete_log("m").expect("delete");
    runtime.create_log("m", LogConfig::unbounded()).expect("create");
    runtime.append("in", &MapOp::Put { key: b"b".to_vec(), value: b"2".to_vec() }.encode()).expect("append");
    assert!(runtime.wait_idle(IDLE));
    assert_eq!(&ns.get("seen", 2).expect("seen:2")[..], b"2", "the handler read its own put");
    assert_eq!(a_now(&runtime, "m"), None, "the new op log holds b alone");
    runtime.stop(IDLE);

    // Without the runtime: the log replaced under it, one op long again.
    ns.delete_log("m").expect("delete");
    ns.create_log("m", LogConfig::unbounded()).expect("create");
    ns.append("m", &put_a(b"9").encode()).expect("append");
    let runtime = start(&ns);
    let map = runtime.sorted_map("m").expect("map");
    assert_eq!(map.get(b"a", None).expect("get").as_deref(), Some(&b"9"[..]));
    assert_eq!(map.get(b"b", None).expect("get"), None);
    runtime.stop(IDLE);

    // Deleted without the runtime, created again by it as it starts, with
    // the same op as the last the old map applied (so its CRC matches): the
    // runtime drops the index of a log it creates.
    ns.delete_log("m").expect("delete");
    let runtime = start(&ns);
    assert!(ns.latest("map.m.at").is_err(), "the old index is gone");
    runtime.append("m", &put_a(b"9").encode()).expect("append");
    runtime.append("m", &put_a(b"9").encode()).expect("append");
    assert_eq!(runtime.sorted_map("m").expect("map").latest().expect("latest"), 2);
    runtime.stop(IDLE);
}

/// From a review: a valid log name too long to name a map's own logs is
/// refused before anything is written, with what to do.
#[test]
fn a_long_op_log_name_is_refused_saying_what_to_do() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    let runtime = start(&ns);
    let name = "m".repeat(varve_runtime::OP_LOG_NAME_BYTES_MAX + 1);
    runtime.create_log(&name, LogConfig::unbounded()).expect("a valid log name");
    let logs_before = ns.list_logs().expect("logs").len();
    let error = runtime.sorted_map(&name).err().expect("too long for a map");
    assert!(error.to_string().contains("use a shorter log name"), "{error}");
    assert_eq!(ns.list_logs().expect("logs").len(), logs_before, "nothing created");
    let fits = "m".repeat(varve_runtime::OP_LOG_NAME_BYTES_MAX);
    runtime.create_log(&fits, LogConfig::unbounded()).expect("create");
    runtime.append(&fits, &put_a(b"1").encode()).expect("append");
    assert_eq!(a_now(&runtime, &fits).as_deref(), Some(&b"1"[..]));
    runtime.stop(IDLE);
}

fn put_kv(k: &[u8], v: &[u8]) -> MapOp {
    MapOp::Put { key: k.to_vec(), value: v.to_vec() }
}

/// From a second review: a rename that fails (its target log exists) must change nothing,
/// but `with_map_indexes` has already deleted the target's map index,
/// which was not an orphan: it described the live log `m2`.
#[test]
fn a_failed_rename_keeps_the_target_logs_map_index() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    let runtime = start(&ns);
    runtime.create_log("m2", LogConfig::unbounded()).expect("create");
    runtime.append("m", &put_a(b"1").encode()).expect("append");
    runtime.append("m2", &put_a(b"2").encode()).expect("append");
    assert_eq!(a_now(&runtime, "m").as_deref(), Some(&b"1"[..]));
    assert_eq!(a_now(&runtime, "m2").as_deref(), Some(&b"2"[..]));
    let error = runtime.rename_logs(&[("m", "m2")]).expect_err("m2 exists");
    println!("rename refused: {error}");
    assert!(ns.latest("map.m2.at").is_ok(), "a failed rename deleted m2's map index");
    runtime.stop(IDLE);
}

/// From a second review: the structure's `PEDaLS` logs deleted, its index kept: the map is
/// opened on an empty structure with the index's old versions, and a read
/// silently misses every op before the deletion.
#[test]
fn an_index_whose_structure_is_gone_is_not_trusted() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    {
        let runtime = start(&ns);
        runtime.append("m", &put_a(b"1").encode()).expect("append");
        runtime.append("m", &put_kv(b"b", b"2").encode()).expect("append");
        assert_eq!(a_now(&runtime, "m").as_deref(), Some(&b"1"[..]));
        runtime.stop(IDLE);
    }
    for info in ns.list_logs().expect("logs") {
        if info.name.starts_with("pds.map.m.s1.") {
            ns.delete_log(&info.name).expect("delete");
        }
    }
    let runtime = start(&ns);
    runtime.append("m", &put_kv(b"c", b"3").encode()).expect("append");
    let map = runtime.sorted_map("m").expect("map");
    let all: Vec<_> = map.range(None, None, None).expect("range").into_iter().map(|(k, _)| k.to_vec()).collect();
    assert_eq!(all, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()], "the map at version 3");
    runtime.stop(IDLE);
}

/// From a second review: an orphan index at the target of a swap is removed only when the
/// swapped log has an index itself. `_gen.m.1` deleted without the runtime
/// (`varve log rm`) leaves `map._gen.m.1.at`; the next repair's swap of an
/// `m` whose map was not read since the last one leaves that orphan in
/// place, and the new `_gen.m.1` reads as the history deleted before. Its
/// last op equal in both histories, the CRC check passes.
#[test]
fn an_orphan_index_at_the_generation_name_is_not_inherited() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    {
        let runtime = start(&ns);
        runtime.append("m", &put_a(b"1").encode()).expect("append");
        runtime.append("m", &put_kv(b"b", b"0").encode()).expect("append");
        assert_eq!(a_now(&runtime, "m").as_deref(), Some(&b"1"[..]));
        swap_in(&runtime, &ns, &[put_a(b"2"), put_kv(b"b", b"0")]); // m -> _gen.m.1 (with its index)
        runtime.stop(IDLE);
    }
    ns.delete_log("_gen.m.1").expect("varve log rm _gen.m.1, stopped");
    let runtime = start(&ns);
    swap_in(&runtime, &ns, &[put_a(b"3"), put_kv(b"b", b"0")]); // m (a=2, no index yet) -> _gen.m.1
    assert_eq!(a_now(&runtime, "m").as_deref(), Some(&b"3"[..]));
    assert_eq!(a_now(&runtime, "_gen.m.1").as_deref(), Some(&b"2"[..]), "the old history's map");
    runtime.stop(IDLE);
}

/// From a second review: a cached map whose index was renamed away and back (the log
/// renamed m -> x, ops put through x's map, x -> m) keeps its stale
/// `applied`: it reports too few versions and the next op fails.
#[test]
fn a_cached_map_renamed_away_and_back_sees_the_ops_put_meanwhile() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    let runtime = start(&ns);
    runtime.append("m", &put_a(b"1").encode()).expect("append");
    assert_eq!(a_now(&runtime, "m").as_deref(), Some(&b"1"[..]));
    runtime.rename_logs(&[("m", "x")]).expect("m -> x");
    runtime.append("x", &put_a(b"2").encode()).expect("append");
    runtime.append("x", &put_a(b"3").encode()).expect("append");
    assert_eq!(a_now(&runtime, "x").as_deref(), Some(&b"3"[..]));
    runtime.rename_logs(&[("x", "m")]).expect("x -> m");
    let map = runtime.sorted_map("m").expect("map");
    assert_eq!(map.latest().expect("latest"), 3, "three ops in m");
    runtime.append("m", &put_a(b"1").encode()).expect("append");
    assert_eq!(a_now(&runtime, "m").as_deref(), Some(&b"1"[..]));
    runtime.stop(IDLE);
}
