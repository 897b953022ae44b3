//! The byte codec every stored format of Varve is written with: the
//! journal's frames, the `PEDaLS` entries (varve-pds), the runtime's events
//! and the PART checkpoints (varve-part). Integers are encoded and decoded
//! here and nowhere else, so the formats cannot disagree on the rules below.
//!
//! The rules:
//! - **Every fixed-width integer is little-endian.**
//! - **Varints are unsigned LEB128**: 7 bits a byte, least significant group
//!   first, the high bit set on every byte but the last. A `u64` takes at most
//!   [`VARINT_BYTES_MAX`] (10) bytes; the reader refuses an eleventh byte and a
//!   tenth byte that carries bits past bit 63. [`ByteWriter::put_varint`]
//!   writes the shortest form; the reader also accepts padded forms (a
//!   trailing `0x80 … 0x00`), as LEB128 readers commonly do.
//!
//! [`ByteReader`] reads a `&[u8]` front to back, bounds-checking every read:
//! bad bytes are a [`ReadError`] (what went wrong, at which byte offset of
//! the input), never a panic. Each format maps `ReadError` into its own error
//! type, adding its context (which log and seq, which frame). Reads borrow
//! from the input; nothing is allocated or copied. [`ByteWriter`] appends to
//! a `Vec<u8>` (or fills a reserved `&mut [u8]`).
//!
//! ```
//! use varve_log::codec::{ByteReader, ByteWriter, ReadErrorKind};
//!
//! let mut out = Vec::new();
//! out.put_u8(1);
//! out.put_u32(0x0403_0201);
//! out.put_varint(300);
//! out.put_bytes(b"hi");
//! assert_eq!(out, [1, 0x01, 0x02, 0x03, 0x04, 0xAC, 0x02, b'h', b'i']);
//!
//! let mut reader = ByteReader::new(&out);
//! assert_eq!(reader.u8()?, 1);
//! assert_eq!(reader.u32()?, 0x0403_0201);
//! assert_eq!(reader.varint()?, 300);
//! assert_eq!(reader.take(2)?, b"hi");
//! reader.finish()?;
//!
//! // A short input says where and by how much.
//! let err = ByteReader::new(&out[..3]).take(4).unwrap_err();
//! assert_eq!(err.offset, 0);
//! assert_eq!(err.kind, ReadErrorKind::Short { needed: 4, available: 3 });
//! assert_eq!(err.to_string(), "4 bytes needed at byte offset 0, only 3 left");
//! # Ok::<(), varve_log::codec::ReadError>(())
//! ```

use std::fmt;

/// The most bytes a LEB128 varint of a `u64` takes: ⌈64 / 7⌉.
pub const VARINT_BYTES_MAX: usize = 10;

const _: () = assert!(VARINT_BYTES_MAX * 7 >= 64 && (VARINT_BYTES_MAX - 1) * 7 < 64);

/// Why a read failed, and at which byte offset of the reader's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadError {
    /// Offset from the start of the input where the failed read began.
    pub offset: usize,
    /// What went wrong.
    pub kind: ReadErrorKind,
}

/// What went wrong in a [`ReadError`]. Its `Display` leaves out the offset,
/// for formats that report offsets of their own (relative to a larger record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadErrorKind {
    /// The input ends early: the read needed `needed` bytes, `available` were left.
    Short {
        /// Bytes the read needed.
        needed: usize,
        /// Bytes left in the input at `offset` (fewer than `needed`).
        available: usize,
    },
    /// A varint runs past [`VARINT_BYTES_MAX`] bytes or past 64 bits.
    VarintOverlong,
    /// [`ByteReader::finish`] found `count` bytes left unread.
    Trailing {
        /// Bytes left unread (at least 1).
        count: usize,
    },
}

/// "byte" or "bytes", for `count` of them.
fn bytes_noun(count: usize) -> &'static str {
    if count == 1 {
        "byte"
    } else {
        "bytes"
    }
}

