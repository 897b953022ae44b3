//! Repair while the application runs (Sans-Souci §7.2.2: the application
//! goes on with the originals; the repair then synchronises shadow and
//! original, "pausing the application briefly", and renames): the shadows
//! are built and the runs replayed while the runtime keeps appending and
//! firing; the runtime is paused only for the last events and the swap.
//!
//! **Rounds.** Each round reads the events `_events` gained since the last
//! one, feeds them to the plan (a forward pass: [`Planner`]) and to the
//! walk, which goes as far as the plan is final (up to the FIRING of the
//! first run still running). Rounds go on while they take long (what
//! arrives meanwhile is the next round's work), at most `rounds_max`;
//! then [`varve_runtime::RuntimeHandle::pause_runs`] stops claims, waits for the runs
//! in flight; one more round replays the runs that finished last (appends
//! still landing: they only queue triggers); then appends are held, the
//! last round — only what was appended since — walks to the end, the
//! shadows are swapped in, the REPAIR event is written, and the runtime
//! resumes. Appends made meanwhile were held, not refused: they land after
//! the swap, in the repaired logs, and fire their handlers as usual.
//! Triggers queued but not yet run when the pause began run after it, on
//! the repaired records — as they would have in a run from scratch.
//!
//! **What the pause costs.** While runs are stopped: the wait for the runs
//! in flight, and the replay of the runs that finished since the last
//! round. While appends are held: reading what was appended since, copying
//! it to the shadows, one `rename_logs` and the REPAIR event — no replay,
//! since no run ran. Both are O(what arrived), not O(history) or O(plan).
//! [`OnlineOutcome`] reports both.
//!
//! **Several namespaces.** An application whose handlers cross namespaces
//! (`HandlerContext::append_via`) is repaired with
//! [`repair_online_across`], given the runtime of every namespace the
//! repair changes. Each round reads every namespace's new events up to a
//! consistent cut (those built before the round began) and merges them
//! into one causal order; the pause stops the runs of every runtime before it holds the
//! appends of any (so no run in flight waits on a held append), and the
//! commit swaps every namespace as one repair.
//!
//! **Limits.** Every namespace the repair changes needs its runtime, in
//! this process (a repair that reaches another is refused). Not for shared
//! runtimes (other processes write the namespace). A run that appended to
//! another namespace *before* it read what the repair changes (its reads
//! are recorded with its next write in its own namespace) needs the
//! second pass only the offline plan makes: refused, with a typed error.
//! A correction that makes a part of a log change which a round already
//! copied (only possible through appends to another namespace, or a log's
//! records appended without events while the runtime ran) is refused with a
//! typed error; the offline [`crate::execute`] repairs those.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use varve_log::{Namespace, Seq, SeqRange};
use varve_runtime::trace::{merge_owned, RecordRef};
use varve_runtime::{read_events, HandlerFn, Paused, RuntimeHandle, StoredEvent, EVENTS_LOG};

use crate::commit::{check_none_interrupted, Commit};
use crate::execute::{check_part, delete_shadows, repair_cause, Inputs, NotReplayable, RepairError, RepairOutcome};
use crate::plan::{Correction, PlanDelta, Planner, RepairPlan};
use crate::walk::Walk;

/// What [`repair_online`] needs.
pub struct Online<'a> {
    /// What is corrected.
    pub corrections: &'a [Correction],
    /// The corrected value of each corrected record.
    pub values: &'a HashMap<RecordRef, Vec<u8>>,
    /// The code of every handler the repair may replay (new code for a replaced one).
    pub handlers: &'a HashMap<String, HandlerFn>,
    /// Handlers marked `replayable = false` (the manifest's).
    pub marked_not_replayable: &'a HashSet<String>,
    /// What to do with their runs.
    pub not_replayable: NotReplayable,
    /// Rounds while the application runs, at most, before the pause.
    pub rounds_max: usize,
    /// Pause as soon as a round took less than this: what arrived during a
    /// short round is little work for the paused ones, whatever a replay
    /// costs (an in-process handler, or a process per run).
    pub pause_under: Duration,
    /// How long the pause may wait for runs in flight before it is called off.
    pub pause_timeout: Duration,
    /// Called after each round before the pause with the round's number
    /// (from 1) and the events it read: progress for a user, a place for a
    /// test to append while the repair runs.
    pub on_round: Option<&'a (dyn Fn(usize, usize) + Sync)>,
}

impl<'a> Online<'a> {
    /// Defaults for the rest: refuse not-replayable runs, 8 rounds at most,
    /// pause after a round under 20 ms, wait 30 s for runs in flight.
    #[must_use]
    pub fn new(
        corrections: &'a [Correction],
        values: &'a HashMap<RecordRef, Vec<u8>>,
        handlers: &'a HashMap<String, HandlerFn>,
        marked_not_replayable: &'a HashSet<String>,
    ) -> Online<'a> {
        Online {
            corrections,
            values,
            handlers,
            marked_not_replayable,
            not_replayable: NotReplayable::Refuse,
            rounds_max: 8,
            pause_under: Duration::from_millis(20),
            pause_timeout: Duration::from_secs(30),
            on_round: None,
        }
    }
}

