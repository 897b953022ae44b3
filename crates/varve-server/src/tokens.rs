//! Bearer tokens (RFC 6750): who may read and who may write, optionally per
//! namespace. Tokens are compared in constant time, so the time an answer
//! takes says nothing about how much of a guess was right.
//!
//! The token file holds one token per line:
//! `TOKEN ACCESS [NAMESPACE,…] [as=PRINCIPAL]`, where ACCESS is `read-only`
//! or `read-write`; `#` starts a comment. A token with `as=PRINCIPAL` acts as
//! that principal on versioned objects (their owners' read grants apply, and
//! it may not touch the object stores' raw `obj.*` logs); a token without it
//! is an administrator's.

use std::path::Path;

use subtle::ConstantTimeEq;

/// What a token allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads only: `GET` requests.
    ReadOnly,
    /// Reads and writes.
    ReadWrite,
}

/// One token and what it allows.
#[derive(Clone, Debug)]
struct Grant {
    token: Vec<u8>,
    access: Access,
    /// `None`: every namespace.
    namespaces: Option<Vec<String>>,
    /// `None`: an administrator token.
    principal: Option<String>,
}

/// The tokens a server accepts.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    grants: Vec<Grant>,
}

/// A token file that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: {message}")]
pub struct TokenFileError {
    /// The token file.
    pub path: String,
    /// The 1-based line of the mistake (0 when the file cannot be read).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Shortest token accepted: a guessable token is no protection.
pub const TOKEN_BYTES_MIN: usize = 8;

/// Longest principal name, in bytes: principals are stored in every version
/// and grant record they write, so a name is an identifier, not a document.
pub const PRINCIPAL_BYTES_MAX: usize = 128;

/// What a token line looks like, for error messages.
const LINE_FORM: &str = "`TOKEN ACCESS [NAMESPACE,…] [as=PRINCIPAL]` (ACCESS: read-only or read-write)";

/// Check a principal name: 1–[`PRINCIPAL_BYTES_MAX`] bytes of
/// `A-Z a-z 0-9 . _ - @`, so that it reads the same in a token file, a log
/// record and a message.
pub fn validate_principal(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("`as=` needs a principal name: write `as=NAME`".into());
    }
    if name.len() > PRINCIPAL_BYTES_MAX {
        return Err(format!("principal {name:?} is over {PRINCIPAL_BYTES_MAX} bytes"));
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))) {
        return Err(format!("principal {name:?} holds {bad:?}: use A-Z a-z 0-9 . _ - @"));
    }
    Ok(())
}

impl Tokens {
    /// Read a token file (see the module docs).
    pub fn read(path: &Path) -> Result<Tokens, TokenFileError> {
        let error = |line, message: String| TokenFileError { path: path.display().to_string(), line, message };
        let text = std::fs::read_to_string(path).map_err(|e| error(0, format!("cannot read the token file: {e}")))?;
        let tokens = Tokens::parse(&text).map_err(|(line, message)| error(line, message))?;
        if tokens.grants.is_empty() {
            return Err(error(0, "the token file holds no token: add a line `TOKEN read-write`".into()));
        }
        Ok(tokens)
    }

    /// Parse the text of a token file; `Err((line, message))`.
    pub fn parse(text: &str) -> Result<Tokens, (usize, String)> {
        let mut grants = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line_no = index + 1;
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut words = line.split_whitespace();
            let (Some(token), Some(access)) = (words.next(), words.next()) else {
                return Err((line_no, format!("expected {LINE_FORM}")));
            };
            if token.len() < TOKEN_BYTES_MIN {
                return Err((line_no, format!("a token has at least {TOKEN_BYTES_MIN} characters")));
            }
            let access = match access {
                "read-only" => Access::ReadOnly,
                "read-write" => Access::ReadWrite,
                other => return Err((line_no, format!("access {other:?}: write read-only or read-write"))),
            };
            let (mut namespaces, mut principal) = (None, None);
            for word in words {
                if let Some(name) = word.strip_prefix("as=") {
                    if principal.is_some() {
                        return Err((line_no, "a token acts as one principal: give `as=` once".into()));
                    }
                    validate_principal(name).map_err(|message| (line_no, message))?;
                    principal = Some(name.to_owned());
                } else if namespaces.is_none() && principal.is_none() {
                    let names: Vec<String> = word.split(',').filter(|n| !n.is_empty()).map(str::to_owned).collect();
                    for name in &names {
                        varve_log::validate_name(name, true).map_err(|e| (line_no, e.to_string()))?;
                    }
                    namespaces = Some(names);
                } else {
                    return Err((
                        line_no,
                        format!("unexpected {word:?}: expected {LINE_FORM}, namespaces separated by commas, no spaces"),
                    ));
                }
            }
            grants.push(Grant { token: token.as_bytes().to_vec(), access, namespaces, principal });
        }
        Ok(Tokens { grants })
    }

    /// Whether no token is configured.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// What `presented` allows, if it is a known token. Every grant is
    /// compared (in constant time), so timing does not reveal which matched.
    #[must_use]
    pub fn check(&self, presented: &[u8]) -> Option<Permission> {
        let mut found = None;
        for grant in &self.grants {
            if bool::from(grant.token.ct_eq(presented)) && found.is_none() {
                found = Some(Permission {
                    access: grant.access,
                    namespaces: grant.namespaces.clone(),
                    principal: grant.principal.clone(),
                });
            }
        }
        found
    }
}

