//! Typed errors of the crate.

use thiserror::Error;

/// Everything that can go wrong when building, training, evaluating or exporting a CGT model.
#[derive(Debug, Error)]
pub enum CgtError {
    /// A model hyper-parameter is inconsistent (for example a width not divisible by its head count).
    #[error("invalid model config: {0}")]
    InvalidConfig(String),
    /// A training or loss hyper-parameter is out of range.
    #[error("invalid training config: {0}")]
    InvalidTrainingConfig(String),
    /// A data-generator parameter is out of range.
    #[error("invalid data config: {0}")]
    InvalidDataConfig(String),
    /// A tensor or sequence did not have the expected shape.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// The operation needs the CGT variant but the model is a plain (baseline) transformer.
    #[error("the model has no y stream (it is a baseline / folded transformer)")]
    NoContextStream,
    /// Reading or writing a file failed.
    #[error("cannot {operation} {path}: {source}")]
    Io {
        /// What was being done: `read`, `list`, `create the directory`, `remove`, `append to`, …
        operation: &'static str,
        /// The file involved.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Writing a file atomically failed (names the operation and the path).
    #[error(transparent)]
    Write(#[from] tint_assets::atomic_write::AtomicWriteError),
    /// A burn recorder could not write or read a checkpoint file.
    #[error("cannot {operation} checkpoint file {path}: {reason}")]
    Checkpoint {
        /// `write` or `read`.
        operation: &'static str,
        /// The file (with the recorder's `.mpk` extension).
        path: String,
        /// What the recorder said, in words.
        reason: String,
    },
    /// A line of a loss log (`log.jsonl`) other than the last is not a step report.
    #[error("{path} line {line}: not a step report of a CGT loss log ({message})")]
    LogLine {
        /// The log file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What the parser said.
        message: String,
    },
    /// A checkpoint's `state.json` is not such a file.
    #[error("{path}: not a checkpoint state file ({message}); delete the checkpoint directory to train the run again")]
    CheckpointState {
        /// The file.
        path: String,
        /// What the parser said.
        message: String,
    },
    /// A checkpoint exists but was written by a run with other settings (steps, batch size, schedule).
    #[error("cannot resume: {0}")]
    ResumeMismatch(String),
    /// Another run is training into the same checkpoint directory.
    #[error(
        "another run is training into the checkpoint directory {dir} (it holds {lock}); wait for \
         it to finish or give another checkpoint directory"
    )]
    CheckpointsBusy {
        /// The checkpoint directory.
        dir: String,
        /// Its lock file.
        lock: String,
    },
    /// Safetensors serialisation failed.
    #[error("safetensors error: {0}")]
    Safetensors(String),
    /// A JSON (de)serialisation failed.
    #[error("json error: {0}")]
    Json(#[from] serde_json::Error),
    /// Data-parallel training splits every batch into equal row shards, one per device.
    #[error(
        "data-parallel training: batch of {batch_size} sequences (step {step}) is not divisible by \
         {devices} devices; choose a batch size that is a multiple of the device count"
    )]
    BatchNotDivisible {
        /// Sequences in the batch.
        batch_size: usize,
        /// Number of devices (peers).
        devices: usize,
        /// The step whose batch was drawn.
        step: usize,
    },
    /// burn-collective (registration, all-reduce, finish) failed, or a peer thread ended abnormally.
    #[error("collective error: {0}")]
    Collective(String),
    /// A numerical routine failed (for example a singular matrix in a least-squares fit).
    #[error("numerical error: {0}")]
    Numerical(String),
}

/// Result alias of the crate.
pub type Result<T> = std::result::Result<T, CgtError>;

impl CgtError {
    /// Wraps an [`std::io::Error`] with what was being done (`read`, `list`, …) and the path.
    pub fn io(
        operation: &'static str,
        path: impl AsRef<std::path::Path>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            operation,
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}
