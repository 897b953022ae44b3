//! The writer of a namespace inside one process: the one place that decides
//! how a write goes, for every surface that holds a namespace's writer lock
//! (`varve serve`, the Python package, the CLI when no runtime answers on
//! the namespace's socket).
//!
//! - **Through a runtime** when one is given ([`NamespaceWriter::with_runtime`]:
//!   the handlers run here), or when the namespace has subscriptions
//!   ([`SUBSCRIPTIONS_LOG`] exists) or an append carries a cause: then a
//!   *writer-only* runtime (no workers) is started, so the append and its
//!   TRIGGERs are one batch and the next runtime fires the handlers, and a
//!   cause lands in `_events`. Once started it stays for the writer's life.
//! - **Straight to the log** otherwise, request ids remembered in
//!   `_runtime.requests` as the runtime does ([`crate::requests`]).
//!
//! Concurrency: on the straight path, appends without a request id run
//! together (sharing the journal's group commit); one with an id predicts
//! its seqs, so it holds the namespace alone. A runtime serialises its own
//! appends.

use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use varve_log::{LogConfig, Namespace, Seq};

use crate::builder::RuntimeBuilder;
use crate::error::Result;
use crate::event::{EventId, TraceId};
use crate::requests::{self, Appended, RequestId, RequestMemory};
use crate::runtime::Runtime;
use crate::system_logs::{namespace_host, SUBSCRIPTIONS_LOG};

/// A namespace's writer in this process (see the module docs).
pub struct NamespaceWriter {
    ns: Arc<dyn Namespace>,
    /// For a writer-only runtime's host id when the namespace has none yet.
    data_dir: std::path::PathBuf,
    state: RwLock<State>,
}

#[derive(Default)]
struct State {
    /// The runtime writes go through, once there is one.
    runtime: Option<Runtime>,
    /// The straight path's request ids, loaded on its first identified append.
    requests: Option<RequestMemory>,
}

/// The cause of an append: the event (in any namespace, on any host) and its trace.
pub type CauseIds = (EventId, TraceId);

impl NamespaceWriter {
    /// The writer of `ns`, which this process holds the writer lock of.
    /// Starts a writer-only runtime if the namespace has subscriptions.
    /// `data_dir` gives the host id of a namespace that has none yet
    /// ([`crate::host_id_for_dir`]).
    pub fn open(ns: Arc<dyn Namespace>, data_dir: &Path) -> Result<NamespaceWriter> {
        let writer = NamespaceWriter { ns, data_dir: data_dir.to_path_buf(), state: RwLock::default() };
        if writer.ns.log_info(SUBSCRIPTIONS_LOG).is_ok() {
            let mut state = writer.write_state();
            writer.start_writer_only(&mut state)?;
        }
        Ok(writer)
    }

    /// Writes go through `runtime` (which runs handlers here).
    #[must_use]
    pub fn with_runtime(runtime: Runtime) -> NamespaceWriter {
        let ns = Arc::clone(runtime.namespace());
        let state = State { runtime: Some(runtime), requests: None };
        NamespaceWriter { ns, data_dir: std::path::PathBuf::new(), state: RwLock::new(state) }
    }

    /// The namespace, for reads.
    #[must_use]
    pub fn namespace(&self) -> &Arc<dyn Namespace> {
        &self.ns
    }

    /// Whether writes go through a runtime (given, or writer-only).
    #[must_use]
    pub fn through_runtime(&self) -> bool {
        self.read_state().runtime.is_some()
    }

    /// The runtime writes go through, if there is one (for its state: backlog, event retention).
    #[must_use]
    pub fn runtime(&self) -> Option<crate::RuntimeHandle> {
        self.read_state().runtime.as_ref().map(Runtime::handle)
    }

    /// Append `batch` atomically: once per `request` id when one is given,
    /// caused by `cause` when one is given. Blocks on the log (fsync).
    pub fn append(
        &self,
        batch: &[(&str, &[u8])],
        request: Option<&RequestId>,
        cause: Option<CauseIds>,
    ) -> Result<Appended> {
        self.write(request, cause.is_some(), |runtime| match runtime {
            Through::Runtime(runtime) => {
                if let Some(id) = request {
                    return runtime.append_once(id, batch, cause);
                }
                let seqs = match cause {
                    Some((parent, trace)) => runtime.append_caused(batch, parent, trace)?,
                    None => runtime.append_batch(batch)?,
                };
                Ok(Appended { seqs, repeated: false })
            }
            Through::Log => Ok(Appended { seqs: self.ns.append_batch(batch)?, repeated: false }),
            Through::LogAlone(memory, id) => requests::append_batch_remembering(self.ns.as_ref(), memory, id, batch),
        })
    }

