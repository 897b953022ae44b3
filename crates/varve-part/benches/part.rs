//! PART against the maps people would pick instead (issue 5 "Benchmarks";
//! the paper's §3.6 microbenchmarks, Figures 9–10, and §5.1 streaming word
//! count). One criterion binary, every structure in the same process, each
//! built once per size and dropped before the next, so one 10M map at a time
//! is in memory.
//!
//! `make bench-part` runs it and `scripts/part_report.py` turns
//! `$CRITERION_HOME/part-*` (medians; `target/criterion-part` there) plus `part_memory.json` and
//! `part_meta.json` (written here) into the PART section of `docs/benchmarks.md` and
//! `docs/part_*.png`.
//!
//! `VARVE_BENCH_ONLY=maps,union,wordcount` (any subset) runs only those parts.
//!
//! Scale (`VARVE_BENCH_SCALE`): `full` = 1M and 10M keys with 4-byte values,
//! 1M keys with 1 KiB values; `quick` = 100k keys; `tiny` = 5k keys. When
//! criterion runs in test mode (`cargo test --benches`, or `-- --test`, or
//! without `--bench`) the default is `tiny`, otherwise `full`.
//!
//! What is measured (times are per operation unless said otherwise):
//! - `lookup_hit` / `lookup_miss`: one `get` of a random present / absent key;
//! - `scan`: one full scan summing the values (a whole scan per iteration;
//!   `Iterator::sum`, so each structure's `fold`);
//! - `range100`: the 100 entries from a random start (ordered maps only);
//! - `insert_snap1` / `insert_snap1000` / `insert_never`: one insert of a
//!   fresh random key into a map of N entries, taking a snapshot after every
//!   1 / 1,000 inserts / never and keeping only the latest snapshot. The
//!   inserted keys are removed again between samples, outside the timed
//!   part, so the map stays at N entries and is not shared with anything
//!   when a sample starts. Snapshot = `snapshot()` for PART and rart,
//!   `clone()` for imbl, rpds and vart (all O(1)); the mutable maps only run
//!   `insert_never` (cloning 1M entries per insert is not a contender);
//! - `union_slice` / `union_random`: union of two 1M maps, the second made
//!   from the first by updating the lowest 10% of the key space (90% of the
//!   structure shared) or 10% of the keys at random;
//! - `wordcount`: one batch of 100k Zipf-distributed words (§5.1) applied
//!   to a count per word, with a snapshot per batch for the persistent maps;
//! - memory: live heap bytes after building, from the counting allocator
//!   below, divided by the entries;
//! - `PART (compacted)`: after its workloads, the PART map is compacted
//!   (`ArtMap::compact`, §3.4) and its read workloads run again; its memory
//!   is what dropping it frees, and the compaction's time is recorded.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::hint::black_box;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use criterion::{BenchmarkId, Criterion, SamplingMode};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use varve_part::{ArtMap, BatchOp};

// ---------------------------------------------------------------------------
// Counting allocator: live heap bytes, for bytes per entry.

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator and only counts bytes.
#[expect(unsafe_code, reason = "a GlobalAlloc impl is unsafe by definition")]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

// ---------------------------------------------------------------------------
// Values: 4 bytes (`u32`) and 1 KiB.

/// A value type of the benchmark. Every structure stores the same type.
trait Value: Clone + 'static {
    /// Label in benchmark ids ("4B", "1KiB").
    const LABEL: &'static str;
    /// Bytes of the raw value, for "raw key + value" in the memory ratio.
    const RAW_BYTES: usize;
    fn make(key: u32) -> Self;
    /// Reads the value (for 1 KiB values: its first bytes, so a scan
    /// touches every value's memory).
    fn digest(&self) -> u64;
}

impl Value for u32 {
    const LABEL: &'static str = "4B";
    const RAW_BYTES: usize = 4;
    fn make(key: u32) -> Self {
        key
    }
    fn digest(&self) -> u64 {
        u64::from(*self)
    }
}

/// 1 KiB values are `Arc<[u8]>` in every structure: a persistent map clones
/// the values of every node it copies, and for big values a Rust user would
/// share them rather than deep-copy 1 KiB per clone (the paper's C++ PART
/// keeps a pointer to the value in the leaf, too).
type Kib = Arc<[u8]>;
const KIB: usize = 1024;

impl Value for Kib {
    const LABEL: &'static str = "1KiB";
    const RAW_BYTES: usize = KIB;
    fn make(key: u32) -> Self {
        let mut bytes = vec![0x5a; KIB];
        bytes[..4].copy_from_slice(&key.to_le_bytes());
        Arc::from(bytes)
    }
    fn digest(&self) -> u64 {
        u64::from(u32::from_le_bytes([self[0], self[1], self[2], self[3]]))
    }
}

// ---------------------------------------------------------------------------
// The structures, behind one trait so every operation is the same code.
// Keys are uniform random `u32`s, given to byte-keyed maps as their 4
// big-endian bytes (so byte order = integer order for the ordered ones).

