//! Errors of the evaluation crate.

/// Everything that can go wrong while setting up or running an evaluation.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// An evaluation setting is out of its valid range.
    #[error("invalid setting {name} = {value}: {rule}")]
    InvalidSetting {
        /// The setting's name, as on the command line.
        name: &'static str,
        /// The offending value.
        value: String,
        /// The rule it violates.
        rule: std::borrow::Cow<'static, str>,
    },
    /// The corpus is too short for even one block.
    #[error("the text has {tokens} tokens, fewer than one block of {block_size}")]
    TextTooShort {
        /// Number of tokens in the text.
        tokens: usize,
        /// The requested block size.
        block_size: usize,
    },
    /// A method name that the evaluation does not know.
    #[error("unknown method {name:?}; available: {known}")]
    UnknownMethod {
        /// The name given.
        name: String,
        /// The known names, comma separated.
        known: String,
    },
    /// Tuning and evaluation blocks share a document.
    #[error(
        "the tuning split overlaps the evaluation split (shared: {}); step sizes must be chosen \
         on data that is not evaluated",
        shared.join(", ")
    )]
    TuningOverlap {
        /// The shared documents.
        shared: Vec<String>,
    },
    /// A method produced a non-finite NLL, label-word score or training loss (no silent NaN: the
    /// run stops unless it was told to record such values, `allow_non_finite`).
    #[error("method {method}: non-finite {quantity} ({value}) on {location}; {origin}")]
    NonFinite {
        /// The method's name.
        method: String,
        /// What is non-finite (`NLL`, `label-word score`, `training loss`).
        quantity: &'static str,
        /// Where in the run: the block and train fraction, or the example and seed.
        location: String,
        /// The first non-finite value.
        value: f64,
        /// Where it first appeared: the checkpoint weights, the forward pass or the update.
        origin: crate::non_finite::NonFiniteOrigin,
    },
    /// A tuned step size whose best value stayed on the edge of its grid after every allowed
    /// extension: the optimum was not bracketed, so the value is not a choice.
    #[error("{0}")]
    Unbracketed(Box<Unbracketed>),
    /// Error from the auxiliary model crate.
    #[error(transparent)]
    Aux(#[from] tint_aux::AuxError),
    /// Error from the simulator crate (configuration, input, unsupported model).
    #[error(transparent)]
    Sim(#[from] tint_sim::SimError),
    /// A chart could not be drawn.
    #[error(transparent)]
    Plot(#[from] tint_lab::chart::ChartError),
    /// A stored report cannot be read or does not belong to this run (`--resume`).
    #[error("{path}: {reason}")]
    Report {
        /// The report file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An offline asset (model, text, data set) could not be obtained from the run's
    /// [`Assets`](tint_lab::Assets).
    #[error(transparent)]
    Asset(#[from] tint_assets::AssetError),
    /// A line of a data file does not follow the expected layout.
    #[error("{path}:{line}: {reason}")]
    Parse {
        /// The file.
        path: std::path::PathBuf,
        /// 1-based line (or record) number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A label is outside the task's classes.
    #[error("{path}:{line}: label {label:?} is not one of the task's {n_classes} classes")]
    BadLabel {
        /// The file.
        path: std::path::PathBuf,
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
    /// Unknown in-context classification task name.
    #[error("unknown task {name:?}; known: {known}")]
    UnknownTask {
        /// The name given.
        name: String,
        /// The known names, comma separated.
        known: String,
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
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// An error with what was being done when it happened (the task loaded, the hint on
    /// `--allow-non-finite`).
    #[error("{context}")]
    Context {
        /// What was being done.
        context: String,
        /// The error.
        #[source]
        source: Box<EvalError>,
    },
    /// A file or directory could not be read, listed, created or written.
    #[error("cannot {operation} {path}: {source}")]
    Io {
        /// What was being done: `read`, `list`, `create the directory`, `write`.
        operation: &'static str,
        /// The file or directory.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// The grid of a tuning whose best value stayed on an edge ([`EvalError::Unbracketed`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "tuning {method}: the best {parameter} ({best:e}) is the {edge} value of the grid {{{}}} \
     (scores {{{}}}, lower is better) after {extensions} extension(s) past the edge; an edge \
     value is not a choice: widen the grid (--tune {parameter}=…) or allow more extensions \
     (--tune-extend)",
    grid.iter().map(|g| format!("{g:e}")).collect::<Vec<_>>().join(", "),
    scores.iter().map(|s| format!("{s:.4}")).collect::<Vec<_>>().join(", ")
)]
pub struct Unbracketed {
    /// The method (and fraction) being tuned.
    pub method: String,
    /// `eta` or `lr`.
    pub parameter: String,
    /// The scored grid, increasing.
    pub grid: Vec<f64>,
    /// Its scores (NaN for a diverged value).
    pub scores: Vec<f64>,
    /// The best value.
    pub best: f64,
    /// `smallest` or `largest`.
    pub edge: &'static str,
    /// Extensions tried.
    pub extensions: usize,
}

impl EvalError {
    /// This error with `context` in front (the error stays its source).
    pub fn context(self, context: impl Into<String>) -> Self {
        EvalError::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }

    /// Whether this error, or one it wraps, is a non-finite value ([`EvalError::NonFinite`]).
    pub fn is_non_finite(&self) -> bool {
        match self {
            EvalError::NonFinite { .. } => true,
            EvalError::Context { source, .. } => source.is_non_finite(),
            _ => false,
        }
    }

    /// A file that could not be read or written (`cannot access PATH: …`).
    pub(crate) fn access(path: &std::path::Path, source: std::io::Error) -> Self {
        EvalError::Io {
            operation: "access",
            path: path.to_path_buf(),
            source,
        }
    }

    /// A line of a data file that does not follow the expected layout.
    pub(crate) fn parse(path: &std::path::Path, line: usize, reason: impl Into<String>) -> Self {
        EvalError::Parse {
            path: path.to_path_buf(),
            line,
            reason: reason.into(),
        }
    }
}
