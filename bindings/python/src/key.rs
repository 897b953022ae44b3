//! Python values ⇄ Varve's order-preserving key encoding.
//!
//! Every encoded value starts with a one-byte tag; the payloads are those of
//! [`varve_pds::key`] (big-endian integers with the sign bit flipped,
//! `0x00`-escaped and terminated strings), so byte order agrees with Python's
//! order for every pair of keys Python itself can compare:
//!
//! | Python | tag | payload | key? |
//! |---|---|---|---|
//! | `int` in `-2**63 .. 0` | `0x01` | `i64` encoding | yes |
//! | `int` in `0 .. 2**64` | `0x02` | `u64` encoding | yes |
//! | `bytes` | `0x03` | `Vec<u8>` encoding | yes |
//! | `str` | `0x04` | `String` encoding | yes |
//! | `tuple` | `0x05` | the fields' encodings, then `0x00` | yes |
//! | `None` | `0x06` | — | values only |
//! | `False` / `True` | `0x07` / `0x08` | — | values only |
//! | `float` | `0x09` | IEEE-754 bits, big-endian | values only |
//!
//! Negative ints sort below non-negative ones because `0x01 < 0x02`; the
//! tuple terminator `0x00` is below every tag, so `(1,) < (1, 2)` as in
//! Python. Keys outside that range raise `OverflowError`; `bool` and `float`
//! keys raise `TypeError` (`True == 1` and `1.0 == 1` in Python, but their
//! encodings differ, so a set could hold "equal" keys twice).
//!
//! **One key type per structure.** Python refuses to order `1` and `"a"`;
//! so does Varve: all keys of a sorted set or map must share one *shape*
//! (`int`, `str`, `bytes`, or a tuple of a given length whose fields have
//! given shapes). See [`shape_of`].

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyString, PyTuple};
use pyo3::IntoPyObjectExt;
use varve_pds::key::Key as _;

const NEG_INT: u8 = 0x01;
const POS_INT: u8 = 0x02;
const BYTES: u8 = 0x03;
const STR: u8 = 0x04;
const TUPLE: u8 = 0x05;
const TUPLE_END: u8 = 0x00;
const NONE: u8 = 0x06;
const FALSE: u8 = 0x07;
const TRUE: u8 = 0x08;
const FLOAT: u8 = 0x09;

/// Deepest tuple nesting accepted: bounds recursion in encode and decode.
pub const TUPLE_DEPTH_MAX: usize = 32;

/// Whether a value is a key (ordered) or only a value (map values, list items).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Key,
    Value,
}

/// Encode a Python value. `TypeError` for unsupported types, `OverflowError`
/// for ints outside `-2**63 ..= 2**64 - 1`.
pub fn encode(obj: &Bound<'_, PyAny>, role: Role) -> PyResult<Vec<u8>> {
    let mut out = Vec::with_capacity(16);
    encode_to(obj, role, 0, &mut out)?;
    Ok(out)
}

fn encode_to(obj: &Bound<'_, PyAny>, role: Role, depth: usize, out: &mut Vec<u8>) -> PyResult<()> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        out.push(BYTES);
        b.as_bytes().to_vec().encode_to(out);
    } else if let Ok(s) = obj.cast::<PyString>() {
        out.push(STR);
        s.to_cow()?.into_owned().encode_to(out);
    } else if obj.is_instance_of::<PyBool>() {
        if role == Role::Key {
            return Err(PyTypeError::new_err(
                "bool keys are not supported (True == 1 in Python, so they would clash with int keys); use int",
            ));
        }
        out.push(if obj.is_truthy()? { TRUE } else { FALSE });
    } else if obj.is_instance_of::<PyInt>() {
        if let Ok(v) = obj.extract::<i64>() {
            if v < 0 {
                out.push(NEG_INT);
                v.encode_to(out);
            } else {
                out.push(POS_INT);
                v.cast_unsigned().encode_to(out);
            }
        } else if let Ok(v) = obj.extract::<u64>() {
            out.push(POS_INT);
            v.encode_to(out);
        } else {
            return Err(PyOverflowError::new_err(format!(
                "int {} is outside the supported range -2**63 ..= 2**64-1; store it as str or bytes, or split it into a tuple",
                obj.repr()?
            )));
        }
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        if depth >= TUPLE_DEPTH_MAX {
            return Err(PyTypeError::new_err(format!("tuples nest at most {TUPLE_DEPTH_MAX} deep")));
        }
        out.push(TUPLE);
        for item in t.iter() {
            encode_to(&item, role, depth + 1, out)?;
        }
        out.push(TUPLE_END);
    } else if obj.is_none() && role == Role::Value {
        out.push(NONE);
    } else if let (Ok(f), Role::Value) = (obj.cast::<PyFloat>(), role) {
        out.push(FLOAT);
        out.extend_from_slice(&f.value().to_bits().to_be_bytes());
    } else {
        let what = if role == Role::Key {
            "keys must be int, str, bytes or tuples of these"
        } else {
            "values must be int, str, bytes, float, bool, None or tuples of these"
        };
        return Err(PyTypeError::new_err(format!("unsupported type {}: {what}", obj.get_type().name()?)));
    }
    Ok(())
}

