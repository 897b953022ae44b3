//! Three applications of versioned objects (`UStore`, `seeds/001_…` §4.1,
//! §4.2, §4.4), each a small binary on [`varve_object::ObjectStore`]:
//!
//! - `vgit` (§4.1): Git-like versions of a directory. Each file is a key
//!   whose versions are its contents; a commit is a version of key
//!   `_commit` naming the version of every file, derived from the commit
//!   before, so commits form the DAG and `log` is `history`.
//! - `ledger` (§4.4): blocks are versions of one key, `chain`, so their ids
//!   are a hash chain; accounts are objects whose versions are balances, and
//!   each block names the account versions it produced.
//! - `table` (§4.2, Decibel's version-first layout): rows are objects, a
//!   table version lists row versions, branches are refs; the four Decibel
//!   queries (scan a branch, diff two branches, scan a version, scan all
//!   branches).
//!
//! What two of them share lives here: opening an object store by URI
//! ([`open_objects`]) and [`tree`]s — a map from names (paths, row ids) to
//! versions of other keys, stored as one version's value — with their
//! three-way merge.
//!
//! ```
//! use varve_example_objects::tree::{resolve_names, Resolution, Tree};
//! use varve_object::{value_digest, version_of};
//!
//! let id = |text: &[u8]| version_of("file/a", &[], &value_digest(text)).id;
//! let base = Tree::from([("a".to_owned(), id(b"1")), ("b".to_owned(), id(b"x"))]);
//! let ours = Tree::from([("a".to_owned(), id(b"2")), ("b".to_owned(), id(b"x"))]);
//! let theirs = Tree::from([("a".to_owned(), id(b"1"))]);
//! let plan = resolve_names(&base, &ours, &theirs);
//! assert_eq!(plan["a"], Resolution::Take(Some(id(b"2")))); // only we changed it
//! assert_eq!(plan["b"], Resolution::Take(None)); // only they deleted it
//! ```

pub mod tree;

use varve_object::{ObjectStore, Version};

/// Open the object store `name` in the namespace of the same name of the
/// store `uri` names (a directory for the embedded journal, or
/// `varve://HOST:PORT`, `nats://HOST:PORT`), creating its logs if needed.
pub fn open_objects(uri: &str, name: &str) -> varve_object::Result<ObjectStore> {
    let store = varve::open(uri, &varve::OpenOptions::default())?;
    let ns = store.namespace(name)?;
    ObjectStore::open(ns, name)
}

/// `start` and up to `n - 1` versions before it, newest first, each with its
/// value, following first parents through merges (`git log
/// --first-parent`). `history_values` reads a run of single parents in one
/// call and stops after a merge; the walk goes on from the merge's first parent.
pub fn first_parent_history(
    objects: &ObjectStore,
    key: &str,
    start: Version,
    n: usize,
) -> varve_object::Result<Vec<(Version, Vec<u8>)>> {
    let mut out = vec![(start, objects.get(key, &start.id)?)];
    let mut at = start;
    while out.len() < n {
        for (v, value) in objects.history_values(key, &at.id, n - out.len())? {
            at = v;
            out.push((v, value));
        }
        match objects.previous(key, &at.id)?.as_slice() {
            [first, _] if out.len() < n => {
                at = *first;
                out.push((at, objects.get(key, &at.id)?));
            }
            _ => break,
        }
    }
    out.truncate(n);
    Ok(out)
}

/// Print one line to stdout. A closed stdout (`… | head`) ends the program
/// quietly, as Unix tools do, instead of panicking as `println!` does; any
/// other failure to write is reported on stderr and ends it with status 1.
pub fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        let _ = writeln!(std::io::stderr(), "error: writing to stdout: {e}");
        std::process::exit(1);
    }
}

/// `println!` through [`say`].
#[macro_export]
macro_rules! say {
    () => {
        $crate::say(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::say(format_args!($($arg)*))
    };
}
