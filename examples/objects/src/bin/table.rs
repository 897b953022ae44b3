//! `table`: a branched table on versioned objects (`UStore` §4.2, after
//! Decibel's version-first layout).
//!
//! A row is a key `row/ID` whose versions are JSON objects. A table version
//! is a version of key `_table` whose value lists the row versions it holds,
//! `{"ID": VERSION-ID, …}`, derived from the table version before (two
//! parents for a merge). A branch is a ref of `_table`, moved with
//! compare-and-set; `main` is created by the first write to it.
//!
//! Decibel's four queries: `scan --branch B` (one branch), `diff A B` (rows
//! only in one branch, or changed), `scan --at VERSION` (a past version),
//! and `scan --all` (every row version with the branches that hold it).
//!
//! ```text
//! table --store STORE insert ID JSON [--branch main]
//! table --store STORE update ID JSON [--branch main]     (fields set; null removes one)
//! table --store STORE delete ID [--branch main]
//! table --store STORE branch NAME [--from main]          (--from: a branch or a table version)
//! table --store STORE scan [--branch main | --at VERSION | --all]
//! table --store STORE diff A B                           (branches or table versions)
//! table --store STORE merge FROM [--into main]           (per row, a field-wise three-way merge)
//! table --store STORE log [--branch main] [-n 20]
//! ```

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use serde_json::{Map, Value};
use varve_example_objects::say;
use varve_example_objects::tree::{decide, merge_trees, tree_from_json, tree_to_json, Decision, Tree};
use varve_example_objects::{first_parent_history, open_objects};
use varve_object::{MapMerge, ObjectStore, Version, VersionId};

/// The key whose versions are the table versions.
const TABLE: &str = "_table";
/// Where a row's versions are: `ROW_PREFIX + id`.
const ROW_PREFIX: &str = "row/";
/// The branch the first write creates.
const MAIN: &str = "main";
/// The longest row id.
const ROW_ID_BYTES_MAX: usize = 128;

#[derive(Parser)]
#[command(name = "table", about = "A branched table on Varve versioned objects (UStore §4.2, Decibel)")]
struct Cli {
    /// The store: a directory (the embedded journal) or a varve:// or nats:// URI.
    #[arg(long, global = true)]
    store: Option<String>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Add row ID (a JSON object) to a branch.
    Insert {
        id: String,
        json: String,
        #[arg(long, default_value = MAIN)]
        branch: String,
    },
    /// Set fields of row ID (a JSON object; a null field removes it).
    Update {
        id: String,
        json: String,
        #[arg(long, default_value = MAIN)]
        branch: String,
    },
    /// Remove row ID from a branch.
    Delete {
        id: String,
        #[arg(long, default_value = MAIN)]
        branch: String,
    },
    /// Create branch NAME at a branch or a table version.
    Branch {
        name: String,
        #[arg(long, default_value = MAIN)]
        from: String,
    },
    /// The rows of a branch, of a past table version, or of every branch.
    Scan {
        #[arg(long, default_value = MAIN, conflicts_with_all = ["at", "all"])]
        branch: String,
        /// A table version (a 4+ hex digit prefix) or a branch.
        #[arg(long, conflicts_with = "all")]
        at: Option<String>,
        /// Every row version, with the branches that hold it.
        #[arg(long)]
        all: bool,
    },
    /// How two branches (or table versions) differ, row by row.
    Diff { first: String, second: String },
    /// Merge branch (or table version) FROM into a branch.
    Merge {
        from: String,
        #[arg(long, default_value = MAIN)]
        into: String,
    },
    /// The table versions of a branch, newest first (first parents through merges).
    Log {
        #[arg(long, default_value = MAIN)]
        branch: String,
        #[arg(short = 'n', long, default_value_t = 20)]
        n: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let Some(store) = cli.store else { bail!("--store is required: a directory or a varve:// URI") };
    let objects = open_objects(&store, "table").with_context(|| format!("opening store {store}"))?;
    let table = Table { objects };
    match cli.command {
        Cmd::Insert { id, json, branch } => table.write_row(&branch, &id, Edit::Insert(parse_object(&json)?)),
        Cmd::Update { id, json, branch } => table.write_row(&branch, &id, Edit::Update(parse_object(&json)?)),
        Cmd::Delete { id, branch } => table.write_row(&branch, &id, Edit::Delete),
        Cmd::Branch { name, from } => table.branch(&name, &from),
        Cmd::Scan { all: true, .. } => table.scan_all(),
        Cmd::Scan { at: Some(at), .. } => table.scan(&at),
        Cmd::Scan { branch, .. } => table.scan(&branch),
        Cmd::Diff { first, second } => table.diff(&first, &second),
        Cmd::Merge { from, into } => table.merge(&from, &into),
        Cmd::Log { branch, n } => table.log(&branch, n),
    }
}

enum Edit {
    Insert(Map<String, Value>),
    Update(Map<String, Value>),
    Delete,
}

struct Table {
    objects: ObjectStore,
}

impl Table {
    fn write_row(&self, branch: &str, id: &str, edit: Edit) -> anyhow::Result<()> {
        check_row_id(id)?;
        let head = self.branch_at(branch)?;
        if head.is_none() && branch != MAIN {
            bail!("no branch {branch}: create it with `table branch {branch}`");
        }
        let mut rows = match head {
            Some(h) => self.rows(&h.id)?,
            None => Tree::new(),
        };
        let key = format!("{ROW_PREFIX}{id}");
        let what = match (edit, rows.get(id).copied()) {
            (Edit::Insert(_), Some(_)) => bail!("row {id} exists in {branch}: update it instead"),
            (Edit::Insert(fields), None) => {
                rows.insert(
                    id.to_owned(),
                    self.objects.put(&key, None, Value::Object(fields).to_string().as_bytes())?.id,
                );
                "inserted"
            }
            (Edit::Update(_) | Edit::Delete, None) => bail!("no row {id} in {branch}"),
            (Edit::Update(fields), Some(old)) => {
                let mut row = parse_object(&String::from_utf8_lossy(&self.objects.get(&key, &old)?))?;
                for (field, value) in fields {
                    if value.is_null() {
                        row.remove(&field);
                    } else {
                        row.insert(field, value);
                    }
                }
                let value = Value::Object(row).to_string().into_bytes();
                if value == self.objects.get(&key, &old)? {
                    say!("row {id} already holds these fields: nothing written");
                    return Ok(());
                }
                let new = self.objects.put(&key, Some(&old), &value)?;
                rows.insert(id.to_owned(), new.id);
                "updated"
            }
            (Edit::Delete, Some(_)) => {
                rows.remove(id);
                "deleted"
            }
        };
        let base = head.map(|h| h.id);
        let v = self.objects.put(TABLE, base.as_ref(), &tree_to_json(&rows).to_string().into_bytes())?;
        self.objects.set_branch(TABLE, branch, base.as_ref(), &v.id)?;
        say!("{what} row {id}: {branch} is at table version {} ({} rows)", v.id.short(12), rows.len());
        Ok(())
    }

