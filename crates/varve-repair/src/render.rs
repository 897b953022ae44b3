//! A plan for people (text), for Graphviz (DOT) and for scripts (JSON, by
//! serde on the plan's types).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use varve_runtime::trace::RecordRef;

use crate::plan::{Correction, Outcome, RepairPlan, Since, Why};

fn record(r: &RecordRef) -> String {
    format!("{}/{}:{}", r.namespace, r.log, r.seq)
}

/// Seqs as ranges: `1..=3, 7, 9..=10`.
fn seq_ranges(seqs: &[u64]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < seqs.len() {
        let mut j = i;
        while j + 1 < seqs.len() && seqs[j + 1] == seqs[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push_str(", ");
        }
        if j > i {
            let _ = write!(out, "{}..={}", seqs[i], seqs[j]);
        } else {
            let _ = write!(out, "{}", seqs[i]);
        }
        i = j + 1;
    }
    out
}

fn why(why: &Why) -> String {
    match why {
        Why::Trigger { record: r } => format!("its input {} changes", record(r)),
        Why::Read { record: r } => format!("it read {}, which changes", record(r)),
        Why::Latest { namespace, log, seq } => {
            format!("it took the latest of {namespace}/{log} ({seq}), past the first record that changes")
        }
        Why::Replaced => "its handler is replaced".to_owned(),
    }
}

impl RepairPlan {
    /// The records that change, as one sorted set.
    #[must_use]
    pub fn changed_records(&self) -> BTreeSet<RecordRef> {
        self.changed
            .iter()
            .flat_map(|c| {
                c.seqs.iter().map(|&seq| RecordRef { namespace: c.namespace.clone(), log: c.log.clone(), seq })
            })
            .collect()
    }

    /// The corrected records, in the order the corrections were given.
    pub fn corrected_records(&self) -> impl Iterator<Item = &RecordRef> {
        self.corrections.iter().filter_map(|c| match c {
            Correction::Record(r) => Some(r),
            Correction::Handler { .. } => None,
        })
    }

    /// The records that may change (outputs of conditional runs), as one sorted set.
    #[must_use]
    pub fn may_change_records(&self) -> BTreeSet<RecordRef> {
        self.changed
            .iter()
            .flat_map(|c| {
                c.may_change.iter().map(|&seq| RecordRef { namespace: c.namespace.clone(), log: c.log.clone(), seq })
            })
            .collect()
    }

    /// The plan as lines for a terminal.
    #[must_use]
    pub fn to_text(&self) -> String {
        let records: usize = self.changed.iter().map(|c| c.seqs.len()).sum();
        let maybe: usize = self.changed.iter().map(|c| c.may_change.len()).sum();
        let conditional = self.reruns.iter().filter(|r| !r.certain).count();
        let mut out = format!(
            "repair plan: {} correction{}, {} handler run{} to replay ({conditional} only if what they saw moves), \
             {} record{} change and {maybe} may, in {} log{}\n",
            self.corrections.len(),
            plural(self.corrections.len()),
            self.reruns.len(),
            plural(self.reruns.len()),
            records,
            plural(records),
            self.changed.len(),
            plural(self.changed.len()),
        );
        out.push_str("corrections:\n");
        for c in &self.corrections {
            match c {
                Correction::Record(r) => {
                    let _ = writeln!(out, "  {}  gets a corrected value", record(r));
                }
                Correction::Handler { handler, since } => {
                    let from = match since {
                        Since::Start => "every run on record".to_owned(),
                        Since::Seq(seq) => format!("runs on input seq {seq} and later"),
                        Since::TimeNs(ns) => format!("runs since {ns} ns after the epoch"),
                    };
                    let _ = writeln!(out, "  handler {handler} gets new code: {from}");
                }
            }
        }
        for r in &self.unrecorded {
            let _ = writeln!(
                out,
                "  note: {} has no APPEND event on record (appended outside the runtime?): nothing recorded depends on it",
                record(r)
            );
        }
        if self.reruns.is_empty() {
            out.push_str("replay: nothing depends on the corrections\n");
        } else {
            out.push_str("replay, in causal order:\n");
        }
        for (i, r) in self.reruns.iter().enumerate() {
            let _ = write!(out, "  {:>3}. {} on {}  ({})", i + 1, r.handler, record(&r.trigger), why(&r.why));
            if r.outcome != Outcome::Done {
                let _ = write!(out, " [was {:?}]", r.outcome);
            }
            if !r.certain {
                out.push_str(" [if it moved]");
            }
            if !r.replayable {
                out.push_str(" [NOT REPLAYABLE]");
            }
            out.push('\n');
            if !r.replaces.is_empty() {
                let names: Vec<String> = r.replaces.iter().map(record).collect();
                let _ = writeln!(out, "       replaces {}", names.join(", "));
            }
            if !r.may_replace.is_empty() {
                let names: Vec<String> = r.may_replace.iter().map(record).collect();
                let _ = writeln!(out, "       may replace {}", names.join(", "));
            }
        }
        if !self.changed.is_empty() {
            out.push_str("logs that change (a shadow copies the records before the first change):\n");
        }
        for c in &self.changed {
            let _ = write!(out, "  {}/{}: ", c.namespace, c.log);
            if !c.seqs.is_empty() {
                let _ = write!(out, "seqs {} change", seq_ranges(&c.seqs));
            }
            if !c.may_change.is_empty() {
                let sep = if c.seqs.is_empty() { "" } else { "; " };
                let _ = write!(out, "{sep}seqs {} may change", seq_ranges(&c.may_change));
            }
            let _ = writeln!(out, " ({} kept before the first)", c.first.saturating_sub(1));
        }
        if !self.not_replayable.is_empty() {
            let _ = writeln!(
                out,
                "not replayable (marked replayable = false; they act on the world): {}",
                self.not_replayable.join(", ")
            );
        }
        let _ = writeln!(out, "{} events read", self.events_scanned);
        out
    }

