//! Errors of the GGUF reader.

use std::path::PathBuf;

/// Everything that can go wrong while reading a GGUF file or building a tokenizer from it.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file could not be read.
    #[error("cannot read GGUF file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file ended before a field could be read.
    #[error(
        "truncated GGUF file: {what} needs {needed} bytes at offset {offset}, the file has {len}"
    )]
    Truncated {
        /// What was being read.
        what: String,
        /// Byte offset of the field.
        offset: u64,
        /// Bytes the field needs.
        needed: u64,
        /// Length of the file.
        len: u64,
    },
    /// The first four bytes are not `GGUF`.
    #[error("not a GGUF file: magic is {found:?}, expected \"GGUF\"")]
    BadMagic {
        /// The four bytes found.
        found: [u8; 4],
    },
    /// The format version is not one this reader understands (2 and 3 are).
    #[error("unsupported GGUF version {version} (supported: 2, 3)")]
    UnsupportedVersion {
        /// The version in the header.
        version: u32,
    },
    /// A metadata value has a type id outside the GGUF specification.
    #[error("metadata key {key:?} has unknown value type {type_id}")]
    UnknownValueType {
        /// The metadata key.
        key: String,
        /// The raw type id.
        type_id: u32,
    },
    /// A string is not valid UTF-8.
    #[error("string at offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// Byte offset of the string's bytes.
        offset: u64,
    },
    /// `general.alignment` is zero or not a power of two.
    #[error("invalid general.alignment {alignment} (must be a positive power of two)")]
    BadAlignment {
        /// The alignment found.
        alignment: u64,
    },
    /// A tensor has a ggml type id this reader does not know at all.
    #[error("unknown ggml type id {type_id} in tensor {tensor:?}")]
    UnknownTensorType {
        /// The tensor name.
        tensor: String,
        /// The raw type id.
        type_id: u32,
    },
    /// A tensor has a known ggml type that cannot be dequantised (yet).
    #[error("unsupported type {type_name} in tensor {tensor:?} (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1)")]
    UnsupportedTensorType {
        /// The tensor name.
        tensor: String,
        /// The ggml type name, e.g. `Q4_K`.
        type_name: &'static str,
    },
    /// A tensor's shape is invalid (too many dims, overflow, or rows not a multiple of the block size).
    #[error("tensor {tensor:?} has invalid shape {dims:?}: {reason}")]
    BadTensorShape {
        /// The tensor name.
        tensor: String,
        /// The dims as stored (innermost first).
        dims: Vec<u64>,
        /// Why it is invalid.
        reason: String,
    },
    /// A tensor's data lies (partly) outside the file.
    #[error("tensor {tensor:?} data [{start}, {end}) is outside the file ({len} bytes)")]
    TensorOutOfBounds {
        /// The tensor name.
        tensor: String,
        /// Absolute start offset.
        start: u64,
        /// Absolute end offset (exclusive).
        end: u64,
        /// Length of the file.
        len: u64,
    },
    /// Two tensors' data ranges overlap.
    #[error("tensors {first:?} [{first_start}, {first_end}) and {second:?} [{second_start}, {second_end}) overlap")]
    OverlappingTensors {
        /// The tensor that starts first.
        first: String,
        /// Its absolute start offset.
        first_start: u64,
        /// Its absolute end offset (exclusive).
        first_end: u64,
        /// The tensor that starts inside the first one.
        second: String,
        /// Its absolute start offset.
        second_start: u64,
        /// Its absolute end offset (exclusive).
        second_end: u64,
    },
    /// A tensor's offset is not a multiple of the data-section alignment.
    #[error("tensor {tensor:?} has offset {offset}, not a multiple of the alignment {alignment}")]
    MisalignedTensor {
        /// The tensor name.
        tensor: String,
        /// Its offset relative to the data section.
        offset: u64,
        /// The data-section alignment.
        alignment: u64,
    },
    /// A metadata key or a tensor name appears twice.
    #[error("{what} {name:?} appears twice in the GGUF file")]
    Duplicate {
        /// `"metadata key"` or `"tensor"`.
        what: &'static str,
        /// The repeated name.
        name: String,
    },
    /// A count, length or nesting depth in the file exceeds a limit of this reader.
    #[error("{what} is {found}, above this reader's limit of {limit}")]
    LimitExceeded {
        /// What was counted (e.g. `nesting depth of metadata key "x"`).
        what: String,
        /// The value found in the file.
        found: u64,
        /// The limit.
        limit: u64,
    },
    /// A tensor that was asked for is not in the file.
    #[error("tensor {tensor:?} is not in the GGUF file")]
    MissingTensor {
        /// The tensor name.
        tensor: String,
    },
    /// A required metadata key is absent.
    #[error("metadata key {key:?} is missing from the GGUF file")]
    MissingMetadata {
        /// The key.
        key: String,
    },
    /// A metadata key has a value of the wrong type.
    #[error("metadata key {key:?} should be {expected}, found {found}")]
    MetadataType {
        /// The key.
        key: String,
        /// The expected type.
        expected: &'static str,
        /// The type found.
        found: &'static str,
    },
    /// A special-token id (BOS, EOS) outside the vocabulary.
    #[error(
        "metadata key {key:?} names token {value}, outside the vocabulary of {vocab_size} tokens"
    )]
    TokenOutOfVocabulary {
        /// The key.
        key: String,
        /// Its value.
        value: u64,
        /// Tokens in `tokenizer.ggml.tokens`.
        vocab_size: usize,
    },
    /// `tokenizer.ggml.add_bos_token` is true but no BOS id is given.
    #[error(
        "metadata key \"tokenizer.ggml.add_bos_token\" is true but \"tokenizer.ggml.bos_token_id\" \
         is absent: the text cannot be tokenized as the file asks"
    )]
    BosWithoutId,
    /// The tokenizer metadata describes a model this crate cannot build.
    #[error("unsupported tokenizer model {model:?} (supported: gpt2 byte-level BPE)")]
    UnsupportedTokenizer {
        /// The value of `tokenizer.ggml.model`.
        model: String,
    },
    /// The `tokenizers` crate rejected the vocabulary or failed to encode/decode.
    #[error("tokenizer error: {message}")]
    Tokenizer {
        /// The message of the `tokenizers` error.
        message: String,
    },
}
