//! Versioned objects over HTTP: the routes under
//! `/v1/namespaces/NS/objects/STORE/…` (`docs/http.md`, Versioned objects),
//! each one call of [`varve_object::ObjectStore`].
//!
//! The server opens each object store once and keeps it (its index of the
//! DAG, its refs, its grants, its value cache) in [`ObjectStores`]. Every
//! request acts as its token's principal ([`ObjectStore::as_principal`]), so
//! the owners' read grants are enforced here, by the server, and not by
//! cooperating clients; an administrator token (or a server without tokens)
//! acts as the administrator, who reads everything. A principal's token may
//! not read or write the stores' raw `obj.*` logs (checked in
//! [`crate::routes`]), which would go around the grants.
//!
//! Wherever a route takes a version it accepts a ref name of the key, a
//! unique id prefix of 4 or more hex characters, or a full id
//! ([`ObjectStore::resolve`]). Versions are `{"id": HEX, "depth": N}` in
//! JSON; values travel raw in puts and gets, and as base64 inside JSON.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::extract::{RawQuery, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};
use varve_log::{LogConfig, LogError, Seq};
use varve_object::record::GrantKind;
use varve_object::{MergeFn, ObjectError, ObjectOptions, ObjectStore, Version, VersionId};
use varve_runtime::RuntimeError;

use crate::app::Shared;
use crate::error::ApiError;
use crate::namespaces::{Namespaces, Served};
use crate::routes::{blocking, parse_json, query, read_body, require_json, Params, JSON_OVERHEAD_BYTES};
use crate::tokens::Permission;
use crate::wire::encode_value;

/// `history`'s default `m`, as `varve object history`'s.
const HISTORY_VERSIONS_DEFAULT: usize = 32;
/// The most versions one `history` answer lists: an answer is built whole in
/// memory (with `values=true`, every value too), so it is bounded; page on
/// from the last version listed.
pub const HISTORY_VERSIONS_MAX: usize = 10_000;
/// The most versions one grant names.
pub const GRANT_VERSIONS_MAX: usize = 10_000;

/// The object stores the server has opened, by (namespace, store).
#[derive(Default)]
pub struct ObjectStores {
    open: Mutex<HashMap<(String, String), ObjectStore>>,
}

impl ObjectStores {
    /// Store `name` of namespace `ns` for a read: `object_store_not_found`
    /// if it was never written (a read creates nothing).
    fn for_read(&self, namespaces: &Namespaces, ns: &str, name: &str) -> Result<ObjectStore, ApiError> {
        validate_store_name(name)?;
        if let Some(store) = self.cached(ns, name) {
            return Ok(store);
        }
        let served = namespaces.for_read(ns)?;
        match served.ns().log_info(&versions_log(name)) {
            Ok(_) => self.open(served, ns, name),
            Err(LogError::LogNotFound { .. }) => {
                Err(ApiError::ObjectStoreNotFound { namespace: ns.to_owned(), store: name.to_owned() })
            }
            Err(other) => Err(other.into()),
        }
    }

    /// Store `name` of namespace `ns` for a write, created (with its
    /// namespace) if needed.
    fn for_write(&self, namespaces: &Namespaces, ns: &str, name: &str) -> Result<ObjectStore, ApiError> {
        validate_store_name(name)?;
        if let Some(store) = self.cached(ns, name) {
            return Ok(store);
        }
        let served = namespaces.for_write(ns)?;
        // Through the namespace's writer, so a runtime the server hosts
        // learns of the logs as of any other create.
        for suffix in ["versions", "refs", "grants"] {
            served.writer.create_log(&format!("obj.{name}.{suffix}"), LogConfig::unbounded())?;
        }
        self.open(served, ns, name)
    }