    fn branch(&self, name: &str, from: &str) -> anyhow::Result<()> {
        if let Some(at) = self.branch_at(name)? {
            bail!("branch {name} exists (at {})", at.id.short(12));
        }
        let v = self.objects.resolve(TABLE, from)?;
        self.objects.set_branch(TABLE, name, None, &v.id)?;
        say!("branch {name} at table version {}", v.id.short(12));
        Ok(())
    }

    /// Decibel's queries 1 and 3: the rows of one branch, or of a table
    /// version (time travel); both are one version of `_table`.
    fn scan(&self, text: &str) -> anyhow::Result<()> {
        let v = self.objects.resolve(TABLE, text)?;
        let rows = self.rows(&v.id)?;
        say!("table version {} ({} rows)", v.id.short(12), rows.len());
        for (id, row) in &rows {
            say!("  {id} {}", self.row_text(id, row)?);
        }
        Ok(())
    }

    /// Decibel's query 4: every row version of any branch, with the branches holding it.
    fn scan_all(&self) -> anyhow::Result<()> {
        let mut holders: BTreeMap<(String, VersionId), Vec<String>> = BTreeMap::new();
        for (name, target) in self.objects.refs(TABLE)? {
            for (id, row) in self.rows(&target.version.id)? {
                holders.entry((id, row)).or_default().push(name.clone());
            }
        }
        for ((id, row), branches) in &holders {
            say!("  {id} {} [{}]", self.row_text(id, row)?, branches.join(", "));
        }
        Ok(())
    }

