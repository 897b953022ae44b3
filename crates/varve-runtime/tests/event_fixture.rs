//! The `_events` record formats, frozen by committed fixtures: each of
//! `tests/fixtures/events_v1.bin` and `events_v2.bin` holds the events below,
//! each as a u32 LE length and the encoded event. Version 1 is no longer
//! written but must stay readable; version 2 is what this build writes, byte
//! for byte. A change that breaks this test changes the format: bump
//! `EVENT_FORMAT_VERSION` and keep the old versions readable instead.
//! (Regenerate only for a new fixture file: `VARVE_WRITE_FIXTURE=1 cargo test`.)

use varve_runtime::event::EVENT_FORMAT_VERSION;
use varve_runtime::{Event, EventId, EventKind, ReadDep};

fn expected() -> Vec<Event> {
    let parent = |seq| Some(EventId { host: 0x0102_0304_0506_0708, namespace: "ns".into(), seq });
    let base = |kind, parent| {
        let mut e = Event::new(kind, 0x00ff_eedd_ccbb_aa99_8877_6655_4433_2211, parent);
        e.timestamp_ns = 1_700_000_000_123_456_789;
        e
    };
    let mut failed = base(EventKind::Failed, parent(3)).at("in", 1).for_handler("h");
    failed.attempt = 2;
    failed.trigger = 2;
    failed.reason = "exited with status 3".into();
    let mut read = base(EventKind::Read, parent(3)).at("model", 4);
    read.seq_last = 9;
    let mut firing = base(EventKind::Firing, parent(2)).at("in", 1).for_handler("h");
    firing.attempt = 1;
    firing.trigger = 2;
    vec![
        base(EventKind::Append, None).at("in", 1),
        base(EventKind::Trigger, parent(1)).at("in", 1).for_handler("h"),
        firing,
        read,
        base(EventKind::Latest, parent(3)).at("model", 9),
        failed,
        base(EventKind::Subscribe, None).at("in", 0).for_handler("h"),
    ]
}

/// The events of `events_v2.bin`: those of version 1, plus reads folded
/// into an APPEND, a DONE and a FAILED (the version 2 way).
fn expected_v2() -> Vec<Event> {
    let mut events = expected();
    let mut append = events[0].clone();
    append.parent = Some(EventId { host: 0x0102_0304_0506_0708, namespace: "ns".into(), seq: 3 });
    append.log = "out".into();
    append.reads = vec![ReadDep::latest("model", 9), ReadDep::read("model", 9, 9), ReadDep::read("model", 1, 300)];
    let mut done = events[5].clone();
    done.kind = EventKind::Done;
    done.reason.clear();
    done.reads = vec![ReadDep::read("in", 1, 1)];
    events[5].reads = vec![ReadDep::latest("model", 0)];
    events.push(append);
    events.push(done);
    events
}

fn decode_all(fixture: &[u8]) -> Vec<Event> {
    let mut at = 0;
    let mut decoded = Vec::new();
    while at < fixture.len() {
        let len = u32::from_le_bytes(fixture[at..at + 4].try_into().expect("a length")) as usize;
        decoded.push(Event::decode(&fixture[at + 4..at + 4 + len], decoded.len() as u64 + 1).expect("an event"));
        at += 4 + len;
    }
    decoded
}

#[test]
fn events_v1_fixture_still_decodes() {
    let fixture = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/events_v1.bin")).unwrap();
    assert_eq!(fixture[4], 1, "the fixture's first event is version 1");
    assert_eq!(decode_all(&fixture), expected());
}

#[test]
fn events_v2_fixture_decodes_and_encodes_byte_for_byte() {
    assert_eq!(EVENT_FORMAT_VERSION, 2, "a new version needs a new fixture; keep this one");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/events_v2.bin");
    let mut encoded = Vec::new();
    for event in expected_v2() {
        let bytes = event.encode();
        encoded.extend_from_slice(&u32::try_from(bytes.len()).unwrap().to_le_bytes());
        encoded.extend_from_slice(&bytes);
    }
    if std::env::var_os("VARVE_WRITE_FIXTURE").is_some() {
        std::fs::write(path, &encoded).unwrap();
    }
    let fixture = std::fs::read(path).unwrap();
    assert_eq!(fixture, encoded, "the encoding of version 2 changed");
    assert_eq!(decode_all(&fixture), expected_v2());
}

/// Version 2 is smaller: the same events take fewer bytes than in version 1.
#[test]
fn version_2_is_more_compact_than_version_1() {
    let v1 = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/events_v1.bin")).unwrap();
    let v2: usize = expected().iter().map(|e| 4 + e.encode().len()).sum();
    assert!(v2 * 10 < v1.len() * 8, "version 2 {v2} bytes vs version 1 {} bytes for the same events", v1.len());
}