    /// Forget every store, so that the namespaces they read can close.
    pub fn close_all(&self) {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    fn cached(&self, ns: &str, name: &str) -> Option<ObjectStore> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).get(&(ns.to_owned(), name.to_owned())).cloned()
    }

    fn open(&self, served: Arc<Served>, ns: &str, name: &str) -> Result<ObjectStore, ApiError> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = (ns.to_owned(), name.to_owned());
        if let Some(store) = open.get(&slot) {
            return Ok(store.clone());
        }
        let namespace = Arc::clone(served.writer.namespace());
        // New versions go through the namespace's writer, so that handlers
        // subscribed to the versions log fire as for any other append.
        let append = move |log: &str, value: &[u8]| -> varve_object::Result<Seq> {
            match served.writer.append(&[(log, value)], None, None) {
                Ok(appended) => appended.seqs.first().copied().ok_or_else(|| {
                    ObjectError::writer(std::io::Error::other("the writer acknowledged no seq for one record"))
                }),
                Err(RuntimeError::Log(error)) => Err(ObjectError::Log(error)),
                Err(error) => Err(ObjectError::writer(error)),
            }
        };
        let options = ObjectOptions { writer: Some(Arc::new(append)), ..ObjectOptions::default() };
        let store = ObjectStore::open_with(namespace, name, options)?;
        open.insert(slot, store.clone());
        Ok(store)
    }
}

fn versions_log(store: &str) -> String {
    format!("obj.{store}.versions")
}

/// A store's name is part of its logs' names, so it follows the naming
/// rules and leaves room for the longest suffix.
fn validate_store_name(name: &str) -> Result<(), ApiError> {
    varve_log::validate_name(name, false)?;
    varve_log::validate_name(&format!("obj.{name}.versions"), false)?;
    Ok(())
}

/// Run `work` on a blocking thread with the request's store, as the token's
/// principal (the administrator for an administrator token).
async fn with_store<T: Send + 'static>(
    state: &Shared,
    permission: &Permission,
    params: &Params,
    write: bool,
    work: impl FnOnce(&ObjectStore) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let state = Arc::clone(state);
    let principal = permission.principal.clone();
    let (ns, name) = (params.ns().to_owned(), params.named("store").to_owned());
    blocking(move || {
        let store = if write {
            state.objects.for_write(&state.namespaces, &ns, &name)?
        } else {
            state.objects.for_read(&state.namespaces, &ns, &name)?
        };
        let store = match principal {
            Some(principal) => store.as_principal(&principal)?,
            None => store,
        };
        work(&store)
    })
    .await
}

fn versions_json(key: &str, versions: &[Version]) -> Response {
    Json(json!({"key": key, "versions": versions.iter().map(Version::to_json).collect::<Vec<_>>()})).into_response()
}

/// A version named by a ref of `key`, a unique id prefix or a full id.
fn resolve(store: &ObjectStore, key: &str, text: &str) -> Result<Version, ApiError> {
    Ok(store.resolve(key, text)?)
}

/// A query parameter the route needs.
fn required<'a>(query: &'a HashMap<String, String>, name: &str) -> Result<&'a str, ApiError> {
    query.get(name).map(String::as_str).ok_or_else(|| ApiError::invalid(format!("this request needs ?{name}=VERSION")))
}

fn parse_bool(name: &str, text: &str) -> Result<bool, ApiError> {
    match text {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(ApiError::invalid(format!("{name}={text:?}: write true or false"))),
    }
}

// ------------------------------------------------------------ writes

/// `POST …/keys/KEY/versions[?base=V]`: store the body as a new version.
pub async fn put(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
    RawQuery(raw): RawQuery,
    request: Request,
) -> Result<Response, ApiError> {
    let mut query = query(raw.as_deref(), &["base"])?;
    let (parts, body) = request.into_parts();
    let value = read_body(body, &parts.headers, "value", state.limits.record_bytes_max).await?;
    let key = params.named("key").to_owned();
    let base = query.remove("base");
    let version = with_store(&state, &permission, &params, true, move |store| {
        let base = base.map(|text| resolve(store, &key, &text)).transpose()?;
        Ok(store.put(&key, base.as_ref().map(|b| &b.id), &value)?)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(json!({"key": params.named("key"), "version": version.to_json()}))).into_response())
}

/// The merge functions `?with=` names.
fn merge_function(name: &str) -> Result<&'static dyn MergeFn, ApiError> {
    varve_object::builtin(name).ok_or_else(|| {
        ApiError::invalid(format!("with={name:?}: write one of {}", varve_object::BUILTIN_MERGES.join(", ")))
    })
}

