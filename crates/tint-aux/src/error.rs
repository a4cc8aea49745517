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
    /// A file the model directory must contain is absent.
    #[error("missing file {path} ({what})")]
    MissingFile {
        /// The file that was looked for.
        path: PathBuf,
        /// What the file should have held.
        what: &'static str,
    },
    /// A JSON file (config or token ids) could not be parsed.
    #[error("cannot parse {path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// `config.json` names a `model_type` this crate does not implement.
    #[error("unknown architecture {model_type:?} in {path} (supported: {supported})")]
    UnknownArchitecture {
        /// The config file.
        path: PathBuf,
        /// The `model_type` found (empty when the field is missing).
        model_type: String,
        /// The supported model types, comma separated.
        supported: &'static str,
    },
    /// `config.json` parsed but holds values this crate cannot use.
    #[error("invalid config {path}: {reason}")]
    InvalidConfig {
        /// The config file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A safetensors file could not be parsed.
    #[error("cannot parse safetensors file {path}: {source}")]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: safetensors::SafeTensorError,
    },
    /// A tensor name appears twice in a safetensors header (the safetensors reader would keep
    /// one of them silently).
    #[error("tensor {name:?} appears twice in the header of {path}; a checkpoint names each tensor once")]
    DuplicateTensor {
        /// The file.
        path: PathBuf,
        /// The repeated name.
        name: String,
    },
    /// A tensor the model needs is not in the checkpoint.
    #[error("tensor {tensor:?} is missing from {path}")]
    MissingTensor {
        /// The checkpoint file.
        path: PathBuf,
        /// The tensor name (every accepted spelling, separated by `|`).
        tensor: String,
    },
    /// A tensor has a shape other than the one the config implies.
    #[error(
        "tensor {tensor:?} in {path} has shape {found:?}, expected {expected:?}{}",
        if set_by.is_empty() { String::new() } else { format!("; {set_by}") }
    )]
    TensorShape {
        /// The checkpoint file.
        path: PathBuf,
        /// The tensor name.
        tensor: String,
        /// The shape the config implies.
        expected: Vec<usize>,
        /// The shape in the file.
        found: Vec<usize>,
        /// Which config fields set the expected dimensions that differ (`32 is the config's
        /// n_embd`); empty when none is known. (Boxed: every `Result` carrying this error stays
        /// small.)
        set_by: Box<str>,
    },
    /// The checkpoint holds tensors the config does not use (e.g. a config with fewer layers than the
    /// checkpoint, or a GGUF `block_count` below the number of blocks).
    #[error("{path} holds {count} tensor(s) the config does not use, e.g. {names:?}: the config does not describe this checkpoint")]
    UnusedTensors {
        /// The checkpoint file.
        path: PathBuf,
        /// How many tensors are unused.
        count: usize,
        /// The first of them, sorted.
        names: Vec<String>,
    },
    /// The config's sizes cannot describe the checkpoint (checked before anything is allocated).
    #[error("config and checkpoint {path} disagree: {reason}")]
    ConfigMismatch {
        /// The checkpoint file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A computation produced NaN or infinite values.
    #[error("non-finite values ({count} of {total}) in {what}{}", cause.as_deref().map(|c| format!(": {c}")).unwrap_or_default())]
    NonFinite {
        /// Where they appeared (e.g. `logits of the plain forward`).
        what: String,
        /// How many values are NaN or infinite.
        count: usize,
        /// How many values were checked.
        total: usize,
        /// Where the first non-finite value came from, when known (a weight, a config value).
        cause: Option<String>,
    },
    /// A token-ids file is malformed.
    #[error("invalid token ids file {path}: {reason}")]
    InvalidIds {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A tensor is stored in a dtype that cannot be converted to float32.
    #[error("tensor {tensor:?} in {path} has dtype {dtype}, expected F32, F16 or BF16")]
    TensorDtype {
        /// The checkpoint file.
        path: PathBuf,
        /// The tensor name.
        tensor: String,
        /// The dtype found.
        dtype: String,
    },
    /// The tokenizer files could not be loaded.
    #[error("cannot load tokenizer from {path}: {message}")]
    Tokenizer {
        /// The tokenizer file (or directory).
        path: PathBuf,
        /// The tokenizer library's message.
        message: String,
    },
    /// Text could not be encoded or decoded.
    #[error("tokenization failed: {message}")]
    Tokenize {
        /// The tokenizer library's message.
        message: String,
    },
    /// A token id is outside the vocabulary.
    #[error("token id {token_id} at [{batch}, {position}] is outside the vocabulary (vocab_size {vocab_size})")]
    TokenIdOutOfRange {
        /// The offending id.
        token_id: i64,
        /// Its batch index.
        batch: usize,
        /// Its position in the sequence.
        position: usize,
        /// The vocabulary size.
        vocab_size: usize,
    },
    /// The sequence is longer than the learned position table.
    #[error(
        "sequence length {seq_length} exceeds the position table (max_positions {max_positions})"
    )]
    SequenceTooLong {
        /// The sequence length given.
        seq_length: usize,
        /// The longest sequence the model accepts.
        max_positions: usize,
    },
    /// The input has no tokens.
    #[error("empty input: batch_size {batch_size}, seq_length {seq_length}")]
    EmptyInput {
        /// The batch size given.
        batch_size: usize,
        /// The sequence length given.
        seq_length: usize,
    },
    /// A dynamic-evaluation option is invalid.
    #[error("invalid dynamic-evaluation option: {reason}")]
    InvalidOption {
        /// What is wrong.
        reason: String,
    },
    /// A request would need more memory than the limit (see [`crate::memory::ForwardMemory`]).
    #[error(
        "{what} would need about {estimate:.2} GiB ({parts}), over the limit {limit:.2} GiB; use \
         fewer or shorter rows, or raise the limit with {flag}"
    )]
    MemoryOverLimit {
        /// What was requested.
        what: String,
        /// The estimate, GiB.
        estimate: f64,
        /// The estimate's parts.
        parts: String,
        /// The limit, GiB.
        limit: f64,
        /// The flag that raises the limit.
        flag: String,
    },
    /// A GGUF file could not be read (see [`crate::gguf::GgufError`]).
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
}
