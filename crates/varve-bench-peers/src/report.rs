//! The report: one Markdown table, rows (durability, metric), a column per
//! store and the journal's ratio to the best of the others, with the notes
//! that say what was run and how the stores were set up.

use std::fmt::Write as _;

use varve_bench::table::{ratio_cell, Align, Table};

use crate::run::{Figures, Sizes, BATCH_RECORDS, GETS, GETS_WARMUP, VALUE_BYTES};
use crate::stores::{Kind, Level, GROUP_THREADS};

/// Every figure of a run, and what is needed to read it.
pub struct Report {
    /// The sizes run.
    pub sizes: Sizes,
    /// The values' seed.
    pub seed: u64,
    /// Per level, each store's median figures, in [`Kind::ALL`] order (the
    /// same stores at every level).
    pub levels: Vec<(Level, Vec<(Kind, Figures)>)>,
    /// Load average (1, 5, 15 min) when the run started and when it ended.
    pub load: [Option<[f64; 3]>; 2],
    /// Wall time of the whole run, seconds.
    pub seconds: f64,
}

/// One row per level: what it measures and which way is better.
struct Metric {
    name: &'static str,
    higher_is_better: bool,
    value: fn(&Figures) -> f64,
    decimals: usize,
}

const METRICS: [Metric; 6] = [
    Metric { name: "appends/s (1 record each)", higher_is_better: true, value: |f| f.appends_per_s, decimals: 0 },
    Metric {
        name: "batch appends, records/s (100 per batch)",
        higher_is_better: true,
        value: |f| f.batch_records_per_s,
        decimals: 0,
    },
    Metric { name: "random get p50, µs (page cache)", higher_is_better: false, value: |f| f.get_p50_us, decimals: 1 },
    Metric { name: "random get p99, µs (page cache)", higher_is_better: false, value: |f| f.get_p99_us, decimals: 1 },
    Metric { name: "full scan, MB/s of values", higher_is_better: true, value: |f| f.scan_mb_per_s, decimals: 0 },
    Metric { name: "disk bytes per record", higher_is_better: false, value: |f| f.disk_bytes_per_record, decimals: 1 },
];

/// The journal's figure over the best peer's (highest where higher is
/// better, else lowest), and that peer; `None` without a journal figure or
/// without peers.
pub fn journal_over_best(figures: &[(Kind, f64)], higher_is_better: bool) -> Option<(f64, Kind)> {
    let journal = figures.iter().find(|(k, _)| *k == Kind::Journal)?.1;
    let peers = figures.iter().filter(|(k, _)| *k != Kind::Journal);
    let best = if higher_is_better {
        peers.max_by(|a, b| a.1.total_cmp(&b.1))
    } else {
        peers.min_by(|a, b| a.1.total_cmp(&b.1))
    }?;
    Some((journal / best.1, best.0))
}

