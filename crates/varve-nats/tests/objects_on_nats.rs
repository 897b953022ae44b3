//! Versioned objects on a real nats-server: two stores (two connections,
//! two indexes of the DAG) extend one key at once and race to move a
//! branch, and a watch on a third sees every version in the order stored.

mod support;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use varve_log::Store;
use varve_nats::NatsStore;
use varve_object::{ObjectError, ObjectStore, Version};

const PUTS_PER_WRITER: usize = 15;

fn objects(namespace: &str) -> ObjectStore {
    let uri = support::uri(support::single(), "");
    let store = NatsStore::open(&uri).unwrap_or_else(|e| panic!("connecting to {uri}: {e}"));
    ObjectStore::open(store.namespace(namespace).expect("namespace"), "docs").expect("object store")
}

#[test]
fn two_writers_share_an_object_store_on_nats() {
    let namespace = support::fresh_name("obj");
    let first = objects(&namespace);
    let root = first.put("doc", None, b"root").expect("root");
    first.set_branch("doc", "main", None, &root.id).expect("branch");
    let mut watch = first.watch("doc", 1).expect("watch");
    let start = Arc::new(Barrier::new(2));
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|who| {
            let (namespace, start) = (namespace.clone(), Arc::clone(&start));
            thread::spawn(move || {
                let store = objects(&namespace);
                start.wait();
                let mut mine: Vec<Version> = Vec::new();
                for i in 0..PUTS_PER_WRITER {
                    let base = mine.last().map_or(root.id, |v| v.id);
                    let v = store.put("doc", Some(&base), format!("{who} {i}").as_bytes()).expect("put");
                    let mut expected = store.resolve("doc", "main").expect("main").id;
                    loop {
                        match store.set_branch("doc", "main", Some(&expected), &v.id) {
                            Ok(()) => break,
                            Err(ObjectError::RefMoved { .. }) => {
                                expected = store.resolve("doc", "main").expect("main").id;
                            }
                            Err(e) => panic!("writer {who}: {e}"),
                        }
                    }
                    mine.push(v);
                }
                mine
            })
        })
        .collect();
    let lines: Vec<Vec<Version>> = writers.into_iter().map(|w| w.join().expect("writer")).collect();
    let reader = objects(&namespace);
    assert_eq!(reader.versions("doc").expect("versions").len(), 1 + 2 * PUTS_PER_WRITER);
    let mut heads = reader.heads("doc").expect("heads");
    heads.sort_by_key(|v| v.id);
    let mut last: Vec<Version> = lines.iter().map(|line| line[PUTS_PER_WRITER - 1]).collect();
    last.sort_by_key(|v| v.id);
    assert_eq!(heads, last);
    assert!(last.contains(&reader.resolve("doc", "main").expect("main")));
    for head in &heads {
        assert_eq!(reader.verify("doc", &head.id).expect("verify").versions, 1 + PUTS_PER_WRITER);
    }
    let mut seen = Vec::new();
    while seen.len() < 1 + 2 * PUTS_PER_WRITER {
        let n = watch.next_timeout(Duration::from_secs(30)).expect("watch").expect("a notification in 30 s");
        seen.push(n.version);
    }
    assert_eq!(seen, reader.versions("doc").expect("versions"), "the watch yields versions in the order stored");
}
