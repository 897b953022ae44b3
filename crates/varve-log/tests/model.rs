//! Property test: random operations (create, append, batch, `append_if`, get,
//! scan, delete, trim, retention overflow, reopen) on the journal and on a plain
//! in-memory model give identical results. Proptest prints the failing case
//! and stores its seed in `proptest-regressions/` for replay.

#![allow(clippy::cast_possible_truncation, clippy::type_complexity, reason = "test data and a plain model")]

use std::collections::BTreeMap;

use proptest::prelude::*;
use varve_log::{JournalNamespace, JournalOptions, LogConfig, LogError, Namespace, OnFull, SeqRange, SyncPolicy};

const LOGS: [&str; 3] = ["a", "b", "c"];
const CONFIGS: [LogConfig; 3] = [
    LogConfig { retention: varve_log::Retention::Unbounded, system: false },
    LogConfig { retention: varve_log::Retention::Keep { k: 4, on_full: OnFull::Refuse }, system: false },
    LogConfig { retention: varve_log::Retention::Keep { k: 5, on_full: OnFull::Overwrite }, system: false },
];

#[derive(Clone, Debug)]
enum Op {
    Create(usize, usize),
    Append(usize, usize),
    Batch(Vec<(usize, usize)>),
    AppendIf(usize, i8, usize),
    Get(usize, u64),
    Scan(usize, u64, u64),
    Delete(usize),
    Trim(usize, u64),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let log = 0..LOGS.len();
    prop_oneof![
        2 => (log.clone(), 0..CONFIGS.len()).prop_map(|(l, c)| Op::Create(l, c)),
        6 => (log.clone(), 0..600usize).prop_map(|(l, n)| Op::Append(l, n)),
        3 => prop::collection::vec((log.clone(), 0..300usize), 0..5).prop_map(Op::Batch),
        2 => (log.clone(), -1..=1i8, 0..50usize).prop_map(|(l, d, n)| Op::AppendIf(l, d, n)),
        3 => (log.clone(), 0..30u64).prop_map(|(l, s)| Op::Get(l, s)),
        2 => (log.clone(), 0..30u64, 0..30u64).prop_map(|(l, a, b)| Op::Scan(l, a, b)),
        1 => log.clone().prop_map(Op::Delete),
        2 => (log.clone(), 0..30u64).prop_map(|(l, s)| Op::Trim(l, s)),
        1 => Just(Op::Reopen),
    ]
}

/// The plain model: each log's config, latest seq and kept records.
#[derive(Default)]
struct Model {
    logs: BTreeMap<&'static str, (LogConfig, u64, BTreeMap<u64, Vec<u8>>)>,
}

/// What an operation returned, in a form both sides can produce.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Seqs(Vec<u64>),
    Value(Vec<u8>),
    Records(Vec<(u64, Vec<u8>)>),
    Unit,
    Error(&'static str),
}

fn kind(e: &LogError) -> &'static str {
    match e {
        LogError::LogNotFound { .. } => "not found",
        LogError::SeqNotFound { .. } => "no such seq",
        LogError::Trimmed { .. } => "trimmed",
        LogError::Full { .. } => "full",
        LogError::Conflict { .. } => "conflict",
        LogError::AlreadyExists { .. } => "exists",
        LogError::InvalidArgument { .. } => "invalid",
        other => panic!("unexpected error {other}"),
    }
}

fn value(step: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (step * 31 + i) as u8).collect()
}

impl Model {
    fn earliest(config: LogConfig, latest: u64, records: &BTreeMap<u64, Vec<u8>>) -> u64 {
        let _ = (config, latest);
        records.keys().next().copied().unwrap_or(0)
    }

