//! # varve-repair — repair and replay (Sans-Souci, `seeds/004_…` ch. 7)
//!
//! When a record turns out to be wrong (a faulty sensor, a bad model, an
//! interpolation later replaced by real data) or a handler had a bug, the
//! causal event log `_events` says exactly what depended on it. This crate
//! builds that **repair graph** (§7.2.2, §7.3.2) from the merged event logs
//! of one or more namespaces and presents it as a [`RepairPlan`]: which
//! handler runs must be replayed, in causal order, and which records of
//! which logs their replay replaces.
//!
//! ```
//! use varve_repair::{Correction, RepairPlan};
//! use varve_runtime::trace::RecordRef;
//! # let merged_events = Vec::new();
//! let plan = RepairPlan::build(
//!     &merged_events,
//!     &[Correction::Record(RecordRef { namespace: "app".into(), log: "model".into(), seq: 1 })],
//!     &Default::default(),
//! );
//! println!("{}", plan.to_text());
//! ```
//!
//! The plan is the dry run of `varve repair plan` (and `--dot`). [`execute`]
//! carries it out — shadow logs, the replay of each run with its reads
//! pinned, the atomic swap — with the handlers' code given as
//! [`varve_runtime::HandlerFn`]s (`varve repair run` replays external
//! commands through `varve_runtime::command_context`); see `docs/repair.md`.

mod commit;
mod execute;
mod needed;
mod online;
mod plan;
mod reach;
mod render;
mod walk;

pub use commit::{resume, Resumed, REPAIRS_LOG};
pub use execute::{execute, Inputs, NotReplayable, RepairError, RepairOutcome, GENERATION_PREFIX, SHADOW_PREFIX};
pub use needed::events_needed;
pub use online::{repair_online, repair_online_across, Online, OnlineOutcome};
pub use plan::{ChangedLog, Correction, Outcome, PlanDelta, Planner, RepairPlan, Rerun, Since, Why};
pub use reach::check_reach;
