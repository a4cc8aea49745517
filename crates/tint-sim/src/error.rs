//! Errors of the simulator crate.

/// Everything that can go wrong while configuring, building, running, saving or loading a simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A TinT hyper-parameter violates one of the construction constraints (docs/construction.md §1.2)
    /// or a range of the step settings: names the field, its value and the rule it breaks.
    #[error("invalid TinT configuration: {field} = {value} {rule}")]
    InvalidConfig {
        /// The configuration field (with the paper's symbol where it has one, e.g. `hidden_size Ds`).
        field: &'static str,
        /// Its value.
        value: String,
        /// The rule it breaks, with the other values the rule involves.
        rule: String,
    },
    /// The auxiliary model cannot be simulated (unsupported architecture or sizes).
    #[error("unsupported auxiliary model: {0}")]
    UnsupportedModel(String),
    /// The inputs do not match each other or the model (shapes, lengths, token ids).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A file could not be read or written.
    #[error("cannot access {path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Writing a file atomically failed (names the operation and the path).
    #[error(transparent)]
    Write(#[from] tint_assets::atomic_write::AtomicWriteError),
    /// A saved simulator is malformed (missing tensor, wrong shape, bad JSON).
    #[error("malformed saved simulator: {0}")]
    Format(String),
    /// An error of the TinT primitives crate.
    #[error(transparent)]
    Ops(#[from] tint_ops::TintOpsError),
}

impl SimError {
    /// [`SimError::InvalidConfig`] for `field = value` breaking `rule`.
    pub(crate) fn invalid_config(
        field: &'static str,
        value: impl std::fmt::Display,
        rule: impl Into<String>,
    ) -> Self {
        Self::InvalidConfig {
            field,
            value: value.to_string(),
            rule: rule.into(),
        }
    }
}
