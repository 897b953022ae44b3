//! Placeholder: see the PEDaLS issue.
