//! Versioned objects through `varve serve`'s object routes, with a token
//! file whose tokens name principals: the server, not the client, enforces
//! the owners' read grants, and a principal's token cannot go around them
//! through the raw `obj.*` logs. Requests are sent with curl, as a user
//! would, and the curl examples of `docs/http.md` (Versioned objects) are
//! run as written.

mod common;

use std::io::Write as _;
use std::process::{Command, Stdio};

use base64::Engine as _;
use common::Env;
use serde_json::{json, Value};

const ADMIN: &str = "admin-token-1";
const ANN: &str = "ann-token-1";
const BOB: &str = "bob-token-1";

struct Api {
    http: String,
}

/// An answer: its status and body.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: status {} body {}", self.status, String::from_utf8_lossy(&self.body)))
    }

    /// The body as JSON, after checking the status.
    fn expect(&self, status: u16) -> Value {
        assert_eq!(self.status, status, "body: {}", String::from_utf8_lossy(&self.body));
        if self.body.is_empty() {
            Value::Null
        } else {
            self.json()
        }
    }

    /// The error kind of a refusal with `status`.
    fn error(&self, status: u16) -> String {
        let body = self.expect(status);
        body["error"].as_str().unwrap_or_else(|| panic!("no error kind in {body}")).to_owned()
    }
}

impl Api {
    /// `METHOD PATH` (under `/v1/namespaces/app/`) with `token` and `body`.
    fn call(&self, method: &str, path: &str, token: &str, body: Option<(&str, &[u8])>) -> Answer {
        let url = format!("{}/v1/namespaces/app/{path}", self.http);
        let mut command = Command::new("curl");
        command.args(["-s", "-X", method, "-w", "\n%{http_code}", "-H", &format!("Authorization: Bearer {token}")]);
        if let Some((content_type, _)) = body {
            command.args(["-H", &format!("Content-Type: {content_type}"), "--data-binary", "@-"]);
        }
        let mut child =
            command.arg(&url).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("curl (is it installed?)");
        let mut stdin = child.stdin.take().expect("stdin");
        if let Some((_, bytes)) = body {
            stdin.write_all(bytes).expect("send the body to curl");
        }
        drop(stdin);
        let output = child.wait_with_output().expect("curl");
        assert!(output.status.success(), "curl {method} {url} failed: {:?}", output.status);
        let mut out = output.stdout;
        let at = out.iter().rposition(|&b| b == b'\n').expect("the status line curl adds");
        let status = std::str::from_utf8(&out[at + 1..]).expect("ascii").trim().parse().expect("a status");
        out.truncate(at);
        Answer { status, body: out }
    }

    fn get(&self, path: &str, token: &str) -> Answer {
        self.call("GET", path, token, None)
    }

    fn put_value(&self, key: &str, token: &str, base: Option<&str>, value: &[u8]) -> String {
        let query = base.map(|b| format!("?base={b}")).unwrap_or_default();
        let answer = self.call(
            "POST",
            &format!("objects/docs/keys/{key}/versions{query}"),
            token,
            Some(("application/octet-stream", value)),
        );
        let body = answer.expect(201);
        assert_eq!(body["key"], key);
        body["version"]["id"].as_str().expect("an id").to_owned()
    }
}

fn ids(answer: &Value) -> Vec<String> {
    answer["versions"].as_array().expect("versions").iter().map(|v| v["id"].as_str().expect("id").to_owned()).collect()
}

/// The token file (its first `text` block) and the `sh` block of
/// docs/http.md's Versioned objects: (command, expected output).
fn doc_examples() -> (String, Vec<(String, String)>) {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/http.md")).expect("docs/http.md");
    let section = doc.split("\n## Versioned objects\n").nth(1).expect("a Versioned objects section");
    let section = section.split("\n## ").next().expect("the section");
    let block = |fence: &str| {
        section.split(fence).nth(1).and_then(|b| b.split("```").next()).expect("a fenced block").to_owned()
    };
    let tokens = block("```text\n");
    let mut examples: Vec<(String, String)> = Vec::new();
    for line in block("```sh\n").lines() {
        if let Some(expected) = line.strip_prefix('#') {
            let (_, output) = examples.last_mut().expect("a command before its output");
            output.push_str(expected.strip_prefix(' ').unwrap_or(expected));
            output.push('\n');
        } else if !line.trim().is_empty() {
            examples.push((line.to_owned(), String::new()));
        }
    }
    (tokens, examples)
}

