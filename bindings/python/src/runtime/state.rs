//! A Python runtime's lifecycle: the plan collected before `start()`, the
//! phases (planned, running, stopped) behind one lock, building and
//! stopping the Rust runtime, and the registries that stop runtimes still
//! running when their store closes or the interpreter exits.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use pyo3::prelude::*;
use varve_log::{Namespace as RustNamespace, Seq, SeqRange};
use varve_runtime::causes::Causes;
use varve_runtime::effects::Effects;
use varve_runtime::{HandlerSpec, Runtime as RustRuntime, RuntimeBuilder, RuntimeHandle, RuntimeOptions, StoredEvent};

use crate::error::{Error, Result};
use crate::log::{lock, NsState};

/// How long `stop()` waits by default, and how long closing the store or
/// leaving the interpreter waits, for handlers still running.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(5);

/// Every runtime of this process, so the interpreter's exit can stop those
/// still running (`varve/runtime.py` registers [`stop_all_runtimes`] with
/// `atexit`): a worker must not try to run Python while it shuts down.
static RUNTIMES: Mutex<Vec<Weak<RuntimeState>>> = Mutex::new(Vec::new());

/// What `start()` builds the runtime from.
#[derive(Clone, Default)]
pub(super) struct Plan {
    pub(super) handlers: Vec<HandlerSpec>,
    pub(super) topics: Vec<String>,
    pub(super) subscriptions: Vec<(String, String)>,
}

pub(super) enum Phase {
    Planned(Plan),
    Running { runtime: RustRuntime, handle: RuntimeHandle, handlers: Vec<String> },
    Stopped,
}

impl Phase {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Phase::Planned(_) => "not started",
            Phase::Running { .. } => "running",
            Phase::Stopped => "stopped",
        }
    }
}

pub(crate) struct RuntimeState {
    pub(super) ns: Arc<NsState>,
    pub(super) options: RuntimeOptions,
    /// Never held while the GIL is taken, nor across a handler run.
    phase: Mutex<Phase>,
    /// Held (without the GIL) for the whole of `start`, so two threads
    /// calling it never build two runtimes over the namespace at once.
    starting: Mutex<()>,
}

impl RuntimeState {
    /// A planned runtime, registered with the namespace (stopped when the
    /// store closes) and with the process (stopped at the interpreter's exit).
    pub(super) fn new(ns: Arc<NsState>, options: RuntimeOptions) -> Arc<Self> {
        let state = Arc::new(RuntimeState {
            ns,
            options,
            phase: Mutex::new(Phase::Planned(Plan::default())),
            starting: Mutex::new(()),
        });
        {
            let mut runtimes = lock(&RUNTIMES);
            runtimes.retain(|r| r.strong_count() > 0);
            runtimes.push(Arc::downgrade(&state));
        }
        let mut registry = lock(&state.ns.runtimes);
        registry.retain(|r| r.strong_count() > 0);
        registry.push(Arc::downgrade(&state));
        drop(registry);
        state
    }

