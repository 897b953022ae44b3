//! The engine's cache of decoded node copies: bounded, and keeping what is
//! visited often (the top of a tree is on every update's path).
//!
//! Two generations: lookups are served from `recent`, or moved there from
//! `older`; when `recent` holds half the capacity, it becomes `older` and
//! the old `older` is dropped. So at most `capacity` copies are held, and a
//! copy visited at least once per half-capacity of distinct visits is never
//! evicted — unlike emptying one map when it is full, which dropped the
//! hot nodes with the cold and made a tree larger than the cache reload its
//! root path.

use std::collections::HashMap;
use std::hash::Hash;

/// foldhash: a lookup per node visit, on integer keys (std's `SipHash` was a
/// measurable share of an insert).
type Generation<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

pub(crate) struct TwoGenerationCache<K, V> {
    recent: Generation<K, V>,
    older: Generation<K, V>,
    /// Most entries held in both generations together; at least 2.
    capacity: usize,
}

impl<K: Hash + Eq + Copy, V> TwoGenerationCache<K, V> {
    pub(crate) fn new(capacity: usize) -> Self {
        TwoGenerationCache { recent: Generation::default(), older: Generation::default(), capacity: capacity.max(2) }
    }

    /// The entry for `key`, made by `load` if neither generation has it
    /// (an error from `load` caches nothing).
    pub(crate) fn get_or_try_insert<E>(&mut self, key: K, load: impl FnOnce() -> Result<V, E>) -> Result<&mut V, E> {
        if !self.recent.contains_key(&key) {
            let value = match self.older.remove(&key) {
                Some(value) => value,
                None => load()?,
            };
            if self.recent.len() >= self.capacity / 2 {
                self.older = std::mem::take(&mut self.recent);
            }
            self.recent.insert(key, value);
        }
        Ok(self.recent.get_mut(&key).expect("present or inserted above"))
    }

    /// The entry for `key`, if either generation has it (not moved).
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        match self.recent.get_mut(key) {
            Some(value) => Some(value),
            None => self.older.get_mut(key),
        }
    }

    /// Hold `value` for `key` (in `recent`), replacing what was there.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        self.older.remove(&key);
        if !self.recent.contains_key(&key) && self.recent.len() >= self.capacity / 2 {
            self.older = std::mem::take(&mut self.recent);
        }
        self.recent.insert(key, value);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.recent.len() + self.older.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_at_most_its_capacity_and_keeps_what_is_visited_often() {
        let mut cache = TwoGenerationCache::new(8);
        let mut loads = 0;
        for cold in 0..1000u32 {
            for key in [u32::MAX, cold] {
                cache
                    .get_or_try_insert(key, || {
                        loads += 1;
                        Ok::<_, ()>(key)
                    })
                    .expect("load");
            }
            assert!(cache.len() <= 8, "{} entries", cache.len());
        }
        assert_eq!(loads, 1001, "the hot key is loaded once, each cold key once");
        assert_eq!(cache.get_or_try_insert(7, || Err("not loaded")), Err("not loaded"), "7 was evicted long ago");
        assert_eq!(*cache.get_or_try_insert(999, || Err("not loaded")).expect("cached"), 999);
    }

    /// The engine's default capacity fills each generation's table to its
    /// load limit: no bucket allocated for copies the cache may not hold.
    #[test]
    fn the_default_capacity_fills_both_generations_tables() {
        let capacity = crate::NODE_CACHE_ENTRIES_DEFAULT;
        let mut cache = TwoGenerationCache::new(capacity);
        for key in 0..3 * capacity {
            cache.get_or_try_insert(key, || Ok::<_, ()>(())).expect("load");
        }
        for generation in [&cache.recent, &cache.older] {
            assert_eq!(generation.capacity(), capacity / 2, "a generation's table holds exactly half the copies");
        }
        assert_eq!(cache.older.len(), capacity / 2, "the older generation was swapped in full");
    }
}