trait Subject<V: Value>: Sized {
    const NAME: &'static str;
    /// Has ordered iteration from a key (range scans).
    const ORDERED: bool;
    /// Has an O(1) snapshot; only these run the snapshot workloads.
    const PERSISTENT: bool;
    type Snap;
    fn empty() -> Self;
    fn put(&mut self, key: u32, value: V);
    fn del(&mut self, key: u32);
    /// Looks `key` up, hands the value to `black_box`, says if found.
    fn lookup(&self, key: u32) -> bool;
    fn scan(&self) -> u64;
    /// Sum of the digests of the (up to) 100 entries from `start` on.
    fn range100(&self, start: u32) -> u64;
    fn snap(&self) -> Option<Self::Snap>;
    fn len_(&self) -> usize;
    /// Lays the structure out for scans at idle time, if it can (PART's
    /// §3.4 compaction); says whether it did.
    fn compact(&mut self) -> bool {
        false
    }
}

fn found<T>(value: Option<T>) -> bool {
    let hit = value.is_some();
    black_box(value);
    hit
}

const RANGE_LEN: usize = 100;

struct Part<V>(ArtMap<V>);
impl<V: Value> Subject<V> for Part<V> {
    const NAME: &'static str = "PART";
    const ORDERED: bool = true;
    const PERSISTENT: bool = true;
    type Snap = varve_part::Snapshot<V>;
    fn empty() -> Self {
        Part(ArtMap::new())
    }
    fn put(&mut self, key: u32, value: V) {
        self.0.insert(&key.to_be_bytes(), value);
    }
    fn del(&mut self, key: u32) {
        self.0.remove(&key.to_be_bytes());
    }
    fn lookup(&self, key: u32) -> bool {
        found(self.0.get(&key.to_be_bytes()))
    }
    fn scan(&self) -> u64 {
        self.0.values().map(Value::digest).sum()
    }
    fn range100(&self, start: u32) -> u64 {
        let start = start.to_be_bytes();
        let mut it = self.0.range::<(Bound<&[u8]>, Bound<&[u8]>)>((Bound::Included(&start[..]), Bound::Unbounded));
        let mut sum = 0;
        for _ in 0..RANGE_LEN {
            // `next_entry` lends the key instead of allocating it, as a
            // scan that only reads keys would.
            match it.next_entry() {
                Some((_, v)) => sum += v.digest(),
                None => break,
            }
        }
        sum
    }
    fn snap(&self) -> Option<Self::Snap> {
        Some(self.0.snapshot())
    }
    fn len_(&self) -> usize {
        self.0.len()
    }
    fn compact(&mut self) -> bool {
        self.0.compact();
        true
    }
}

/// PART's rows after `compact()`.
const PART_COMPACTED: &str = "PART (compacted)";

struct StdHash<V>(HashMap<u32, V>);
impl<V: Value> Subject<V> for StdHash<V> {
    const NAME: &'static str = "HashMap";
    const ORDERED: bool = false;
    const PERSISTENT: bool = false;
    type Snap = ();
    fn empty() -> Self {
        StdHash(HashMap::new())
    }
    fn put(&mut self, key: u32, value: V) {
        self.0.insert(key, value);
    }
    fn del(&mut self, key: u32) {
        self.0.remove(&key);
    }
    fn lookup(&self, key: u32) -> bool {
        found(self.0.get(&key))
    }
    fn scan(&self) -> u64 {
        self.0.values().map(Value::digest).sum()
    }
    fn range100(&self, _: u32) -> u64 {
        unreachable!("unordered")
    }
    fn snap(&self) -> Option<()> {
        None
    }
    fn len_(&self) -> usize {
        self.0.len()
    }
}

struct StdBTree<V>(BTreeMap<u32, V>);
impl<V: Value> Subject<V> for StdBTree<V> {
    const NAME: &'static str = "BTreeMap";
    const ORDERED: bool = true;
    const PERSISTENT: bool = false;
    type Snap = ();
    fn empty() -> Self {
        StdBTree(BTreeMap::new())
    }
    fn put(&mut self, key: u32, value: V) {
        self.0.insert(key, value);
    }
    fn del(&mut self, key: u32) {
        self.0.remove(&key);
    }
    fn lookup(&self, key: u32) -> bool {
        found(self.0.get(&key))
    }
    fn scan(&self) -> u64 {
        self.0.values().map(Value::digest).sum()
    }
    fn range100(&self, start: u32) -> u64 {
        self.0.range(start..).take(RANGE_LEN).map(|(_, v)| v.digest()).sum()
    }
    fn snap(&self) -> Option<()> {
        None
    }
    fn len_(&self) -> usize {
        self.0.len()
    }
}

struct ImblOrd<V>(imbl::OrdMap<u32, V>);
impl<V: Value> Subject<V> for ImblOrd<V> {
    const NAME: &'static str = "imbl::OrdMap";
    const ORDERED: bool = true;
    const PERSISTENT: bool = true;
    type Snap = imbl::OrdMap<u32, V>;
    fn empty() -> Self {
        ImblOrd(imbl::OrdMap::new())
    }
    fn put(&mut self, key: u32, value: V) {
        self.0.insert(key, value);
    }
    fn del(&mut self, key: u32) {
        self.0.remove(&key);
    }
    fn lookup(&self, key: u32) -> bool {
        found(self.0.get(&key))
    }
    fn scan(&self) -> u64 {
        self.0.values().map(Value::digest).sum()
    }
    fn range100(&self, start: u32) -> u64 {
        self.0.range(start..).take(RANGE_LEN).map(|(_, v)| v.digest()).sum()
    }
    fn snap(&self) -> Option<Self::Snap> {
        Some(self.0.clone())
    }
    fn len_(&self) -> usize {
        self.0.len()
    }
}