    /// Graphviz DOT: corrected records red, records that change orange,
    /// replayed runs as ellipses; edges from each input to the run it makes
    /// replay (solid: trigger, dashed: read or latest) and from each run to
    /// the records it replaces.
    #[must_use]
    pub fn to_dot(&self) -> String {
        let node = |r: &RecordRef| format!("\"{}\"", record(r).replace('"', "'"));
        let mut out = String::from("digraph repair {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
        let corrected: BTreeSet<&RecordRef> = self.corrected_records().collect();
        for r in self.changed_records() {
            let fill = if corrected.contains(&r) { "#fecaca" } else { "#fed7aa" };
            let _ = writeln!(out, "  {} [shape=box, style=filled, fillcolor=\"{fill}\"];", node(&r));
        }
        for r in self.may_change_records() {
            let _ = writeln!(out, "  {} [shape=box, style=\"filled,dashed\", fillcolor=\"#fef9c3\"];", node(&r));
        }
        for (i, r) in self.reruns.iter().enumerate() {
            let run = format!("\"run {}\"", i + 1);
            let color = if r.replayable { "#fef3c7" } else { "#e5e7eb" };
            let _ = writeln!(
                out,
                "  {run} [label=\"{}. {}\\non {}\", shape=ellipse, style=filled, fillcolor=\"{color}\"];",
                i + 1,
                r.handler.replace('"', "'"),
                record(&r.trigger).replace('"', "'"),
            );
            match &r.why {
                Why::Trigger { record: input } | Why::Read { record: input } => {
                    let style = if matches!(r.why, Why::Read { .. }) { " [style=dashed]" } else { "" };
                    let _ = writeln!(out, "  {} -> {run}{style};", node(input));
                }
                Why::Latest { namespace, log, seq } => {
                    let input = RecordRef { namespace: namespace.clone(), log: log.clone(), seq: *seq };
                    let _ = writeln!(out, "  {} -> {run} [style=dashed, label=\"latest\"];", node(&input));
                }
                Why::Replaced => {
                    let _ = writeln!(out, "  \"handler {0}\" [shape=note]; \"handler {0}\" -> {run};", r.handler);
                }
            }
            for output in &r.replaces {
                let _ = writeln!(out, "  {run} -> {};", node(output));
            }
            for output in &r.may_replace {
                let _ = writeln!(out, "  {run} -> {} [style=dotted];", node(output));
            }
        }
        out.push_str("}\n");
        out
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::seq_ranges;

    #[test]
    fn seq_ranges_fold_runs() {
        assert_eq!(seq_ranges(&[1, 2, 3, 7, 9, 10]), "1..=3, 7, 9..=10");
        assert_eq!(seq_ranges(&[]), "");
    }
}
