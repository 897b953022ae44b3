//! Compatibility rules checked when a version is registered.
//!
//! Always, whatever the mode (Protocol Buffers' rule): a field number keeps
//! its name for ever, its type may only widen ([`FieldType::promotes_to`]),
//! and a number once retired is never used again.
//!
//! Then, for an automatic version, the mode (Confluent's vocabulary):
//! - **BACKWARD** — the new version reads records written with the earlier
//!   one: every field it adds has a default or is set by an INIT; every
//!   field kept reads the old type (a promotion).
//! - **FORWARD** — readers of the earlier version read records written
//!   with the new one: every field it drops had a default there; every
//!   field kept is readable in the old type.
//! - **FULL** — both; `_TRANSITIVE` — against every earlier version of the
//!   generation, not only the previous one.
//!
//! Manual and reset versions are checked for field identity only: their
//! records never meet the old ones (a migration rewrites them, a reset
//! starts over).

use std::sync::Arc;

use crate::error::{Result, SchemaError};
use crate::schema::{Model, SchemaVersion};
use crate::types::FieldType;

/// Check `new` against the subject's `history` (oldest first).
pub(crate) fn check(history: &[Arc<SchemaVersion>], new: &SchemaVersion) -> Result<()> {
    check_identity(history, new)?;
    if new.model != Model::Automatic {
        return Ok(());
    }
    let Some(prev) = history.last() else { return Ok(()) };
    let generation: Vec<&Arc<SchemaVersion>> = history.iter().filter(|v| v.generation == new.generation).collect();
    let against: Vec<&Arc<SchemaVersion>> = if new.compat.transitive() { generation.clone() } else { vec![prev] };
    for old in against {
        if new.compat.backward() {
            check_backward(&generation, old, new)?;
        }
        if new.compat.forward() {
            check_forward(old, new)?;
        }
    }
    Ok(())
}

fn incompatible(new: &SchemaVersion, against: u32, field: &str, rule: &'static str, reason: String) -> SchemaError {
    SchemaError::Incompatible {
        subject: new.subject.clone(),
        version: new.version,
        against,
        field: field.to_owned(),
        rule,
        reason,
    }
}

fn check_identity(history: &[Arc<SchemaVersion>], new: &SchemaVersion) -> Result<()> {
    let prev = history.last();
    for old in history {
        for field in &old.fields {
            let Some((_, now)) = new.field_by_number(field.number) else { continue };
            if now.name != field.name {
                return Err(incompatible(
                    new,
                    old.version,
                    &now.name,
                    "FIELD_NUMBER",
                    format!(
                        "takes number {} from field '{}'; numbers are never reused: pick a new number",
                        field.number, field.name
                    ),
                ));
            }
            if !field.ty.promotes_to(now.ty) {
                return Err(incompatible(
                    new,
                    old.version,
                    &now.name,
                    "FIELD_NUMBER",
                    format!(
                        "changes type from {} to {}, which is not a promotion: add a field with a new number and an INIT that converts",
                        field.ty, now.ty
                    ),
                ));
            }
            if prev.is_some_and(|p| p.field_by_number(field.number).is_none()) {
                return Err(incompatible(
                    new,
                    old.version,
                    &now.name,
                    "FIELD_NUMBER",
                    format!(
                        "uses number {}, retired since v{}: numbers are never reused",
                        field.number,
                        old.version + 1
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_backward(generation: &[&Arc<SchemaVersion>], old: &SchemaVersion, new: &SchemaVersion) -> Result<()> {
    for field in new.added_since(old) {
        if field.default.is_some() {
            continue;
        }
        // The version that added it (new itself, or one in between) must
        // carry an INIT, which is then required to set it.
        let adder_has_init = generation
            .iter()
            .map(AsRef::as_ref)
            .chain(std::iter::once(new))
            .filter(|v| v.version > old.version)
            .find(|v| v.field_by_number(field.number).is_some())
            .is_some_and(|v| v.init.is_some());
        if !adder_has_init {
            return Err(incompatible(
                new,
                old.version,
                &field.name,
                "BACKWARD",
                "is added without a default or an INIT, so records written before it cannot be read: give it a default or declare an INIT".into(),
            ));
        }
    }
    for field in &new.fields {
        if let Some((_, was)) = old.field_by_number(field.number) {
            if !was.ty.promotes_to(field.ty) {
                return Err(type_error(new, old, &field.name, "BACKWARD", was.ty, field.ty));
            }
        }
    }
    Ok(())
}

fn check_forward(old: &SchemaVersion, new: &SchemaVersion) -> Result<()> {
    for field in old.added_since(new) {
        if field.default.is_none() {
            return Err(incompatible(
                new,
                old.version,
                &field.name,
                "FORWARD",
                format!("is dropped, but has no default in v{}, so its readers cannot read new records", old.version),
            ));
        }
    }
    for field in &new.fields {
        if let Some((_, was)) = old.field_by_number(field.number) {
            if !field.ty.promotes_to(was.ty) {
                return Err(type_error(new, old, &field.name, "FORWARD", field.ty, was.ty));
            }
        }
    }
    Ok(())
}

fn type_error(
    new: &SchemaVersion,
    old: &SchemaVersion,
    name: &str,
    rule: &'static str,
    from: FieldType,
    to: FieldType,
) -> SchemaError {
    incompatible(
        new,
        old.version,
        name,
        rule,
        format!("would have to be read as {to} from {from}, which is not a promotion"),
    )
}