struct ImblHash<V>(imbl::HashMap<u32, V>);
impl<V: Value> Subject<V> for ImblHash<V> {
    const NAME: &'static str = "imbl::HashMap";
    const ORDERED: bool = false;
    const PERSISTENT: bool = true;
    type Snap = imbl::HashMap<u32, V>;
    fn empty() -> Self {
        ImblHash(imbl::HashMap::new())
    }
    fn put(&mut self, key: u32, value: V) {
        self.0.insert(key, value);
    }
    fn del(&mut self, key: u32) {
        self.0.remove(&key);
    }
    fn lookup(&self, key: u32) -> bool {
        found(self.0.get(&key))
    }
    fn scan(&self) -> u64 {
        self.0.values().map(Value::digest).sum()
    }
    fn range100(&self, _: u32) -> u64 {
        unreachable!("unordered")
    }
    fn snap(&self) -> Option<Self::Snap> {
        Some(self.0.clone())
    }
    fn len_(&self) -> usize {
        self.0.len()
    }
}

struct RpdsRb<V>(rpds::RedBlackTreeMapSync<u32, V>);
impl<V: Value + Send + Sync> Subject<V> for RpdsRb<V> {
    const NAME: &'static str = "rpds::RedBlackTreeMap";
    const ORDERED: bool = true;
    const PERSISTENT: bool = true;
    type Snap = rpds::RedBlackTreeMapSync<u32, V>;
    fn empty() -> Self {
        RpdsRb(rpds::RedBlackTreeMap::new_sync())
    }
    fn put(&mut self, key: u32, value: V) {
        self.0.insert_mut(key, value);
    }
    fn del(&mut self, key: u32) {
        self.0.remove_mut(&key);
    }
    fn lookup(&self, key: u32) -> bool {
        found(self.0.get(&key))
    }
    fn scan(&self) -> u64 {
        self.0.values().map(Value::digest).sum()
    }
    fn range100(&self, start: u32) -> u64 {
        self.0.range(start..).take(RANGE_LEN).map(|(_, v)| v.digest()).sum()
    }
    fn snap(&self) -> Option<Self::Snap> {
        Some(self.0.clone())
    }
    fn len_(&self) -> usize {
        self.0.size()
    }
}

struct RpdsHash<V>(rpds::HashTrieMapSync<u32, V>);
impl<V: Value + Send + Sync> Subject<V> for RpdsHash<V> {
    const NAME: &'static str = "rpds::HashTrieMap";
    const ORDERED: bool = false;
    const PERSISTENT: bool = true;
    type Snap = rpds::HashTrieMapSync<u32, V>;
    fn empty() -> Self {
        RpdsHash(rpds::HashTrieMap::new_sync())
    }
    fn put(&mut self, key: u32, value: V) {
        self.0.insert_mut(key, value);
    }
    fn del(&mut self, key: u32) {
        self.0.remove_mut(&key);
    }
    fn lookup(&self, key: u32) -> bool {
        found(self.0.get(&key))
    }
    fn scan(&self) -> u64 {
        self.0.values().map(Value::digest).sum()
    }
    fn range100(&self, _: u32) -> u64 {
        unreachable!("unordered")
    }
    fn snap(&self) -> Option<Self::Snap> {
        Some(self.0.clone())
    }
    fn len_(&self) -> usize {
        self.0.size()
    }
}

/// rart's persistent tree. `ArrayKey<8>` holds the 4 big-endian key bytes
/// (rart turns a `u32` into them itself).
type RartKey = rart::ArrayKey<8>;
struct Rart<V: Clone>(rart::VersionedAdaptiveRadixTree<RartKey, V>);
impl<V: Value> Subject<V> for Rart<V> {
    const NAME: &'static str = "rart::Versioned";
    const ORDERED: bool = true;
    const PERSISTENT: bool = true;
    type Snap = rart::VersionedAdaptiveRadixTree<RartKey, V>;
    fn empty() -> Self {
        Rart(rart::VersionedAdaptiveRadixTree::new())
    }
    fn put(&mut self, key: u32, value: V) {
        self.0.insert(key, value);
    }
    fn del(&mut self, key: u32) {
        self.0.remove(key);
    }
    fn lookup(&self, key: u32) -> bool {
        found(self.0.get(key))
    }
    fn scan(&self) -> u64 {
        self.0.values_iter().map(Value::digest).sum()
    }
    fn range100(&self, start: u32) -> u64 {
        self.0
            .range((Bound::Included(RartKey::from(start)), Bound::Unbounded))
            .take(RANGE_LEN)
            .map(|(_, v)| v.digest())
            .sum()
    }
    fn snap(&self) -> Option<Self::Snap> {
        Some(self.0.snapshot())
    }
    fn len_(&self) -> usize {
        self.0.iter().count()
    }
}

