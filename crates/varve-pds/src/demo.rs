//! The paper's worked example (§III Figure 1, §IV-C Figure 3): a BST with
//! one extra pointer, insert 7, 2, 5, then delete 2 — each version's
//! preorder and every log as a table in the layout of Table I / Figure 3
//! (seqs from 1, 0 for null).
//!
//! ```
//! let example = varve_pds::demo::paper_example()?;
//! assert_eq!(example.versions[3].1, vec![7, 5]);
//! assert_eq!(example.ap.last().map(|r| (r.seq, r.vs, r.dseq, r.lseq)), Some((4, 4, 1, 4)));
//! println!("{example}");
//! # Ok::<(), varve_pds::PdsError>(())
//! ```
//!
//! LinkLogs are named `pds.<structure>.link.<dseq>`; the tables also show
//! the paper's alias `link_<val>` (the paper names them by node value).

use std::fmt;
use std::sync::Arc;

use varve_log::{Limits, MemoryNamespace, Namespace, Seq};

use crate::codec::{ApEntry, DataEntry, LinkEntry};
use crate::error::Result;
use crate::key::Key;
use crate::tree::split_val;
use crate::{Options, SortedSet, Structure, Version};

/// A DataLog row: seq, vs, val, link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataRow {
    /// The entry's seq in the DataLog: the node's `dseq`.
    pub seq: Seq,
    /// The version that created the node.
    pub vs: Version,
    /// The node's key.
    pub val: u64,
    /// The node's LinkLog, `pds.<structure>.link.<dseq>`.
    pub link: String,
}

/// A LinkLog row: seq, vs, dseq, lseq, rem, type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkRow {
    /// The entry's seq in its LinkLog.
    pub seq: Seq,
    /// The version that wrote the entry.
    pub vs: Version,
    /// DataLog seq of the child pointed to (0: null).
    pub dseq: Seq,
    /// First LinkLog seq of the child's copy in use (0: null).
    pub lseq: Seq,
    /// Update entries left in the copy after this one.
    pub rem: u32,
    /// The field set, as the paper's letter: `L` or `R`.
    pub kind: &'static str,
}

/// An APLog row: seq, vs, dseq, lseq.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApRow {
    /// The entry's seq in the APLog (equal to `vs`).
    pub seq: Seq,
    /// The version the entry commits.
    pub vs: Version,
    /// DataLog seq of the version's root (0: an empty tree).
    pub dseq: Seq,
    /// First LinkLog seq of the root's copy in use (0: an empty tree).
    pub lseq: Seq,
}

/// One LinkLog: its real name, the paper's alias, its rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkTable {
    /// The LinkLog's name, `pds.<structure>.link.<dseq>`.
    pub log: String,
    /// The paper's name for it, `link_<val>`.
    pub alias: String,
    /// Its entries, from seq 1.
    pub rows: Vec<LinkRow>,
}

/// The logs of a BST of `u64` keys, and each version's preorder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaperExample {
    /// The operations, as the paper writes them.
    pub ops: Vec<String>,
    /// (version, preorder of its keys).
    pub versions: Vec<(Version, Vec<u64>)>,
    /// The DataLog, one row per node, from seq 1.
    pub data: Vec<DataRow>,
    /// Each node's LinkLog, in DataLog order.
    pub links: Vec<LinkTable>,
    /// The APLog, one row per version, from seq 1.
    pub ap: Vec<ApRow>,
}

/// Run the paper's example on a memory namespace.
pub fn paper_example() -> Result<PaperExample> {
    paper_example_on(&(Arc::new(MemoryNamespace::new("demo", Limits::default())) as Arc<dyn Namespace>), "demo")
}

/// Run the paper's example as structure `name` in `ns` (which must not
/// hold that structure yet) and read its logs back.
pub fn paper_example_on(ns: &Arc<dyn Namespace>, name: &str) -> Result<PaperExample> {
    let mut tree = SortedSet::<u64>::open_as(
        ns.clone(),
        name,
        Structure::Bst,
        Options { extra: 1, keep: None, ..Options::default() },
    )?;
    let mut ops = Vec::new();
    for k in [7u64, 2, 5] {
        tree.insert(&k)?;
        ops.push(format!("insert({k})"));
    }
    tree.delete(&2)?;
    ops.push("delete(2)".into());
    dump_bst(ns.as_ref(), &tree, name, ops)
}

fn dump_bst(ns: &dyn Namespace, tree: &SortedSet<u64>, name: &str, ops: Vec<String>) -> Result<PaperExample> {
    let mut versions = Vec::new();
    for v in tree.versions()? {
        versions.push((v, tree.preorder(Some(v))?));
    }
    let data_log = format!("pds.{name}.data");
    let mut data = Vec::new();
    for seq in 1..=ns.latest(&data_log)? {
        let entry = DataEntry::decode(&ns.get(&data_log, seq)?, &data_log, seq)?;
        let (key, _) = split_val(&entry.val)?;
        data.push(DataRow { seq, vs: entry.vs, val: u64::decode_all(key)?, link: entry.link });
    }
    let mut links = Vec::new();
    for row in &data {
        let mut rows = Vec::new();
        for seq in 1..=ns.latest(&row.link)? {
            let e = LinkEntry::decode(&ns.get(&row.link, seq)?, &row.link, seq)?;
            rows.push(LinkRow { seq, vs: e.vs, dseq: e.dseq, lseq: e.lseq, rem: e.rem, kind: e.kind.letter() });
        }
        links.push(LinkTable { log: row.link.clone(), alias: format!("link_{}", row.val), rows });
    }
    let ap_log = format!("pds.{name}.ap");
    let mut ap = Vec::new();
    for seq in 1..=ns.latest(&ap_log)? {
        let e = ApEntry::decode(&ns.get(&ap_log, seq)?, &ap_log, seq)?;
        ap.push(ApRow { seq, vs: e.vs, dseq: e.dseq, lseq: e.lseq });
    }
    Ok(PaperExample { ops, versions, data, links, ap })
}

