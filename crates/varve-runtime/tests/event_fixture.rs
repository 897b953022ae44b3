//! The `_events` record format, version 1, frozen by a committed fixture:
//! `tests/fixtures/events_v1.bin` holds the events below, each as a u32 LE
//! length and the encoded event. A change that breaks this test changes the
//! format: bump `EVENT_FORMAT_VERSION` and keep version 1 readable instead.
//! (Regenerate only for a new fixture file: `VARVE_WRITE_FIXTURE=1 cargo test`.)

use varve_runtime::{Event, EventId, EventKind};

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

#[test]
fn events_v1_fixture_decodes_and_encodes_byte_for_byte() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/events_v1.bin");
    let mut encoded = Vec::new();
    for event in expected() {
        let bytes = event.encode();
        encoded.extend_from_slice(&u32::try_from(bytes.len()).unwrap().to_le_bytes());
        encoded.extend_from_slice(&bytes);
    }
    if std::env::var_os("VARVE_WRITE_FIXTURE").is_some() {
        std::fs::write(path, &encoded).unwrap();
    }
    let fixture = std::fs::read(path).unwrap();
    assert_eq!(fixture, encoded, "the encoding of version 1 changed");
    let mut at = 0;
    let mut decoded = Vec::new();
    while at < fixture.len() {
        let len = u32::from_le_bytes(fixture[at..at + 4].try_into().unwrap()) as usize;
        decoded.push(Event::decode(&fixture[at + 4..at + 4 + len], decoded.len() as u64 + 1).unwrap());
        at += 4 + len;
    }
    assert_eq!(decoded, expected());
}
