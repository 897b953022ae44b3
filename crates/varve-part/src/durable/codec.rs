//! [`Codec`]: how the values of a [`DurableMap`](super::DurableMap) are
//! stored in batch and blob records, and its implementations for the value
//! types Varve uses.

use super::decode::Reader;
use super::format::put_varint;

/// Values stored in a [`DurableMap`](super::DurableMap): a self-delimiting byte encoding.
pub trait Codec: Sized {
    /// Append the encoding of `self` to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Decode one value from the front of `input`, advancing it; `None` on
    /// bad or short bytes (never panic).
    fn decode(input: &mut &[u8]) -> Option<Self>;
}

impl Codec for u32 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn decode(input: &mut &[u8]) -> Option<Self> {
        let (head, rest) = input.split_first_chunk::<4>()?;
        *input = rest;
        Some(u32::from_le_bytes(*head))
    }
}

impl Codec for u64 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn decode(input: &mut &[u8]) -> Option<Self> {
        let (head, rest) = input.split_first_chunk::<8>()?;
        *input = rest;
        Some(u64::from_le_bytes(*head))
    }
}

/// Byte strings: a LEB128 length, then the bytes.
impl Codec for Vec<u8> {
    fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.len() as u64);
        out.extend_from_slice(self);
    }
    fn decode(input: &mut &[u8]) -> Option<Self> {
        let mut reader = Reader::new(input);
        let len = usize::try_from(reader.varint().ok()?).ok()?;
        let bytes = reader.take(len).ok()?.to_vec();
        *input = &input[reader.pos..];
        Some(bytes)
    }
}
