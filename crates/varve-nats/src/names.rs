//! Where a namespace and its logs live in `JetStream`: one stream per
//! namespace, three subjects per log (its records, its configuration and
//! its trim floor).
//!
//! Varve names use `[A-Za-z0-9_.-]`; a `.` separates subject tokens and is
//! not allowed in stream names, so it is written `~`, a character Varve
//! names never hold (the mapping is one to one).

/// The first token of every subject Varve writes.
pub const SUBJECT_ROOT: &str = "varve";

/// The prefix of every stream Varve creates, one per namespace.
pub const STREAM_PREFIX: &str = "VARVE_";

/// A Varve name as one subject token (and as part of a stream name).
pub(crate) fn token(name: &str) -> String {
    name.replace('.', "~")
}

/// The Varve name a token stands for.
pub(crate) fn untoken(token: &str) -> String {
    token.replace('~', ".")
}

/// The stream and subjects of one namespace.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    /// The namespace's stream: `VARVE_<ns>`.
    pub(crate) stream: String,
    /// `varve.<ns>.`: every subject of the namespace starts with it.
    prefix: String,
}

impl Layout {
    pub(crate) fn new(namespace: &str) -> Layout {
        let token = token(namespace);
        Layout { stream: format!("{STREAM_PREFIX}{token}"), prefix: format!("{SUBJECT_ROOT}.{token}.") }
    }

    /// The subjects the stream captures: `varve.<ns>.>`.
    pub(crate) fn stream_subjects(&self) -> String {
        format!("{}>", self.prefix)
    }

    /// A log's records: `varve.<ns>.d.<log>`.
    pub(crate) fn data(&self, log: &str) -> String {
        format!("{}d.{}", self.prefix, token(log))
    }

    /// A log's configuration (one message; its absence means no log):
    /// `varve.<ns>.c.<log>`.
    pub(crate) fn config(&self, log: &str) -> String {
        format!("{}c.{}", self.prefix, token(log))
    }

    /// A log's trim floor (its last message's `Varve-Seq`: no record below
    /// it is kept; no message when never trimmed): `varve.<ns>.t.<log>`.
    pub(crate) fn floor(&self, log: &str) -> String {
        format!("{}t.{}", self.prefix, token(log))
    }

    /// Every configuration subject, to list the logs.
    pub(crate) fn configs(&self) -> String {
        format!("{}c.>", self.prefix)
    }

    /// The log a configuration subject belongs to.
    pub(crate) fn log_of_config(&self, subject: &str) -> Option<String> {
        subject.strip_prefix(&self.prefix)?.strip_prefix("c.").map(untoken)
    }
}

/// The namespace a stream name stands for, if Varve made it.
pub(crate) fn namespace_of_stream(stream: &str) -> Option<String> {
    stream.strip_prefix(STREAM_PREFIX).map(untoken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_one_to_one() {
        let layout = Layout::new("app.v1");
        assert_eq!(layout.stream, "VARVE_app~v1");
        assert_eq!(layout.data("temp.c"), "varve.app~v1.d.temp~c");
        assert_eq!(layout.config("temp.c"), "varve.app~v1.c.temp~c");
        assert_eq!(layout.floor("temp.c"), "varve.app~v1.t.temp~c");
        assert_eq!(layout.log_of_config("varve.app~v1.c.temp~c").as_deref(), Some("temp.c"));
        assert_eq!(layout.log_of_config("varve.app~v1.d.temp~c"), None);
        assert_eq!(namespace_of_stream("VARVE_app~v1").as_deref(), Some("app.v1"));
        assert_eq!(namespace_of_stream("ORDERS"), None);
    }
}
