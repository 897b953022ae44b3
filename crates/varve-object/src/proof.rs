//! Ancestry proofs: evidence that a version is an ancestor of a head,
//! checkable by a client that holds only the head's id and the key.
//!
//! A proof is the chain of version preimages from the head down to the
//! ancestor: for each version on the path, its parents (id and depth) and
//! its value's digest, and which parent the path follows. The checker
//! recomputes every id from its preimage, starting from the id it trusts,
//! and accepts only if each step hashes to the id the previous step pointed
//! at and the last step hashes to the ancestor's id. Every element is
//! checked — immudb's lesson, where proofs whose unchecked fields a server
//! could forge were accepted.

use serde_json::{json, Value};

use crate::error::{ObjectError, Result};
use crate::version::{version_of, Version, VersionId};

/// One version on the path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProofStep {
    /// Its parents, in order.
    pub parents: Vec<Version>,
    /// BLAKE3 of its value.
    pub digest: [u8; 32],
    /// Which parent the path follows (0 on the last step).
    pub follow: u8,
}

/// A proof that `ancestor` is an ancestor of (or is) `head` under `key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AncestryProof {
    /// The key.
    pub key: String,
    /// The versions from the head (first) down to the ancestor (last).
    pub steps: Vec<ProofStep>,
}

impl AncestryProof {
    /// Check the proof against ids the client trusts. Returns the ancestor
    /// as a version (with its depth) when every step checks.
    pub fn check(&self, key: &str, head: &VersionId, ancestor: &VersionId) -> Result<Version> {
        let fail = |reason: String| Err(ObjectError::ProofInvalid { reason });
        if self.key != key {
            return fail(format!("it is for key {:?}, not {key:?}", self.key));
        }
        if self.steps.is_empty() {
            return fail("it has no steps".to_owned());
        }
        let mut expected = *head;
        for (i, step) in self.steps.iter().enumerate() {
            if step.parents.len() > 2 {
                return fail(format!("step {i} lists {} parents (at most 2)", step.parents.len()));
            }
            let version = version_of(key, &step.parents, &step.digest);
            if version.id != expected {
                return fail(format!("step {i} hashes to {}, not {}", version.id.short(12), expected.short(12)));
            }
            if i + 1 == self.steps.len() {
                return if step.follow != 0 {
                    fail(format!("the last step follows parent {}, but a path ends there", step.follow))
                } else if version.id == *ancestor {
                    Ok(version)
                } else {
                    fail(format!("it ends at {}, not at {}", version.id.short(12), ancestor.short(12)))
                };
            }
            match step.parents.get(usize::from(step.follow)) {
                Some(parent) => expected = parent.id,
                None => return fail(format!("step {i} follows parent {} of {}", step.follow, step.parents.len())),
            }
        }
        unreachable!("the loop returns at the last step")
    }

    /// The proof as JSON (ids and digests in hex), for a client elsewhere.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|s| {
                json!({
                    "parents": s.parents.iter().map(|p| json!({"id": p.id.to_hex(), "depth": p.depth})).collect::<Vec<_>>(),
                    "digest": VersionId(s.digest).to_hex(),
                    "follow": s.follow,
                })
            })
            .collect();
        json!({ "key": self.key, "steps": steps })
    }

    /// Read a proof written by [`AncestryProof::to_json`].
    pub fn from_json(value: &Value) -> Result<AncestryProof> {
        let bad = |why: &str| ObjectError::InvalidArgument { reason: format!("ancestry proof JSON: {why}") };
        let key = value["key"].as_str().ok_or_else(|| bad("no \"key\" string"))?.to_owned();
        let mut steps = Vec::new();
        for step in value["steps"].as_array().ok_or_else(|| bad("no \"steps\" array"))? {
            let mut parents = Vec::new();
            for parent in step["parents"].as_array().ok_or_else(|| bad("a step without \"parents\""))? {
                let id: VersionId = parent["id"].as_str().ok_or_else(|| bad("a parent without \"id\""))?.parse()?;
                let depth = parent["depth"].as_u64().ok_or_else(|| bad("a parent without \"depth\""))?;
                parents.push(Version { id, depth });
            }
            let digest = step["digest"].as_str().ok_or_else(|| bad("a step without \"digest\""))?;
            let digest = digest.parse::<VersionId>()?.0;
            let follow =
                step["follow"].as_u64().and_then(|f| u8::try_from(f).ok()).ok_or_else(|| bad("bad \"follow\""))?;
            steps.push(ProofStep { parents, digest, follow });
        }
        Ok(AncestryProof { key, steps })
    }
}
