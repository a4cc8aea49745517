//! Errors of the R data reader.

use std::path::PathBuf;

use super::MAX_DEPTH;

/// Errors of the R data reader.
#[derive(Debug, thiserror::Error)]
pub enum RDataError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The gzip layer is corrupt or truncated.
    #[error("gzip-compressed R data is corrupt or truncated: {0}")]
    Gzip(#[source] std::io::Error),
    /// The data is compressed with a method this reader does not decode.
    #[error("R data compressed with {method} is not supported (re-save it with gzip: `saveRDS(x, file)`)")]
    UnsupportedCompression {
        /// `bzip2` or `xz`.
        method: &'static str,
    },
    /// The stream does not start with a known R serialization header.
    #[error("not R serialized data (starts with {found:?})")]
    BadMagic {
        /// The first bytes, escaped.
        found: String,
    },
    /// An R serialization format other than XDR binary.
    #[error("R serialization format {format:?} is not supported (only XDR binary, `X`)")]
    UnsupportedFormat {
        /// `ascii` or `native binary`.
        format: &'static str,
    },
    /// A serialization version other than 2 or 3.
    #[error("R serialization version {version} is not supported (only 2 and 3)")]
    UnsupportedVersion {
        /// The version found.
        version: i32,
    },
    /// The stream ends inside an item.
    #[error("R data truncated at byte {offset}: {what} needs {needed} byte(s), {available} left")]
    Truncated {
        /// Offset in the decompressed stream.
        offset: usize,
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// A known SEXP type this reader does not support.
    #[error("unsupported R object type {name} (SEXP type {code}) at byte {offset}")]
    UnsupportedSexp {
        /// R's name of the type, e.g. `ENVSXP`.
        name: &'static str,
        /// The type code.
        code: u32,
        /// Offset of the item's flags in the decompressed stream.
        offset: usize,
    },
    /// A SEXP type code R does not define.
    #[error("unknown R object type {code} at byte {offset}")]
    UnknownSexp {
        /// The type code.
        code: u32,
        /// Offset of the item's flags in the decompressed stream.
        offset: usize,
    },
    /// An ALTREP class this reader cannot expand.
    #[error("unsupported ALTREP class {class:?} at byte {offset}")]
    UnsupportedAltrep {
        /// The class name, e.g. `deferred_string`.
        class: String,
        /// Offset of the item's flags.
        offset: usize,
    },
    /// A back reference to an object not read yet.
    #[error("reference #{index} at byte {offset}, but only {known} referable object(s) were read")]
    BadReference {
        /// 1-based reference index.
        index: usize,
        /// Referable objects read so far.
        known: usize,
        /// Offset of the item's flags.
        offset: usize,
    },
    /// A negative or impossible length.
    #[error("invalid length {length} at byte {offset}")]
    BadLength {
        /// The length as written.
        length: i64,
        /// Offset of the length word.
        offset: usize,
    },
    /// A well-formed item of the wrong kind where the format requires another (e.g. a symbol whose
    /// name is not a string).
    #[error("at byte {offset}: expected {expected}, found {found}")]
    Unexpected {
        /// What the format requires.
        expected: &'static str,
        /// What was found.
        found: String,
        /// Offset of the item.
        offset: usize,
    },
    /// Items nested deeper than [`MAX_DEPTH`].
    #[error("R data nested deeper than {MAX_DEPTH} levels at byte {offset}")]
    TooDeep {
        /// Offset of the item's flags.
        offset: usize,
    },
    /// A data-frame view of an object failed (not a data frame, missing column, wrong column type).
    #[error("R data frame: {0}")]
    DataFrame(String),
    /// An `.rda` file lacks a requested object.
    #[error("R data holds no object named {name:?} (it holds: {available})")]
    MissingObject {
        /// The name looked for.
        name: String,
        /// The names present, comma separated.
        available: String,
    },
}