fn thousands(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    let (whole, fraction) = text.split_once('.').map_or((text.as_str(), None), |(w, f)| (w, Some(f)));
    let mut grouped = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 && c.is_ascii_digit() {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match fraction {
        Some(f) => format!("{grouped}.{f}"),
        None => grouped,
    }
}

impl Report {
    /// The table alone.
    pub fn table(&self) -> String {
        let mut columns = vec![("durability", Align::Left), ("metric", Align::Left)];
        // The stores measured (all of them unless `--only` picked one), in order.
        let kinds: Vec<Kind> =
            self.levels.first().map(|(_, stores)| stores.iter().map(|(k, _)| *k).collect()).unwrap_or_default();
        columns.extend(kinds.iter().map(|k| (k.label(), Align::Right)));
        columns.push(("journal ÷ best peer", Align::Right));
        let mut table = Table::new(&columns);
        for (level, stores) in &self.levels {
            for metric in &METRICS {
                let figures: Vec<(Kind, f64)> = stores.iter().map(|(k, f)| (*k, (metric.value)(f))).collect();
                let mut row = vec![level.label().to_owned(), metric.name.to_owned()];
                row.extend(figures.iter().map(|(_, v)| thousands(*v, metric.decimals)));
                row.push(match journal_over_best(&figures, metric.higher_is_better) {
                    Some((ratio, best)) => {
                        format!("{} vs {}", ratio_cell(ratio, metric.higher_is_better), best.label())
                    }
                    None => "–".into(),
                });
                table.row(row);
            }
        }
        table.to_markdown()
    }

    /// The table with the notes that say what was run.
    pub fn to_markdown(&self) -> String {
        let s = &self.sizes;
        let load = |l: Option<[f64; 3]>| l.map_or("unknown".into(), |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"));
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Records: {VALUE_BYTES} B values of seeded pseudo-random bytes (seed {}), keys the log's seq \
             (u64 big-endian; SQLite's INTEGER PRIMARY KEY). Per trial and store: single appends \
             (none {} / fsync {} / group {}), then batches of {BATCH_RECORDS} (none {} / fsync {} / group {} \
             records); close; disk use; reopen; a full scan and {GETS_WARMUP} gets untimed; {GETS} timed \
             random gets; a timed full scan. {} trial(s), medians; stores take turns within a trial. \
             Load average (1/5/15 min) at start {} and end {}; {:.0} s in all.\n",
            self.seed,
            s.singles[0],
            s.singles[1],
            s.singles[2],
            s.batched[0],
            s.batched[1],
            s.batched[2],
            s.trials,
            load(self.load[0]),
            load(self.load[1]),
            self.seconds,
        );
        out.push_str(&self.table());
        let _ = write!(
            out,
            "\nThe last column is the journal's figure over the best other store's, named: for appends \
             and scans higher is better, for latency and disk bytes lower is better.\n\n\
             Durability, matched: **none** — journal `SyncPolicy::Never`, redb `Durability::None` \
             commits and one `Immediate` commit at close, fjall writes without `persist`, SQLite WAL \
             `synchronous=OFF`, RocksDB `sync=false` (WAL on). **fsync per append** — each append (or \
             batch) durable before it returns: journal `SyncPolicy::Always`, redb `Durability::Immediate` \
             commit per write, fjall `persist(SyncData)` after each write (a batch commits with \
             `durability(SyncData)`), SQLite WAL `synchronous=FULL` with a transaction per write, \
             RocksDB `sync=true`. **group commit** — the same from {GROUP_THREADS} threads at once: the \
             journal (`Always`) and RocksDB (its write group) share one fsync among the appenders \
             waiting; redb (one write transaction at a time), SQLite (one connection behind a mutex) \
             and fjall (each writer persists, one at a time under its journal lock) have no group \
             commit, so each write still pays its own sync — what a user of them gets.\n\n\
             Close: the journal's `close` (sync); redb an `Immediate` commit; fjall `persist(SyncAll)` \
             and its memtable written out as a table; SQLite closes its connection (checkpointing and \
             removing the WAL); RocksDB `flush_wal(true)` and `flush` (memtable to a table file). No \
             store is asked to compact. Gets: one call each as a user makes it alone (redb opens a \
             read transaction per get, SQLite runs a cached prepared statement, RocksDB `get_pinned`). \
             Scans: the journal's `scan`, redb's `iter`, fjall's `iter`, SQLite `SELECT value ORDER \
             BY seq`, RocksDB's raw iterator. RocksDB is built without compression libraries and fjall \
             with its default lz4: the values are random and do not compress.\n"
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_to_the_best_peer() {
        let figures = [(Kind::Journal, 50.0), (Kind::Redb, 100.0), (Kind::Sqlite, 25.0)];
        let (ratio, best) = journal_over_best(&figures, true).expect("a journal and peers");
        assert!((ratio - 0.5).abs() < 1e-9 && best == Kind::Redb);
        let (ratio, best) = journal_over_best(&figures, false).expect("a journal and peers");
        assert!((ratio - 2.0).abs() < 1e-9 && best == Kind::Sqlite);
        assert!(journal_over_best(&[(Kind::Journal, 1.0)], true).is_none());
    }

    #[test]
    fn numbers_are_grouped() {
        assert_eq!(thousands(1_234_567.0, 0), "1,234,567");
        assert_eq!(thousands(999.0, 0), "999");
        assert_eq!(thousands(1234.56, 1), "1,234.6");
        assert_eq!(thousands(12.0, 1), "12.0");
    }
}