impl fmt::Display for ReadErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ReadErrorKind::Short { needed, available } => {
                write!(f, "{needed} {} needed, only {available} left", bytes_noun(needed))
            }
            ReadErrorKind::VarintOverlong => {
                write!(f, "varint longer than {VARINT_BYTES_MAX} bytes or past 64 bits")
            }
            ReadErrorKind::Trailing { count } => write!(f, "{count} trailing {}", bytes_noun(count)),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let offset = self.offset;
        match self.kind {
            ReadErrorKind::Short { needed, available } => {
                write!(f, "{needed} {} needed at byte offset {offset}, only {available} left", bytes_noun(needed))
            }
            kind @ (ReadErrorKind::VarintOverlong | ReadErrorKind::Trailing { .. }) => {
                write!(f, "{kind} at byte offset {offset}")
            }
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads integers and byte strings from the front of a `&[u8]`.
///
/// Every method is O(1) except [`varint`](Self::varint) (O(bytes read), at
/// most 10). A failed read leaves the reader where it was. Slices returned
/// borrow the input (`'a`), not the reader.
#[derive(Clone, Debug)]
pub struct ByteReader<'a> {
    /// The bytes not read yet: always a suffix of the input.
    rest: &'a [u8],
    /// The input's length; `position` is derived from it, so that a read
    /// only has to shorten `rest`.
    len: usize,
}

impl<'a> ByteReader<'a> {
    /// A reader at the start of `bytes`.
    #[inline]
    #[must_use]
    pub const fn new(bytes: &'a [u8]) -> Self {
        ByteReader { rest: bytes, len: bytes.len() }
    }

    /// How many bytes have been read: the offset of the next read.
    #[inline]
    #[must_use]
    pub const fn position(&self) -> usize {
        self.len - self.rest.len()
    }

    /// How many bytes are left.
    #[inline]
    #[must_use]
    pub const fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// Whether every byte has been read.
    #[inline]
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The bytes not read yet, without reading them.
    #[inline]
    #[must_use]
    pub const fn rest(&self) -> &'a [u8] {
        self.rest
    }

    #[cold]
    fn short(&self, needed: usize) -> ReadError {
        ReadError { offset: self.position(), kind: ReadErrorKind::Short { needed, available: self.rest.len() } }
    }

    /// The next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        let Some((head, rest)) = self.rest.split_at_checked(n) else { return Err(self.short(n)) };
        self.rest = rest;
        Ok(head)
    }

    /// The next `N` bytes, as an array.
    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], ReadError> {
        let Some((head, rest)) = self.rest.split_first_chunk::<N>() else { return Err(self.short(N)) };
        self.rest = rest;
        Ok(*head)
    }

    /// The next byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, ReadError> {
        let Some((&byte, rest)) = self.rest.split_first() else { return Err(self.short(1)) };
        self.rest = rest;
        Ok(byte)
    }

    /// A little-endian `u16`.
    #[inline]
    pub fn u16(&mut self) -> Result<u16, ReadError> {
        self.array().map(u16::from_le_bytes)
    }

    /// A little-endian `u32`.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, ReadError> {
        self.array().map(u32::from_le_bytes)
    }

    /// A little-endian `u64`.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, ReadError> {
        self.array().map(u64::from_le_bytes)
    }

    /// A little-endian `u128`.
    #[inline]
    pub fn u128(&mut self) -> Result<u128, ReadError> {
        self.array().map(u128::from_le_bytes)
    }

    /// A LEB128 varint (see the module docs): at most [`VARINT_BYTES_MAX`]
    /// bytes, and the tenth may only carry bit 63.
    #[inline]
    pub fn varint(&mut self) -> Result<u64, ReadError> {
        // One byte (values below 128) is the common case: lengths, tags.
        if let Some((&byte, rest)) = self.rest.split_first() {
            if byte < 0x80 {
                self.rest = rest;
                return Ok(u64::from(byte));
            }
        }
        self.varint_long()
    }

    fn varint_long(&mut self) -> Result<u64, ReadError> {
        let mut value = 0u64;
        for (index, &byte) in self.rest.iter().take(VARINT_BYTES_MAX).enumerate() {
            // The tenth byte holds bit 63 only: 9 × 7 = 63 bits come before it.
            if index == VARINT_BYTES_MAX - 1 && byte > 1 {
                return Err(ReadError { offset: self.position(), kind: ReadErrorKind::VarintOverlong });
            }
            value |= u64::from(byte & 0x7F) << (7 * index);
            if byte & 0x80 == 0 {
                self.rest = &self.rest[index + 1..];
                return Ok(value);
            }
        }
        // Fewer than ten bytes, all with the continuation bit set.
        Err(self.short(self.rest.len() + 1))
    }

    /// The next `len` bytes, where `len` is a little-endian `u16` before them.
    #[inline]
    pub fn bytes_u16(&mut self) -> Result<&'a [u8], ReadError> {
        self.prefixed(|reader| reader.u16().map(usize::from))
    }

    /// The next `len` bytes, where `len` is a little-endian `u32` before them.
    #[inline]
    pub fn bytes_u32(&mut self) -> Result<&'a [u8], ReadError> {
        self.prefixed(|reader| reader.u32().map(|len| len as usize))
    }

    /// The next `len` bytes, where `len` is a varint before them.
    #[inline]
    pub fn bytes_varint(&mut self) -> Result<&'a [u8], ReadError> {
        self.prefixed(|reader| reader.varint().map(|len| usize::try_from(len).unwrap_or(usize::MAX)))
    }

    /// A length, then that many bytes; on failure the reader stays before the length.
    #[inline]
    fn prefixed(&mut self, len: impl FnOnce(&mut Self) -> Result<usize, ReadError>) -> Result<&'a [u8], ReadError> {
        let mut ahead = self.clone();
        let len = len(&mut ahead)?;
        let bytes = ahead.take(len)?;
        *self = ahead;
        Ok(bytes)
    }

    /// End of input: refuses trailing bytes.
    #[inline]
    pub fn finish(self) -> Result<(), ReadError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(ReadError { offset: self.position(), kind: ReadErrorKind::Trailing { count: self.rest.len() } })
        }
    }
}

