//! Helpers shared by this crate's integration tests.

use varve_log::{JournalNamespace, LogInfo, Namespace as _, SeqRange};

/// Every log of a namespace with its records, in the order `list_logs` gives.
pub type Contents = Vec<(LogInfo, Vec<(u64, Vec<u8>)>)>;

/// What `ns` holds now, to compare two opens record by record. A read-only
/// handle reads on to the writer's published end first (a writer's refresh
/// does nothing).
pub fn contents(ns: &JournalNamespace) -> Contents {
    ns.refresh().expect("refresh");
    let logs = ns.list_logs().expect("list");
    logs.into_iter()
        .map(|info| {
            let records = ns
                .scan(&info.name, SeqRange::from(info.earliest.max(1)..))
                .expect("scan")
                .map(|r| r.map(|r| (r.seq, r.value.to_vec())).expect("record"))
                .collect();
            (info, records)
        })
        .collect()
}
