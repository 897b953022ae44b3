//! How values are compressed, whole or as a delta against a base value
//! (`UStore`'s `compress()`/`decompress()`, §3.3.1), behind a small trait so
//! an application can plug in a codec that knows its data.

use std::cell::RefCell;
use std::io;

use zstd::bulk::Decompressor;

/// Compresses values whole and against a base. Implementations must be
/// deterministic in what they decode: `decode_delta(base, encode_delta(base,
/// v)) == v`.
pub trait Codec: Send + Sync {
    /// The id stored with every value this codec wrote; a store refuses to
    /// read values of another codec's id. 0 is reserved.
    fn id(&self) -> u8;

    /// `value` compressed on its own.
    fn encode(&self, value: &[u8]) -> io::Result<Vec<u8>>;

    /// `value` back from [`Codec::encode`]'s output; `len` is its length.
    fn decode(&self, stored: &[u8], len: usize) -> io::Result<Vec<u8>>;

    /// `value` compressed with `base` as reference.
    fn encode_delta(&self, base: &[u8], value: &[u8]) -> io::Result<Vec<u8>>;

    /// `value` back from [`Codec::encode_delta`]'s output and the same base.
    fn decode_delta(&self, base: &[u8], stored: &[u8], len: usize) -> io::Result<Vec<u8>>;
}

/// Zstandard: whole values compressed at a level, deltas compressed with
/// the base value as a raw-content dictionary (zstd reads a dictionary
/// without its magic number as content the input may refer back to, which
/// is what a delta against the previous version needs).
#[derive(Clone, Copy, Debug)]
pub struct ZstdCodec {
    /// The compression level (1–22; 3 is zstd's default).
    pub level: i32,
}

impl Default for ZstdCodec {
    fn default() -> Self {
        ZstdCodec { level: 3 }
    }
}

/// [`ZstdCodec`]'s id.
pub const ZSTD_CODEC_ID: u8 = 1;

impl Codec for ZstdCodec {
    fn id(&self) -> u8 {
        ZSTD_CODEC_ID
    }

    fn encode(&self, value: &[u8]) -> io::Result<Vec<u8>> {
        zstd::bulk::compress(value, self.level)
    }

    fn decode(&self, stored: &[u8], len: usize) -> io::Result<Vec<u8>> {
        check_len(with_decompressor(&[], |d| d.decompress(stored, len))?, len)
    }

    fn encode_delta(&self, base: &[u8], value: &[u8]) -> io::Result<Vec<u8>> {
        zstd::bulk::Compressor::with_dictionary(self.level, base)?.compress(value)
    }

    fn decode_delta(&self, base: &[u8], stored: &[u8], len: usize) -> io::Result<Vec<u8>> {
        check_len(with_decompressor(base, |d| d.decompress(stored, len))?, len)
    }
}

thread_local! {
    /// A decompression context per thread, made once: making one
    /// (`ZSTD_createDCtx`) costs more than decoding a small delta, and a read
    /// through a delta chain decodes up to `chain_max` of them.
    static DECOMPRESSOR: RefCell<Option<Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Run `f` with this thread's decompression context holding a copy of
/// `dictionary` (none when empty). The copy stays until the thread's next
/// decode: each thread that read a delta keeps one base value in memory.
/// Each `decompress` starts a new frame, so a failed one leaves nothing
/// behind for the next.
fn with_decompressor<T>(
    dictionary: &[u8],
    f: impl FnOnce(&mut Decompressor<'static>) -> io::Result<T>,
) -> io::Result<T> {
    DECOMPRESSOR.with(|cell| {
        // `f` only decompresses, so it never comes back here while the cell is borrowed.
        let mut slot = cell.borrow_mut();
        let decompressor = match &mut *slot {
            Some(d) => d,
            empty => empty.insert(Decompressor::new()?),
        };
        decompressor.set_dictionary(dictionary)?;
        f(decompressor)
    })
}

fn check_len(value: Vec<u8>, len: usize) -> io::Result<Vec<u8>> {
    if value.len() == len {
        Ok(value)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("decoded {} bytes where the record says {len}", value.len()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_against_a_similar_base_is_small_and_round_trips() {
        let base: Vec<u8> = (0..32 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut value = base.clone();
        value[100..110].copy_from_slice(b"0123456789");
        let codec = ZstdCodec::default();
        let delta = codec.encode_delta(&base, &value).unwrap();
        assert!(delta.len() < 200, "delta of {} bytes", delta.len());
        assert_eq!(codec.decode_delta(&base, &delta, value.len()).unwrap(), value);
        let whole = codec.encode(&value).unwrap();
        assert_eq!(codec.decode(&whole, value.len()).unwrap(), value);
        // The thread's context, used with a dictionary above, decodes without one again.
        assert_eq!(codec.decode(&whole, value.len()).unwrap(), value);
        assert_eq!(codec.decode_delta(&base, &delta, value.len()).unwrap(), value);
    }
}