/// Appends little-endian integers, LEB128 varints and bytes to a buffer.
///
/// Implementors provide [`put_bytes`](Self::put_bytes); the rest follows.
pub trait ByteWriter {
    /// Append `bytes` as they are.
    fn put_bytes(&mut self, bytes: &[u8]);

    /// Append one byte.
    #[inline]
    fn put_u8(&mut self, value: u8) {
        self.put_bytes(&[value]);
    }

    /// Append `value` little-endian.
    #[inline]
    fn put_u16(&mut self, value: u16) {
        self.put_bytes(&value.to_le_bytes());
    }

    /// Append `value` little-endian.
    #[inline]
    fn put_u32(&mut self, value: u32) {
        self.put_bytes(&value.to_le_bytes());
    }

    /// Append `value` little-endian.
    #[inline]
    fn put_u64(&mut self, value: u64) {
        self.put_bytes(&value.to_le_bytes());
    }

    /// Append `value` little-endian.
    #[inline]
    fn put_u128(&mut self, value: u128) {
        self.put_bytes(&value.to_le_bytes());
    }

    /// Append `value` as a LEB128 varint, in the fewest bytes (1 to [`VARINT_BYTES_MAX`]).
    #[inline]
    fn put_varint(&mut self, value: u64) {
        if value < 0x80 {
            self.put_u8(value.to_le_bytes()[0]);
            return;
        }
        let mut buf = [0u8; VARINT_BYTES_MAX];
        let mut len = 0;
        let mut rest = value;
        while rest >= 0x80 {
            buf[len] = rest.to_le_bytes()[0] | 0x80;
            rest >>= 7;
            len += 1;
        }
        buf[len] = rest.to_le_bytes()[0];
        self.put_bytes(&buf[..=len]);
    }
}

