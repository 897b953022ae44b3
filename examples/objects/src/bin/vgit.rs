//! `vgit`: Git-like versions of a directory on versioned objects (`UStore`
//! §4.1).
//!
//! Each file is a key `file/PATH` whose versions are the file's contents. A
//! commit is a version of key `_commit` whose value is
//! `{"message": …, "files": {PATH: VERSION-ID, …}}` and whose parent is the
//! commit before (two parents for a merge): commits form the DAG, `log` is
//! `history`, and a commit's id verifies every file of it and the whole past.
//! Branches are refs of `_commit`, moved with compare-and-set. The working
//! directory's `.vgit-head` file names its branch (or a commit, detached);
//! files and directories whose names start with `.vgit` are not versioned,
//! nor is the store's directory, nor symbolic links.
//!
//! ```text
//! vgit --store STORE [--dir DIR] init [--branch main]
//! vgit --store STORE [--dir DIR] commit -m MESSAGE [--branch B]
//! vgit --store STORE [--dir DIR] log [-n 20]
//! vgit --store STORE [--dir DIR] checkout VERSION [--to EMPTY-DIR]
//! vgit --store STORE [--dir DIR] branch [NAME [VERSION]]
//! vgit --store STORE [--dir DIR] merge BRANCH
//! vgit --store STORE [--dir DIR] status
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use varve_example_objects::say;
use varve_example_objects::tree::{decide, merge_trees, tree_from_json, tree_to_json, Decision, Tree};
use varve_example_objects::{first_parent_history, open_objects};
use varve_object::{LineMerge, ObjectStore, Version, VersionId};

/// The key whose versions are the commits.
const COMMIT: &str = "_commit";
/// Where a file's versions are: `FILE_PREFIX + path`.
const FILE_PREFIX: &str = "file/";
/// The working directory's file naming its branch or commit.
const HEAD_FILE: &str = ".vgit-head";
/// Names starting with this are not versioned (the head file, a store kept in `.vgit/`).
const IGNORED_PREFIX: &str = ".vgit";
/// The largest file versioned: a version is one log record, and the
/// journal's record limit (`Limits::record_bytes_max`, 16 MiB) must leave
/// room for the record's header.
const FILE_BYTES_MAX: u64 = 8 << 20;
/// The deepest directory nesting walked, so a cycle or a pathological tree ends.
const DIR_DEPTH_MAX: usize = 64;

#[derive(Parser)]
#[command(name = "vgit", about = "Git-like versions of a directory on Varve versioned objects (UStore §4.1)")]
struct Cli {
    /// The store: a directory (the embedded journal) or a varve:// or nats:// URI.
    #[arg(long, global = true)]
    store: Option<String>,
    /// The working directory.
    #[arg(long, global = true, default_value = ".")]
    dir: PathBuf,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Make DIR a working directory on branch B of the store.
    Init {
        #[arg(long, default_value = "main")]
        branch: String,
    },
    /// Record the directory as a new commit on the current branch (or on B, created here if new).
    Commit {
        #[arg(short, long)]
        message: String,
        #[arg(long)]
        branch: Option<String>,
    },
    /// The commits before the current one, newest first (first parents through merges).
    Log {
        #[arg(short = 'n', long, default_value_t = 20)]
        n: usize,
    },
    /// Restore the directory at VERSION (a branch, or a commit id or prefix); with --to, into an empty directory instead.
    Checkout {
        version: String,
        #[arg(long)]
        to: Option<PathBuf>,
    },
    /// List the branches, or create NAME at VERSION (default the current commit).
    Branch { name: Option<String>, version: Option<String> },
    /// Merge BRANCH into the current branch: per file, a line merge against the merge base.
    Merge { branch: String },
    /// What differs between the directory and the current commit.
    Status,
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
    let objects = open_objects(&store, "vgit").with_context(|| format!("opening store {store}"))?;
    // A store kept inside the working directory is not part of it.
    let store_dir = if store.contains("://") { None } else { fs::canonicalize(&store).ok() };
    let repo = Repo { objects, dir: cli.dir, store_dir };
    match cli.command {
        Cmd::Init { branch } => repo.init(&branch),
        Cmd::Commit { message, branch } => repo.commit(&message, branch),
        Cmd::Log { n } => repo.log(n),
        Cmd::Checkout { version, to } => repo.checkout(&version, to.as_deref()),
        Cmd::Branch { name: None, .. } => repo.list_branches(),
        Cmd::Branch { name: Some(name), version } => repo.branch(&name, version.as_deref()),
        Cmd::Merge { branch } => repo.merge(&branch),
        Cmd::Status => repo.status(),
    }
}

