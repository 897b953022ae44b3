//! Order-preserving key encoding: `a < b` exactly when `encode(a) < encode(b)`
//! as byte strings, so a tree can compare encoded keys with `memcmp`.
//!
//! | type | encoding |
//! |---|---|
//! | `u64`, `u32` | big-endian, fixed width |
//! | `i64`, `i32` | big-endian with the sign bit flipped |
//! | `bool` | one byte, 0 or 1 |
//! | `String`, `Vec<u8>` | bytes with each `0x00` escaped as `0x00 0xFF`, then the terminator `0x00 0x00` |
//! | `()` | nothing |
//! | tuples `(A, B)`, `(A, B, C)` | the fields' encodings concatenated |
//!
//! Integers are the one place in this crate that uses big-endian: it is what
//! makes byte order agree with numeric order. Every log entry format (see
//! [`crate::codec`]) is little-endian. The terminator makes strings
//! self-delimiting, so tuples compare field by field (`("a", 2) < ("ab", 1)`).
//!
//! ```
//! use varve_pds::key::{Key, encode};
//! assert!(encode(&-5i64) < encode(&3i64));
//! assert!(encode(&("a".to_string(), 2u64)) < encode(&("ab".to_string(), 1u64)));
//! assert_eq!(<(String, u64)>::decode_all(&encode(&("x".to_string(), 9u64))).unwrap(), ("x".to_string(), 9));
//! ```

use crate::error::{PdsError, Result};

/// A type with an order-preserving, self-delimiting byte encoding.
pub trait Key: Sized {
    /// Append this value's encoding to `out`.
    fn encode_to(&self, out: &mut Vec<u8>);
    /// Decode one value from the front of `input`, advancing it.
    fn decode_from(input: &mut &[u8]) -> Result<Self>;

    /// Decode exactly one value from `bytes` (trailing bytes are an error).
    fn decode_all(bytes: &[u8]) -> Result<Self> {
        let mut input = bytes;
        let value = Self::decode_from(&mut input)?;
        if input.is_empty() {
            Ok(value)
        } else {
            Err(decode_error(std::any::type_name::<Self>(), format!("{} trailing bytes", input.len())))
        }
    }
}

/// The encoding of `key` as a new vector.
pub fn encode<K: Key>(key: &K) -> Vec<u8> {
    let mut out = Vec::new();
    key.encode_to(&mut out);
    out
}

fn decode_error(ty: &'static str, reason: impl Into<String>) -> PdsError {
    PdsError::Decode { ty, reason: reason.into() }
}

fn take<const N: usize>(input: &mut &[u8], ty: &'static str) -> Result<[u8; N]> {
    if input.len() < N {
        return Err(decode_error(ty, format!("needs {N} bytes, {} left", input.len())));
    }
    let (head, rest) = input.split_at(N);
    *input = rest;
    Ok(head.try_into().expect("split at N"))
}

impl Key for u64 {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_be_bytes());
    }
    fn decode_from(input: &mut &[u8]) -> Result<Self> {
        Ok(u64::from_be_bytes(take(input, "u64")?))
    }
}

impl Key for u32 {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_be_bytes());
    }
    fn decode_from(input: &mut &[u8]) -> Result<Self> {
        Ok(u32::from_be_bytes(take(input, "u32")?))
    }
}

impl Key for i64 {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.cast_unsigned() ^ (1 << 63)).to_be_bytes());
    }
    fn decode_from(input: &mut &[u8]) -> Result<Self> {
        Ok((u64::from_be_bytes(take(input, "i64")?) ^ (1 << 63)).cast_signed())
    }
}

impl Key for i32 {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.cast_unsigned() ^ (1 << 31)).to_be_bytes());
    }
    fn decode_from(input: &mut &[u8]) -> Result<Self> {
        Ok((u32::from_be_bytes(take(input, "i32")?) ^ (1 << 31)).cast_signed())
    }
}

