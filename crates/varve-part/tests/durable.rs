//! `DurableMap` (§4.1): round trips against a `BTreeMap` model on memory and
//! on the journal, checkpoints while batches go on, reclaiming generations,
//! injected I/O faults, and decoder fuzzing. `VARVE_SEED=S` replays a run.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use varve_log::{JournalOptions, JournalStore, MemoryStore, Namespace, Store, SyncPolicy};
use varve_part::durable::{testing, DurableError, DurableMap, DurableOptions};
use varve_part::BatchOp;
use varve_pds::testing::FaultyNamespace;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn seed() -> u64 {
    let seed = varve_testkit::seed::from_env_or_clock();
    println!("seed {seed} ({})", varve_testkit::seed::replay_hint(seed));
    seed
}

fn memory_ns() -> Arc<dyn Namespace> {
    MemoryStore::new().namespace("test").expect("namespace")
}

fn random_batch(rng: &mut StdRng, keys: u32, size: usize) -> Vec<BatchOp<Vec<u8>>> {
    (0..size)
        .map(|_| {
            // Short keys that are prefixes of each other, and longer ones.
            let k = rng.gen_range(0..keys);
            let key = if k % 3 == 0 { k.to_be_bytes()[2..].to_vec() } else { k.to_be_bytes().to_vec() };
            if rng.gen_bool(0.2) {
                BatchOp::Delete(key)
            } else {
                let len = rng.gen_range(0..12);
                BatchOp::Put(key, (0..len).map(|_| rng.gen()).collect())
            }
        })
        .collect()
}

fn apply_model(model: &mut Model, ops: &[BatchOp<Vec<u8>>]) {
    for op in ops {
        match op {
            BatchOp::Put(k, v) => {
                model.insert(k.clone(), v.clone());
            }
            BatchOp::Delete(k) => {
                model.remove(k);
            }
        }
    }
}

fn assert_equals(map: &DurableMap<Vec<u8>>, model: &Model, context: &str) {
    let got: Vec<(Vec<u8>, Vec<u8>)> = map.iter().map(|(k, v)| (k, v.clone())).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len(), "{context}: length");
    assert!(got == want, "{context}: contents differ");
    varve_part::testing::check_invariants(map);
}

fn open(ns: &Arc<dyn Namespace>, options: DurableOptions) -> DurableMap<Vec<u8>> {
    DurableMap::open(ns.clone(), "m", options).expect("open")
}

/// Batches, checkpoints (full and incremental, several generations) and
/// reopens at random points, each compared with the model.
fn round_trips(ns: &Arc<dyn Namespace>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let options = DurableOptions { depth_threshold: 1 + (seed % 2) as usize, full_every: 3 };
    let mut model = Model::new();
    let mut map = open(ns, options);
    let mut fulls = 0;
    for step in 0..60 {
        let keys = if step % 2 == 0 { 3000 } else { 200_000 };
        let size = rng.gen_range(1..400);
        let batch = random_batch(&mut rng, keys, size);
        apply_model(&mut model, &batch);
        map.apply(batch).expect("apply");
        match rng.gen_range(0..10) {
            0..=2 => {
                let stats = map.checkpoint().expect("checkpoint");
                fulls += u32::from(stats.full);
            }
            3 => {
                drop(map);
                map = open(ns, options);
                assert_equals(&map, &model, &format!("seed {seed} step {step} reopen"));
            }
            _ => {}
        }
    }
    map.checkpoint().expect("checkpoint");
    drop(map);
    let map = open(ns, options);
    assert_equals(&map, &model, &format!("seed {seed} final"));
    assert!(fulls >= 2, "several generations were written");
    // Reclaim: only the current generation's logs (and the manifest) remain.
    let logs: Vec<String> = ns.list_logs().expect("list").into_iter().map(|l| l.name).collect();
    assert_eq!(logs.iter().filter(|l| l.starts_with("m.blobs.")).count(), 1, "{logs:?}");
    assert!(logs.iter().filter(|l| l.starts_with("m.batches.")).count() <= 2, "{logs:?}");
}

#[test]
fn round_trips_on_memory() {
    let seed = seed();
    for s in 0..4 {
        round_trips(&memory_ns(), seed.wrapping_add(s));
    }
}

