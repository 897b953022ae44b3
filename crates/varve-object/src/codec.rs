//! How values are compressed, whole or as a delta against a base value
//! (`UStore`'s `compress()`/`decompress()`, §3.3.1), behind a small trait so
//! an application can plug in a codec that knows its data.

use std::cell::RefCell;
use std::io;

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

    /// `value` compressed with `base` as reference. An error means "no
    /// delta against this base": the store then keeps the value whole.
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

/// The first bytes of a formatted zstd dictionary: a base value starting
/// with them would be read as one, not as content, so it gets no delta.
const ZSTD_DICT_MAGIC: [u8; 4] = 0xEC30_A437_u32.to_le_bytes();

thread_local! {
    // Contexts are reused: allocating one (about 1 MiB of tables at level 3)
    // per value cost more than compressing the value.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

fn with_compressor<T>(
    level: i32,
    dictionary: &[u8],
    f: impl FnOnce(&mut zstd::bulk::Compressor<'static>) -> io::Result<T>,
) -> io::Result<T> {
    COMPRESSOR.with(|slot| {
        let mut slot = slot.borrow_mut();
        let compressor = match slot.as_mut() {
            Some(c) => c,
            None => slot.insert(zstd::bulk::Compressor::new(level)?),
        };
        compressor.set_dictionary(level, dictionary)?;
        f(compressor)
    })
}

fn with_decompressor<T>(
    dictionary: &[u8],
    f: impl FnOnce(&mut zstd::bulk::Decompressor<'static>) -> io::Result<T>,
) -> io::Result<T> {
    DECOMPRESSOR.with(|slot| {
        let mut slot = slot.borrow_mut();
        let decompressor = match slot.as_mut() {
            Some(d) => d,
            None => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        decompressor.set_dictionary(dictionary)?;
        f(decompressor)
    })
}

impl Codec for ZstdCodec {
    fn id(&self) -> u8 {
        ZSTD_CODEC_ID
    }

    fn encode(&self, value: &[u8]) -> io::Result<Vec<u8>> {
        with_compressor(self.level, &[], |c| c.compress(value))
    }

    fn decode(&self, stored: &[u8], len: usize) -> io::Result<Vec<u8>> {
        check_len(with_decompressor(&[], |d| d.decompress(stored, len))?, len)
    }

    fn encode_delta(&self, base: &[u8], value: &[u8]) -> io::Result<Vec<u8>> {
        if base.starts_with(&ZSTD_DICT_MAGIC) {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "the base looks like a zstd dictionary"));
        }
        with_compressor(self.level, base, |c| c.compress(value))
    }

    fn decode_delta(&self, base: &[u8], stored: &[u8], len: usize) -> io::Result<Vec<u8>> {
        check_len(with_decompressor(base, |d| d.decompress(stored, len))?, len)
    }
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
        // Contexts are reused across calls: a dictionary does not leak into the next value.
        assert_eq!(codec.decode(&codec.encode(&base).unwrap(), base.len()).unwrap(), base);
        let mut dict_like = ZSTD_DICT_MAGIC.to_vec();
        dict_like.extend_from_slice(&base);
        assert!(codec.encode_delta(&dict_like, &value).is_err(), "no delta against a dictionary look-alike");
    }
}
