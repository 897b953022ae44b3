//! `ArtMap::compact` under an allocator that counts (and on request logs)
//! this thread's heap: it copies nothing a snapshot shares, leaks nothing,
//! and lays the new tree in memory no old block was freed from; snapshots
//! read on other threads meanwhile stay whole. (Most of these came from a
//! review of the first version, which copied Node256 chunks shared with a
//! snapshot and freed chunks and child vectors during its walk.)
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};

use varve_part::testing::check_invariants;
use varve_part::ArtMap;

/// Per thread, so tests running in parallel do not disturb each other.
struct Counting;
thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static LOGGING: Cell<bool> = const { Cell::new(false) };
    /// (address, size, allocated: true / freed: false), preallocated.
    static LOG: RefCell<Vec<(usize, usize, bool)>> = const { RefCell::new(Vec::new()) };
}

fn note(ptr: *mut u8, size: usize, allocated: bool) {
    let _ = LIVE.try_with(|live| {
        let size = isize::try_from(size).expect("sizes fit isize");
        live.set(live.get() + if allocated { size } else { -size });
    });
    if LOGGING.try_with(Cell::get).unwrap_or(false) {
        let _ = LOG.try_with(|log| {
            if let Ok(mut log) = log.try_borrow_mut() {
                if log.len() < log.capacity() {
                    log.push((ptr as usize, size, allocated));
                }
            }
        });
    }
}

// SAFETY: forwards every call to the system allocator; only counts and logs.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        note(ptr, layout.size(), true);
        ptr
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(ptr, layout.size(), false);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.with(Cell::get)
}

fn xorshift(mut x: u32) -> impl FnMut() -> u32 {
    move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    }
}

/// A Node256 the map holds alone may share 15 of its 16 chunks with a
/// snapshot (path copying copies one chunk): those stay shared.
#[test]
fn compaction_copies_no_node256_chunk_a_snapshot_shares() {
    let mut map = ArtMap::new();
    for b in 0..=255u8 {
        for x in 0..2u8 {
            map.insert(&[b, x], u32::from(b));
        }
    }
    let snapshot = map.snapshot();
    map.insert(&[0, 5], 7); // copies the root and its chunk 0 only
    let before = live();
    let done = map.compact();
    let grown = live() - before;
    check_invariants(&map);
    assert_eq!((map.len(), snapshot.len()), (513, 512));
    assert_eq!(map.get(&[0, 5]), Some(&7));
    assert_eq!(snapshot.get(&[0, 5]), None);
    assert!(grown <= 0, "compaction with a snapshot alive grew the heap by {grown} bytes ({done:?})");
}

#[test]
fn compaction_with_a_snapshot_alive_does_not_grow_the_heap_at_scale() {
    let mut next = xorshift(0x1234_5678);
    let mut map = ArtMap::new();
    for _ in 0..200_000 {
        let k = next();
        map.insert(&k.to_be_bytes(), k);
    }
    let snapshot = map.snapshot();
    for _ in 0..2_000 {
        let k = next();
        map.insert(&k.to_be_bytes(), k);
    }
    let before = live();
    let done = map.compact();
    let grown = live() - before;
    assert!(grown <= 0, "compaction with a snapshot alive grew the heap by {grown} bytes ({done:?})");
    assert!(done.nodes_moved > 0 && done.nodes_shared > 0, "{done:?}");
    check_invariants(&map);
    drop(snapshot);
}

