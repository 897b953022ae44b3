//! The record wire format: Protocol Buffers' encoding, with the writer's
//! schema id in front.
//!
//! ```text
//! record  = varint(schema id) field*
//! field   = varint(number << 3 | wire type) payload
//! payload = varint            (wire type 0: bool, u32, u64; i32 and i64 zigzag)
//!         | 8 bytes LE        (wire type 1: f64)
//!         | varint(len) bytes (wire type 2: string, bytes)
//!         | 4 bytes LE        (wire type 5: f32)
//! ```
//!
//! Why this and not a format of our own: it is compact (a small integer
//! field is two bytes), its field-number identity is exactly the rule schema
//! evolution needs, every language can read it, and fields a reader does
//! not know can be skipped by wire type alone, so they are kept as raw
//! bytes and written back unchanged (`prost` drops them; we do not).
//! Absent fields are not written; fields appear in number order.

use crate::types::{FieldType, Value};

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// The wire type a field of `ty` is written with.
#[must_use]
pub fn wire_type(ty: FieldType) -> u8 {
    match ty {
        FieldType::Bool | FieldType::I32 | FieldType::I64 | FieldType::U32 | FieldType::U64 => VARINT,
        FieldType::F64 => FIXED64,
        FieldType::F32 => FIXED32,
        FieldType::String | FieldType::Bytes => LEN,
    }
}

/// Append `v` as a LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        #[allow(clippy::cast_possible_truncation)]
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    #[allow(clippy::cast_possible_truncation)]
    out.push(v as u8);
}

/// Read a varint at `*pos`, advancing it; `None` if truncated or too long.
#[must_use]
pub fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn zigzag(i: i64) -> u64 {
    #[allow(clippy::cast_sign_loss)]
    {
        ((i << 1) ^ (i >> 63)) as u64
    }
}

fn unzigzag(u: u64) -> i64 {
    #[allow(clippy::cast_possible_wrap)]
    {
        ((u >> 1) as i64) ^ -((u & 1) as i64)
    }
}

