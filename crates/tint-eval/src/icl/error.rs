//! Errors of the in-context classification evaluation.

use std::path::PathBuf;

/// Everything that can go wrong while loading a task or running an in-context classification cell.
#[derive(Debug, thiserror::Error)]
pub enum IclError {
    /// A data file could not be read or written.
    #[error("cannot access {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A line of a data file does not follow the expected layout.
    #[error("{path}:{line}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line (or record) number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A label is outside the task's classes.
    #[error("{path}:{line}: label {label:?} is not one of the task's {n_classes} classes")]
    BadLabel {
        /// The file.
        path: PathBuf,
        /// 1-based line (or record) number.
        line: usize,
        /// The label as written.
        label: String,
        /// Number of classes of the task.
        n_classes: usize,
    },
    /// A data set holds no example at all.
    #[error("{what} holds no example")]
    Empty {
        /// Which data (file or split).
        what: String,
    },
    /// Unknown task name.
    #[error("unknown task {name:?}; known: {known}")]
    UnknownTask {
        /// The name given.
        name: String,
        /// The known names, comma separated.
        known: String,
    },
    /// A setting is out of its valid range.
    #[error("invalid setting {name} = {value}: {rule}")]
    InvalidSetting {
        /// The setting's name.
        name: &'static str,
        /// The offending value.
        value: String,
        /// The rule it violates.
        rule: String,
    },
    /// A prompt (context + label word) does not fit in the model's positions.
    #[error("a prompt needs {needed} positions but the model has {max_positions}")]
    PromptTooLong {
        /// Positions needed.
        needed: usize,
        /// Positions available.
        max_positions: usize,
    },
    /// A label word tokenises to nothing.
    #[error("label word {word:?} tokenises to no token")]
    EmptyLabelWord {
        /// The label word.
        word: String,
    },
    /// A report file could not be (de)serialised.
    #[error("report {path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A chart could not be drawn (empty report, non-finite values, a drawing error).
    #[error("plot: {0}")]
    Plot(String),
    /// Error from the auxiliary model crate.
    #[error(transparent)]
    Aux(#[from] tint_aux::AuxError),
    /// Error from the evaluation crate's shared methods (TinT construction and forward), and
    /// non-finite scores or training losses ([`crate::EvalError::NonFinite`]).
    #[error(transparent)]
    Eval(#[from] crate::EvalError),
}

impl IclError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        IclError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn parse(path: &std::path::Path, line: usize, reason: impl Into<String>) -> Self {
        IclError::Parse {
            path: path.to_path_buf(),
            line,
            reason: reason.into(),
        }
    }
}