#[test]
fn round_trips_on_journal() {
    let seed = seed();
    let dir = tempfile::tempdir().expect("tempdir");
    let options = JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() };
    {
        let store = JournalStore::open(dir.path(), options).expect("store");
        let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("ns").expect("namespace"));
        round_trips(&ns, seed);
    }
    // And across a reopen of the journal itself.
    let store = JournalStore::open(dir.path(), options).expect("store");
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("ns").expect("namespace"));
    let map = open(&ns, DurableOptions::default());
    assert!(!map.is_empty());
}

#[test]
fn empty_and_single_entry_maps_round_trip() {
    let ns = memory_ns();
    let mut map = open(&ns, DurableOptions::default());
    map.checkpoint().expect("empty checkpoint");
    drop(map);
    let mut map = open(&ns, DurableOptions::default());
    assert!(map.is_empty());
    map.insert(b"only", b"one".to_vec()).expect("insert");
    map.checkpoint().expect("checkpoint");
    drop(map);
    let mut map = open(&ns, DurableOptions::default());
    assert_eq!(map.get(b"only"), Some(&b"one".to_vec()));
    map.insert(b"", b"empty key".to_vec()).expect("insert");
    map.remove(b"only").expect("remove");
    drop(map);
    let map = open(&ns, DurableOptions::default());
    assert_eq!(map.len(), 1);
    assert_eq!(map.get(b""), Some(&b"empty key".to_vec()));
}

/// The expensive write runs on another thread while batches go on; both
/// the checkpoint and the later batches survive a reopen, and the next
/// incremental checkpoint reuses the subtrees the first one wrote.
#[test]
fn checkpoint_runs_while_batches_are_applied() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let ns = memory_ns();
    let mut map = open(&ns, DurableOptions::default());
    let mut model = Model::new();
    for _ in 0..20 {
        let batch = random_batch(&mut rng, 1 << 20, 1000);
        apply_model(&mut model, &batch);
        map.apply(batch).expect("apply");
    }
    let job = map.begin_checkpoint().expect("begin");
    assert!(matches!(map.begin_checkpoint(), Err(DurableError::CheckpointInFlight { .. })));
    let writer = std::thread::spawn(move || job.write());
    for _ in 0..50 {
        let batch = random_batch(&mut rng, 1 << 20, 4);
        apply_model(&mut model, &batch);
        map.apply(batch).expect("apply during checkpoint");
    }
    let written = writer.join().expect("writer thread").expect("write");
    let first = map.commit_checkpoint(written).expect("commit");
    assert!(first.full);
    let second = map.checkpoint().expect("incremental");
    assert!(!second.full);
    assert!(second.reused > 0, "{second:?}");
    assert!(second.blob_bytes * 2 < first.blob_bytes, "first {first:?}, second {second:?}");
    for _ in 0..5 {
        let batch = random_batch(&mut rng, 1 << 20, 100);
        apply_model(&mut model, &batch);
        map.apply(batch).expect("apply");
    }
    drop(map);
    let map = open(&ns, DurableOptions::default());
    assert_equals(&map, &model, &format!("seed {seed}"));
}