    /// `append_if`: append `value` to `log` only if its latest seq is
    /// `expected_latest`, else `Conflict { actual }`; with a request id, a
    /// repeat answers the first append's seq (before the check: the first
    /// attempt moved latest on).
    pub fn append_if(
        &self,
        log: &str,
        expected_latest: Seq,
        value: &[u8],
        request: Option<&RequestId>,
        cause: Option<CauseIds>,
    ) -> Result<Appended> {
        self.append_batch_if(&[(log, value)], &[(log, expected_latest)], request, cause)
    }

    /// `append_batch_if`: append `batch` atomically only if each log of
    /// `expected` (each one the batch writes) ends at its seq, else
    /// `Conflict` naming the first that does not; a request id and a cause
    /// as for [`NamespaceWriter::append`] (a repeat answers the first
    /// append's seqs before the check: the first attempt moved the logs on).
    pub fn append_batch_if(
        &self,
        batch: &[(&str, &[u8])],
        expected: &[(&str, Seq)],
        request: Option<&RequestId>,
        cause: Option<CauseIds>,
    ) -> Result<Appended> {
        varve_log::rules::check_expected_logs(batch, expected)?;
        self.write(request, cause.is_some(), |runtime| match runtime {
            Through::Runtime(runtime) => runtime.append_batch_if_once(request, batch, expected, cause),
            Through::Log => Ok(Appended { seqs: self.ns.append_batch_if(batch, expected)?, repeated: false }),
            Through::LogAlone(memory, id) => {
                if memory.recall(id).is_none() {
                    // This writer holds the namespace alone: nothing lands between the check and the append.
                    crate::trigger::check_expected(self.ns.as_ref(), batch, expected)?;
                }
                requests::append_batch_remembering(self.ns.as_ref(), memory, id, batch)
            }
        })
    }

    /// Create a log (idempotent for the same configuration); `true` if it is new.
    pub fn create_log(&self, name: &str, config: LogConfig) -> Result<bool> {
        let state = self.read_state();
        if let Some(runtime) = &state.runtime {
            return runtime.create_log(name, config);
        }
        let existed = self.ns.log_info(name).is_ok();
        self.ns.create_log(name, config)?;
        Ok(!existed)
    }

    /// Delete a log and its records.
    pub fn delete_log(&self, name: &str) -> Result<()> {
        let state = self.read_state();
        if let Some(runtime) = &state.runtime {
            return runtime.delete_log(name);
        }
        crate::append_index::delete_index(self.ns.as_ref(), name)?;
        Ok(self.ns.delete_log(name)?)
    }

    /// Rename logs, all at once (see `Namespace::rename_logs`); through the
    /// runtime when there is one. The runtime's own logs (`_events`,
    /// `_runtime.*`, `_dead_letters`) keep their names on either path.
    pub fn rename_logs(&self, renames: &[(&str, &str)]) -> Result<()> {
        crate::inner::refuse_renaming_runtime_logs(renames)?;
        let state = self.read_state();
        if let Some(runtime) = &state.runtime {
            return runtime.rename_logs(renames);
        }
        Ok(self.ns.rename_logs(renames)?)
    }

    /// Trim a log's records below `before` (see `Namespace::trim`); through
    /// the runtime when there is one. The runtime's own logs are refused:
    /// it trims `_events` itself, by its retention (`events_keep`), never
    /// past what its recovery still needs.
    pub fn trim(&self, log: &str, before: Seq) -> Result<Seq> {
        crate::inner::refuse_trimming_runtime_logs(log)?;
        let state = self.read_state();
        if let Some(runtime) = &state.runtime {
            return runtime.trim(log, before);
        }
        Ok(self.ns.trim(log, before)?)
    }

