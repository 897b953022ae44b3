//! Versioned objects on a real `varve serve`: two clients (each its own
//! connection and its own index of the DAG) extend one key at once and race
//! to move one branch; a third client then sees every version, the heads
//! both left, the branch where the last winner put it, and verifies it all.

mod common;

use std::sync::{Arc, Barrier};
use std::thread;

use varve_object::{ObjectError, ObjectStore, Version};

use common::Env;

const PUTS_PER_WRITER: usize = 25;

fn objects(uri: &str) -> ObjectStore {
    let store = varve::open(uri, &varve::OpenOptions::default()).expect("open the served store");
    ObjectStore::open(store.namespace("app").expect("namespace"), "docs").expect("object store")
}

#[test]
fn two_clients_extend_one_key_and_race_for_a_branch_through_one_server() {
    let env = Env::new();
    let served = env.serve(&[]);
    let root = objects(&served.uri).put("doc", None, b"root").expect("root");
    objects(&served.uri).set_branch("doc", "main", None, &root.id).expect("branch");
    let start = Arc::new(Barrier::new(2));
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|who| {
            let (uri, start) = (served.uri.clone(), Arc::clone(&start));
            thread::spawn(move || {
                let store = objects(&uri);
                start.wait();
                let mut mine: Vec<Version> = Vec::new();
                let mut lost_races = 0;
                for i in 0..PUTS_PER_WRITER {
                    let base = mine.last().map_or(root.id, |v| v.id);
                    let v = store.put("doc", Some(&base), format!("{who} {i}").as_bytes()).expect("put");
                    // Move main from wherever it is to my version; a lost race
                    // says where it went, and I retry from there.
                    let mut expected = store.resolve("doc", "main").expect("main").id;
                    loop {
                        match store.set_branch("doc", "main", Some(&expected), &v.id) {
                            Ok(()) => break,
                            Err(ObjectError::RefMoved { .. }) => {
                                lost_races += 1;
                                expected = store.resolve("doc", "main").expect("main").id;
                            }
                            Err(e) => panic!("writer {who}: {e}"),
                        }
                    }
                    mine.push(v);
                }
                (mine, lost_races)
            })
        })
        .collect();
    let results: Vec<(Vec<Version>, usize)> = writers.into_iter().map(|w| w.join().expect("writer")).collect();
    println!("lost branch races: a {}, b {}", results[0].1, results[1].1);

    let reader = objects(&served.uri);
    let all = reader.versions("doc").expect("versions");
    assert_eq!(all.len(), 1 + 2 * PUTS_PER_WRITER, "every version of both writers is stored once");
    for (i, (mine, _)) in results.iter().enumerate() {
        let who = ["a", "b"][i];
        for (n, v) in mine.iter().enumerate() {
            assert_eq!(reader.get("doc", &v.id).expect("get"), format!("{who} {n}").as_bytes());
        }
        assert_eq!(reader.history("doc", &mine[PUTS_PER_WRITER - 1].id, 100).expect("history").len(), PUTS_PER_WRITER);
    }
    let mut heads = reader.heads("doc").expect("heads");
    heads.sort_by_key(|v| v.id);
    let mut last: Vec<Version> = results.iter().map(|(mine, _)| mine[PUTS_PER_WRITER - 1]).collect();
    last.sort_by_key(|v| v.id);
    assert_eq!(heads, last, "each writer's line ends in a head");
    let main = reader.resolve("doc", "main").expect("main");
    assert!(last.contains(&main), "main is at one writer's last version: {main:?}");
    for head in &heads {
        assert_eq!(reader.verify("doc", &head.id).expect("verify").versions, 1 + PUTS_PER_WRITER);
    }
}
