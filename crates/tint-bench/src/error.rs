//! Errors of the benchmark.

use tint_assets::AtomicWriteError;

/// Everything that can go wrong while setting up, running or reporting a benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A benchmark setting is out of its valid range.
    #[error("invalid setting {name} = {value}: {rule}")]
    InvalidSetting {
        /// The setting's name, as on the command line.
        name: &'static str,
        /// The offending value.
        value: String,
        /// The rule it violates.
        rule: &'static str,
    },
    /// A measurement produced a non-finite value (the timed work went wrong).
    #[error("bench mode {mode}: non-finite result {value}")]
    NonFinite {
        /// The measurement's mode.
        mode: String,
        /// The value.
        value: f64,
    },
    /// The SmolLM2 file does not have the published sizes the report's FLOP counts use.
    #[error("SmolLM2 GGUF has (D, layers, vocabulary) = {found:?}, expected {expected:?}")]
    WrongSmolLm2 {
        /// What the file holds.
        found: (usize, usize, usize),
        /// The published sizes.
        expected: (usize, usize, usize),
    },
    /// A child measurement failed or printed no result.
    #[error("bench child {spec} failed: {reason}")]
    Child {
        /// The child's `MODE:BATCH`.
        spec: String,
        /// Its standard error, or what was wrong with its output.
        reason: String,
    },
    /// A tensor could not be read back or a checkpoint could not be serialised.
    #[error("bench {what}: {reason}")]
    Data {
        /// What was being done.
        what: &'static str,
        /// The underlying error.
        reason: String,
    },
    /// Creating a directory failed.
    #[error("cannot create {path}: {source}")]
    Io {
        /// The directory.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Writing a file failed.
    #[error(transparent)]
    Write(#[from] AtomicWriteError),
    /// A measurement result is not valid JSON.
    #[error("bench measurement JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Error from the auxiliary model crate.
    #[error(transparent)]
    Aux(#[from] tint_aux::AuxError),
    /// Error from the simulator crate.
    #[error(transparent)]
    Sim(#[from] tint_sim::SimError),
    /// The caller's side of the benchmark (running a child, writing a report section) failed.
    #[error("{0}")]
    Host(Box<dyn std::error::Error + Send + Sync>),
}
