//! The holes in one log's index: runs of lost seqs kept as ranges rather
//! than a lost position per seq.
//!
//! Recovery makes a hole of a gap larger than the journal's bytes could
//! hold. Only damage makes one (the first segment deleted by hand, say), and
//! a damaged header may claim any size, so what a hole costs must not grow
//! with its length, and what many holes cost must not grow faster than
//! their number: finding a seq among them is a binary search.

use std::collections::VecDeque;

use crate::contract::Seq;

/// Seqs `first..=last` of a log, lost for the [`LossCause`] indexed `cause`.
///
/// [`LossCause`]: crate::error::LossCause
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hole {
    pub(crate) first: Seq,
    pub(crate) last: Seq,
    pub(crate) cause: usize,
}

impl Hole {
    pub(crate) fn len(self) -> u64 {
        self.last - self.first + 1
    }
}

/// Sorted, disjoint holes. Invariant: each entry's `lost_through` is the
/// sum of the lengths of the holes up to and including it, plus `trimmed`
/// (the hole seqs trimmed from the front since), so trimming the front
/// changes one number instead of every entry.
#[derive(Clone, Debug, Default)]
pub(crate) struct Holes {
    list: VecDeque<(Hole, u64)>,
    trimmed: u64,
}

/// Where a seq falls among the holes.
pub(crate) enum Found {
    /// In the hole of this index.
    In(usize),
    /// In no hole, after this many hole seqs.
    After(u64),
}

impl Holes {
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Bytes on the heap: the box holding these holes, and their list's room.
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Holes>() + self.list.capacity() * std::mem::size_of::<(Hole, u64)>()
    }

    pub(crate) fn get(&self, i: usize) -> Hole {
        self.list[i].0
    }

    pub(crate) fn first(&self) -> Option<Hole> {
        self.list.front().map(|&(hole, _)| hole)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = Hole> + '_ {
        self.list.iter().map(|&(hole, _)| hole)
    }

    /// The seqs in all holes.
    pub(crate) fn total(&self) -> u64 {
        self.list.back().map_or(0, |&(_, through)| through - self.trimmed)
    }

    /// Where `seq` falls: O(log holes).
    pub(crate) fn find(&self, seq: Seq) -> Found {
        let after = self.list.partition_point(|(hole, _)| hole.first <= seq);
        let Some(&(hole, through)) = after.checked_sub(1).map(|i| &self.list[i]) else { return Found::After(0) };
        if seq <= hole.last {
            Found::In(after - 1)
        } else {
            Found::After(through - self.trimmed)
        }
    }

    /// The seqs in the holes before hole `i`.
    pub(crate) fn before(&self, i: usize) -> u64 {
        let (hole, through) = self.list[i];
        through - self.trimmed - hole.len()
    }

    /// Add a hole after every seq indexed so far.
    pub(crate) fn push(&mut self, hole: Hole) {
        debug_assert!(self.list.back().is_none_or(|(last, _)| last.last < hole.first));
        let through = self.list.back().map_or(self.trimmed, |&(_, through)| through) + hole.len();
        self.list.push_back((hole, through));
    }

    /// `seq`, in hole `i`, is no longer lost: split the hole around it.
    /// O(holes), as every later sum changes; only a relocated copy of a
    /// record in a hole does this.
    pub(crate) fn split(&mut self, i: usize, seq: Seq) {
        let (hole, _) = self.list.remove(i).expect("the hole exists");
        let right = (seq < hole.last).then(|| Hole { first: seq + 1, ..hole });
        let left = (hole.first < seq).then(|| Hole { last: seq - 1, ..hole });
        for part in right.into_iter().chain(left) {
            self.list.insert(i, (part, 0));
        }
        let mut through = i.checked_sub(1).map_or(self.trimmed, |j| self.list[j].1);
        for (hole, sum) in self.list.iter_mut().skip(i) {
            through += hole.len();
            *sum = through;
        }
    }

    /// Drop the seqs of the first hole below `keep_from`; returns the seq
    /// the log's index now starts at (the first hole started where it did).
    pub(crate) fn trim_front(&mut self, keep_from: Seq) -> Seq {
        let (first, _) = self.list.front_mut().expect("a first hole");
        if keep_from > first.last {
            let next = first.last + 1;
            self.trimmed += first.len();
            self.list.pop_front();
            next
        } else {
            self.trimmed += keep_from - first.first;
            first.first = keep_from;
            keep_from
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hole(first: Seq, last: Seq) -> Hole {
        Hole { first, last, cause: 0 }
    }

    fn found(holes: &Holes, seq: Seq) -> Result<usize, u64> {
        match holes.find(seq) {
            Found::In(i) => Ok(i),
            Found::After(n) => Err(n),
        }
    }

    #[test]
    fn find_split_and_trim_keep_the_counts() {
        let mut holes = Holes::default();
        holes.push(hole(3, 5));
        holes.push(hole(10, 19));
        assert_eq!((found(&holes, 2), found(&holes, 4), found(&holes, 7)), (Err(0), Ok(0), Err(3)));
        assert_eq!((found(&holes, 19), found(&holes, 20), holes.total()), (Ok(1), Err(13), 13));
        holes.split(1, 12);
        assert_eq!(holes.iter().collect::<Vec<_>>(), [hole(3, 5), hole(10, 11), hole(13, 19)]);
        assert_eq!((found(&holes, 12), found(&holes, 13), holes.before(2)), (Err(5), Ok(2), 5));
        assert_eq!(holes.trim_front(4), 4);
        assert_eq!((found(&holes, 7), holes.total(), holes.before(1)), (Err(2), 11, 2));
        assert_eq!(holes.trim_front(9), 6);
        assert_eq!((found(&holes, 12), holes.total(), holes.first()), (Err(2), 9, Some(hole(10, 11))));
        holes.split(0, 10);
        holes.split(0, 11);
        assert_eq!((holes.iter().collect::<Vec<_>>(), found(&holes, 20)), (vec![hole(13, 19)], Err(7)));
    }
}