/// A write failing during a checkpoint: the error is returned, the map
/// goes on (batches and later checkpoints work), and a reopen falls back
/// to the previous checkpoint plus the batches.
#[test]
fn io_failure_during_checkpoint_falls_back_to_the_previous_one() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut failed = 0;
    // full_every 2: the third checkpoint is full (log creations, blob
    // records, sync, manifest, deletions); 8: incremental, with deltas.
    for (full_every, fail_at) in [2, 8].into_iter().flat_map(|f| (0..8).map(move |at| (f, at))) {
        let faulty = FaultyNamespace::new(memory_ns());
        let ns: Arc<dyn Namespace> = faulty.clone();
        let mut map = open(&ns, DurableOptions { depth_threshold: 2, full_every });
        let mut model = Model::new();
        for round in 0..3 {
            let size = if round == 2 && full_every == 8 { 300 } else { 3000 };
            let batch = random_batch(&mut rng, 1 << 20, size);
            apply_model(&mut model, &batch);
            map.apply(batch).expect("apply");
            if round < 2 {
                map.checkpoint().expect("checkpoint");
            }
        }
        let manifests_before = ns.latest("m.manifest").expect("latest");
        faulty.fail_before(faulty.writes() + fail_at);
        let result = map.checkpoint();
        if faulty.injected() == 0 {
            continue; // the checkpoint had fewer writes than fail_at
        }
        match result {
            Ok(_) | Err(DurableError::Log(_)) => {}
            Err(other) => panic!("unexpected error {other}"),
        }
        let fell_back = ns.latest("m.manifest").expect("latest") == manifests_before;
        failed += usize::from(fell_back);
        let context = format!("seed {seed} full_every {full_every} fail_at {fail_at} fell back {fell_back}");
        let batch = random_batch(&mut rng, 1 << 20, 100);
        apply_model(&mut model, &batch);
        map.apply(batch).expect("the map goes on after a failed checkpoint");
        assert_equals(&map, &model, &format!("{context}: in memory"));
        // Another handle reads what is on the logs: the previous checkpoint
        // (or the new one, if only a step after the manifest failed) plus
        // every batch.
        let reader = open(&ns, DurableOptions::default());
        assert_equals(&reader, &model, &format!("{context}: reopened"));
        drop(reader);
        // The same map checkpoints again (incremental or full), then reopens.
        map.checkpoint().expect("a later checkpoint works");
        map.checkpoint().expect("and another");
        drop(map);
        let map = open(&ns, DurableOptions::default());
        assert_equals(&map, &model, &format!("{context}: after later checkpoints"));
    }
    assert!(failed >= 6, "most injected faults hit before the manifest ({failed})");
}

/// A failed batch append poisons updates (the record may have landed);
/// reads go on, and a reopen recovers from the logs.
#[test]
fn failed_batch_append_poisons_updates_until_reopen() {
    let faulty = FaultyNamespace::new(memory_ns());
    let ns: Arc<dyn Namespace> = faulty.clone();
    let mut map = open(&ns, DurableOptions::default());
    map.insert(b"a", b"1".to_vec()).expect("insert");
    faulty.lose_ack(faulty.writes());
    assert!(map.insert(b"b", b"2".to_vec()).is_err());
    assert!(matches!(map.insert(b"c", b"3".to_vec()), Err(DurableError::Poisoned { .. })));
    assert_eq!(map.get(b"a"), Some(&b"1".to_vec()));
    drop(map);
    let map = open(&ns, DurableOptions::default());
    assert_eq!(map.get(b"b"), Some(&b"2".to_vec()), "the written batch is all there");
    assert_eq!(map.get(b"c"), None);
}

/// Seeded random bytes and bit flips of valid records never panic the
/// decoders; damage is reported with log, seq and offset.
#[test]
fn decoders_reject_bad_bytes_without_panicking() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let ns = memory_ns();
    let mut map = open(&ns, DurableOptions::default());
    for _ in 0..5 {
        map.apply(random_batch(&mut rng, 1 << 16, 500)).expect("apply");
    }
    let batch = ns.get("m.batches.1", 1).expect("batch record");
    map.checkpoint().expect("checkpoint");
    let manifest_seq = ns.latest("m.manifest").expect("latest");
    let manifest = ns.get("m.manifest", manifest_seq).expect("manifest");
    // The first checkpoint is full: it starts generation 2.
    let blob = ns.get("m.blobs.2", 1).expect("blob record");
    assert!(testing::load_manifest(ns.as_ref(), "m", &manifest, manifest_seq).is_ok());
    for i in 0..3000 {
        let len = rng.gen_range(0..64);
        let junk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let _ = testing::decode_batch_record(&junk);
        let _ = testing::decode_blob_record(&junk);
        let _ = testing::load_manifest(ns.as_ref(), "m", &junk, 1);
        for valid in [&manifest, &blob, &batch] {
            let mut bad = valid.to_vec();
            let at = rng.gen_range(0..bad.len());
            bad[at] ^= 1 << rng.gen_range(0..8);
            assert!(testing::decode_batch_record(&bad).is_err(), "seed {seed} case {i}: a flip passes the CRC");
            assert!(testing::decode_blob_record(&bad).is_err());
            assert!(testing::load_manifest(ns.as_ref(), "m", &bad, 1).is_err());
            let cut = &valid[..rng.gen_range(0..valid.len())];
            assert!(testing::decode_blob_record(cut).is_err());
        }
    }
    // Damage a stored blob record: open names the log and seq.
    let ns2 = memory_ns();
    for log in ["m.manifest", "m.batches.2", "m.blobs.2"] {
        ns2.create_log(log, ns.log_info(log).expect("info").config).expect("create");
    }
    let mut bad = blob.to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xFF;
    ns2.append("m.blobs.2", &bad).expect("append");
    for seq in 2..=ns.latest("m.blobs.2").expect("latest") {
        ns2.append("m.blobs.2", &ns.get("m.blobs.2", seq).expect("get")).expect("append");
    }
    ns2.append("m.manifest", &manifest).expect("append");
    match DurableMap::<Vec<u8>>::open(ns2, "m", DurableOptions::default()) {
        Err(DurableError::Corrupt { log, seq, .. }) => {
            assert_eq!((log.as_str(), seq), ("m.blobs.2", 1));
        }
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(_) => panic!("expected Corrupt, opened"),
    }
}