impl ByteWriter for Vec<u8> {
    #[inline]
    fn put_bytes(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    #[inline]
    fn put_u8(&mut self, value: u8) {
        self.push(value);
    }

    /// Byte by byte: the default's `extend_from_slice` of a few bytes is a
    /// `memcpy` call, which took most of an index checkpoint's encoding
    /// (three varints per record position).
    #[inline]
    fn put_varint(&mut self, value: u64) {
        let mut rest = value;
        while rest >= 0x80 {
            self.push(rest.to_le_bytes()[0] | 0x80);
            rest >>= 7;
        }
        self.push(rest.to_le_bytes()[0]);
    }
}

/// Writes into a slice front to back, shortening it, as `std::io::Write`
/// does for `&mut [u8]`: for a header whose room is reserved before its
/// fields are known.
///
/// # Panics
///
/// If the bytes do not fit what is left of the slice: the caller sized the
/// slice for its fields, so writing past it is a bug.
impl ByteWriter for &mut [u8] {
    #[inline]
    fn put_bytes(&mut self, bytes: &[u8]) {
        assert!(bytes.len() <= self.len(), "{} bytes do not fit the {} left of the slice", bytes.len(), self.len());
        let (head, tail) = std::mem::take(self).split_at_mut(bytes.len());
        head.copy_from_slice(bytes);
        *self = tail;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn varint_bytes(value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_varint(value);
        out
    }

    #[test]
    fn integers_are_little_endian() {
        let mut out = Vec::new();
        out.put_u16(0x0102);
        out.put_u32(0x0304_0506);
        out.put_u64(0x0708_090A_0B0C_0D0E);
        out.put_u128(1);
        assert_eq!(&out[..14], &[2, 1, 6, 5, 4, 3, 0x0E, 0x0D, 0x0C, 0x0B, 0x0A, 9, 8, 7]);
        assert_eq!(&out[14..], &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut reader = ByteReader::new(&out);
        assert_eq!(reader.u16(), Ok(0x0102));
        assert_eq!(reader.u32(), Ok(0x0304_0506));
        assert_eq!(reader.u64(), Ok(0x0708_090A_0B0C_0D0E));
        assert_eq!(reader.u128(), Ok(1));
        assert_eq!(reader.finish(), Ok(()));
    }

    #[test]
    fn varints_are_leb128() {
        assert_eq!(varint_bytes(0), [0]);
        assert_eq!(varint_bytes(127), [0x7F]);
        assert_eq!(varint_bytes(128), [0x80, 0x01]);
        assert_eq!(varint_bytes(300), [0xAC, 0x02]);
        let max = varint_bytes(u64::MAX);
        assert_eq!(max.len(), VARINT_BYTES_MAX);
        assert_eq!(max, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]);
        assert_eq!(ByteReader::new(&max).varint(), Ok(u64::MAX));
        // Padded forms are read too.
        assert_eq!(ByteReader::new(&[0x81, 0x80, 0x00]).varint(), Ok(1));
    }

    #[test]
    fn overlong_varints_are_refused() {
        // Eleven bytes.
        let eleven = [0x80; 11];
        let err = ByteReader::new(&eleven).varint().expect_err("eleven bytes");
        assert_eq!(err, ReadError { offset: 0, kind: ReadErrorKind::VarintOverlong });
        // Ten bytes whose last carries bits past 63.
        let mut past = [0xFF; 10];
        past[9] = 0x02;
        let mut reader = ByteReader::new(&[7, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02]);
        reader.u8().expect("one byte");
        let err = reader.varint().expect_err("past 64 bits");
        assert_eq!(err, ReadError { offset: 1, kind: ReadErrorKind::VarintOverlong });
        assert_eq!(err.to_string(), "varint longer than 10 bytes or past 64 bits at byte offset 1");
        assert_eq!(reader.position(), 1, "a failed read leaves the reader where it was");
        assert!(ByteReader::new(&past).varint().is_err());
    }

    #[test]
    fn short_input_says_where_and_how_much() {
        let bytes = [1, 2, 3];
        let mut reader = ByteReader::new(&bytes);
        assert_eq!(reader.u8(), Ok(1));
        let err = reader.u32().expect_err("short");
        assert_eq!(err, ReadError { offset: 1, kind: ReadErrorKind::Short { needed: 4, available: 2 } });
        assert_eq!(err.to_string(), "4 bytes needed at byte offset 1, only 2 left");
        assert_eq!(err.kind.to_string(), "4 bytes needed, only 2 left");
        assert_eq!(reader.position(), 1);
        assert!(reader.take(usize::MAX).is_err());
        assert!(reader.array::<3>().is_err());
        assert_eq!(reader.take(2), Ok(&[2, 3][..]));
        let err = reader.u8().expect_err("empty");
        assert_eq!(err.kind, ReadErrorKind::Short { needed: 1, available: 0 });
        assert_eq!(err.to_string(), "1 byte needed at byte offset 3, only 0 left");
        // A varint cut off before its last byte.
        let err = ByteReader::new(&[0x80, 0x80]).varint().expect_err("cut");
        assert_eq!(err, ReadError { offset: 0, kind: ReadErrorKind::Short { needed: 3, available: 2 } });
        assert!(ByteReader::new(&[]).varint().is_err());
    }

    #[test]
    fn prefixed_bytes_check_their_length() {
        let mut out = Vec::new();
        out.put_u16(2);
        out.put_bytes(b"ab");
        out.put_u32(1);
        out.put_bytes(b"c");
        out.put_varint(3);
        out.put_bytes(b"def");
        let mut reader = ByteReader::new(&out);
        assert_eq!(reader.bytes_u16(), Ok(&b"ab"[..]));
        assert_eq!(reader.bytes_u32(), Ok(&b"c"[..]));
        assert_eq!(reader.bytes_varint(), Ok(&b"def"[..]));
        assert_eq!(reader.finish(), Ok(()));

        let mut reader = ByteReader::new(&[5, 0, b'x']);
        let err = reader.bytes_u16().expect_err("length past the end");
        assert_eq!(err, ReadError { offset: 2, kind: ReadErrorKind::Short { needed: 5, available: 1 } });
        assert_eq!(reader.position(), 0, "a failed read leaves the reader where it was");
        let huge = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01];
        assert!(ByteReader::new(&huge).bytes_varint().is_err());
    }

