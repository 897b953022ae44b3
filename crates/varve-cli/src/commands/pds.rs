//! `varve pds …`: the `PEDaLS` workloads (§V-A) and the paper's worked example
//! (Figure 3 / Table I), over `varve-pds`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;
use serde_json::json;
use varve_log::{JournalOptions, JournalStore, Namespace, Store, SyncPolicy};
use varve_pds::workload::{self, RunOptions, RunReport};
use varve_pds::Structure;

use super::Context;

/// `varve pds gen`: print a workload in the paper's format.
pub fn gen(ops: usize, seed: u64) -> anyhow::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(workload::generate(ops, seed).as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// `varve pds run`: run a workload file on a new structure in the namespace.
pub fn run(
    ctx: &Context<'_>,
    file: &Path,
    structure: &str,
    extra: u32,
    name: Option<&str>,
    verify: bool,
    dump: bool,
) -> anyhow::Result<()> {
    let structure: Structure = structure.parse()?;
    let text = std::fs::read_to_string(file).with_context(|| format!("reading workload {}", file.display()))?;
    let parsed = workload::parse(&text)?;
    let ns = open_group_commit(ctx)?;
    let name = name.map_or_else(|| format!("workload.{structure}.e{extra}"), str::to_owned);
    let report =
        workload::run_named(ns.clone(), &name, &parsed, structure, extra, RunOptions { verify, contents: dump })?;
    ns.sync()?;
    if dump {
        let mut out = crate::output::LineWriter::stdout();
        for version in &report.versions {
            let line = if ctx.out.json() {
                serde_json::to_string(&json!({ "version": version.version, "items": version.items }))?
            } else {
                let items: Vec<String> = version.items.iter().map(u64::to_string).collect();
                format!("{}: [{}]", version.version, items.join(", "))
            };
            out.line(&line)?;
        }
        return Ok(());
    }
    ctx.out.answer(&Summary::new(&name, &report), || summary_text(&name, &report))?;
    Ok(())
}

/// `varve pds demo`: the paper's example — insert 7, 2, 5, delete 2 with one extra pointer.
pub fn demo(ctx: &Context<'_>) -> anyhow::Result<()> {
    let example = varve_pds::demo::paper_example()?;
    if !ctx.out.json() {
        print!("{example}");
        return Ok(());
    }
    let value = json!({
        "ops": example.ops,
        "versions": example.versions.iter().map(|(v, preorder)| json!({"version": v, "preorder": preorder})).collect::<Vec<_>>(),
        "data_log": example.data.iter().map(|r| json!({"seq": r.seq, "vs": r.vs, "val": r.val, "link": r.link})).collect::<Vec<_>>(),
        "link_logs": example.links.iter().map(|t| json!({
            "log": t.log,
            "paper_name": t.alias,
            "entries": t.rows.iter().map(|r| json!({"seq": r.seq, "vs": r.vs, "dseq": r.dseq, "lseq": r.lseq, "rem": r.rem, "type": r.kind})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "ap_log": example.ap.iter().map(|r| json!({"seq": r.seq, "vs": r.vs, "dseq": r.dseq, "lseq": r.lseq})).collect::<Vec<_>>(),
    });
    ctx.out.answer(&value, String::new)?;
    Ok(())
}

/// Workloads run with group commit, as the benchmark does: a workload is
/// thousands of small appends, and a crash mid-run loses at most the last
/// few milliseconds, which recovery completes or abandons per operation.
fn open_group_commit(ctx: &Context<'_>) -> anyhow::Result<Arc<dyn Namespace>> {
    let options = JournalOptions { sync: SyncPolicy::Group(Duration::from_millis(5)), read_only: false, ..ctx.journal };
    JournalStore::open(&ctx.data, options)?.namespace(&ctx.namespace).map_err(|e| {
        super::write::explain_locked(ctx, e, "`varve pds` writes with append_if, which a runtime does not offer")
    })
}

#[derive(Serialize)]
struct Summary<'a> {
    structure: String,
    name: &'a str,
    extra: u32,
    ops: usize,
    no_ops: usize,
    versions: u64,
    /// All the updates' wall time.
    update_seconds: f64,
    /// That time over the updates that wrote a version.
    us_per_update: f64,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    verified: bool,
}

impl<'a> Summary<'a> {
    fn new(name: &'a str, report: &RunReport) -> Self {
        let updates = report.ops - report.no_ops;
        let micros = |q: f64| report.update_quantile(q).as_secs_f64() * 1e6;
        #[expect(clippy::cast_precision_loss, reason = "an average for display")]
        let us_per_update = report.update_time.as_secs_f64() * 1e6 / updates.max(1) as f64;
        Summary {
            structure: report.structure.to_string(),
            name,
            extra: report.extra,
            ops: report.ops,
            no_ops: report.no_ops,
            versions: report.version_count,
            update_seconds: report.update_time.as_secs_f64(),
            us_per_update,
            p50_us: micros(0.5),
            p99_us: micros(0.99),
            max_us: micros(1.0),
            verified: report.verified,
        }
    }
}

fn summary_text(name: &str, report: &RunReport) -> String {
    let summary = Summary::new(name, report);
    let verified = if report.verified {
        "; every version matches the in-memory model of all versions"
    } else {
        " (not verified: pass --verify)"
    };
    format!(
        "ran {} operations on {} {name:?} (extra {}): {} versions, {} no-ops in {:.2} s: {:.1} µs per update \
         (p50 {:.1}, p99 {:.1}, max {:.0} µs){verified}",
        summary.ops,
        summary.structure,
        summary.extra,
        summary.versions,
        summary.no_ops,
        summary.update_seconds,
        summary.us_per_update,
        summary.p50_us,
        summary.p99_us,
        summary.max_us
    )
}