#[test]
fn the_curl_examples_of_versioned_objects_in_the_http_guide_answer_as_written() {
    let env = Env::new();
    let (tokens, examples) = doc_examples();
    assert!(examples.len() >= 10, "{examples:?}");
    let path = env.temp.path().join("tokens");
    std::fs::write(&path, tokens).expect("token file");
    let served = env.serve(&["--token-file", path.to_str().expect("utf-8 path")]);
    for (command, expected) in examples {
        let output = Command::new("bash").arg("-c").arg(&command).env("VARVE", served.http()).output().expect("bash");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            stdout.trim_end(),
            expected.trim_end(),
            "{command}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// A `varve serve` with an administrator's token and Ann's and Bob's, and its API.
fn serve_with_tokens(env: &Env) -> (common::Served, Api) {
    let tokens = env.temp.path().join("tokens");
    std::fs::write(
        &tokens,
        format!(
            "{ADMIN} read-write\n{ANN} read-write app as=ann\n{BOB} read-write as=bob # same rights, other principal\n"
        ),
    )
    .expect("token file");
    let served = env.serve(&["--token-file", tokens.to_str().expect("utf-8 path")]);
    let api = Api { http: served.http() };
    (served, api)
}

#[test]
fn the_server_enforces_grants_for_the_principal_its_tokens_name() {
    let env = Env::new();
    let (_served, api) = serve_with_tokens(&env);

    // Ann writes three versions of her key and makes it private.
    let v1 = api.put_value("plan", ANN, None, b"draft");
    let v2 = api.put_value("plan", ANN, Some(&v1[..8]), b"review");
    let v3 = api.put_value("plan", ANN, Some(&v2), b"final");
    assert_eq!(api.call("POST", "objects/docs/keys/plan/restrict", ANN, None).expect(200)["restricted"], true);
    let grants = api.get("objects/docs/keys/plan/grants", ADMIN).expect(200);
    assert_eq!(grants["owner"], "ann");
    assert_eq!(grants["grants"][0]["kind"], "restrict");
    let info = api.get(&format!("objects/docs/keys/plan/versions/{v2}/info"), ANN).expect(200);
    assert_eq!((info["author"].as_str(), info["version"]["depth"].as_u64()), (Some("ann"), Some(2)));
    assert_eq!(ids(&json!({"versions": info["parents"]})), vec![v1.clone()]);

    // Bob may read none of it.
    let refused = api.get(&format!("objects/docs/keys/plan/versions/{v1}"), BOB);
    assert_eq!(refused.error(403), "forbidden");
    let body = refused.json();
    assert_eq!((body["principal"].as_str(), body["owner"].as_str()), (Some("bob"), Some("ann")));
    assert_eq!(api.get(&format!("objects/docs/keys/plan/versions/{v3}/history"), BOB).error(403), "forbidden");
    assert_eq!(ids(&api.get("objects/docs/keys/plan/versions", BOB).expect(200)), Vec::<String>::new());
    // Nor grant himself anything, nor restrict her key: only the owner changes grants.
    let grant_v3 = json!({"principal": "bob", "versions": [v3], "with_ancestors": true}).to_string();
    let refused =
        api.call("POST", "objects/docs/keys/plan/grants", BOB, Some(("application/json", grant_v3.as_bytes())));
    assert_eq!(refused.error(403), "forbidden", "he may not even name a version he cannot read");
    assert_eq!(api.call("POST", "objects/docs/keys/plan/restrict", BOB, None).error(403), "not_owner");

    // Ann grants Bob v2 with its ancestors: he reads v2 and v1, not v3.
    let grant_v2 = json!({"principal": "bob", "versions": [v2], "with_ancestors": true}).to_string();
    let granted =
        api.call("POST", "objects/docs/keys/plan/grants", ANN, Some(("application/json", grant_v2.as_bytes())));
    assert_eq!(granted.expect(201)["versions"], json!([v2]));
    let got = api.get(&format!("objects/docs/keys/plan/versions/{v2}"), BOB);
    assert_eq!((got.status, got.body.as_slice()), (200, &b"review"[..]));
    let got = api.get(&format!("objects/docs/keys/plan/versions/{}", &v1[..6]), BOB);
    assert_eq!((got.status, got.body.as_slice()), (200, &b"draft"[..]));
    let history = api.get(&format!("objects/docs/keys/plan/versions/{v2}/history?values=true"), BOB).expect(200);
    assert_eq!(ids(&history), vec![v1.clone()]);
    assert_eq!(history["versions"][0]["value"], base64::engine::general_purpose::STANDARD.encode(b"draft"));
    assert_eq!(api.get(&format!("objects/docs/keys/plan/versions/{v3}"), BOB).error(403), "forbidden");
    assert_eq!(ids(&api.get("objects/docs/keys/plan/versions", BOB).expect(200)), vec![v1.clone(), v2.clone()]);

    // Bob cannot go around the grants through the raw logs, however he spells them.
    for path in [
        "logs/obj.docs.versions/records",
        "logs/obj.docs.versions/records/1",
        "logs/%6Fbj.docs.versions/records/1",
        "logs/obj.docs.grants",
        "logs/obj.docs.refs/watch",
    ] {
        let raw = api.get(path, BOB);
        assert_eq!(raw.error(403), "forbidden", "{path}");
        assert!(raw.json()["message"].as_str().expect("message").contains("/objects/"), "{path}");
    }
    let forged = json!({"records": [{"log": "obj.docs.grants", "value": "AA=="}]}).to_string();
    assert_eq!(api.call("POST", "batch", BOB, Some(("application/json", forged.as_bytes()))).error(403), "forbidden");
    assert_eq!(api.call("DELETE", "logs/obj.docs.grants", BOB, None).error(403), "forbidden");
    let logs = api.get("logs", BOB).expect(200);
    assert!(logs["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .all(|l| !l["name"].as_str().unwrap_or("").starts_with("obj.")));

    // An administrator reads everything, raw logs included.
    let got = api.get(&format!("objects/docs/keys/plan/versions/{v3}"), ADMIN);
    assert_eq!((got.status, got.body.as_slice()), (200, &b"final"[..]));
    let scan = api.get("logs/obj.docs.versions/records", ADMIN);
    assert_eq!(scan.status, 200);
    assert!(String::from_utf8_lossy(&scan.body).contains("{\"end\":true,\"records\":3}"));
    assert_eq!(
        api.get(&format!("objects/docs/keys/plan/versions/{v3}/verify"), ADMIN).expect(200)["versions_checked"],
        3
    );
    let proof = api.get(&format!("objects/docs/keys/plan/prove?ancestor={v1}&head={v3}"), ADMIN).expect(200);
    assert_eq!(proof["steps"].as_array().map(Vec::len), Some(3));
}

#[test]
fn refs_merges_and_unknown_versions_answer_with_their_status() {
    let env = Env::new();
    let (_served, api) = serve_with_tokens(&env);
    let v1 = api.put_value("plan", ANN, None, b"draft");
    let v2 = api.put_value("plan", ANN, Some(&v1), b"review");
    let v3 = api.put_value("plan", ANN, Some(&v2), b"final");

    // A branch moves by compare-and-set: a stale expectation is 409.
    let set = api.call("PUT", &format!("objects/docs/keys/plan/refs/main?to={v1}&expected=none"), ANN, None);
    assert_eq!(set.expect(200)["version"]["id"], v1.as_str());
    let moved = api.call("PUT", &format!("objects/docs/keys/plan/refs/main?to={v3}&expected={v2}"), ANN, None);
    assert_eq!(moved.error(409), "ref_moved");
    assert!(moved.json()["message"].as_str().expect("message").contains("re-read it and retry"));
    api.call("PUT", &format!("objects/docs/keys/plan/refs/main?to={v3}&expected={v1}"), ANN, None).expect(200);
    let got = api.get("objects/docs/keys/plan/versions/main", ANN);
    assert_eq!((got.status, got.body.as_slice()), (200, &b"final"[..]));
    assert_eq!(api.get("objects/docs/keys/plan/refs", ANN).expect(200)["refs"][0]["name"], "main");

    // Two branches of a map, merged by the server's map merge.
    let root = api.put_value("svc", ANN, None, br#"{"port":80,"tls":false}"#);
    let left = api.put_value("svc", ANN, Some(&root), br#"{"port":8080,"tls":false}"#);
    let right = api.put_value("svc", ANN, Some(&root), br#"{"port":80,"tls":true}"#);
    assert_eq!(api.get("objects/docs/keys/svc/heads", ANN).expect(200)["versions"].as_array().map(Vec::len), Some(2));
    let merged =
        api.call("POST", &format!("objects/docs/keys/svc/merge?left={left}&right={right}&with=map"), ANN, None);
    let merged = merged.expect(201)["version"]["id"].as_str().expect("id").to_owned();
    let value: Value =
        serde_json::from_slice(&api.get(&format!("objects/docs/keys/svc/versions/{merged}"), ANN).body).expect("JSON");
    assert_eq!(value, json!({"port": 8080, "tls": true}));
    let previous = api.get(&format!("objects/docs/keys/svc/versions/{merged}/previous"), ANN).expect(200);
    assert_eq!(ids(&previous), vec![left, right]);
    assert_eq!(api.get("objects/docs/keys", ADMIN).expect(200)["keys"], json!(["plan", "svc"]));

    // What does not exist is 404.
    let unknown = "0".repeat(64);
    assert_eq!(api.get(&format!("objects/docs/keys/plan/versions/{unknown}"), ADMIN).error(404), "version_not_found");
    assert_eq!(api.get("objects/docs/keys/plan/versions/abcdef12", ANN).error(404), "version_not_found");
    assert_eq!(api.get("objects/nothing/keys", ADMIN).error(404), "object_store_not_found");
}