    /// Decibel's query 2: rows only in one, and rows in both that differ (field by field).
    fn diff(&self, first: &str, second: &str) -> anyhow::Result<()> {
        let (a, b) = (self.objects.resolve(TABLE, first)?, self.objects.resolve(TABLE, second)?);
        let (ra, rb) = (self.rows(&a.id)?, self.rows(&b.id)?);
        let mut same = 0;
        for (id, row) in &ra {
            match rb.get(id) {
                None => say!("- {id} {} (only in {first})", self.row_text(id, row)?),
                Some(other) if other == row => same += 1,
                Some(other) => {
                    let d = self.objects.diff(&format!("{ROW_PREFIX}{id}"), row, other)?;
                    let mut parts: Vec<String> = Vec::new();
                    parts.extend(d.changed.iter().map(|(f, (x, y))| format!("{f}: {x} -> {y}")));
                    parts.extend(d.added.iter().map(|(f, y)| format!("+{f}: {y}")));
                    parts.extend(d.removed.iter().map(|(f, x)| format!("-{f}: {x}")));
                    say!("~ {id} {}", parts.join(", "));
                }
            }
        }
        for (id, row) in rb.iter().filter(|(id, _)| !ra.contains_key(*id)) {
            say!("+ {id} {} (only in {second})", self.row_text(id, row)?);
        }
        say!("({same} rows the same)");
        Ok(())
    }

    fn merge(&self, from: &str, into: &str) -> anyhow::Result<()> {
        let ours = self.branch_at(into)?.with_context(|| format!("no branch {into}"))?;
        let theirs = self.objects.resolve(TABLE, from)?;
        let (v, how) = match decide(&self.objects, TABLE, &ours.id, &theirs.id)? {
            Decision::UpToDate => {
                say!("{into} is already up to date with {from}");
                return Ok(());
            }
            Decision::FastForward => (theirs, "fast-forward"),
            Decision::Merge { base } => {
                let base_rows = match base {
                    Some(b) => self.rows(&b.id)?,
                    None => Tree::new(),
                };
                let (our_rows, their_rows) = (self.rows(&ours.id)?, self.rows(&theirs.id)?);
                let rows =
                    match merge_trees(&self.objects, ROW_PREFIX, (&base_rows, &our_rows, &their_rows), &MapMerge)? {
                        Ok(rows) => rows,
                        Err(conflicts) => {
                            bail!(
                                "merge conflict in {} row(s), nothing changed: {}",
                                conflicts.len(),
                                conflicts.join("; ")
                            )
                        }
                    };
                let value = tree_to_json(&rows).to_string().into_bytes();
                (self.objects.merge(TABLE, &ours.id, &theirs.id, &value)?, "merged")
            }
        };
        self.objects.set_branch(TABLE, into, Some(&ours.id), &v.id)?;
        say!("{into} is at table version {} ({how} {from}, {} rows)", v.id.short(12), self.rows(&v.id)?.len());
        Ok(())
    }

    fn log(&self, branch: &str, n: usize) -> anyhow::Result<()> {
        let head = self.branch_at(branch)?.with_context(|| format!("no branch {branch}"))?;
        for (v, value) in first_parent_history(&self.objects, TABLE, head, n)? {
            let rows = tree_from_json(&serde_json::from_slice(&value)?).map_err(anyhow::Error::msg)?;
            let merge = if self.objects.previous(TABLE, &v.id)?.len() == 2 { " (merge)" } else { "" };
            say!("{} {} rows{merge}", v.id.short(12), rows.len());
        }
        Ok(())
    }

    // ----- helpers --------------------------------------------------------

    fn branch_at(&self, name: &str) -> anyhow::Result<Option<Version>> {
        Ok(self.objects.refs(TABLE)?.get(name).map(|t| t.version))
    }

    fn rows(&self, table: &VersionId) -> anyhow::Result<Tree> {
        let value: Value = serde_json::from_slice(&self.objects.get(TABLE, table)?)
            .with_context(|| format!("table version {} is not JSON", table.short(12)))?;
        tree_from_json(&value).map_err(|e| anyhow::anyhow!("table version {}: {e}", table.short(12)))
    }

    fn row_text(&self, id: &str, row: &VersionId) -> anyhow::Result<String> {
        Ok(String::from_utf8_lossy(&self.objects.get(&format!("{ROW_PREFIX}{id}"), row)?).into_owned())
    }
}

fn parse_object(text: &str) -> anyhow::Result<Map<String, Value>> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => bail!("a row is a JSON object, like '{{\"name\":\"pear\",\"qty\":3}}'"),
        Err(e) => bail!("not JSON: {e}"),
    }
}

fn check_row_id(id: &str) -> anyhow::Result<()> {
    let ok = !id.is_empty()
        && id.len() <= ROW_ID_BYTES_MAX
        && id.bytes().all(|c| c.is_ascii_alphanumeric() || b"_.-".contains(&c));
    if !ok {
        bail!("row id {id:?}: use 1 to {ROW_ID_BYTES_MAX} of [A-Za-z0-9_.-]");
    }
    Ok(())
}