    /// Call without the GIL (inside `py.detach`), and drop the guard
    /// before attaching again: a thread holding `phase` must never wait for
    /// the GIL, or it could wait for a thread that holds the GIL and waits
    /// for `phase`.
    fn lock_phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        lock(&self.phase)
    }

    /// Run `f` on the running runtime (GIL released; `phase` held only inside).
    pub(super) fn with_running<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&RustRuntime) -> varve_runtime::Result<R> + Send,
    ) -> PyResult<R> {
        py.detach(|| match &*self.lock_phase() {
            Phase::Running { runtime, .. } => f(runtime).map_err(Error::from),
            other => Err(not_running(other)),
        })
        .map_err(Into::into)
    }

    /// Look at the phase (GIL released).
    pub(super) fn read_phase<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Phase) -> Result<R> + Send,
    ) -> PyResult<R> {
        py.detach(|| f(&mut self.lock_phase())).map_err(Into::into)
    }

    /// Stop for good, waiting up to `grace` for running handlers (call
    /// without the GIL: the handlers may need it to finish).
    pub(crate) fn shut_down(&self, grace: Duration) {
        let previous = std::mem::replace(&mut *self.lock_phase(), Phase::Stopped);
        if let Phase::Running { runtime, .. } = previous {
            runtime.stop(grace);
        }
    }

    /// The running runtime's handle (appends), or why there is none.
    pub(crate) fn handle(&self) -> Result<RuntimeHandle> {
        match &*self.lock_phase() {
            Phase::Running { handle, .. } => Ok(handle.clone()),
            phase => Err(not_running(phase)),
        }
    }

    /// Build and start the runtime from the plan (without the GIL; the
    /// workers may run Python handlers at once).
    pub(super) fn start(&self) -> Result<()> {
        let _starting = lock(&self.starting);
        let plan = match &*self.lock_phase() {
            Phase::Planned(plan) => plan.clone(),
            Phase::Running { .. } => return Ok(()),
            Phase::Stopped => return Err(not_running(&Phase::Stopped)),
        };
        let handlers: Vec<String> = plan.handlers.iter().map(|h| h.name.clone()).collect();
        // This runtime is the namespace's writer from now on.
        self.ns.release_writer();
        let ns = self.ns.handle()?;
        let mut builder = RuntimeBuilder::new(ns).options(self.options.clone());
        for spec in plan.handlers {
            builder = builder.register(spec);
        }
        for topic in &plan.topics {
            builder = builder.topic(topic);
        }
        for (log, handler) in &plan.subscriptions {
            builder = builder.subscribe(log, handler);
        }
        let runtime = builder.start()?;
        let mut phase = self.lock_phase();
        if !matches!(&*phase, Phase::Planned(_)) {
            // Stopped meanwhile (`stop()`, the store closed).
            drop(phase);
            runtime.stop(STOP_GRACE);
            return Err(not_running(&Phase::Stopped));
        }
        let handle = runtime.handle();
        *phase = Phase::Running { runtime, handle, handlers };
        Ok(())
    }

    pub(super) fn events(&self, range: SeqRange) -> Result<Vec<StoredEvent>> {
        self.ns.with(|ns| Ok(varve_runtime::namespace_events(ns.as_ref(), range)?))
    }

    /// What caused `log`/`seq`, by the event index (`varve_runtime::causes`).
    /// The walk stays in this namespace, as the events `events` reads do.
    pub(super) fn causes(&self, log: &str, seq: Seq) -> Result<Vec<StoredEvent>> {
        self.ns.with(|ns| {
            let open = |name: &str| -> varve_runtime::Result<Option<Arc<dyn RustNamespace>>> {
                Ok((name == self.ns.name).then(|| Arc::clone(ns)))
            };
            Ok(Causes::new(&open).ancestors(&self.ns.name, log, seq)?)
        })
    }

    /// What depends on `log`/`seq`, walking the events after it (`varve_runtime::effects`), in this namespace.
    pub(super) fn effects(&self, log: &str, seq: Seq) -> Result<Vec<StoredEvent>> {
        self.ns.with(|ns| {
            let open = |name: &str| -> varve_runtime::Result<Option<Arc<dyn RustNamespace>>> {
                Ok((name == self.ns.name).then(|| Arc::clone(ns)))
            };
            let namespaces = [self.ns.name.clone()];
            Ok(Effects::new(&open, &namespaces).descendants(&self.ns.name, log, seq)?)
        })
    }
}

impl Drop for RuntimeState {
    fn drop(&mut self) {
        // Dropped by the garbage collector, GIL held: stopping here would wait
        // for workers that wait for the GIL. Stop on a thread of its own.
        let phase = std::mem::replace(self.phase.get_mut().unwrap_or_else(PoisonError::into_inner), Phase::Stopped);
        if let Phase::Running { runtime, .. } = phase {
            let _ =
                std::thread::Builder::new().name("varve-runtime-stop".into()).spawn(move || runtime.stop(STOP_GRACE));
        }
    }
}

pub(super) fn not_running(phase: &Phase) -> Error {
    match phase {
        Phase::Planned(_) => Error::State {
            state: "not started",
            message: "the runtime is not started: call start() (or use it in a `with` block) first".into(),
        },
        _ => Error::State {
            state: "stopped",
            message: "the runtime is stopped: a stopped runtime does not restart; create a new varve.Runtime over \
                      the namespace (it re-runs what this one left unfinished)"
                .into(),
        },
    }
}

/// Stop every runtime still running (called by `atexit`, GIL held).
#[pyfunction]
#[pyo3(name = "_stop_all_runtimes")]
pub fn stop_all_runtimes(py: Python<'_>) {
    let runtimes: Vec<_> = lock(&RUNTIMES).drain(..).filter_map(|r| r.upgrade()).collect();
    py.detach(|| {
        for runtime in runtimes {
            runtime.shut_down(STOP_GRACE);
        }
    });
}
