//! The Log contract on the embedded journal, with small segments so that
//! rolls, reclamation and compaction happen inside the checks too.

use varve_log::conformance::Fixture;
use varve_log::{JournalOptions, JournalStore, Store, SyncPolicy};

fn fresh() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = JournalOptions { segment_bytes_max: 64 << 10, sync: SyncPolicy::Never, ..JournalOptions::default() };
    let store = JournalStore::open(dir.path(), options).expect("open store");
    Fixture { namespace: store.namespace("test").expect("namespace"), keep_alive: Box::new(dir) }
}

varve_log::conformance_suite!(fresh);

mod always_sync {
    use super::*;

    fn fresh_always() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = JournalStore::open(dir.path(), JournalOptions::default()).expect("open store");
        Fixture { namespace: store.namespace("test").expect("namespace"), keep_alive: Box::new(dir) }
    }

    varve_log::conformance_suite!(fresh_always);
}

/// Every log packed at nearly every chance (`hot_logs_min` 0), so that
/// each operation meets logs thawed from and read out of the packed set,
/// and every set kept in a scratch file, mapped (the heap's sets are
/// covered by the model, trim and rename tests).
mod packed_logs {
    use super::*;

    fn fresh_packing() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let options = JournalOptions {
            segment_bytes_max: 64 << 10,
            sync: SyncPolicy::Never,
            hot_logs_min: 0,
            packed_in_file_bytes_min: 0,
            ..JournalOptions::default()
        };
        let store = JournalStore::open(dir.path(), options).expect("open store");
        Fixture { namespace: store.namespace("test").expect("namespace"), keep_alive: Box::new(dir) }
    }

    varve_log::conformance_suite!(fresh_packing);
}
