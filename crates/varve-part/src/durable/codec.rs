//! [`Codec`]: how the values of a [`DurableMap`](super::DurableMap) are
//! stored in batch and blob records, and its implementations for the value
//! types Varve uses.

use varve_log::codec::{ByteReader, ByteWriter, ReadError};

/// Values stored in a [`DurableMap`](super::DurableMap): a self-delimiting byte encoding.
pub trait Codec: Sized {
    /// Append the encoding of `self` to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Decode one value from the front of `input`, advancing it; `None` on
    /// bad or short bytes (never panic).
    fn decode(input: &mut &[u8]) -> Option<Self>;
}

/// Run `read` on the front of `input`; on success advance `input` past
/// what it read.
fn read_front<'a, T>(
    input: &mut &'a [u8],
    read: impl FnOnce(&mut ByteReader<'a>) -> Result<T, ReadError>,
) -> Option<T> {
    let mut reader = ByteReader::new(input);
    let value = read(&mut reader).ok()?;
    *input = reader.rest();
    Some(value)
}

/// Little-endian.
impl Codec for u32 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(*self);
    }
    fn decode(input: &mut &[u8]) -> Option<Self> {
        read_front(input, ByteReader::u32)
    }
}

/// Little-endian.
impl Codec for u64 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(*self);
    }
    fn decode(input: &mut &[u8]) -> Option<Self> {
        read_front(input, ByteReader::u64)
    }
}

/// Byte strings: a LEB128 length, then the bytes.
impl Codec for Vec<u8> {
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_varint(self.len() as u64);
        out.put_bytes(self);
    }
    fn decode(input: &mut &[u8]) -> Option<Self> {
        read_front(input, |reader| reader.bytes_varint().map(<[u8]>::to_vec))
    }
}
