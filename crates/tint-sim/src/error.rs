//! Errors of the simulator crate.

/// Everything that can go wrong while configuring, building, running, saving or loading a simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A TinT hyper-parameter violates one of the construction constraints (docs/construction.md §1.2).
    #[error("invalid TinT configuration: {0}")]
    InvalidConfig(String),
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