/// vart's versioned tree (`FixedSizeKey<4>`, the 4 key bytes; snapshot =
/// `clone()`, O(1)). Its `get` returns the value by clone (an `Arc` bump
/// for 1 KiB values). Inserts use the in-place path
/// (`insert_or_replace_unchecked`) while the root is not shared and the
/// copy-on-write path (`insert_or_replace`) right after a snapshot: the
/// fastest use of its API.
type VartKey = vart::FixedSizeKey<4>;
struct Vart<V: Clone>(vart::art::Tree<VartKey, V>);
impl<V: Value> Subject<V> for Vart<V> {
    const NAME: &'static str = "vart::Tree";
    const ORDERED: bool = true;
    const PERSISTENT: bool = true;
    type Snap = vart::art::Tree<VartKey, V>;
    fn empty() -> Self {
        Vart(vart::art::Tree::new())
    }
    fn put(&mut self, key: u32, value: V) {
        let key = VartKey::from_slice(&key.to_be_bytes());
        if let Err(e) = self.0.insert_or_replace_unchecked(&key, value.clone(), 0, 0) {
            assert!(matches!(e, vart::TrieError::RootIsNotUniquelyOwned), "vart insert: {e}");
            self.0.insert_or_replace(&key, value, 0, 0).expect("vart copy-on-write insert");
        }
    }
    fn del(&mut self, key: u32) {
        self.0.remove(&VartKey::from_slice(&key.to_be_bytes()));
    }
    fn lookup(&self, key: u32) -> bool {
        found(self.0.get(&VartKey::from_slice(&key.to_be_bytes()), 0))
    }
    fn scan(&self) -> u64 {
        self.0.iter().map(|(_, v, _, _)| v.digest()).sum()
    }
    fn range100(&self, start: u32) -> u64 {
        let start = VartKey::from_slice(&start.to_be_bytes());
        self.0.range((Bound::Included(start), Bound::Unbounded)).take(RANGE_LEN).map(|(_, v, _, _)| v.digest()).sum()
    }
    fn snap(&self) -> Option<Self::Snap> {
        Some(self.0.clone())
    }
    fn len_(&self) -> usize {
        self.0.len()
    }
}

/// blart's mutable ART (`[u8; 4]` keys: fixed length, so no key is a
/// prefix of another, as blart requires).
struct Blart<V>(blart::TreeMap<[u8; 4], V>);
impl<V: Value> Subject<V> for Blart<V> {
    const NAME: &'static str = "blart::TreeMap";
    const ORDERED: bool = true;
    const PERSISTENT: bool = false;
    type Snap = ();
    fn empty() -> Self {
        Blart(blart::TreeMap::new())
    }
    fn put(&mut self, key: u32, value: V) {
        self.0.insert(key.to_be_bytes(), value);
    }
    fn del(&mut self, key: u32) {
        self.0.remove(&key.to_be_bytes());
    }
    fn lookup(&self, key: u32) -> bool {
        found(self.0.get(&key.to_be_bytes()))
    }
    fn scan(&self) -> u64 {
        self.0.values().map(Value::digest).sum()
    }
    fn range100(&self, start: u32) -> u64 {
        self.0.range(start.to_be_bytes()..).take(RANGE_LEN).map(|(_, v)| v.digest()).sum()
    }
    fn snap(&self) -> Option<()> {
        None
    }
    fn len_(&self) -> usize {
        self.0.len()
    }
}

// ---------------------------------------------------------------------------
// Workload data.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scale {
    Tiny,
    Quick,
    Full,
}

impl Scale {
    fn from_env(test_mode: bool) -> Scale {
        match std::env::var("VARVE_BENCH_SCALE").as_deref() {
            Ok("tiny") => Scale::Tiny,
            Ok("quick") => Scale::Quick,
            Ok("full") => Scale::Full,
            Ok(other) => panic!("VARVE_BENCH_SCALE={other}: expected tiny, quick or full"),
            Err(_) if test_mode => Scale::Tiny,
            Err(_) => Scale::Full,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Scale::Tiny => "tiny",
            Scale::Quick => "quick",
            Scale::Full => "full",
        }
    }
    /// (entries, value type is 1 KiB) of each configuration.
    fn configs(self) -> Vec<(usize, bool)> {
        match self {
            Scale::Tiny => vec![(5_000, false), (5_000, true)],
            Scale::Quick => vec![(100_000, false), (100_000, true)],
            // 10M × 1 KiB would be 10 GiB of values per structure (plus
            // rart's and vart's per-entry nodes) on a 24 GiB machine shared
            // with other builds, and 10 structures × 10 GiB of values to
            // build: 1 KiB values run at 1M only.
            Scale::Full => vec![(1_000_000, false), (10_000_000, false), (1_000_000, true)],
        }
    }
    /// (batches, tuples per batch, vocabulary) of the word count.
    fn wordcount(self) -> (usize, usize, usize) {
        match self {
            Scale::Tiny => (4, 2_000, 5_000),
            Scale::Quick => (20, 20_000, 100_000),
            Scale::Full => (100, 100_000, 1_000_000),
        }
    }
}