/// What a presented token allows.
#[derive(Clone, Debug)]
pub struct Permission {
    /// Read only, or read and write.
    pub access: Access,
    /// The namespaces it reaches; `None` for every one.
    pub namespaces: Option<Vec<String>>,
    /// Who it acts as on versioned objects; `None` for an administrator.
    pub principal: Option<String>,
}

impl Permission {
    /// Everything: the permission when the server runs without tokens.
    #[must_use]
    pub fn all() -> Permission {
        Permission { access: Access::ReadWrite, namespaces: None, principal: None }
    }

    /// Whether it reaches `namespace`.
    #[must_use]
    pub fn reaches(&self, namespace: &str) -> bool {
        self.namespaces.as_ref().is_none_or(|names| names.iter().any(|n| n == namespace))
    }

    /// Whether it may read and write `log` as raw records. A principal's
    /// token may not touch an object store's logs (`obj.*`): reading them
    /// would bypass the owners' read grants, and writing them would forge
    /// versions, refs and grants. It goes through the object routes instead.
    #[must_use]
    pub fn may_touch_raw(&self, log: &str) -> bool {
        self.principal.is_none() || !log.starts_with(OBJECT_LOG_PREFIX)
    }
}

/// The prefix of every object store's logs (`obj.NAME.versions|refs|grants`,
/// named in `varve_object::store`).
pub const OBJECT_LOG_PREFIX: &str = "obj.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_parses_and_grants_what_it_says() {
        let tokens = Tokens::parse("# comment\nwriter-123 read-write\n\nreader-456 read-only sensors,app # two\n")
            .expect("parses");
        let writer = tokens.check(b"writer-123").expect("known");
        assert_eq!(writer.access, Access::ReadWrite);
        assert!(writer.reaches("anything"));
        let reader = tokens.check(b"reader-456").expect("known");
        assert_eq!(reader.access, Access::ReadOnly);
        assert!(reader.reaches("app") && !reader.reaches("other"));
        assert!(tokens.check(b"writer-12").is_none());
        assert!(tokens.check(b"writer-1234").is_none());
        assert!(tokens.check(b"").is_none());
    }

    #[test]
    fn bad_token_files_name_the_line() {
        assert_eq!(Tokens::parse("short read-write").err().map(|e| e.0), Some(1));
        assert_eq!(Tokens::parse("\nlong-enough write").err().map(|e| e.0), Some(2));
        assert_eq!(Tokens::parse("long-enough read-only a, b").err().map(|e| e.0), Some(1));
        assert_eq!(Tokens::parse("long-enough").err().map(|e| e.0), Some(1));
        assert_eq!(Tokens::parse("long-enough read-only _x,../y").err().map(|e| e.0), Some(1));
    }

    #[test]
    fn a_token_may_name_its_principal() {
        let text = "admin-123 read-write\nann-token read-write app as=ann\nbob-token read-only as=bob@example.org\n";
        let tokens = Tokens::parse(text).expect("parses");
        let admin = tokens.check(b"admin-123").expect("known");
        assert_eq!(admin.principal, None);
        assert!(admin.may_touch_raw("obj.docs.versions"));
        let ann = tokens.check(b"ann-token").expect("known");
        assert_eq!(ann.principal.as_deref(), Some("ann"));
        assert!(ann.reaches("app") && !ann.reaches("other"));
        assert!(!ann.may_touch_raw("obj.docs.versions") && ann.may_touch_raw("events"));
        let bob = tokens.check(b"bob-token").expect("known");
        assert_eq!((bob.access, bob.principal.as_deref()), (Access::ReadOnly, Some("bob@example.org")));
        assert!(bob.reaches("anything"));
    }

    #[test]
    fn bad_principals_name_the_line() {
        let error = |text: &str| Tokens::parse(text).expect_err("refused");
        let (line, message) = error("# tokens\nlong-enough read-write as=");
        assert_eq!(line, 2);
        assert!(message.contains("needs a principal name"), "{message}");
        let (line, message) = error("long-enough read-write\n\nlong-enough2 read-only app as=a/b");
        assert_eq!(line, 3);
        assert!(message.contains("\"a/b\"") && message.contains("'/'"), "{message}");
        assert_eq!(error(&format!("long-enough read-only as={}", "x".repeat(129))).0, 1);
        assert!(error("long-enough read-only as=ann as=bob").1.contains("once"));
        assert!(error("long-enough read-only as=ann app").1.contains("unexpected \"app\""));
        assert!(error("long-enough read-only app other").1.contains("unexpected \"other\""));
    }
}