/// Where the working directory is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Head {
    Branch(String),
    Detached(VersionId),
}

/// A commit's value.
struct Commit {
    message: String,
    files: Tree,
}

impl Commit {
    fn encode(&self) -> Vec<u8> {
        json!({"message": self.message, "files": tree_to_json(&self.files)}).to_string().into_bytes()
    }
}

/// How the directory differs from a commit.
#[derive(Default)]
struct Changes {
    modified: Vec<String>,
    added: Vec<String>,
    deleted: Vec<String>,
}

impl Changes {
    fn is_clean(&self) -> bool {
        self.modified.is_empty() && self.deleted.is_empty()
    }
}

struct Repo {
    objects: ObjectStore,
    dir: PathBuf,
    store_dir: Option<PathBuf>,
}

impl Repo {
    fn init(&self, branch: &str) -> anyhow::Result<()> {
        let head_file = self.dir.join(HEAD_FILE);
        if head_file.exists() {
            bail!("{} is already a vgit working directory ({HEAD_FILE} exists)", self.dir.display());
        }
        fs::create_dir_all(&self.dir).with_context(|| format!("creating {}", self.dir.display()))?;
        self.write_head(&Head::Branch(branch.to_owned()))?;
        say!("initialized {} on branch {branch}", self.dir.display());
        Ok(())
    }

    fn commit(&self, message: &str, branch: Option<String>) -> anyhow::Result<()> {
        let head = self.read_head()?;
        let parent = self.head_commit(&head)?;
        let branch = match (branch, &head) {
            (Some(b), _) => b,
            (None, Head::Branch(b)) => b.clone(),
            (None, Head::Detached(_)) => bail!("HEAD is detached: commit with --branch NAME to start a branch here"),
        };
        let at = self.branch_at(&branch)?;
        if at.is_some() && at.map(|v| v.id) != parent.map(|v| v.id) {
            bail!("branch {branch} is at another commit than this directory: check it out first");
        }
        let before = match parent {
            Some(p) => self.read_commit(&p.id)?.files,
            None => Tree::new(),
        };
        let mut files = Tree::new();
        let mut changed = 0;
        for (path, full) in self.scan()? {
            let content = read_file(&full)?;
            let key = format!("{FILE_PREFIX}{path}");
            let old = before.get(&path);
            let id = match old {
                Some(id) if self.objects.get(&key, id)? == content => *id,
                _ => {
                    changed += 1;
                    self.objects.put(&key, old, &content)?.id
                }
            };
            files.insert(path, id);
        }
        let removed = before.keys().filter(|p| !files.contains_key(*p)).count();
        if let Some(p) = parent.filter(|_| files == before) {
            bail!("nothing to commit: the directory matches commit {}", p.id.short(12));
        }
        let commit = Commit { message: message.to_owned(), files };
        let v = self.objects.put(COMMIT, parent.as_ref().map(|p| &p.id), &commit.encode())?;
        self.objects.set_branch(COMMIT, &branch, at.as_ref().map(|a| &a.id), &v.id)?;
        self.write_head(&Head::Branch(branch.clone()))?;
        say!(
            "[{branch} {}] {message} ({} files: {changed} changed, {removed} removed)",
            v.id.short(12),
            commit.files.len()
        );
        Ok(())
    }

    fn log(&self, n: usize) -> anyhow::Result<()> {
        let head = self.read_head()?;
        let Some(start) = self.head_commit(&head)? else { bail!("no commits yet") };
        let names = self.branch_names()?;
        for (v, value) in first_parent_history(&self.objects, COMMIT, start, n)? {
            self.print_commit(&v, &value, &names)?;
        }
        Ok(())
    }