    /// Stop the runtime writes go through, if any (`grace` for its running
    /// handlers, see [`Runtime::stop`]); later writes go straight to the log
    /// until a cause or a subscription asks for a runtime again.
    pub fn stop(&self, grace: Duration) {
        let runtime = self.write_state().runtime.take();
        if let Some(runtime) = runtime {
            runtime.stop(grace);
        }
    }

    /// Run `write` on the path this write takes, holding what it needs.
    fn write<T>(
        &self,
        request: Option<&RequestId>,
        caused: bool,
        write: impl FnOnce(Through<'_>) -> Result<T>,
    ) -> Result<T> {
        {
            let state = self.read_state();
            if let Some(runtime) = &state.runtime {
                return write(Through::Runtime(runtime));
            }
            if request.is_none() && !caused {
                return write(Through::Log);
            }
        }
        let mut state = self.write_state();
        if caused && state.runtime.is_none() {
            self.start_writer_only(&mut state)?;
        }
        let State { runtime, requests } = &mut *state;
        if let Some(runtime) = runtime {
            return write(Through::Runtime(runtime));
        }
        let Some(id) = request else {
            return write(Through::Log);
        };
        if requests.is_none() {
            *requests = Some(requests::read_requests(self.ns.as_ref())?);
        }
        write(Through::LogAlone(requests.get_or_insert_with(RequestMemory::default), id))
    }

    fn start_writer_only(&self, state: &mut State) -> Result<()> {
        let host = match namespace_host(self.ns.as_ref())? {
            Some(host) => host,
            None => crate::host_id_for_dir(&self.data_dir)?,
        };
        state.runtime = Some(RuntimeBuilder::new(Arc::clone(&self.ns)).host(host).concurrency(0).start()?);
        // The straight path's memory is stale once the runtime appends; the runtime keeps its own.
        state.requests = None;
        Ok(())
    }

    fn read_state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_state(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The path one write takes.
enum Through<'a> {
    /// A runtime (it serialises its own appends).
    Runtime(&'a Runtime),
    /// The log, alongside other unidentified appends.
    Log,
    /// The log, holding the namespace alone: an identified append, with the request memory.
    LogAlone(&'a mut RequestMemory, &'a RequestId),
}

#[cfg(test)]
mod tests {
    use varve_log::{LogConfig, MemoryStore, Store};

    use super::*;
    use crate::event::EventKind;
    use crate::system_logs::{read_events, EVENTS_LOG};
    use varve_log::LogError;

    fn namespace() -> Arc<dyn Namespace> {
        let ns = MemoryStore::new().namespace("app").expect("namespace");
        ns.create_log("in", LogConfig::unbounded()).expect("create");
        ns
    }

    #[test]
    fn a_plain_namespace_is_written_straight_and_ids_land_once() {
        let ns = namespace();
        let writer = NamespaceWriter::open(Arc::clone(&ns), Path::new("unused")).expect("open");
        assert!(!writer.through_runtime());
        assert_eq!(writer.append(&[("in", b"a")], None, None).expect("append").seqs, vec![1]);
        assert!(ns.log_info(EVENTS_LOG).is_err(), "no runtime logs for a plain append");
        let id = RequestId::parse("r1").expect("id");
        let first = writer.append(&[("in", b"b")], Some(&id), None).expect("append");
        let again = writer.append(&[("in", b"b")], Some(&id), None).expect("repeat");
        assert_eq!((first.seqs.clone(), first.repeated, again.seqs, again.repeated), (vec![2], false, vec![2], true));
        let conflict = writer.append_if("in", 1, b"c", None, None).expect_err("latest is 2");
        assert!(matches!(conflict, crate::RuntimeError::Log(LogError::Conflict { actual: 2, .. })), "{conflict}");
        let id = RequestId::parse("r2").expect("id");
        assert_eq!(writer.append_if("in", 2, b"c", Some(&id), None).expect("append_if").seqs, vec![3]);
        assert!(
            writer.append_if("in", 2, b"c", Some(&id), None).expect("repeat").repeated,
            "answered before the check"
        );
    }

    #[test]
    fn a_cause_brings_a_writer_only_runtime_that_records_it() {
        let ns = namespace();
        let dir = tempfile::tempdir().expect("temp dir");
        let writer = NamespaceWriter::open(Arc::clone(&ns), dir.path()).expect("open");
        let parent = EventId::parse("00000000000000aa:other:7").expect("event id");
        let appended = writer.append(&[("in", b"x")], None, Some((parent.clone(), 0xabc))).expect("append");
        assert!(writer.through_runtime(), "a caused append starts a writer-only runtime");
        let host = namespace_host(ns.as_ref()).expect("host").expect("the runtime stored a host");
        let events = read_events(ns.as_ref(), host, varve_log::SeqRange::ALL).expect("events");
        let append = events.iter().find(|e| e.event.kind == EventKind::Append).expect("an APPEND");
        assert_eq!((append.event.parent.as_ref(), append.event.trace), (Some(&parent), 0xabc));
        assert_eq!(append.event.seq, appended.seqs[0]);
        writer.stop(Duration::ZERO);
    }

    /// `append_batch_if` on each of the three paths: straight to the log,
    /// straight with a request id (the writer holds the namespace alone), and
    /// through a (writer-only) runtime. A refused batch leaves nothing.
    #[test]
    fn conditional_batches_land_only_where_expected_on_every_path() {
        let ns = namespace();
        ns.create_log("out", LogConfig::unbounded()).expect("create");
        let dir = tempfile::tempdir().expect("temp dir");
        let writer = NamespaceWriter::open(Arc::clone(&ns), dir.path()).expect("open");
        let batch: [(&str, &[u8]); 3] = [("in", b"a"), ("out", b"b"), ("in", b"c")];
        let ids = [RequestId::parse("c1").expect("id"), RequestId::parse("c2").expect("id")];
        let paths: [(&str, Option<&RequestId>, Option<CauseIds>); 3] = [
            ("straight", None, None),
            ("straight with an id", Some(&ids[0]), None),
            (
                "through a runtime",
                Some(&ids[1]),
                Some((EventId::parse("00000000000000aa:other:7").expect("event id"), 7)),
            ),
        ];
        for (path, request, cause) in paths {
            let (latest_in, latest_out) = (ns.latest("in").expect("in"), ns.latest("out").expect("out"));
            let stale = [("in", latest_in), ("out", latest_out + 1)];
            let err = writer.append_batch_if(&batch, &stale, request, cause.clone()).expect_err(path);
            assert!(
                matches!(&err, crate::RuntimeError::Log(LogError::Conflict { log, expected, actual })
                    if log == "out" && *expected == latest_out + 1 && *actual == latest_out),
                "{path}: {err}"
            );
            let err =
                writer.append_batch_if(&batch[..1], &[("out", latest_out)], request, cause.clone()).expect_err(path);
            assert!(matches!(err, crate::RuntimeError::Log(LogError::InvalidArgument { .. })), "{path}: {err}");
            assert_eq!(
                (ns.latest("in").expect("in"), ns.latest("out").expect("out")),
                (latest_in, latest_out),
                "{path}"
            );
            let expected = [("in", latest_in), ("out", latest_out)];
            let appended = writer.append_batch_if(&batch, &expected, request, cause.clone()).expect(path);
            assert_eq!(appended.seqs, vec![latest_in + 1, latest_out + 1, latest_in + 2], "{path}");
            assert_eq!(ns.get("out", latest_out + 1).expect("get"), &b"b"[..], "{path}");
            if let Some(id) = request {
                let again = writer.append_batch_if(&batch, &expected, Some(id), cause.clone()).expect("repeat");
                assert_eq!(
                    (again.seqs, again.repeated),
                    (appended.seqs.clone(), true),
                    "{path}: answered before the check"
                );
            }
            assert_eq!(writer.through_runtime(), cause.is_some(), "{path}");
        }
        let host = namespace_host(ns.as_ref()).expect("host").expect("the runtime stored a host");
        let events = read_events(ns.as_ref(), host, varve_log::SeqRange::ALL).expect("events");
        let appends: Vec<(&str, Seq)> = events
            .iter()
            .filter(|e| e.event.kind == EventKind::Append)
            .map(|e| (e.event.log.as_str(), e.event.seq))
            .collect();
        assert_eq!(appends, vec![("in", 5), ("out", 3), ("in", 6)], "the runtime's batch is traced, record by record");
        writer.stop(Duration::ZERO);
    }
}