    fn append(&mut self, batch: &[(&'static str, Vec<u8>)], expected: Option<u64>) -> Outcome {
        if batch.is_empty() {
            return Outcome::Error("invalid");
        }
        if batch.iter().any(|(log, _)| !self.logs.contains_key(log)) {
            return Outcome::Error("not found");
        }
        let mut counts: Vec<(&str, u64)> = Vec::new();
        for (log, _) in batch {
            match counts.iter_mut().find(|(name, _)| name == log) {
                Some((_, count)) => *count += 1,
                None => counts.push((log, 1)),
            }
        }
        for (log, count) in &counts {
            let (config, latest, _) = &self.logs[log];
            if expected.is_some_and(|e| e != *latest) {
                return Outcome::Error("conflict");
            }
            if let varve_log::Retention::Keep { k, on_full: OnFull::Refuse } = config.retention {
                if latest + count > k {
                    return Outcome::Error("full");
                }
            }
        }
        let mut seqs = Vec::new();
        for (log, v) in batch {
            let (config, latest, records) = self.logs.get_mut(log).expect("checked");
            *latest += 1;
            records.insert(*latest, v.clone());
            if let varve_log::Retention::Keep { k, on_full: OnFull::Overwrite } = config.retention {
                while records.len() as u64 > k {
                    records.pop_first();
                }
            }
            seqs.push(*latest);
        }
        Outcome::Seqs(seqs)
    }

    fn apply(&mut self, step: usize, op: &Op) -> Outcome {
        match op {
            Op::Create(l, c) => match self.logs.get(LOGS[*l]) {
                Some((config, ..)) if *config == CONFIGS[*c] => Outcome::Unit,
                Some(_) => Outcome::Error("exists"),
                None => {
                    self.logs.insert(LOGS[*l], (CONFIGS[*c], 0, BTreeMap::new()));
                    Outcome::Unit
                }
            },
            Op::Append(l, n) => self.append(&[(LOGS[*l], value(step, *n))], None),
            Op::Batch(entries) => {
                let batch: Vec<_> = entries.iter().map(|(l, n)| (LOGS[*l], value(step, *n))).collect();
                self.append(&batch, None)
            }
            Op::AppendIf(l, delta, n) => {
                let Some((_, latest, _)) = self.logs.get(LOGS[*l]) else { return Outcome::Error("not found") };
                let expected = latest.saturating_add_signed(i64::from(*delta));
                self.append(&[(LOGS[*l], value(step, *n))], Some(expected))
            }
            Op::Get(l, seq) => {
                let Some((config, latest, records)) = self.logs.get(LOGS[*l]) else {
                    return Outcome::Error("not found");
                };
                if *seq == 0 || seq > latest {
                    Outcome::Error("no such seq")
                } else if *seq < Self::earliest(*config, *latest, records) {
                    Outcome::Error("trimmed")
                } else {
                    Outcome::Value(records[seq].clone())
                }
            }
            Op::Scan(l, first, last) => {
                let Some((config, latest, records)) = self.logs.get(LOGS[*l]) else {
                    return Outcome::Error("not found");
                };
                let first = (*first).max(1);
                if first > *last {
                    return Outcome::Error("invalid");
                }
                let earliest = Self::earliest(*config, *latest, records);
                if *latest > 0 && first <= *latest && first < earliest && earliest > 1 {
                    return Outcome::Error("trimmed");
                }
                Outcome::Records(records.range(first..=*last).map(|(s, v)| (*s, v.clone())).collect())
            }
            Op::Delete(l) => match self.logs.remove(LOGS[*l]) {
                Some(_) => Outcome::Unit,
                None => Outcome::Error("not found"),
            },
            Op::Trim(l, before) => {
                let Some((config, latest, records)) = self.logs.get_mut(LOGS[*l]) else {
                    return Outcome::Error("not found");
                };
                if matches!(config.retention, varve_log::Retention::Keep { on_full: OnFull::Refuse, .. })
                    || before > latest
                {
                    return Outcome::Error("invalid");
                }
                while records.first_key_value().is_some_and(|(seq, _)| seq < before) {
                    records.pop_first();
                }
                Outcome::Seqs(vec![records.keys().next().copied().unwrap_or(0)])
            }
            Op::Reopen => Outcome::Unit,
        }
    }
}

fn run_real(ns: &JournalNamespace, step: usize, op: &Op) -> Outcome {
    let result = match op {
        Op::Create(l, c) => ns.create_log(LOGS[*l], CONFIGS[*c]).map(|()| Outcome::Unit),
        Op::Append(l, n) => ns.append(LOGS[*l], &value(step, *n)).map(|s| Outcome::Seqs(vec![s])),
        Op::Batch(entries) => {
            let values: Vec<Vec<u8>> = entries.iter().map(|(_, n)| value(step, *n)).collect();
            let batch: Vec<(&str, &[u8])> =
                entries.iter().zip(&values).map(|((l, _), v)| (LOGS[*l], v.as_slice())).collect();
            ns.append_batch(&batch).map(Outcome::Seqs)
        }
        Op::AppendIf(l, delta, n) => ns.latest(LOGS[*l]).and_then(|latest| {
            let expected = latest.saturating_add_signed(i64::from(*delta));
            ns.append_if(LOGS[*l], expected, &value(step, *n)).map(|s| Outcome::Seqs(vec![s]))
        }),
        Op::Get(l, seq) => ns.get(LOGS[*l], *seq).map(|v| Outcome::Value(v.to_vec())),
        Op::Scan(l, first, last) => {
            ns.scan(LOGS[*l], SeqRange { first: (*first).max(1), last: *last }).and_then(|scan| {
                scan.map(|r| r.map(|r| (r.seq, r.value.to_vec()))).collect::<Result<Vec<_>, _>>().map(Outcome::Records)
            })
        }
        Op::Delete(l) => ns.delete_log(LOGS[*l]).map(|()| Outcome::Unit),
        Op::Trim(l, before) => ns.trim(LOGS[*l], *before).map(|earliest| Outcome::Seqs(vec![earliest])),
        Op::Reopen => Ok(Outcome::Unit),
    };
    result.unwrap_or_else(|e| Outcome::Error(kind(&e)))
}

fn options() -> JournalOptions {
    // Logs packed at nearly every chance: reads and changes meet packed logs.
    JournalOptions { segment_bytes_max: 4096, sync: SyncPolicy::Never, hot_logs_min: 0, ..JournalOptions::default() }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn journal_matches_the_model(ops in prop::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ns = JournalNamespace::open(dir.path(), "model", options()).expect("open");
        let mut model = Model::default();
        for (step, op) in ops.iter().enumerate() {
            if let Op::Reopen = op {
                drop(ns);
                ns = JournalNamespace::open(dir.path(), "model", options()).expect("reopen");
            }
            let expected = model.apply(step, op);
            let actual = run_real(&ns, step, op);
            prop_assert_eq!(&actual, &expected, "step {} {:?}", step, op);
        }
        // And the final state survives one more reopen, log by log.
        drop(ns);
        let ns = JournalNamespace::open(dir.path(), "model", options()).expect("final reopen");
        let listed: Vec<(String, u64, u64)> =
            ns.list_logs().expect("list").into_iter().map(|l| (l.name, l.earliest, l.latest)).collect();
        let modelled: Vec<(String, u64, u64)> = model
            .logs
            .iter()
            .map(|(n, (_, latest, records))| ((*n).to_owned(), records.keys().next().copied().unwrap_or(0), *latest))
            .collect();
        prop_assert_eq!(listed, modelled);
    }
}