/// Records whose checksum is right but whose body is damaged or random
/// (what a bug, not the disk, would produce) reach the structural decoder:
/// it must return errors, never panic, and bound its recursion.
#[test]
fn structural_decoder_survives_sealed_garbage() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let ns = memory_ns();
    let mut map = open(&ns, DurableOptions::default());
    for _ in 0..5 {
        map.apply(random_batch(&mut rng, 1 << 16, 500)).expect("apply");
    }
    map.checkpoint().expect("full");
    map.apply(random_batch(&mut rng, 1 << 16, 20)).expect("apply");
    map.checkpoint().expect("incremental (deltas)");
    let manifest_seq = ns.latest("m.manifest").expect("latest");
    let valid: Vec<Vec<u8>> = vec![
        ns.get("m.manifest", manifest_seq).expect("manifest").to_vec(),
        ns.get("m.blobs.2", ns.latest("m.blobs.2").expect("latest")).expect("blobs").to_vec(),
        ns.get("m.batches.2", 1).expect("batch").to_vec(),
    ];
    for case in 0..4000 {
        let body: Vec<u8> = if case % 2 == 0 {
            let mut body = vec![1u8];
            body.extend((0..rng.gen_range(0..48)).map(|_| rng.gen::<u8>()));
            body
        } else {
            let record = &valid[rng.gen_range(0..valid.len())];
            let mut body = record[..record.len() - 4].to_vec();
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(1..body.len());
                body[at] = rng.gen();
            }
            if rng.gen_bool(0.2) {
                body.truncate(rng.gen_range(1..body.len()));
            }
            body
        };
        let record = testing::seal(body);
        let _ = testing::decode_batch_record(&record);
        let _ = testing::decode_blob_record(&record);
        let _ = testing::load_manifest(ns.as_ref(), "m", &record, manifest_seq);
    }
    // Inline nodes nested past TREE_DEPTH_MAX: an error, not a stack overflow.
    let mut body = vec![1u8];
    body.extend([1, 2, 2, 1, 0, 0, 0, 2]); // header fields, then top = node
    for _ in 0..5000 {
        body.extend([0, 0, 1, 0, 1]); // no prefix, no value, one child: inline node
    }
    let deep = testing::load_manifest(ns.as_ref(), "m", &testing::seal(body), 1);
    assert!(matches!(deep, Err(DurableError::Corrupt { .. })), "{deep:?}");
    // A record of another format version is refused as such.
    let mut future = valid[0][..valid[0].len() - 4].to_vec();
    future[0] = 2;
    let refused = testing::load_manifest(ns.as_ref(), "m", &testing::seal(future), 7);
    assert!(
        matches!(&refused, Err(DurableError::Version { log, seq: 7, found: 2, expected: 1 }) if log == "m.manifest"),
        "{refused:?}"
    );
    println!("seed {seed}: 4000 sealed garbage records rejected or decoded without panic");
}