    fn print_commit(&self, v: &Version, value: &[u8], names: &BTreeMap<VersionId, Vec<String>>) -> anyhow::Result<()> {
        let commit = decode_commit(&v.id, value)?;
        let refs = names.get(&v.id).map(|n| format!(" ({})", n.join(", "))).unwrap_or_default();
        let parents = self.objects.previous(COMMIT, &v.id)?;
        let merge = if parents.len() == 2 {
            format!(" [merge of {} and {}]", parents[0].id.short(12), parents[1].id.short(12))
        } else {
            String::new()
        };
        say!("{}{refs} {}{merge}", v.id.short(12), commit.message);
        Ok(())
    }

    fn checkout(&self, text: &str, to: Option<&Path>) -> anyhow::Result<()> {
        let v = self.objects.resolve(COMMIT, text)?;
        // Only this commit and its files are read, not the history.
        let commit = self.read_commit(&v.id)?;
        if let Some(target) = to {
            if target.exists() && fs::read_dir(target)?.next().is_some() {
                bail!("--to {}: the directory is not empty", target.display());
            }
            self.write_files(target, &Tree::new(), &commit.files)?;
            say!("wrote {} files of commit {} to {}", commit.files.len(), v.id.short(12), target.display());
            return Ok(());
        }
        let head = self.read_head()?;
        let current = match self.head_commit(&head)? {
            Some(c) => self.read_commit(&c.id)?.files,
            None => Tree::new(),
        };
        self.require_clean(&current, Some(&commit.files))?;
        self.write_files(&self.dir, &current, &commit.files)?;
        let is_branch = self.objects.refs(COMMIT)?.get(text).is_some_and(|r| !r.tag);
        let head = if is_branch { Head::Branch(text.to_owned()) } else { Head::Detached(v.id) };
        self.write_head(&head)?;
        match head {
            Head::Branch(b) => say!("on branch {b} at {}: {}", v.id.short(12), commit.message),
            Head::Detached(_) => say!("HEAD detached at {}: {}", v.id.short(12), commit.message),
        }
        Ok(())
    }

    fn list_branches(&self) -> anyhow::Result<()> {
        let head = self.read_head().ok();
        for (name, target) in self.objects.refs(COMMIT)? {
            let mark = if head == Some(Head::Branch(name.clone())) { '*' } else { ' ' };
            say!("{mark} {name} {}", target.version.id.short(12));
        }
        Ok(())
    }

    fn branch(&self, name: &str, version: Option<&str>) -> anyhow::Result<()> {
        if let Some(at) = self.branch_at(name)? {
            bail!("branch {name} exists (at {})", at.id.short(12));
        }
        let v = match version {
            Some(text) => self.objects.resolve(COMMIT, text)?,
            None => self.head_commit(&self.read_head()?)?.context("no commits yet: nothing to branch from")?,
        };
        self.objects.set_branch(COMMIT, name, None, &v.id)?;
        say!("branch {name} at {}", v.id.short(12));
        Ok(())
    }

    fn merge(&self, other: &str) -> anyhow::Result<()> {
        let Head::Branch(branch) = self.read_head()? else {
            bail!("HEAD is detached: check out a branch to merge into")
        };
        let ours = self.branch_at(&branch)?.context("no commits yet on this branch: nothing to merge into")?;
        let theirs = self.objects.resolve(COMMIT, other)?;
        let our_files = self.read_commit(&ours.id)?.files;
        let their_files = self.read_commit(&theirs.id)?.files;
        self.require_clean(&our_files, Some(&their_files))?;
        let (v, files, how) = match decide(&self.objects, COMMIT, &ours.id, &theirs.id)? {
            Decision::UpToDate => {
                say!("already up to date with {other}");
                return Ok(());
            }
            Decision::FastForward => (theirs, their_files, "fast-forward"),
            Decision::Merge { base } => {
                let base_files = match base {
                    Some(b) => self.read_commit(&b.id)?.files,
                    None => Tree::new(),
                };
                let sides = (&base_files, &our_files, &their_files);
                let files = match merge_trees(&self.objects, FILE_PREFIX, sides, &LineMerge)? {
                    Ok(files) => files,
                    Err(conflicts) => bail!(
                        "merge conflict in {} file(s), nothing changed: {}",
                        conflicts.len(),
                        conflicts.join("; ")
                    ),
                };
                let commit = Commit { message: format!("merge {other} into {branch}"), files };
                let v = self.objects.merge(COMMIT, &ours.id, &theirs.id, &commit.encode())?;
                (v, commit.files, "merge commit")
            }
        };
        self.objects.set_branch(COMMIT, &branch, Some(&ours.id), &v.id)?;
        self.write_files(&self.dir, &our_files, &files)?;
        say!("{branch} is at {} ({how}, {} files)", v.id.short(12), files.len());
        Ok(())
    }