#[test]
fn compaction_allocates_the_new_tree_in_no_block_the_old_one_freed() {
    let mut next = xorshift(0x9e37_79b9);
    let mut map = ArtMap::new();
    for _ in 0..200_000 {
        let k = next();
        map.insert(&k.to_be_bytes(), k);
    }
    LOG.with(|log| log.borrow_mut().reserve_exact(4_000_000));
    LOGGING.with(|on| on.set(true));
    let done = map.compact();
    LOGGING.with(|on| on.set(false));
    let log = LOG.with(|log| std::mem::take(&mut *log.borrow_mut()));
    // Blocks of the new tree (alive after compaction) at an address freed
    // earlier in it.
    let mut freed = HashMap::new();
    let mut reused = HashMap::<usize, usize>::new();
    for &(address, size, allocated) in &log {
        if allocated {
            if freed.contains_key(&address) {
                reused.insert(address, size);
            }
        } else {
            reused.remove(&address);
            freed.insert(address, size);
        }
    }
    let mut by_size = BTreeMap::<usize, usize>::new();
    for size in reused.values() {
        *by_size.entry(*size).or_default() += 1;
    }
    assert!(reused.is_empty(), "{done:?}: new blocks at freed addresses, by size: {by_size:?}");
}

/// Everything compaction allocates is freed with the map: with and without
/// a snapshot, values on inner nodes, long suffixes, a Node256 root.
#[test]
fn compaction_leaks_nothing() {
    let start = live();
    {
        let mut map: ArtMap<Vec<u8>> = ArtMap::new();
        for i in 0..3000u32 {
            let mut k = i.to_be_bytes().to_vec();
            map.insert(&k, k.clone());
            k.extend_from_slice(b"-a-long-suffix-of-more-than-ten-bytes");
            map.insert(&k, k.clone());
        }
        for b in 0..=255u8 {
            map.insert(&[b], vec![b]);
            map.insert(&[b, b], vec![b]);
        }
        let snapshot = map.snapshot();
        for i in (0..3000u32).step_by(7) {
            map.remove(&i.to_be_bytes());
        }
        map.insert(&[9, 9, 9], vec![1]);
        map.compact();
        check_invariants(&map);
        let before: Vec<_> = snapshot.iter().map(|(k, v)| (k, v.clone())).collect();
        drop(snapshot);
        map.compact();
        check_invariants(&map);
        assert_eq!(map.len(), before.len() - 3000 / 7 - 1 + 1);
    }
    assert_eq!(live(), start, "all freed");
}

/// Snapshots read on other threads while the map is updated and compacted;
/// keys that are prefixes of each other, long suffixes, a wide root.
#[test]
fn compaction_beside_snapshots_read_on_other_threads() {
    let mut map: ArtMap<u64> = ArtMap::new();
    let mut model = BTreeMap::new();
    let key = |i: u64| -> Vec<u8> {
        let mut k = vec![u8::try_from(i % 256).expect("byte")];
        k.extend(std::iter::repeat_n(b'x', usize::try_from(i % 13).expect("small")));
        k.extend_from_slice(&(i / 256).to_be_bytes()[6..]);
        k
    };
    for round in 0..20u64 {
        for i in 0..2000u64 {
            let i = i * 31 + round * 7;
            if i % 5 == 0 {
                map.remove(&key(i));
                model.remove(&key(i));
            } else {
                map.insert(&key(i), i);
                model.insert(key(i), i);
                map.insert(&key(i)[..1], i);
                model.insert(key(i)[..1].to_vec(), i);
            }
        }
        let snapshot = map.snapshot();
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
        let reader = std::thread::spawn(move || {
            for _ in 0..3 {
                let got: Vec<_> = snapshot.iter().map(|(k, v)| (k, *v)).collect();
                assert_eq!(got, want);
            }
        });
        map.insert(&key(round), round);
        model.insert(key(round), round);
        map.compact();
        check_invariants(&map);
        let got: Vec<_> = map.iter().map(|(k, v)| (k, *v)).collect();
        assert_eq!(got, model.iter().map(|(k, v)| (k.clone(), *v)).collect::<Vec<_>>());
        let prefixed: Vec<_> = map.prefix(&[7]).map(|(k, _)| k).collect();
        assert_eq!(prefixed, model.keys().filter(|k| k.starts_with(&[7])).cloned().collect::<Vec<_>>());
        reader.join().expect("reader");
    }
}
