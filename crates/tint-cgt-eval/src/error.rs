//! Errors of the CGT runs.

use tint_assets::AtomicWriteError;

/// Everything that can go wrong while setting up, running or reporting CGT runs.
#[derive(Debug, thiserror::Error)]
pub enum CgtRunError {
    /// A run setting is out of its valid range.
    #[error("invalid setting {name} = {value}: {rule}")]
    InvalidSetting {
        /// The setting's name, as on the command line.
        name: &'static str,
        /// The offending value.
        value: String,
        /// The rule it violates.
        rule: &'static str,
    },
    /// Training, evaluation, export or a chart failed in the CGT crate.
    #[error("{what}: {source}")]
    Cgt {
        /// What was being done (`training cgt-aux seed 1`, `evaluating`, …).
        what: String,
        /// The underlying error.
        #[source]
        source: tint_cgt::CgtError,
    },
    /// A file or directory could not be read or created.
    #[error("cannot {operation} {path}: {source}")]
    Io {
        /// What was being done: `read`, `create`, `open for appending`, `append to`.
        operation: &'static str,
        /// The file or directory.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A line of a learning-curve file (`curve.jsonl` of a run) is not a curve point.
    #[error("{path} line {line}: not a learning-curve point ({message}); delete the file and resume the run to evaluate the curve again")]
    Curve {
        /// The curve file.
        path: std::path::PathBuf,
        /// 1-based line number.
        line: usize,
        /// What the parser said.
        message: String,
    },
    /// A run's `evaluation.json` is not such a file.
    #[error(
        "{path}: not a run's evaluation file as written by `cargo xtask eval cgt` ({message})"
    )]
    EvaluationFile {
        /// The file.
        path: std::path::PathBuf,
        /// What the parser said.
        message: String,
    },
    /// A chart could not be drawn.
    #[error("drawing {what}: {source}")]
    Chart {
        /// Which chart.
        what: String,
        /// What the chart module said.
        #[source]
        source: tint_lab::chart::ChartError,
    },
    /// Writing a chart failed.
    #[error(transparent)]
    Write(#[from] AtomicWriteError),
    /// The text corpus could not be read: missing, not UTF-8, or over
    /// [`tint_assets::MAX_TEXT_FILE_BYTES`] (the error names the file).
    #[error("reading the text corpus: {0}")]
    Text(tint_assets::TextFileError),
    /// The caller's [`Assets`](tint_lab::Assets) could not provide the default text corpus.
    #[error("fetching the default text corpus, the SOTU addresses and Shakespeare's works (or pass --text FILE|DIR,…: a file of blank-line separated documents, a directory of one document per file): {0}")]
    Corpus(#[source] tint_assets::AssetError),
}

impl CgtRunError {
    /// Wraps a chart error with which chart it was.
    pub fn chart(what: impl Into<String>) -> impl FnOnce(tint_lab::chart::ChartError) -> Self {
        let what = what.into();
        move |source| Self::Chart { what, source }
    }

    /// Wraps a CGT error with what was being done.
    pub fn cgt(what: impl Into<String>) -> impl FnOnce(tint_cgt::CgtError) -> Self {
        let what = what.into();
        move |source| Self::Cgt { what, source }
    }
}