/// `POST …/keys/KEY/merge?left=V&right=V[&with=FUNCTION]`: a version with
/// two parents, whose value is the body, or what `with` computes (then the
/// body is empty).
pub async fn merge(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
    RawQuery(raw): RawQuery,
    request: Request,
) -> Result<Response, ApiError> {
    let query = query(raw.as_deref(), &["left", "right", "with"])?;
    let (left, right) = (required(&query, "left")?.to_owned(), required(&query, "right")?.to_owned());
    let function = query.get("with").map(|name| merge_function(name)).transpose()?;
    let (parts, body) = request.into_parts();
    let value = read_body(body, &parts.headers, "value", state.limits.record_bytes_max).await?;
    if function.is_some() && !value.is_empty() {
        return Err(ApiError::invalid("a merge takes a value in its body or ?with=FUNCTION, not both"));
    }
    let key = params.named("key").to_owned();
    let version = with_store(&state, &permission, &params, true, move |store| {
        let (left, right) = (resolve(store, &key, &left)?, resolve(store, &key, &right)?);
        Ok(match function {
            Some(function) => store.merge_with(&key, &left.id, &right.id, function)?,
            None => store.merge(&key, &left.id, &right.id, &value)?,
        })
    })
    .await?;
    Ok((StatusCode::CREATED, Json(json!({"key": params.named("key"), "version": version.to_json()}))).into_response())
}

/// `PUT …/keys/KEY/refs/NAME?to=V[&expected=V|none][&kind=branch|tag]`:
/// move (or create) a branch if it is at `expected` now (default: wherever
/// it is), or create a tag. A branch moved by someone else first is `409 ref_moved`.
pub async fn set_ref(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = query(raw.as_deref(), &["to", "expected", "kind"])?;
    let to = required(&query, "to")?.to_owned();
    let expected = query.get("expected").cloned();
    let tag = match query.get("kind").map_or("branch", String::as_str) {
        "branch" => false,
        "tag" => true,
        other => return Err(ApiError::invalid(format!("kind={other:?}: write branch or tag"))),
    };
    if tag && expected.is_some() {
        return Err(ApiError::invalid("a tag is set once: ?expected= is for branches"));
    }
    let (key, name) = (params.named("key").to_owned(), params.named("name").to_owned());
    let (key_for, name_for) = (key.clone(), name.clone());
    let version = with_store(&state, &permission, &params, true, move |store| {
        let (key, name) = (key_for, name_for);
        let to = resolve(store, &key, &to)?;
        if tag {
            store.set_tag(&key, &name, &to.id)?;
            return Ok(to);
        }
        let expected = match expected.as_deref() {
            // "none": the branch must not exist yet.
            Some("none") => None,
            Some(text) => Some(resolve(store, &key, text)?.id),
            None => store.refs(&key)?.get(&name).map(|t| t.version.id),
        };
        store.set_branch(&key, &name, expected.as_ref(), &to.id)?;
        Ok(to)
    })
    .await?;
    let kind = if tag { "tag" } else { "branch" };
    Ok(Json(json!({"key": key, "ref": name, "kind": kind, "version": version.to_json()})).into_response())
}

/// `DELETE …/keys/KEY/refs/NAME[?expected=V]`: delete a ref if it is at
/// `expected` (default: wherever it is).
pub async fn delete_ref(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = query(raw.as_deref(), &["expected"])?;
    let expected = query.get("expected").cloned();
    let (key, name) = (params.named("key").to_owned(), params.named("name").to_owned());
    let (key_for, name_for) = (key.clone(), name.clone());
    with_store(&state, &permission, &params, true, move |store| {
        let (key, name) = (key_for, name_for);
        let expected = match expected {
            Some(text) => resolve(store, &key, &text)?.id,
            None => match store.refs(&key)?.get(&name) {
                Some(target) => target.version.id,
                None => return Err(ApiError::invalid(format!("key {key:?} has no ref {name:?}"))),
            },
        };
        Ok(store.delete_ref(&key, &name, &expected)?)
    })
    .await?;
    Ok(Json(json!({"key": key, "ref": name, "kind": "deleted", "version": null})).into_response())
}

/// `POST …/keys/KEY/restrict`: only the owner and the principals it grants
/// read the key from now on. Only its owner (or an administrator) may.
pub async fn restrict(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    read_body(body, &parts.headers, "restrict body", JSON_OVERHEAD_BYTES).await?;
    let key = params.named("key").to_owned();
    let key_for = key.clone();
    with_store(&state, &permission, &params, true, move |store| Ok(store.restrict(&key_for)?)).await?;
    Ok(Json(json!({"key": key, "restricted": true})).into_response())
}

