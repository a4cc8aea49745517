//! Errors of the auxiliary-model crate.

use std::path::PathBuf;

/// Everything that can go wrong while loading or running an auxiliary model.
#[derive(Debug, thiserror::Error)]
pub enum AuxError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
