#![allow(clippy::many_single_char_names, reason = "versions of a DAG drawn as letters")]
//! The object store's API: the paper's history semantics, idempotent puts,
//! refs, merges with the built-in functions, grants, notifications and a
//! runtime handler that merges concurrent heads as they appear.

use std::sync::Arc;
use std::time::Duration;

use varve_log::{JournalOptions, JournalStore, MemoryStore, Namespace, Store};
use varve_object::{
    Counter, LastWriterWins, MapMerge, ObjectError, ObjectOptions, ObjectStore, SetUnion, Version, VersionId,
};

fn memory_store() -> ObjectStore {
    ObjectStore::open(MemoryStore::new().namespace("app").expect("ns"), "objs").expect("open")
}

fn ids(versions: &[Version]) -> Vec<VersionId> {
    versions.iter().map(|v| v.id).collect()
}

/// The DAG of the paper's Figure 2: v1 ← v2 ← v7 ← v8, v2 and v4 merged
/// into v5, v5 ← v6 ← v9 (v3 ← v4 a second root's line).
#[test]
fn history_follows_single_parents_and_stops_after_a_merge_as_the_paper_says() {
    let s = memory_store();
    let v1 = s.put("k", None, b"1").expect("put");
    let v2 = s.put("k", Some(&v1.id), b"2").expect("put");
    let v3 = s.put("k", None, b"3").expect("put");
    let v4 = s.put("k", Some(&v3.id), b"4").expect("put");
    let v5 = s.merge("k", &v2.id, &v4.id, b"5").expect("merge");
    let v6 = s.put("k", Some(&v5.id), b"6").expect("put");
    let v7 = s.put("k", Some(&v2.id), b"7").expect("put");
    let v8 = s.put("k", Some(&v7.id), b"8").expect("put");
    let v9 = s.put("k", Some(&v6.id), b"9").expect("put");
    assert_eq!(ids(&s.history("k", &v8.id, 3).expect("history")), [v7.id, v2.id, v1.id]);
    assert_eq!(ids(&s.history("k", &v9.id, 3).expect("history")), [v6.id, v5.id]);
    assert_eq!(ids(&s.previous("k", &v5.id).expect("previous")), [v2.id, v4.id]);
    let values: Vec<Vec<u8>> = s.history_values("k", &v8.id, 2).expect("values").into_iter().map(|(_, v)| v).collect();
    assert_eq!(values, [b"7".to_vec(), b"2".to_vec()]);
    assert_eq!((v5.depth, v9.depth), (3, 5));
    let mut heads = ids(&s.heads("k").expect("heads"));
    heads.sort();
    let mut expected = vec![v8.id, v9.id];
    expected.sort();
    assert_eq!(heads, expected);
    assert_eq!(ids(&s.merge_bases("k", &v8.id, &v9.id).expect("bases")), [v2.id]);
    assert!(s.merge_bases("k", &v1.id, &v3.id).expect("bases").is_empty(), "two roots share no history");
}

#[test]
fn identical_puts_are_one_version_and_bad_arguments_are_typed_errors() {
    let s = memory_store();
    let ns_latest = |s: &ObjectStore| s.versions("k").expect("versions").len();
    let a = s.put("k", None, b"same").expect("put");
    assert_eq!(s.put("k", None, b"same").expect("put again"), a);
    assert_eq!(ns_latest(&s), 1);
    assert_ne!(s.put("other", None, b"same").expect("put").id, a.id, "the key is hashed in");
    let missing = VersionId([7; 32]);
    assert!(matches!(s.put("k", Some(&missing), b"x"), Err(ObjectError::VersionNotFound { .. })));
    assert!(matches!(s.get("other", &a.id), Err(ObjectError::VersionNotFound { .. })), "a version of another key");
    assert!(matches!(s.put("", None, b"x"), Err(ObjectError::InvalidArgument { .. })));
    assert!(matches!(s.merge("k", &a.id, &a.id, b"x"), Err(ObjectError::InvalidArgument { .. })));
    assert_eq!(s.resolve("k", &a.id.short(6)).expect("prefix"), a);
    assert!(matches!(s.resolve("k", "zz"), Err(ObjectError::VersionNotFound { .. })));
}