/// Append one field. The value must already have the field's type
/// ([`Value::coerce`]); a mismatch writes nothing and returns false.
pub fn put_field(out: &mut Vec<u8>, number: u32, ty: FieldType, value: &Value) -> bool {
    let tag = (u64::from(number) << 3) | u64::from(wire_type(ty));
    match (ty, value) {
        (FieldType::Bool, Value::Bool(b)) => {
            put_varint(out, tag);
            put_varint(out, u64::from(*b));
        }
        (FieldType::I32 | FieldType::I64, Value::Int(i)) => {
            put_varint(out, tag);
            put_varint(out, zigzag(*i));
        }
        (FieldType::U32 | FieldType::U64, Value::UInt(u)) => {
            put_varint(out, tag);
            put_varint(out, *u);
        }
        (FieldType::F64, Value::Float(x)) => {
            put_varint(out, tag);
            out.extend_from_slice(&x.to_le_bytes());
        }
        (FieldType::F32, Value::Float(x)) => {
            put_varint(out, tag);
            #[allow(clippy::cast_possible_truncation)]
            out.extend_from_slice(&(*x as f32).to_le_bytes());
        }
        (FieldType::String, Value::Text(s)) => {
            put_varint(out, tag);
            put_varint(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        (FieldType::Bytes, Value::Bytes(b)) => {
            put_varint(out, tag);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        _ => return false,
    }
    true
}

/// One field as read off the wire: its number, and either a value decoded
/// with the writer's type or, for a number the writer's schema lacks, the
/// raw bytes of the whole field (tag included) to keep.
pub enum WireField<'a> {
    /// A field of the writer's schema, decoded.
    Known {
        /// Its number.
        number: u32,
        /// Its value, in the writer's type.
        value: Value,
    },
    /// A field the writer's schema lacks, kept whole.
    Unknown {
        /// Tag and payload.
        raw: &'a [u8],
    },
}

/// Read the next field at `*pos`. `type_of(number)` gives the writer's type
/// of a known number. `Err` says what is malformed.
pub fn next_field<'a>(
    bytes: &'a [u8],
    pos: &mut usize,
    type_of: impl Fn(u32) -> Option<FieldType>,
) -> Result<WireField<'a>, String> {
    let start = *pos;
    let tag = get_varint(bytes, pos).ok_or_else(|| format!("truncated field tag at byte {start}"))?;
    let number = u32::try_from(tag >> 3).map_err(|_| format!("field number {} too large at byte {start}", tag >> 3))?;
    #[allow(clippy::cast_possible_truncation)]
    let wire = (tag & 7) as u8;
    let payload_start = *pos;
    let payload_end = match wire {
        VARINT => {
            get_varint(bytes, pos).ok_or_else(|| format!("truncated varint of field #{number}"))?;
            *pos
        }
        FIXED64 => payload_start + 8,
        FIXED32 => payload_start + 4,
        LEN => {
            let len = get_varint(bytes, pos).ok_or_else(|| format!("truncated length of field #{number}"))?;
            usize::try_from(len).ok().and_then(|l| pos.checked_add(l)).ok_or("length overflows")?
        }
        other => return Err(format!("field #{number} has wire type {other}, which this format does not use")),
    };
    if payload_end > bytes.len() {
        return Err(format!("field #{number} runs past the end of the record"));
    }
    *pos = payload_end;
    let Some(ty) = type_of(number) else {
        return Ok(WireField::Unknown { raw: &bytes[start..payload_end] });
    };
    if wire_type(ty) != wire {
        return Err(format!("field #{number} is {ty} but was written with wire type {wire}"));
    }
    let payload = &bytes[payload_start..payload_end];
    let value = match ty {
        FieldType::Bool => Value::Bool(varint_payload(bytes, payload_start)? != 0),
        FieldType::I32 | FieldType::I64 => Value::Int(unzigzag(varint_payload(bytes, payload_start)?)),
        FieldType::U32 | FieldType::U64 => Value::UInt(varint_payload(bytes, payload_start)?),
        FieldType::F64 => Value::Float(f64::from_le_bytes(payload.try_into().map_err(|_| "bad f64")?)),
        FieldType::F32 => Value::Float(f64::from(f32::from_le_bytes(payload.try_into().map_err(|_| "bad f32")?))),
        FieldType::String => {
            let mut p = payload_start;
            let _ = get_varint(bytes, &mut p);
            Value::Text(
                std::str::from_utf8(&bytes[p..payload_end])
                    .map_err(|_| format!("field #{number} is a string but is not UTF-8"))?
                    .to_owned(),
            )
        }
        FieldType::Bytes => {
            let mut p = payload_start;
            let _ = get_varint(bytes, &mut p);
            Value::Bytes(bytes[p..payload_end].to_vec())
        }
    };
    Ok(WireField::Known { number, value })
}

fn varint_payload(bytes: &[u8], mut pos: usize) -> Result<u64, String> {
    get_varint(bytes, &mut pos).ok_or_else(|| "truncated varint".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_round_trip() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut pos = 0;
            assert_eq!(get_varint(&out, &mut pos), Some(v));
            assert_eq!(pos, out.len());
        }
        for i in [0, -1, 1, i64::MIN, i64::MAX, -300] {
            assert_eq!(unzigzag(zigzag(i)), i);
        }
    }

    #[test]
    fn a_truncated_field_is_an_error_not_a_panic() {
        let mut out = Vec::new();
        assert!(put_field(&mut out, 3, FieldType::String, &Value::Text("hello".into())));
        for cut in 0..out.len() {
            let mut pos = 0;
            let read = next_field(&out[..cut], &mut pos, |_| Some(FieldType::String));
            assert!(read.is_err(), "cut at {cut} should fail");
        }
    }
}