fn size_label(n: usize) -> String {
    if n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n.is_multiple_of(1_000) {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

/// Keys and probes of one size; all seeded.
struct Data {
    n: usize,
    /// `n` distinct uniform random keys, in random order (insertion order).
    keys: Vec<u32>,
    /// The same keys sorted (for "absent" checks and the key-space slice).
    sorted: Vec<u32>,
    /// Present keys in random order, to look up.
    hits: Vec<u32>,
    /// Absent keys, to look up.
    misses: Vec<u32>,
    /// Distinct absent keys, to insert (and remove again).
    fresh: Vec<u32>,
    /// Random starting points of range scans.
    starts: Vec<u32>,
}

const PROBES: usize = 1 << 20;

impl Data {
    fn new(n: usize) -> Data {
        let mut rng = StdRng::seed_from_u64(0x5eed_0000 ^ n as u64);
        let mut sorted: Vec<u32> = Vec::with_capacity(n + n / 100);
        while sorted.len() < n {
            let missing = n - sorted.len();
            sorted.extend((0..missing + missing / 100 + 16).map(|_| rng.gen::<u32>()));
            sorted.sort_unstable();
            sorted.dedup();
        }
        sorted.shuffle(&mut rng);
        sorted.truncate(n);
        let keys = sorted.clone();
        sorted.sort_unstable();
        let probes = PROBES.min(n);
        let hits: Vec<u32> = (0..probes).map(|_| keys[rng.gen_range(0..n)]).collect();
        let absent = |rng: &mut StdRng, count: usize| {
            let mut out: Vec<u32> = Vec::with_capacity(count);
            while out.len() < count {
                let k = rng.gen::<u32>();
                if sorted.binary_search(&k).is_err() {
                    out.push(k);
                }
            }
            out
        };
        let misses = absent(&mut rng, probes);
        let mut fresh = absent(&mut rng, (n / 16).clamp(1_000, 1 << 18));
        fresh.sort_unstable();
        fresh.dedup();
        fresh.shuffle(&mut rng);
        let starts = (0..probes).map(|_| rng.gen::<u32>()).collect();
        Data { n, keys, sorted, hits, misses, fresh, starts }
    }
}

// ---------------------------------------------------------------------------
// Output next to criterion's (`$CRITERION_HOME`, default `target/criterion`).

fn out_dir() -> PathBuf {
    std::env::var_os("CRITERION_HOME").map_or_else(|| PathBuf::from("target/criterion"), PathBuf::from)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

struct MemoryRow {
    config: String,
    structure: &'static str,
    entries: usize,
    bytes: usize,
    raw_per_entry: usize,
    /// How long `compact()` took (rows of compacted structures).
    compact_seconds: Option<f64>,
}

#[derive(Default)]
struct Record {
    memory: Vec<MemoryRow>,
}

fn write_memory_json(record: &Record) {
    let mut s = String::from("[\n");
    for (i, r) in record.memory.iter().enumerate() {
        #[expect(clippy::cast_precision_loss, reason = "a report")]
        let per = r.bytes as f64 / r.entries as f64;
        let _ = writeln!(
            s,
            "  {{\"config\": \"{}\", \"structure\": \"{}\", \"entries\": {}, \"bytes\": {}, \"bytes_per_entry\": {per:.2}, \"raw_bytes_per_entry\": {}, \"compact_seconds\": {}}}{}",
            r.config,
            r.structure,
            r.entries,
            r.bytes,
            r.raw_per_entry,
            r.compact_seconds.map_or_else(|| "null".to_owned(), |seconds| format!("{seconds:.3}")),
            if i + 1 == record.memory.len() { "" } else { "," }
        );
    }
    s.push_str("]\n");
    write_out("part_memory.json", &s);
}

fn write_out(name: &str, contents: &str) {
    let dir = out_dir();
    std::fs::create_dir_all(&dir).expect("create the criterion directory");
    std::fs::write(dir.join(name), contents).expect("write a benchmark result file");
}

// ---------------------------------------------------------------------------
// The measurements.

/// Snapshot intervals of the insert workloads (`None` = never).
const SNAPSHOT_INTERVALS: [(&str, Option<usize>); 3] =
    [("part-insert_snap1", Some(1)), ("part-insert_snap1000", Some(1_000)), ("part-insert_never", None)];

fn bench_structure<V: Value, S: Subject<V>>(c: &mut Criterion, data: &Data, record: &mut Record) {
    let config = format!("{}-{}", size_label(data.n), V::LABEL);
    let id = BenchmarkId::new(S::NAME, &config);

    // Build (and measure its heap) once; every read workload uses it.
    let before = LIVE.load(Ordering::Relaxed);
    let mut map = S::empty();
    for &k in &data.keys {
        map.put(k, V::make(k));
    }
    let bytes = LIVE.load(Ordering::Relaxed).saturating_sub(before);
    assert_eq!(map.len_(), data.n, "{} holds every key", S::NAME);
    record.memory.push(MemoryRow {
        config: config.clone(),
        structure: S::NAME,
        entries: data.n,
        bytes,
        raw_per_entry: 4 + V::RAW_BYTES,
        compact_seconds: None,
    });
    bench_reads(c, &id, &map, data);
    for (group, interval) in SNAPSHOT_INTERVALS {
        if interval.is_some() && !S::PERSISTENT {
            continue;
        }
        let mut g = c.benchmark_group(group);
        g.sampling_mode(SamplingMode::Flat);
        g.bench_function(id.clone(), |b| {
            b.iter_custom(|iters| insert_fresh(&mut map, &data.fresh, iters, interval));
        });
    }
    assert_eq!(map.len_(), data.n, "{} back to its size", S::NAME);

    // §3.4: compacted at idle time, after its updates; the reads again.
    let start = Instant::now();
    if map.compact() {
        let compact_seconds = start.elapsed().as_secs_f64();
        bench_reads(c, &BenchmarkId::new(PART_COMPACTED, &config), &map, data);
        // Its heap is what dropping it frees (criterion's own allocations
        // since the build are not the map's).
        let live = LIVE.load(Ordering::Relaxed);
        drop(map);
        record.memory.push(MemoryRow {
            config,
            structure: PART_COMPACTED,
            entries: data.n,
            bytes: live.saturating_sub(LIVE.load(Ordering::Relaxed)),
            raw_per_entry: 4 + V::RAW_BYTES,
            compact_seconds: Some(compact_seconds),
        });
    }
}

/// The read workloads on a built structure.
fn bench_reads<V: Value, S: Subject<V>>(c: &mut Criterion, id: &BenchmarkId, map: &S, data: &Data) {
    let mask = data.hits.len();
    {
        let mut g = c.benchmark_group("part-lookup_hit");
        let mut i = 0;
        g.bench_function(id.clone(), |b| {
            b.iter(|| {
                i = if i + 1 == mask { 0 } else { i + 1 };
                assert!(map.lookup(data.hits[i]));
            });
        });
    }
    {
        let mut g = c.benchmark_group("part-lookup_miss");
        let mut i = 0;
        g.bench_function(id.clone(), |b| {
            b.iter(|| {
                i = if i + 1 == mask { 0 } else { i + 1 };
                assert!(!map.lookup(data.misses[i]));
            });
        });
    }
    {
        let mut g = c.benchmark_group("part-scan");
        g.sampling_mode(SamplingMode::Flat);
        g.bench_function(id.clone(), |b| b.iter(|| black_box(map.scan())));
    }
    if S::ORDERED {
        let mut g = c.benchmark_group("part-range100");
        let mut i = 0;
        g.bench_function(id.clone(), |b| {
            b.iter(|| {
                i = if i + 1 == mask { 0 } else { i + 1 };
                black_box(map.range100(data.starts[i]))
            });
        });
    }
}

/// Inserts `iters` fresh keys (in chunks of at most `fresh.len()`), taking a
/// snapshot every `interval` inserts and keeping the latest; returns the
/// time of the inserts and snapshots only (values are made beforehand). Each chunk's keys are removed
/// again, untimed, after its last snapshot is dropped.
fn insert_fresh<V: Value, S: Subject<V>>(map: &mut S, fresh: &[u32], iters: u64, interval: Option<usize>) -> Duration {
    let mut left = usize::try_from(iters).expect("iteration count fits usize");
    let mut total = Duration::ZERO;
    let mut since_snapshot = 0;
    while left > 0 {
        let chunk = &fresh[..left.min(fresh.len())];
        // Values are made before the clock starts: an insert is timed,
        // not the allocation of its 1 KiB value.
        let values: Vec<V> = chunk.iter().map(|&k| V::make(k)).collect();
        let mut latest: Option<S::Snap> = None;
        let start = Instant::now();
        for (&k, v) in chunk.iter().zip(values) {
            map.put(k, v);
            if let Some(every) = interval {
                since_snapshot += 1;
                if since_snapshot == every {
                    since_snapshot = 0;
                    latest = map.snap();
                }
            }
        }
        total += start.elapsed();
        drop(black_box(latest));
        for &k in chunk {
            map.del(k);
        }
        left -= chunk.len();
    }
    total
}

/// Ordered persistent maps for the union workload.
trait Union: Sized + Clone {
    const NAME: &'static str;
    fn build(keys: &[u32]) -> Self;
    fn bump(&mut self, keys: &[u32]);
    fn union_of(&self, other: &Self) -> usize;
}

impl Union for ArtMap<u32> {
    const NAME: &'static str = "PART";
    fn build(keys: &[u32]) -> Self {
        let mut m = ArtMap::new();
        for &k in keys {
            m.insert(&k.to_be_bytes(), k);
        }
        m
    }
    fn bump(&mut self, keys: &[u32]) {
        for &k in keys {
            self.insert(&k.to_be_bytes(), k.wrapping_add(1));
        }
    }
    fn union_of(&self, other: &Self) -> usize {
        self.union(other).len()
    }
}

impl Union for imbl::OrdMap<u32, u32> {
    const NAME: &'static str = "imbl::OrdMap";
    fn build(keys: &[u32]) -> Self {
        keys.iter().map(|&k| (k, k)).collect()
    }
    fn bump(&mut self, keys: &[u32]) {
        for &k in keys {
            self.insert(k, k.wrapping_add(1));
        }
    }
    fn union_of(&self, other: &Self) -> usize {
        self.clone().union(other.clone()).len()
    }
}

impl Union for imbl::HashMap<u32, u32> {
    const NAME: &'static str = "imbl::HashMap";
    fn build(keys: &[u32]) -> Self {
        keys.iter().map(|&k| (k, k)).collect()
    }
    fn bump(&mut self, keys: &[u32]) {
        for &k in keys {
            self.insert(k, k.wrapping_add(1));
        }
    }
    fn union_of(&self, other: &Self) -> usize {
        self.clone().union(other.clone()).len()
    }
}

/// rpds has no union: insert every entry of the other map.
impl Union for rpds::RedBlackTreeMapSync<u32, u32> {
    const NAME: &'static str = "rpds::RedBlackTreeMap";
    fn build(keys: &[u32]) -> Self {
        let mut m = rpds::RedBlackTreeMap::new_sync();
        for &k in keys {
            m.insert_mut(k, k);
        }
        m
    }
    fn bump(&mut self, keys: &[u32]) {
        for &k in keys {
            self.insert_mut(k, k.wrapping_add(1));
        }
    }
    fn union_of(&self, other: &Self) -> usize {
        let mut out = other.clone();
        for (k, v) in self {
            out.insert_mut(*k, *v);
        }
        out.size()
    }
}

fn bench_union<U: Union>(c: &mut Criterion, data: &Data) {
    let a = U::build(&data.keys);
    let config = size_label(data.n);
    // 90% shared: the lowest 10% of the key space updated.
    let mut b_slice = a.clone();
    b_slice.bump(&data.sorted[..data.n / 10]);
    // 10% of the keys, uniformly spread.
    let mut b_random = a.clone();
    b_random.bump(&data.keys[..data.n / 10]);
    for (group, b) in [("part-union_slice", &b_slice), ("part-union_random", &b_random)] {
        let mut g = c.benchmark_group(group);
        g.sampling_mode(SamplingMode::Flat);
        g.bench_function(BenchmarkId::new(U::NAME, &config), |bench| {
            bench.iter(|| {
                assert_eq!(a.union_of(b), data.n);
            });
        });
    }
}

// ---------------------------------------------------------------------------
// Streaming word count (§5.1): 26-character alphanumeric words, a Zipf
// (s = 1) stream over the vocabulary, applied in batches.

const WORD_BYTES: usize = 26;
type Word = [u8; WORD_BYTES];
const ZIPF_EXPONENT: f64 = 1.0;

struct Stream {
    words: Vec<Word>,
    batches: Vec<Vec<u32>>,
}

impl Stream {
    fn new(batches: usize, per_batch: usize, vocabulary: usize) -> Stream {
        const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let mut rng = StdRng::seed_from_u64(0x00c0_ffee);
        let words: Vec<Word> =
            (0..vocabulary).map(|_| std::array::from_fn(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())])).collect();
        // Rank r has weight 1 / (r + 1)^s; ranks are word indices, and words
        // are random, so popular words are spread over the key space.
        let mut cdf = Vec::with_capacity(vocabulary);
        let mut acc = 0.0;
        for r in 0..vocabulary {
            #[expect(clippy::cast_precision_loss, reason = "a weight")]
            let w = 1.0 / ((r + 1) as f64).powf(ZIPF_EXPONENT);
            acc += w;
            cdf.push(acc);
        }
        let batches = (0..batches)
            .map(|_| {
                (0..per_batch)
                    .map(|_| {
                        let u = rng.gen::<f64>() * acc;
                        let r = cdf.partition_point(|&c| c < u).min(vocabulary - 1);
                        u32::try_from(r).expect("vocabulary fits u32")
                    })
                    .collect()
            })
            .collect();
        Stream { words, batches }
    }

    /// This batch's count per word.
    fn tally(&self, batch: usize) -> HashMap<&Word, u64> {
        let mut counts: HashMap<&Word, u64> = HashMap::new();
        for &w in &self.batches[batch] {
            *counts.entry(&self.words[w as usize]).or_insert(0) += 1;
        }
        counts
    }
}

/// One word-count contender: its state and "apply batch `i`, return the
/// snapshot taken after it". The latest snapshot is kept until the next
/// batch replaces it (dropping the old one is part of the timed work).
fn bench_wordcount_one<M, R>(
    c: &mut Criterion,
    stream: &Stream,
    name: &str,
    mut state: M,
    mut apply: impl FnMut(&mut M, usize) -> R,
) {
    let mut g = c.benchmark_group("part-wordcount");
    g.sampling_mode(SamplingMode::Flat);
    let per_batch = stream.batches[0].len();
    let mut batch = 0;
    let mut latest: Option<R> = None;
    let id = BenchmarkId::new(name, format!("{}-per-batch", size_label(per_batch)));
    g.bench_function(id, |b| {
        b.iter(|| {
            drop(latest.replace(apply(&mut state, batch)));
            batch = (batch + 1) % stream.batches.len();
        });
    });
}

fn bump_rpds<M: RpdsMap>(m: &mut M, counts: HashMap<&Word, u64>) {
    for (w, d) in counts {
        m.add(w, d);
    }
}

/// `get_mut` or insert, for both rpds maps.
trait RpdsMap {
    fn add(&mut self, word: &Word, d: u64);
}
impl RpdsMap for rpds::HashTrieMapSync<Word, u64> {
    fn add(&mut self, word: &Word, d: u64) {
        match self.get_mut(word) {
            Some(v) => *v += d,
            None => self.insert_mut(*word, d),
        }
    }
}
impl RpdsMap for rpds::RedBlackTreeMapSync<Word, u64> {
    fn add(&mut self, word: &Word, d: u64) {
        match self.get_mut(word) {
            Some(v) => *v += d,
            None => self.insert_mut(*word, d),
        }
    }
}

fn bench_wordcount(c: &mut Criterion, stream: &Stream) {
    let vocabulary = || stream.words.iter().map(|w| (*w, 0u64));
    // Every map starts with the whole vocabulary at 0 (the paper loads the
    // key set first), so batches are updates of existing keys. The
    // persistent maps first tally the batch (the same `HashMap` for all),
    // then apply one update per distinct word and take a snapshot; the
    // mutable `HashMap` (the upper bound) counts every tuple in place.
    let std_map: HashMap<Word, u64> = vocabulary().collect();
    bench_wordcount_one(c, stream, "HashMap", std_map, |m, i| {
        for &w in &stream.batches[i] {
            *m.entry(stream.words[w as usize]).or_insert(0) += 1;
        }
    });
    let mut part = ArtMap::new();
    part.apply(vocabulary().map(|(w, v)| BatchOp::Put(w.to_vec(), v)));
    bench_wordcount_one(c, stream, "PART", part.clone(), |m: &mut ArtMap<u64>, i| {
        let ops: Vec<BatchOp<u64>> = stream
            .tally(i)
            .into_iter()
            .map(|(w, d)| BatchOp::Put(w.to_vec(), m.get(w).copied().unwrap_or(0) + d))
            .collect();
        m.apply(ops);
        m.snapshot()
    });
    bench_wordcount_one(c, stream, "PART (get_mut)", part, |m: &mut ArtMap<u64>, i| {
        for (w, d) in stream.tally(i) {
            match m.get_mut(w) {
                Some(v) => *v += d,
                None => {
                    m.insert(w, d);
                }
            }
        }
        m.snapshot()
    });
    let imbl_hash: imbl::HashMap<Word, u64> = vocabulary().collect();
    bench_wordcount_one(c, stream, "imbl::HashMap", imbl_hash, |m, i| {
        for (w, d) in stream.tally(i) {
            *m.entry(*w).or_insert(0) += d;
        }
        m.clone()
    });
    let imbl_ord: imbl::OrdMap<Word, u64> = vocabulary().collect();
    bench_wordcount_one(c, stream, "imbl::OrdMap", imbl_ord, |m, i| {
        for (w, d) in stream.tally(i) {
            *m.entry(*w).or_insert(0) += d;
        }
        m.clone()
    });
    let mut trie = rpds::HashTrieMap::new_sync();
    let mut rb = rpds::RedBlackTreeMap::new_sync();
    for (w, v) in vocabulary() {
        trie.insert_mut(w, v);
        rb.insert_mut(w, v);
    }
    bench_wordcount_one(c, stream, "rpds::HashTrieMap", trie, |m, i| {
        bump_rpds(m, stream.tally(i));
        m.clone()
    });
    bench_wordcount_one(c, stream, "rpds::RedBlackTreeMap", rb, |m, i| {
        bump_rpds(m, stream.tally(i));
        m.clone()
    });
}

// ---------------------------------------------------------------------------

fn bench_config<V: Value + Send + Sync>(c: &mut Criterion, data: &Data, record: &mut Record) {
    bench_structure::<V, Part<V>>(c, data, record);
    bench_structure::<V, StdHash<V>>(c, data, record);
    bench_structure::<V, StdBTree<V>>(c, data, record);
    bench_structure::<V, ImblOrd<V>>(c, data, record);
    bench_structure::<V, ImblHash<V>>(c, data, record);
    bench_structure::<V, RpdsRb<V>>(c, data, record);
    bench_structure::<V, RpdsHash<V>>(c, data, record);
    bench_structure::<V, Rart<V>>(c, data, record);
    bench_structure::<V, Vart<V>>(c, data, record);
    bench_structure::<V, Blart<V>>(c, data, record);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // Criterion benchmarks only with `--bench` (what `cargo bench` passes);
    // otherwise it runs each benchmark once as a test.
    let test_mode = !args.iter().any(|a| a == "--bench") || args.iter().any(|a| a == "--test");
    let scale = Scale::from_env(test_mode);
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .without_plots()
        .configure_from_args();
    let started = Instant::now();
    let started_unix = unix_now();
    let load_start = loadavg();
    let mut record = Record::default();

    // `VARVE_BENCH_ONLY=maps,union,wordcount` (any subset) runs only those
    // parts, e.g. to profile one (criterion's own filter would still build
    // every map).
    let only = std::env::var("VARVE_BENCH_ONLY").unwrap_or_default();
    let runs = |part: &str| only.is_empty() || only.split(',').any(|p| p == part);
    let configs = if runs("maps") || runs("union") { scale.configs() } else { Vec::new() };
    let mut union_size = None;
    for &(n, kib) in &configs {
        let data = Data::new(n);
        if kib {
            if runs("maps") {
                bench_config::<Kib>(&mut c, &data, &mut record);
            }
        } else {
            if runs("maps") {
                bench_config::<u32>(&mut c, &data, &mut record);
            }
            if union_size.is_none() && runs("union") {
                // The union goal is about two 1M maps: the smallest size.
                union_size = Some(n);
                bench_union::<ArtMap<u32>>(&mut c, &data);
                bench_union::<imbl::OrdMap<u32, u32>>(&mut c, &data);
                bench_union::<imbl::HashMap<u32, u32>>(&mut c, &data);
                bench_union::<rpds::RedBlackTreeMapSync<u32, u32>>(&mut c, &data);
            }
        }
    }
    // Test mode (`cargo test`) writes nothing: it only proves the code runs.
    if !test_mode && runs("maps") {
        write_memory_json(&record);
    }
    let (batches, per_batch, vocabulary) = scale.wordcount();
    if runs("wordcount") {
        let stream = Stream::new(batches, per_batch, vocabulary);
        bench_wordcount(&mut c, &stream);
    }

    let meta = format!(
        "{{\"scale\": \"{}\", \"started_unix\": {started_unix}, \"seconds\": {:.0}, \"loadavg_start\": \"{load_start}\", \"loadavg_end\": \"{}\", \"configs\": [{}], \"union_entries\": {}, \"wordcount\": {{\"batches\": {batches}, \"tuples_per_batch\": {per_batch}, \"vocabulary\": {vocabulary}, \"zipf_exponent\": {ZIPF_EXPONENT}, \"word_bytes\": {WORD_BYTES}}}}}\n",
        scale.name(),
        started.elapsed().as_secs_f64(),
        loadavg(),
        configs
            .iter()
            .map(|&(n, kib)| format!("\"{}-{}\"", size_label(n), if kib { "1KiB" } else { "4B" }))
            .collect::<Vec<_>>()
            .join(", "),
        union_size.unwrap_or(0),
    );
    if !test_mode {
        write_out("part_meta.json", &meta);
    }
    c.final_summary();
}