/// What an online repair did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OnlineOutcome {
    /// The plan of every event up to the swap.
    pub plan: RepairPlan,
    /// What the repair did (as [`crate::execute`]'s).
    pub outcome: RepairOutcome,
    /// Rounds before appends were held (the last of them with runs stopped).
    pub rounds: usize,
    /// Events read per round, the last (paused) one last.
    pub events_per_round: Vec<usize>,
    /// From the pause's start (no new runs claimed) to the resumption.
    pub paused: Duration,
    /// Of that, how long appends through the runtime were held (after the
    /// runs in flight finished and the runs that finished last were replayed).
    pub appends_held: Duration,
}

/// Repair the runtime's namespace while it runs (see the module docs);
/// `runtime` is a handle of it (`Runtime::handle`), in this process.
/// On an error before the swap the shadows are deleted and the runtime
/// runs on, unchanged; the error says what happened.
pub fn repair_online(runtime: &RuntimeHandle, online: &Online<'_>) -> Result<OnlineOutcome, RepairError> {
    repair_online_across(std::slice::from_ref(runtime), online)
}

/// [`repair_online`] of an application whose handlers cross namespaces
/// (`HandlerContext::append_via`): `runtimes` serve every namespace the
/// repair changes, one runtime each, all in this process. They are paused
/// together for the end of the repair — first no new run in any of them,
/// then appends held in all — and the swaps of every namespace are
/// committed through the repair journal as one repair
/// ([`crate::resume`] finishes it after a crash between two of them).
pub fn repair_online_across(runtimes: &[RuntimeHandle], online: &Online<'_>) -> Result<OnlineOutcome, RepairError> {
    let mut namespaces: HashMap<String, Arc<dyn Namespace>> = HashMap::new();
    for runtime in runtimes {
        let ns = Arc::clone(runtime.namespace());
        if namespaces.insert(ns.name().to_owned(), ns).is_some() {
            return Err(RepairError::Unsupported(format!(
                "two of the runtimes given serve namespace {:?}: give one runtime per namespace",
                runtime.namespace_name()
            )));
        }
    }
    if runtimes.is_empty() {
        return Err(RepairError::Unsupported("an online repair needs the runtime of the namespace it repairs".into()));
    }
    let inputs = Inputs {
        events: &[],
        namespaces: &namespaces,
        handlers: online.handlers,
        values: online.values,
        not_replayable: online.not_replayable,
    };
    check_none_interrupted(&namespaces)?;
    let mut planner = Planner::new(online.corrections, online.marked_not_replayable);
    let mut walk = Walk::new(&inputs);
    let mut sources = Vec::with_capacity(runtimes.len());
    for runtime in runtimes {
        // From the earliest event kept (event retention may have trimmed the oldest).
        let read_to = runtime.namespace().earliest(EVENTS_LOG)?.saturating_sub(1);
        sources.push(Source { runtime, read_to });
    }
    let mut rounds = Rounds { sources, events_per_round: Vec::new() };
    let result = rounds.run(online, &inputs, &mut planner, &mut walk);
    let outcome = std::mem::take(&mut walk.outcome);
    let pause = match result {
        Ok(pause) => pause,
        Err(e) => {
            if outcome.swapped.is_empty() {
                delete_shadows(&walk);
            }
            return Err(e);
        }
    };
    Ok(OnlineOutcome {
        plan: planner.plan(),
        outcome,
        rounds: rounds.events_per_round.len().saturating_sub(1),
        events_per_round: rounds.events_per_round,
        paused: pause.paused,
        appends_held: pause.appends_held,
    })
}

/// How long the pause lasted.
struct Pause {
    paused: Duration,
    appends_held: Duration,
}

/// One runtime's `_events`, read round by round.
struct Source<'r> {
    runtime: &'r RuntimeHandle,
    /// `_events` has been read (and fed) up to this seq.
    read_to: Seq,
}

struct Rounds<'r> {
    sources: Vec<Source<'r>>,
    events_per_round: Vec<usize>,
}

