//! Decode the input into map operations and check each against a
//! `BTreeMap` oracle (see `tests/oracle/mod.rs`).
#![no_main]

#[path = "../../tests/oracle/mod.rs"]
mod oracle;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    oracle::run(&oracle::decode(data));
});
