//! The deterministic batches of the durable crash loop, shared by the child
//! (`tests/bin/durable_crash_writer.rs`) and the test
//! (`tests/durable_crash.rs`): batch `id` of run `seed`.

use varve_part::BatchOp;

/// Key holding the id of the last applied batch (u64 LE): every batch
/// writes it, so a reopened map says which batches it holds.
pub const LAST_BATCH_KEY: &[u8] = b"\xff\xfflast-batch";

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Batch `id`: 40 puts and deletes over 200k keys, then the id.
pub fn batch_for(seed: u64, id: u64) -> Vec<BatchOp<Vec<u8>>> {
    let mut state = seed ^ id.wrapping_mul(0xA24B_AED4_963E_E407);
    let mut ops: Vec<BatchOp<Vec<u8>>> = (0..40)
        .map(|_| {
            let r = splitmix(&mut state);
            let key = ((r >> 8) % 200_000).to_be_bytes()[5..].to_vec();
            if r.is_multiple_of(5) {
                BatchOp::Delete(key)
            } else {
                BatchOp::Put(key, id.to_le_bytes()[..(r % 8) as usize].to_vec())
            }
        })
        .collect();
    ops.push(BatchOp::Put(LAST_BATCH_KEY.to_vec(), id.to_le_bytes().to_vec()));
    ops
}