    fn status(&self) -> anyhow::Result<()> {
        let head = self.read_head()?;
        let commit = self.head_commit(&head)?;
        match (&head, commit) {
            (Head::Branch(b), Some(c)) => say!("on branch {b} at {}", c.id.short(12)),
            (Head::Branch(b), None) => say!("on branch {b}, no commits yet"),
            (Head::Detached(id), _) => say!("HEAD detached at {}", id.short(12)),
        }
        let files = match commit {
            Some(c) => self.read_commit(&c.id)?.files,
            None => Tree::new(),
        };
        let changes = self.changes(&files)?;
        for (what, paths) in [("modified", &changes.modified), ("new", &changes.added), ("deleted", &changes.deleted)] {
            for path in paths {
                say!("  {what}: {path}");
            }
        }
        if changes.is_clean() && changes.added.is_empty() {
            say!("nothing to commit, the directory matches the commit");
        }
        Ok(())
    }

    // ----- helpers --------------------------------------------------------

    fn read_head(&self) -> anyhow::Result<Head> {
        let path = self.dir.join(HEAD_FILE);
        let text = fs::read_to_string(&path).with_context(|| {
            format!("{} is not a vgit working directory (no {HEAD_FILE}): run `vgit init`", self.dir.display())
        })?;
        let text = text.trim();
        if let Some(branch) = text.strip_prefix("ref: ") {
            Ok(Head::Branch(branch.to_owned()))
        } else {
            Ok(Head::Detached(text.parse().with_context(|| format!("{}: not a ref or a commit id", path.display()))?))
        }
    }

    fn write_head(&self, head: &Head) -> anyhow::Result<()> {
        let text = match head {
            Head::Branch(b) => format!("ref: {b}\n"),
            Head::Detached(id) => format!("{id}\n"),
        };
        let path = self.dir.join(HEAD_FILE);
        fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    }

    /// The commit the head names; `None` on a branch without commits.
    fn head_commit(&self, head: &Head) -> anyhow::Result<Option<Version>> {
        match head {
            Head::Branch(b) => self.branch_at(b),
            Head::Detached(id) => Ok(Some(self.objects.info(COMMIT, id)?.version)),
        }
    }

    fn branch_at(&self, name: &str) -> anyhow::Result<Option<Version>> {
        Ok(self.objects.refs(COMMIT)?.get(name).map(|t| t.version))
    }

    fn branch_names(&self) -> anyhow::Result<BTreeMap<VersionId, Vec<String>>> {
        let mut names: BTreeMap<VersionId, Vec<String>> = BTreeMap::new();
        for (name, target) in self.objects.refs(COMMIT)? {
            names.entry(target.version.id).or_default().push(name);
        }
        Ok(names)
    }

    fn read_commit(&self, id: &VersionId) -> anyhow::Result<Commit> {
        decode_commit(id, &self.objects.get(COMMIT, id)?)
    }