#[test]
fn branches_move_by_compare_and_set_and_tags_do_not_move() {
    let s = memory_store();
    let v1 = s.put("k", None, b"1").expect("put");
    let v2 = s.put("k", Some(&v1.id), b"2").expect("put");
    s.set_branch("k", "main", None, &v1.id).expect("create");
    let err = s.set_branch("k", "main", None, &v2.id).expect_err("exists");
    assert!(matches!(&err, ObjectError::RefMoved { actual, .. } if *actual == v1.id.short(12)), "{err}");
    s.set_branch("k", "main", Some(&v1.id), &v2.id).expect("move");
    assert_eq!(s.resolve("k", "main").expect("resolve"), v2);
    s.set_tag("k", "v1.0", &v1.id).expect("tag");
    s.set_tag("k", "v1.0", &v1.id).expect("the same tag again is a no-op");
    assert!(matches!(s.set_tag("k", "v1.0", &v2.id), Err(ObjectError::RefMoved { .. })));
    assert!(s.refs("k").expect("refs")["v1.0"].tag);
    assert!(matches!(s.set_branch("k", "abcd", None, &v1.id), Err(ObjectError::InvalidArgument { .. })));
    s.delete_ref("k", "main", &v2.id).expect("delete");
    assert!(!s.refs("k").expect("refs").contains_key("main"));
}