    #[test]
    fn a_slice_is_filled_front_to_back() {
        let mut header = [0u8; 6];
        let mut fields: &mut [u8] = &mut header;
        fields.put_u16(0x5656);
        fields.put_u32(7);
        assert!(fields.is_empty());
        assert_eq!(header, [0x56, 0x56, 7, 0, 0, 0]);
    }

    #[test]
    #[should_panic(expected = "4 bytes do not fit the 3 left of the slice")]
    fn writing_past_a_slice_is_a_bug() {
        let mut header = [0u8; 3];
        let mut fields: &mut [u8] = &mut header;
        fields.put_u32(7);
    }

    #[test]
    fn finish_refuses_trailing_bytes() {
        let mut reader = ByteReader::new(&[1, 2, 3]);
        reader.u8().expect("one byte");
        assert_eq!(reader.remaining(), 2);
        assert_eq!(reader.rest(), &[2, 3]);
        let err = reader.finish().expect_err("trailing");
        assert_eq!(err, ReadError { offset: 1, kind: ReadErrorKind::Trailing { count: 2 } });
        assert_eq!(err.to_string(), "2 trailing bytes at byte offset 1");
        assert_eq!(ByteReader::new(&[]).finish(), Ok(()));
    }

    #[derive(Clone, Debug)]
    enum Field {
        U8(u8),
        U16(u16),
        U32(u32),
        U64(u64),
        U128(u128),
        Varint(u64),
        Bytes(Vec<u8>),
    }

    fn field() -> impl Strategy<Value = Field> {
        prop_oneof![
            any::<u8>().prop_map(Field::U8),
            any::<u16>().prop_map(Field::U16),
            any::<u32>().prop_map(Field::U32),
            any::<u64>().prop_map(Field::U64),
            any::<u128>().prop_map(Field::U128),
            // Every varint length, 1 to 10 bytes, is equally likely.
            (0..64u32, any::<u64>()).prop_map(|(bits, v)| Field::Varint(v >> bits)),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Field::Bytes),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(fields in proptest::collection::vec(field(), 0..30)) {
            let mut out = Vec::new();
            for field in &fields {
                match field {
                    Field::U8(v) => out.put_u8(*v),
                    Field::U16(v) => out.put_u16(*v),
                    Field::U32(v) => out.put_u32(*v),
                    Field::U64(v) => out.put_u64(*v),
                    Field::U128(v) => out.put_u128(*v),
                    Field::Varint(v) => out.put_varint(*v),
                    Field::Bytes(v) => {
                        out.put_varint(v.len() as u64);
                        out.put_bytes(v);
                    }
                }
            }
            let mut reader = ByteReader::new(&out);
            for field in &fields {
                let before = reader.position();
                match field {
                    Field::U8(v) => prop_assert_eq!(reader.u8(), Ok(*v)),
                    Field::U16(v) => prop_assert_eq!(reader.u16(), Ok(*v)),
                    Field::U32(v) => prop_assert_eq!(reader.u32(), Ok(*v)),
                    Field::U64(v) => prop_assert_eq!(reader.u64(), Ok(*v)),
                    Field::U128(v) => prop_assert_eq!(reader.u128(), Ok(*v)),
                    Field::Varint(v) => {
                        prop_assert_eq!(reader.varint(), Ok(*v));
                        prop_assert_eq!(reader.position() - before, varint_bytes(*v).len());
                    }
                    Field::Bytes(v) => prop_assert_eq!(reader.bytes_varint(), Ok(&v[..])),
                }
            }
            prop_assert_eq!(reader.finish(), Ok(()));
        }

        /// Any bytes, read any way: an error or a value, never a panic, and
        /// the position only moves forward within the input.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..24), reads in proptest::collection::vec(0..6u8, 0..12)) {
            let mut reader = ByteReader::new(&bytes);
            for read in reads {
                let before = reader.position();
                let ok = match read {
                    0 => reader.u8().is_ok(),
                    1 => reader.u32().is_ok(),
                    2 => reader.u64().is_ok(),
                    3 => reader.varint().is_ok(),
                    4 => reader.bytes_varint().is_ok(),
                    _ => reader.take(3).is_ok(),
                };
                prop_assert!(reader.position() >= before && reader.position() <= bytes.len());
                if !ok {
                    prop_assert_eq!(reader.position(), before);
                }
                prop_assert_eq!(reader.position() + reader.remaining(), bytes.len());
            }
        }

        #[test]
        fn varint_length_is_minimal(value in any::<u64>()) {
            let bits = 64 - value.leading_zeros() as usize;
            prop_assert_eq!(varint_bytes(value).len(), bits.div_ceil(7).max(1));
        }
    }
}