/// The body of a grant.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantJson {
    principal: String,
    versions: Vec<String>,
    #[serde(default)]
    with_ancestors: bool,
}

/// `POST …/keys/KEY/grants` with `{"principal": P, "versions": [V, …],
/// "with_ancestors": bool}`: let P read those versions (and their
/// ancestors). Only the key's owner (or an administrator) may.
pub async fn grant(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    require_json(&parts.headers, false)?;
    let body = read_body(body, &parts.headers, "grant", JSON_OVERHEAD_BYTES).await?;
    let grant: GrantJson = parse_json(&body)?;
    if grant.versions.len() > GRANT_VERSIONS_MAX {
        return Err(ApiError::invalid(format!("a grant names at most {GRANT_VERSIONS_MAX} versions")));
    }
    let key = params.named("key").to_owned();
    let key_for = key.clone();
    let GrantJson { principal, versions, with_ancestors } = grant;
    let principal_for = principal.clone();
    let ids = with_store(&state, &permission, &params, true, move |store| {
        let key = key_for;
        let ids: Vec<VersionId> =
            versions.iter().map(|text| resolve(store, &key, text).map(|v| v.id)).collect::<Result<_, _>>()?;
        store.grant(&key, &principal_for, &ids, with_ancestors)?;
        Ok(ids)
    })
    .await?;
    let versions: Vec<String> = ids.iter().map(VersionId::to_hex).collect();
    Ok((
        StatusCode::CREATED,
        Json(json!({"key": key, "principal": principal, "versions": versions, "with_ancestors": with_ancestors})),
    )
        .into_response())
}

// ------------------------------------------------------------ reads

/// `GET …/objects/STORE/keys`: every key with at least one version.
pub async fn keys(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
) -> Result<Response, ApiError> {
    let keys = with_store(&state, &permission, &params, false, |store| Ok(store.keys()?)).await?;
    Ok(Json(json!({"keys": keys})).into_response())
}

/// `GET …/keys/KEY/heads`: the versions nothing derives from (that the principal may read).
pub async fn heads(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
) -> Result<Response, ApiError> {
    let key = params.named("key").to_owned();
    let key_for = key.clone();
    let heads = with_store(&state, &permission, &params, false, move |store| Ok(store.heads(&key_for)?)).await?;
    Ok(versions_json(&key, &heads))
}

/// `GET …/keys/KEY/versions`: every version the principal may read, in the order written.
pub async fn versions(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
) -> Result<Response, ApiError> {
    let key = params.named("key").to_owned();
    let key_for = key.clone();
    let all = with_store(&state, &permission, &params, false, move |store| Ok(store.versions(&key_for)?)).await?;
    Ok(versions_json(&key, &all))
}

/// Resolve the path's version and run `work` on it.
async fn on_version<T: Send + 'static>(
    state: &Shared,
    permission: &Permission,
    params: &Params,
    work: impl FnOnce(&ObjectStore, &str, Version) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let (key, text) = (params.named("key").to_owned(), params.named("version").to_owned());
    with_store(state, permission, params, false, move |store| {
        let version = resolve(store, &key, &text)?;
        work(store, &key, version)
    })
    .await
}

/// `GET …/keys/KEY/versions/V`: the value's bytes, with `Varve-Version`
/// (the full id) and `Varve-Depth`.
pub async fn get(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
) -> Result<Response, ApiError> {
    let (version, value) =
        on_version(&state, &permission, &params, |store, key, version| Ok((version, store.get(key, &version.id)?)))
            .await?;
    let mut response = Body::from(value).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    let id = HeaderValue::from_str(&version.id.to_hex()).map_err(|e| ApiError::invalid(e.to_string()))?;
    headers.insert("varve-version", id);
    headers.insert("varve-depth", HeaderValue::from(version.depth));
    Ok(response)
}

/// `GET …/keys/KEY/versions/V/info`: its parents, author, seq and storage.
pub async fn info(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
) -> Result<Response, ApiError> {
    let info =
        on_version(&state, &permission, &params, |store, key, version| Ok(store.info(key, &version.id)?)).await?;
    Ok(Json(info.to_json()).into_response())
}

/// `GET …/keys/KEY/versions/V/previous`: its parents.
pub async fn previous(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
) -> Result<Response, ApiError> {
    let parents =
        on_version(&state, &permission, &params, |store, key, version| Ok(store.previous(key, &version.id)?)).await?;
    Ok(versions_json(params.named("key"), &parents))
}