#[test]
fn merge_functions_get_the_closest_common_ancestor() {
    let s = memory_store();
    let base = s.put("n", None, b"10").expect("put");
    let l1 = s.put("n", Some(&base.id), b"12").expect("put");
    let l2 = s.put("n", Some(&l1.id), b"15").expect("put"); // +5 on the left
    let r = s.put("n", Some(&base.id), b"7").expect("put"); // -3 on the right
    let m = s.merge_with("n", &l2.id, &r.id, &Counter).expect("merge");
    assert_eq!(s.get("n", &m.id).expect("get"), b"12");
    assert_eq!(ids(&s.previous("n", &m.id).expect("previous")), [l2.id, r.id]);
    // Last writer wins: the deeper side.
    let lww = s.merge_with("n", &l2.id, &r.id, &LastWriterWins).expect("merge");
    assert_eq!(s.get("n", &lww.id).expect("get"), b"15");

    let a = s.put("set", None, br#"["a","b"]"#).expect("put");
    let x = s.put("set", Some(&a.id), br#"["a","b","x"]"#).expect("put");
    let y = s.put("set", Some(&a.id), br#"["b","y"]"#).expect("put");
    let u = s.merge_with("set", &x.id, &y.id, &SetUnion).expect("merge");
    assert_eq!(s.get("set", &u.id).expect("get"), br#"["b","x","y"]"#);

    let c = s.put("cfg", None, br#"{"port":80,"host":"a"}"#).expect("put");
    let c1 = s.put("cfg", Some(&c.id), br#"{"port":81,"host":"a"}"#).expect("put");
    let c2 = s.put("cfg", Some(&c.id), br#"{"port":82,"host":"b"}"#).expect("put");
    let err = s.merge_with("cfg", &c1.id, &c2.id, &MapMerge).expect_err("both changed port");
    assert!(matches!(&err, ObjectError::MergeConflict { fields } if fields == &["port"]), "{err}");
    assert_eq!(s.heads("cfg").expect("heads").len(), 2, "a failed merge stores nothing");
    let diff = s.diff("cfg", &c1.id, &c2.id).expect("diff");
    assert_eq!(diff.changed.keys().collect::<Vec<_>>(), ["host", "port"]);
    // A user merge function: take the larger port.
    let custom = |input: &varve_object::MergeInput<'_>| -> varve_object::Result<Vec<u8>> {
        let port =
            |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).expect("json")["port"].as_u64().expect("port");
        let (l, r) = (port(input.left.1), port(input.right.1));
        Ok(format!(r#"{{"port":{},"host":"b"}}"#, l.max(r)).into_bytes())
    };
    let m = s.merge_with("cfg", &c1.id, &c2.id, &custom).expect("merge");
    assert_eq!(s.get("cfg", &m.id).expect("get"), br#"{"port":82,"host":"b"}"#);
    assert_eq!(s.merge_heads("cfg", &MapMerge).expect("one head"), None);
}

#[test]
fn restricted_keys_are_read_only_by_their_owner_and_grantees() {
    let admin = memory_store();
    let ann = admin.as_principal("ann").expect("ann");
    let bob = admin.as_principal("bob").expect("bob");
    let v1 = ann.put("diary", None, b"day 1").expect("put");
    let v2 = ann.put("diary", Some(&v1.id), b"day 2").expect("put");
    let v3 = ann.put("diary", Some(&v2.id), b"day 3").expect("put");
    assert_eq!(bob.get("diary", &v1.id).expect("public until restricted"), b"day 1");
    assert!(matches!(bob.restrict("diary"), Err(ObjectError::NotOwner { .. })));
    ann.restrict("diary").expect("restrict");
    let err = bob.get("diary", &v1.id).expect_err("restricted");
    assert!(matches!(&err, ObjectError::Forbidden { owner, .. } if owner == "ann"), "{err}");
    assert!(bob.heads("diary").expect("heads").is_empty(), "heads hide what bob may not read");
    ann.grant("diary", "bob", &[v2.id], true).expect("grant v2 and its ancestors");
    assert_eq!(bob.get("diary", &v2.id).expect("granted"), b"day 2");
    assert_eq!(bob.get("diary", &v1.id).expect("an ancestor"), b"day 1");
    assert!(matches!(bob.get("diary", &v3.id), Err(ObjectError::Forbidden { .. })), "not granted");
    assert!(matches!(bob.put("diary", Some(&v2.id), b"bob was here"), Err(ObjectError::Forbidden { .. })));
    assert_eq!(ann.get("diary", &v3.id).expect("the owner reads all"), b"day 3");
    assert_eq!(admin.get("diary", &v3.id).expect("the administrator reads all"), b"day 3");
    // Grants are auditable: who issued what, in order.
    let grants = admin.grants("diary").expect("grants");
    assert_eq!(grants.len(), 2);
    assert_eq!((grants[1].record.author.as_str(), grants[1].record.principal.as_str()), ("ann", "bob"));
}

#[test]
fn a_watch_yields_new_versions_by_prefix_and_resumes_from_a_seq() {
    let s = memory_store();
    let mut watch = s.watch("sensor/", 1).expect("watch");
    let a = s.put("sensor/1", None, b"a").expect("put");
    s.put("other", None, b"x").expect("put");
    let b = s.put("sensor/2", None, b"b").expect("put");
    let first = watch.next_timeout(Duration::from_secs(10)).expect("watch").expect("a notification");
    assert_eq!((first.key.as_str(), first.version), ("sensor/1", a));
    let second = watch.next_timeout(Duration::from_secs(10)).expect("watch").expect("a notification");
    assert_eq!((second.key.as_str(), second.version), ("sensor/2", b));
    assert!(watch.next_timeout(Duration::from_millis(50)).expect("watch").is_none());
    // Resume after the first, as a restarted subscriber would.
    let mut resumed = s.watch("sensor/", first.seq + 1).expect("watch");
    assert_eq!(resumed.next_timeout(Duration::from_secs(10)).expect("watch").expect("n").version, b);
}

#[test]
fn versions_refs_and_grants_survive_a_reopen_of_the_journal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = || {
        let store = JournalStore::open(dir.path(), JournalOptions::default()).expect("journal");
        let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("app").expect("ns"));
        ObjectStore::open(ns, "objs").expect("open")
    };
    let (v1, v2) = {
        let s = open();
        let v1 = s.put("k", None, &[b'x'; 5000]).expect("put");
        let mut next = vec![b'x'; 5000];
        next[10] = b'y';
        let v2 = s.put("k", Some(&v1.id), &next).expect("put");
        s.set_branch("k", "main", None, &v2.id).expect("branch");
        s.as_principal("ann").expect("ann").put("secret", None, b"s").expect("put");
        s.restrict("secret").expect("restrict");
        (v1, v2)
    };
    let s = open();
    assert_eq!(s.get("k", &v1.id).expect("get"), vec![b'x'; 5000]);
    assert_eq!(s.get("k", &v2.id).expect("get")[10], b'y');
    assert_eq!(s.resolve("k", "main").expect("main"), v2);
    assert_eq!(s.owner("secret").expect("owner"), "ann");
    let bob = s.as_principal("bob").expect("bob");
    assert!(bob.versions("secret").expect("versions").is_empty());
    assert_eq!(s.verify("k", &v2.id).expect("verify").versions, 2);
}

/// Concurrent heads drive a merge handler: the store appends through the
/// runtime, so each new version fires a handler subscribed to the versions
/// log; the handler merges the key's heads (which fires it once more, to
/// find a single head and stop).
#[test]
fn a_runtime_handler_merges_concurrent_heads_as_they_appear() {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    let plain = ObjectStore::open(ns.clone(), "cfg").expect("open"); // creates the logs
    let versions_log = plain.versions_log().to_owned();
    let slot: Arc<std::sync::OnceLock<ObjectStore>> = Arc::new(std::sync::OnceLock::new());
    let handler_store = Arc::clone(&slot);
    let runtime = varve_runtime::RuntimeBuilder::new(ns.clone())
        .handler("merge-heads", varve_runtime::RetryPolicy::default(), move |ctx| {
            let n = varve_object::Notification::decode(ctx.record(), ctx.seq())?;
            let store = handler_store.get().expect("the store is set before the first put");
            store.merge_heads(&n.key, &MapMerge)?;
            Ok(())
        })
        .subscribe(&versions_log, "merge-heads")
        .start()
        .expect("runtime");
    let handle = runtime.handle();
    let writer: Arc<dyn varve_object::Appender> =
        Arc::new(move |log: &str, value: &[u8]| handle.append(log, value).map_err(ObjectError::writer));
    let store = ObjectStore::open_with(ns, "cfg", ObjectOptions { writer: Some(writer), ..ObjectOptions::default() })
        .expect("open through the runtime");
    slot.set(store.clone()).expect("set once");

    let base = store.put("svc", None, br#"{"port":80,"tls":false,"replicas":1}"#).expect("put");
    assert!(runtime.wait_idle(Duration::from_secs(30)));
    // Two writers extend the same version: two heads.
    store.put("svc", Some(&base.id), br#"{"port":8080,"tls":false,"replicas":1}"#).expect("put");
    store.put("svc", Some(&base.id), br#"{"port":80,"tls":true,"replicas":1}"#).expect("put");
    assert!(runtime.wait_idle(Duration::from_secs(30)), "the handler runs settle");
    let heads = store.heads("svc").expect("heads");
    assert_eq!(heads.len(), 1, "the handler merged the two heads: {heads:?}");
    assert_eq!(store.get("svc", &heads[0].id).expect("get"), br#"{"port":8080,"replicas":1,"tls":true}"#);
    assert_eq!(store.previous("svc", &heads[0].id).expect("previous").len(), 2);
    runtime.stop(Duration::from_secs(5));
}

/// Threads of one process share a handle: puts run their appends unlocked
/// (so they can share a group commit), and the index still keeps every
/// version once, in log order, even when two threads store the same put.
#[test]
fn threads_putting_at_once_through_one_handle_lose_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = JournalStore::open(
        dir.path(),
        JournalOptions { sync: varve_log::SyncPolicy::Group(Duration::from_millis(2)), ..JournalOptions::default() },
    )
    .expect("journal");
    let ns: Arc<dyn Namespace> = Arc::new(journal.journal_namespace("app").expect("ns"));
    let store = ObjectStore::open(ns.clone(), "objs").expect("open");
    let root = store.put("k", None, b"root").expect("root");
    let threads: Vec<_> = (0..4_usize)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut last = root.id;
                let mut mine = Vec::new();
                for i in 0..50 {
                    // Threads 0 and 1 store the same line: identical puts.
                    let who = t.saturating_sub(1_usize);
                    last = store.put("k", Some(&last), format!("{who}-{i}").as_bytes()).expect("put").id;
                    mine.push(last);
                }
                mine
            })
        })
        .collect();
    let lines: Vec<Vec<VersionId>> = threads.into_iter().map(|t| t.join().expect("thread")).collect();
    assert_eq!(lines[0], lines[1], "identical puts are the same versions");
    let versions = ids(&store.versions("k").expect("versions"));
    assert_eq!(versions.len(), 1 + 3 * 50, "each version once");
    let reopened = ObjectStore::open(ns, "objs").expect("reopen");
    assert_eq!(ids(&reopened.versions("k").expect("versions")), versions, "the same order after a reopen");
    assert_eq!(reopened.heads("k").expect("heads").len(), 3);
}