impl Key for bool {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn decode_from(input: &mut &[u8]) -> Result<Self> {
        match take::<1>(input, "bool")? {
            [0] => Ok(false),
            [1] => Ok(true),
            [b] => Err(decode_error("bool", format!("byte {b} is neither 0 nor 1"))),
        }
    }
}

impl Key for () {
    fn encode_to(&self, _out: &mut Vec<u8>) {}
    fn decode_from(_input: &mut &[u8]) -> Result<Self> {
        Ok(())
    }
}

fn encode_escaped(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

fn decode_escaped(input: &mut &[u8], ty: &'static str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        match input.get(i) {
            None => return Err(decode_error(ty, "missing terminator 00 00")),
            Some(0) => match input.get(i + 1) {
                Some(0) => {
                    *input = &input[i + 2..];
                    return Ok(out);
                }
                Some(0xFF) => {
                    out.push(0);
                    i += 2;
                }
                _ => return Err(decode_error(ty, "byte 00 followed by neither 00 nor FF")),
            },
            Some(&b) => {
                out.push(b);
                i += 1;
            }
        }
    }
}

impl Key for Vec<u8> {
    fn encode_to(&self, out: &mut Vec<u8>) {
        encode_escaped(self, out);
    }
    fn decode_from(input: &mut &[u8]) -> Result<Self> {
        decode_escaped(input, "byte string")
    }
}

impl Key for String {
    fn encode_to(&self, out: &mut Vec<u8>) {
        encode_escaped(self.as_bytes(), out);
    }
    fn decode_from(input: &mut &[u8]) -> Result<Self> {
        String::from_utf8(decode_escaped(input, "string")?).map_err(|e| decode_error("string", e.to_string()))
    }
}

impl<A: Key, B: Key> Key for (A, B) {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.0.encode_to(out);
        self.1.encode_to(out);
    }
    fn decode_from(input: &mut &[u8]) -> Result<Self> {
        Ok((A::decode_from(input)?, B::decode_from(input)?))
    }
}

impl<A: Key, B: Key, C: Key> Key for (A, B, C) {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.0.encode_to(out);
        self.1.encode_to(out);
        self.2.encode_to(out);
    }
    fn decode_from(input: &mut &[u8]) -> Result<Self> {
        Ok((A::decode_from(input)?, B::decode_from(input)?, C::decode_from(input)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check_order<K: Key + Ord + std::fmt::Debug + PartialEq>(a: &K, b: &K) {
        let (ea, eb) = (encode(a), encode(b));
        assert_eq!(a.cmp(b), ea.cmp(&eb), "{a:?} vs {b:?}");
        assert_eq!(&K::decode_all(&ea).expect("round trip"), a);
    }

    proptest! {
        #[test]
        fn u64_order(a: u64, b: u64) { check_order(&a, &b); }
        #[test]
        fn i64_order(a: i64, b: i64) { check_order(&a, &b); }
        #[test]
        fn i32_order(a: i32, b: i32) { check_order(&a, &b); }
        #[test]
        fn string_order(a in "[a\\x00b\\u{ff}]{0,6}", b in "[a\\x00b\\u{ff}]{0,6}") { check_order(&a, &b); }
        #[test]
        fn bytes_order(a in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), any::<u8>()], 0..6),
                       b in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), any::<u8>()], 0..6)) {
            check_order(&a, &b);
        }
        #[test]
        fn tuple_order(a in ("[ab\\x00]{0,3}", any::<i64>()), b in ("[ab\\x00]{0,3}", any::<i64>())) { check_order(&a, &b); }
        #[test]
        fn triple_order(a in (any::<u64>(), proptest::collection::vec(0u8..3, 0..3), any::<bool>()),
                        b in (any::<u64>(), proptest::collection::vec(0u8..3, 0..3), any::<bool>())) {
            check_order(&a, &b);
        }
    }

    #[test]
    fn truncated_input_is_an_error() {
        assert!(u64::decode_all(&[1, 2, 3]).is_err());
        assert!(String::decode_all(b"abc").is_err());
        assert!(<u64>::decode_all(&[0; 9]).is_err());
    }
}