fn table(f: &mut fmt::Formatter<'_>, title: &str, header: &[&str], rows: &[Vec<String>]) -> fmt::Result {
    writeln!(f, "{title}")?;
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].len()).chain([header[i].len()]).max().unwrap_or(0))
        .collect();
    let line = |f: &mut fmt::Formatter<'_>, cells: &[&str]| {
        let parts: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect();
        writeln!(f, "  {}", parts.join("  "))
    };
    line(f, header)?;
    for row in rows {
        line(f, &row.iter().map(String::as_str).collect::<Vec<_>>())?;
    }
    writeln!(f)
}

impl fmt::Display for PaperExample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "PEDaLS BST, one extra pointer: {}", self.ops.join(", "))?;
        writeln!(f)?;
        for ((v, preorder), op) in self.versions.iter().zip(&self.ops) {
            let keys: Vec<String> = preorder.iter().map(u64::to_string).collect();
            writeln!(f, "version {v} (after {op}): preorder [{}]", keys.join(", "))?;
        }
        writeln!(f)?;
        let alias = |log: &str| self.links.iter().find(|l| l.log == log).map_or(log, |l| l.alias.as_str()).to_owned();
        let rows: Vec<Vec<String>> = self
            .data
            .iter()
            .map(|r| vec![r.seq.to_string(), r.vs.to_string(), r.val.to_string(), alias(&r.link)])
            .collect();
        table(f, "DataLog", &["seq", "vs", "val", "link"], &rows)?;
        for link in &self.links {
            let rows: Vec<Vec<String>> = link
                .rows
                .iter()
                .map(|r| {
                    let n = |x: u64| x.to_string();
                    vec![n(r.seq), n(r.vs), n(r.dseq), n(r.lseq), r.rem.to_string(), r.kind.to_owned()]
                })
                .collect();
            let title = format!("LinkLog: {} ({})", link.alias, link.log);
            table(f, &title, &["seq", "vs", "dseq", "lseq", "rem", "type"], &rows)?;
        }
        let rows: Vec<Vec<String>> = self
            .ap
            .iter()
            .map(|r| vec![r.seq.to_string(), r.vs.to_string(), r.dseq.to_string(), r.lseq.to_string()])
            .collect();
        table(f, "APLog", &["seq", "vs", "dseq", "lseq"], &rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values §IV-C states for Figure 3.
    #[test]
    fn matches_the_paper_figure_3() {
        let ex = paper_example().expect("example");
        let pre: Vec<Vec<u64>> = ex.versions.iter().map(|(_, p)| p.clone()).collect();
        assert_eq!(pre, vec![vec![7], vec![7, 2], vec![7, 2, 5], vec![7, 5]]);
        let data: Vec<(u64, u64, u64, &str)> = ex.data.iter().map(|r| (r.seq, r.vs, r.val, r.link.as_str())).collect();
        assert_eq!(
            data,
            vec![(1, 1, 7, "pds.demo.link.1"), (2, 2, 2, "pds.demo.link.2"), (3, 3, 5, "pds.demo.link.3")]
        );
        let rows = |i: usize| -> Vec<(u64, u64, u64, u64, u32, &str)> {
            ex.links[i].rows.iter().map(|r| (r.seq, r.vs, r.dseq, r.lseq, r.rem, r.kind)).collect()
        };
        assert_eq!(
            rows(0),
            vec![
                (1, 1, 0, 0, 1, "L"),
                (2, 1, 0, 0, 1, "R"),
                (3, 2, 2, 1, 0, "L"),
                (4, 4, 0, 0, 1, "R"),
                (5, 4, 3, 1, 1, "L")
            ],
            "link_7"
        );
        assert_eq!(rows(1), vec![(1, 2, 0, 0, 1, "L"), (2, 2, 0, 0, 1, "R"), (3, 3, 3, 1, 0, "R")], "link_2");
        assert_eq!(rows(2), vec![(1, 3, 0, 0, 1, "L"), (2, 3, 0, 0, 1, "R")], "link_5");
        let ap: Vec<(u64, u64, u64, u64)> = ex.ap.iter().map(|r| (r.seq, r.vs, r.dseq, r.lseq)).collect();
        assert_eq!(ap, vec![(1, 1, 1, 1), (2, 2, 1, 1), (3, 3, 1, 1), (4, 4, 1, 4)]);
        let text = ex.to_string();
        assert!(text.contains("LinkLog: link_7 (pds.demo.link.1)"), "{text}");
    }
}