fn corrupt(reason: &str) -> PyErr {
    crate::error::Error::Corrupt(format!(
        "a stored key or value does not decode ({reason}); was it written by another program?"
    ))
    .into()
}

/// Decode one encoded value back into a Python object.
pub fn decode<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let mut input = bytes;
    let value = decode_from(py, &mut input, 0)?;
    if !input.is_empty() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(value)
}

fn decode_from<'py>(py: Python<'py>, input: &mut &[u8], depth: usize) -> PyResult<Bound<'py, PyAny>> {
    let (&tag, rest) = input.split_first().ok_or_else(|| corrupt("empty"))?;
    *input = rest;
    let bad = |e: varve_pds::PdsError| corrupt(&e.to_string());
    Ok(match tag {
        NEG_INT => i64::decode_from(input).map_err(bad)?.into_bound_py_any(py)?,
        POS_INT => u64::decode_from(input).map_err(bad)?.into_bound_py_any(py)?,
        BYTES => PyBytes::new(py, &Vec::<u8>::decode_from(input).map_err(bad)?).into_any(),
        STR => PyString::new(py, &String::decode_from(input).map_err(bad)?).into_any(),
        TUPLE => {
            if depth >= TUPLE_DEPTH_MAX {
                return Err(corrupt("tuples nested too deep"));
            }
            let mut items = Vec::new();
            loop {
                match input.first() {
                    None => return Err(corrupt("unterminated tuple")),
                    Some(&TUPLE_END) => {
                        *input = &input[1..];
                        break;
                    }
                    Some(_) => items.push(decode_from(py, input, depth + 1)?),
                }
            }
            PyTuple::new(py, items)?.into_any()
        }
        NONE => py.None().into_bound(py),
        FALSE => PyBool::new(py, false).to_owned().into_any(),
        TRUE => PyBool::new(py, true).to_owned().into_any(),
        FLOAT => {
            let bits = input.get(..8).ok_or_else(|| corrupt("short float"))?;
            let value = f64::from_bits(u64::from_be_bytes(bits.try_into().map_err(|_| corrupt("short float"))?));
            *input = &input[8..];
            PyFloat::new(py, value).into_any()
        }
        other => return Err(corrupt(&format!("unknown tag {other:#04x}"))),
    })
}

/// The shape of an encoded key: its tags with payloads left out and the two
/// int tags merged, e.g. `int`, `tuple(str, int)`. Keys of one shape are
/// always comparable in Python; keys of different shapes may not be.
pub fn shape_of(encoded: &[u8]) -> String {
    let mut out = String::new();
    let mut input = encoded;
    if shape_from(&mut input, &mut out).is_none() {
        out.push('?');
    }
    out
}

fn shape_from(input: &mut &[u8], out: &mut String) -> Option<()> {
    let (&tag, rest) = input.split_first()?;
    *input = rest;
    match tag {
        NEG_INT | POS_INT => {
            *input = input.get(8..)?;
            out.push_str("int");
        }
        BYTES | STR => {
            // Skip to the unescaped terminator 00 00.
            let mut i = 0;
            loop {
                match (input.get(i)?, input.get(i + 1)) {
                    (0, Some(0)) => break,
                    (0, _) => i += 2,
                    _ => i += 1,
                }
            }
            *input = &input[i + 2..];
            out.push_str(if tag == BYTES { "bytes" } else { "str" });
        }
        TUPLE => {
            out.push_str("tuple(");
            let mut first = true;
            loop {
                if *input.first()? == TUPLE_END {
                    *input = &input[1..];
                    break;
                }
                if !first {
                    out.push_str(", ");
                }
                first = false;
                shape_from(input, out)?;
            }
            out.push(')');
        }
        _ => return None,
    }
    Some(())
}