/// `GET …/keys/KEY/versions/V/history[?m=N][&values=true]`: up to `m`
/// predecessors, nearest first (see [`ObjectStore::history`]); with
/// `values`, each with its value in base64.
pub async fn history(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = query(raw.as_deref(), &["m", "values"])?;
    let m = match query.get("m") {
        None => HISTORY_VERSIONS_DEFAULT,
        Some(text) => text.parse::<usize>().ok().filter(|m| *m <= HISTORY_VERSIONS_MAX).ok_or_else(|| {
            ApiError::invalid(format!("m={text:?}: write a whole number up to {HISTORY_VERSIONS_MAX}"))
        })?,
    };
    let values = query.get("values").map(|text| parse_bool("values", text)).transpose()?.unwrap_or(false);
    let list = on_version(&state, &permission, &params, move |store, key, version| {
        if !values {
            return Ok(store.history(key, &version.id, m)?.iter().map(Version::to_json).collect::<Vec<_>>());
        }
        let history = store.history_values(key, &version.id, m)?;
        Ok(history
            .iter()
            .map(|(v, value)| json!({"id": v.id.to_hex(), "depth": v.depth, "value": encode_value(value)}))
            .collect())
    })
    .await?;
    Ok(Json(json!({"key": params.named("key"), "versions": list})).into_response())
}

/// `GET …/keys/KEY/versions/V/verify`: recompute V and every ancestor from
/// the stored bytes; a mismatch is `500 tampered`.
pub async fn verify(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
) -> Result<Response, ApiError> {
    let (version, report) =
        on_version(&state, &permission, &params, |store, key, version| Ok((version, store.verify(key, &version.id)?)))
            .await?;
    Ok(Json(json!({"key": params.named("key"), "version": version.to_json(), "versions_checked": report.versions}))
        .into_response())
}

/// `GET …/keys/KEY/prove?ancestor=V&head=V`: the ancestry proof as JSON
/// (as `varve object prove` writes it; `varve object check-proof` checks it).
pub async fn prove(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = query(raw.as_deref(), &["ancestor", "head"])?;
    let (ancestor, head) = (required(&query, "ancestor")?.to_owned(), required(&query, "head")?.to_owned());
    let key = params.named("key").to_owned();
    let proof = with_store(&state, &permission, &params, false, move |store| {
        let (ancestor, head) = (resolve(store, &key, &ancestor)?, resolve(store, &key, &head)?);
        Ok(store.prove(&key, &ancestor.id, &head.id)?.to_json())
    })
    .await?;
    Ok(Json(proof).into_response())
}

/// `GET …/keys/KEY/refs`: the key's branches and tags.
pub async fn refs(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
) -> Result<Response, ApiError> {
    let key = params.named("key").to_owned();
    let key_for = key.clone();
    let refs = with_store(&state, &permission, &params, false, move |store| Ok(store.refs(&key_for)?)).await?;
    let list: Vec<Value> = refs
        .iter()
        .map(|(name, t)| {
            json!({"name": name, "kind": if t.tag { "tag" } else { "branch" }, "version": t.version.to_json()})
        })
        .collect();
    Ok(Json(json!({"key": key, "refs": list})).into_response())
}

/// `GET …/keys/KEY/grants`: the key's owner, and every restriction and grant in the order issued.
pub async fn grants(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
) -> Result<Response, ApiError> {
    let key = params.named("key").to_owned();
    let key_for = key.clone();
    let (owner, entries) = with_store(&state, &permission, &params, false, move |store| {
        Ok((store.owner(&key_for)?, store.grants(&key_for)?))
    })
    .await?;
    let list: Vec<Value> = entries
        .iter()
        .map(|e| {
            let r = &e.record;
            json!({
                "seq": e.seq,
                "kind": match r.kind { GrantKind::Restrict => "restrict", GrantKind::Grant => "grant" },
                "principal": r.principal,
                "versions": r.versions.iter().map(VersionId::to_hex).collect::<Vec<_>>(),
                "with_ancestors": r.with_ancestors,
                "author": r.author,
                "unix_ms": r.unix_ms,
            })
        })
        .collect();
    Ok(Json(json!({"key": key, "owner": owner, "grants": list})).into_response())
}