    /// The versioned files of the working directory: path ('/'-separated) → where it is.
    fn scan(&self) -> anyhow::Result<BTreeMap<String, PathBuf>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![(self.dir.clone(), String::new(), 0)];
        while let Some((dir, prefix, depth)) = stack.pop() {
            if depth > DIR_DEPTH_MAX {
                bail!("{}: directories nest deeper than {DIR_DEPTH_MAX}", dir.display());
            }
            for entry in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
                let entry = entry?;
                let name = entry.file_name();
                let Some(name) = name.to_str() else {
                    bail!("{}: file names must be UTF-8", entry.path().display());
                };
                if name.starts_with(IGNORED_PREFIX) {
                    continue;
                }
                let kind = entry.file_type()?;
                let path = format!("{prefix}{name}");
                if kind.is_dir() {
                    if self.store_dir.is_some() && fs::canonicalize(entry.path()).ok() == self.store_dir {
                        continue;
                    }
                    stack.push((entry.path(), format!("{path}/"), depth + 1));
                } else if kind.is_file() {
                    out.insert(path, entry.path());
                }
            }
        }
        Ok(out)
    }

    fn changes(&self, files: &Tree) -> anyhow::Result<Changes> {
        let mut changes = Changes::default();
        let present = self.scan()?;
        for (path, full) in &present {
            match files.get(path) {
                Some(id) => {
                    if self.objects.get(&format!("{FILE_PREFIX}{path}"), id)? != read_file(full)? {
                        changes.modified.push(path.clone());
                    }
                }
                None => changes.added.push(path.clone()),
            }
        }
        changes.deleted = files.keys().filter(|p| !present.contains_key(*p)).cloned().collect();
        Ok(changes)
    }

    /// Refuse when the directory has changes a checkout would lose: edits
    /// of `current`'s files, and new files `target` would overwrite.
    fn require_clean(&self, current: &Tree, target: Option<&Tree>) -> anyhow::Result<()> {
        let changes = self.changes(current)?;
        let mut lost: Vec<&String> = changes.modified.iter().chain(&changes.deleted).collect();
        if let Some(target) = target {
            lost.extend(changes.added.iter().filter(|p| target.contains_key(*p)));
        }
        if !lost.is_empty() {
            let paths: Vec<&str> = lost.iter().map(|s| s.as_str()).collect();
            bail!("uncommitted changes in {}: commit them first", paths.join(", "));
        }
        Ok(())
    }

    /// Make `dir`, which holds `from`'s files, hold `to`'s: write the files
    /// whose version differs, delete those `to` lacks.
    fn write_files(&self, dir: &Path, from: &Tree, to: &Tree) -> anyhow::Result<()> {
        for path in from.keys().filter(|p| !to.contains_key(*p)) {
            let full = safe_join(dir, path)?;
            match fs::remove_file(&full) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("deleting {}", full.display())),
            }
        }
        for (path, id) in to {
            let full = safe_join(dir, path)?;
            if from.get(path) == Some(id) && full.exists() {
                continue;
            }
            let content = self.objects.get(&format!("{FILE_PREFIX}{path}"), id)?;
            if let Some(parent) = full.parent() {
                fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
            }
            fs::write(&full, content).with_context(|| format!("writing {}", full.display()))?;
        }
        Ok(())
    }
}

fn decode_commit(id: &VersionId, value: &[u8]) -> anyhow::Result<Commit> {
    let bad = || format!("commit {} is not a vgit commit", id.short(12));
    let value: Value = serde_json::from_slice(value).with_context(bad)?;
    let message = value["message"].as_str().with_context(bad)?.to_owned();
    let files = tree_from_json(&value["files"]).map_err(anyhow::Error::msg).with_context(bad)?;
    Ok(Commit { message, files })
}

fn read_file(path: &Path) -> anyhow::Result<Vec<u8>> {
    let len = fs::metadata(path).with_context(|| format!("reading {}", path.display()))?.len();
    if len > FILE_BYTES_MAX {
        bail!("{}: {len} bytes, over the {FILE_BYTES_MAX}-byte limit of a file version", path.display());
    }
    fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// `dir/path`, refused if `path` (read from the store) could leave `dir`.
fn safe_join(dir: &Path, path: &str) -> anyhow::Result<PathBuf> {
    let relative = Path::new(path);
    if path.is_empty() || !relative.components().all(|c| matches!(c, Component::Normal(_))) {
        bail!("the commit names file {path:?}, which is not a plain relative path");
    }
    Ok(dir.join(relative))
}
