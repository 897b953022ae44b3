//! Bearer tokens (RFC 6750): who may read and who may write, optionally per
//! namespace. Tokens are compared in constant time, so the time an answer
//! takes says nothing about how much of a guess was right.
//!
//! The token file holds one token per line: `TOKEN ACCESS [NAMESPACE,…]`,
//! where ACCESS is `read-only` or `read-write`; `#` starts a comment.

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
                return Err((
                    line_no,
                    "expected `TOKEN ACCESS [NAMESPACE,…]` (ACCESS: read-only or read-write)".into(),
                ));
            };
            if token.len() < TOKEN_BYTES_MIN {
                return Err((line_no, format!("a token has at least {TOKEN_BYTES_MIN} characters")));
            }
            let access = match access {
                "read-only" => Access::ReadOnly,
                "read-write" => Access::ReadWrite,
                other => return Err((line_no, format!("access {other:?}: write read-only or read-write"))),
            };
            let namespaces = match words.next() {
                None => None,
                Some(list) => {
                    let names: Vec<String> = list.split(',').filter(|n| !n.is_empty()).map(str::to_owned).collect();
                    for name in &names {
                        varve_log::validate_name(name, true).map_err(|e| (line_no, e.to_string()))?;
                    }
                    Some(names)
                }
            };
            if let Some(extra) = words.next() {
                return Err((line_no, format!("unexpected {extra:?}: separate namespaces with commas, no spaces")));
            }
            grants.push(Grant { token: token.as_bytes().to_vec(), access, namespaces });
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
                found = Some(Permission { access: grant.access, namespaces: grant.namespaces.clone() });
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
}

impl Permission {
    /// Everything: the permission when the server runs without tokens.
    #[must_use]
    pub fn all() -> Permission {
        Permission { access: Access::ReadWrite, namespaces: None }
    }

    /// Whether it reaches `namespace`.
    #[must_use]
    pub fn reaches(&self, namespace: &str) -> bool {
        self.namespaces.as_ref().is_none_or(|names| names.iter().any(|n| n == namespace))
    }
}

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
}