impl Rounds<'_> {
    /// The events the namespaces' `_events` gained since the last call, in
    /// causal order after those returned before.
    ///
    /// With several namespaces, a round is a consistent cut: only events
    /// built before the round began (`timestamp_ns` up to then) are taken,
    /// each namespace's up to its first later one. An event X that
    /// happened before such an event Y — Y's parent, or an append of the
    /// same run in another namespace, whose reads are recorded with it —
    /// was written before Y was built, so before the round began and before
    /// X's namespace is read: it is taken too, or an earlier round took it.
    /// (The merge then orders them. A cut that is not consistent — the
    /// clock stepped back — is caught by the plan's and the walk's checks,
    /// a typed error, as taking every namespace up to its latest seq is in
    /// `tests/online.rs`.) Once every runtime's appends are held, the cut
    /// takes everything.
    fn next_events(&mut self) -> Result<Vec<StoredEvent>, RepairError> {
        let cut_ns = now_ns();
        let several = self.sources.len() > 1;
        let mut logs = Vec::with_capacity(self.sources.len());
        for source in &mut self.sources {
            let ns = source.runtime.namespace();
            let latest = ns.latest(EVENTS_LOG)?;
            let mut events = if latest > source.read_to {
                read_events(ns.as_ref(), source.runtime.host(), SeqRange { first: source.read_to + 1, last: latest })?
            } else {
                Vec::new()
            };
            if several {
                if let Some(later) = events.iter().position(|e| e.event.timestamp_ns > cut_ns) {
                    events.truncate(later);
                }
            }
            if let Some(last) = events.last() {
                source.read_to = last.id.seq;
            }
            logs.push(events);
        }
        let events = merge_owned(logs);
        self.events_per_round.push(events.len());
        Ok(events)
    }

    /// Feed `events` to the planner; what the plan gained, checked.
    fn feed(
        planner: &mut Planner,
        online: &Online<'_>,
        inputs: &Inputs<'_>,
        events: &[StoredEvent],
    ) -> Result<PlanDelta, RepairError> {
        planner.feed(events);
        if planner.needs_second_pass() {
            return Err(RepairError::Unsupported(
                "the repair reaches runs that appended to another namespace before reading what it changes: repair \
                 with the applications stopped"
                    .to_owned(),
            ));
        }
        let delta = planner.take_changes();
        if let Some(other) = delta.changed.iter().find(|c| !inputs.namespaces.contains_key(&c.namespace)) {
            return Err(RepairError::Unsupported(format!(
                "the repair changes namespace {:?} too, which no runtime given serves: pass its runtime as well \
                 (varve_repair::repair_online_across), or stop the applications and repair offline",
                other.namespace
            )));
        }
        check_part(online.corrections, &delta.reruns, &delta.changed, inputs)?;
        Ok(delta)
    }

    fn run(
        &mut self,
        online: &Online<'_>,
        inputs: &Inputs<'_>,
        planner: &mut Planner,
        walk: &mut Walk<'_>,
    ) -> Result<Pause, RepairError> {
        for round in 1..=online.rounds_max.max(1) {
            let started = Instant::now();
            let events = self.next_events()?;
            if round == 1 {
                // The first round starts at each namespace's earliest event kept.
                crate::reach::check_reach(online.corrections, &events)?;
            }
            let new = events.len();
            let delta = Self::feed(planner, online, inputs, &events)?;
            walk.extend(&delta.reruns, &delta.changed, Cow::Owned(events), false)?;
            if let Some(on_round) = online.on_round {
                on_round(round, new);
            }
            if started.elapsed() < online.pause_under {
                break;
            }
        }
        // The REPAIR event's parent, looked for before the pause (O(events)).
        let corrected = RepairPlan { corrections: online.corrections.to_vec(), ..RepairPlan::default() };
        let cause = repair_cause(&corrected, walk.events()).cloned();
        let mut paused = pause_runs(&self.sources, online.pause_timeout)?;
        // No run starts now in any runtime; the runs that finished last are
        // replayed while appends still land (they only queue triggers,
        // which wait).
        let events = self.next_events()?;
        let delta = Self::feed(planner, online, inputs, &events)?;
        walk.extend(&delta.reruns, &delta.changed, Cow::Owned(events), false)?;
        // No run is in flight anywhere, so none waits on an append held here.
        for guard in &mut paused {
            guard.hold_appends();
        }
        let held_since = Instant::now();
        let events = self.next_events()?;
        let fed = walk.events().len();
        let delta = Self::feed(planner, online, inputs, &events)?;
        walk.extend(&delta.reruns, &delta.changed, Cow::Owned(events), true)?;
        walk.finish()?;
        // Still paused: this process is the namespaces' only writer.
        let cause = cause.as_ref().or_else(|| repair_cause(&corrected, &walk.events()[fed..]));
        let commit = Commit::prepare(online.corrections, online.values, &walk.shadows, &walk.outcome, cause)?;
        commit.run(inputs.namespaces, &mut walk.outcome)?;
        let pause = Pause {
            paused: paused.first().map(Paused::elapsed).unwrap_or_default(),
            appends_held: held_since.elapsed(),
        };
        drop(paused);
        Ok(pause)
    }
}

/// Pause every runtime's runs, in order; the first that cannot (a run that
/// does not finish in time) calls the whole pause off: the guards taken so
/// far drop, and those runtimes resume.
fn pause_runs<'r>(sources: &[Source<'r>], timeout: Duration) -> Result<Vec<Paused<'r>>, RepairError> {
    let mut paused = Vec::with_capacity(sources.len());
    for source in sources {
        paused.push(source.runtime.pause_runs(timeout)?);
    }
    Ok(paused)
}

/// Now, as events' `timestamp_ns`: nanoseconds since the Unix epoch.
fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