/// Keys that are prefixes of each other make a tree as deep as their
/// count: checkpoints and reopens walk it on a deep stack up to
/// `TREE_DEPTH_MAX` levels, and refuse deeper trees with an error.
#[test]
fn deep_trees_checkpoint_up_to_the_limit_and_are_refused_beyond() {
    let ns = memory_ns();
    let mut map = open(&ns, DurableOptions::default());
    let mut model = Model::new();
    let batch: Vec<BatchOp<Vec<u8>>> = (1..=1000).map(|n| BatchOp::Put(vec![b'a'; n], vec![1])).collect();
    apply_model(&mut model, &batch);
    map.apply(batch).expect("apply");
    map.checkpoint().expect("a 1000-level tree checkpoints");
    map.insert(b"aab", vec![2]).expect("insert");
    model.insert(b"aab".to_vec(), vec![2]);
    map.checkpoint().expect("incremental");
    drop(map);
    let mut map = open(&ns, DurableOptions::default());
    assert_equals(&map, &model, "deep tree reopened");
    let batch: Vec<BatchOp<Vec<u8>>> = (1001..=1100).map(|n| BatchOp::Put(vec![b'a'; n], vec![3])).collect();
    map.apply(batch).expect("apply");
    assert!(matches!(map.checkpoint(), Err(DurableError::TooDeep)));
    map.insert(b"b", vec![4]).expect("the map goes on");
}

/// A generation holds one full checkpoint, then incremental ones until
/// `full_every` or until it has written twice its full checkpoint's bytes.
#[test]
fn generations_start_on_schedule() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let ns = memory_ns();
    let mut map = open(&ns, DurableOptions { depth_threshold: 1, full_every: 4 });
    let mut kinds = String::new();
    for round in 0..13 {
        // Load, then small changes, except rewrites of most keys in rounds
        // 9 and 10 (right after round 8's full checkpoint).
        let size = match round {
            0 => 20_000,
            9 | 10 => 10_000,
            _ => 20,
        };
        map.apply(random_batch(&mut rng, 5000, size)).expect("apply");
        let stats = map.checkpoint().expect("checkpoint");
        kinds.push(if stats.full { 'F' } else { 'i' });
    }
    // Rounds 9 and 10 rewrite about the whole map: the generation has
    // written twice its full checkpoint's bytes, and round 10 or 11 starts
    // a new one before its fourth checkpoint (full_every alone: round 12).
    assert_eq!(&kinds[..10], "FiiiFiiiFi", "seed {seed}");
    assert!(kinds[10..12].contains('F'), "seed {seed}: {kinds}");
}

/// `checkpoints` lists the manifest log's kept records, oldest first, each
/// saying where replay starts after it; the log keeps `MANIFESTS_KEPT`.
#[test]
fn checkpoints_list_the_kept_manifest_records() {
    let ns = memory_ns();
    let mut map = open(&ns, DurableOptions { depth_threshold: 1, full_every: 3 });
    assert!(map.checkpoints().expect("none yet").is_empty());
    let kept = varve_part::durable::MANIFESTS_KEPT;
    for round in 1..=kept + 2 {
        map.insert(&round.to_be_bytes(), b"v".to_vec()).expect("insert");
        map.checkpoint().expect("checkpoint");
    }
    let records = map.checkpoints().expect("checkpoints");
    assert_eq!(records.len() as u64, kept, "older records are trimmed");
    let last = records.last().expect("in force");
    assert_eq!((last.manifest_seq, last.number), (kept + 2, kept + 2));
    assert_eq!(last.batch_generation, map.batch_generation());
    for pair in records.windows(2) {
        assert_eq!(pair[1].manifest_seq, pair[0].manifest_seq + 1);
        assert!(pair[1].generation >= pair[0].generation);
    }
    // full_every 3: checkpoints 1, 4, 7, 10 start generations; replay after
    // a full one starts at the first batch of its new batch log.
    for record in &records {
        assert_eq!(record.full, record.number % 3 == 1, "{record:?}");
        if record.full {
            assert_eq!(record.batch_seq, 0, "{record:?}");
        }
    }
    drop(map);
    let reopened = open(&ns, DurableOptions::default());
    assert_eq!(reopened.checkpoints().expect("after reopen"), records);
}
