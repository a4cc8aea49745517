//! Bounded text files: a corpus, a token-id list or any other text an experiment reads whole is read
//! through [`read_text_limited`], so that a path to a device (`/dev/zero`), a FIFO or an oversized
//! file gives an error naming it instead of filling memory.

use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Most bytes one text file of a corpus may have (256 MiB; read whole, then tokenized or cut).
pub const MAX_TEXT_FILE_BYTES: u64 = 256 << 20;

/// A text file that could not be read: which file, what it should have held, and why (not found, an
/// OS error, more bytes than the limit, not UTF-8: [`io::ErrorKind::InvalidData`] with the reason).
#[derive(Debug)]
pub struct TextFileError {
    /// The file.
    pub path: PathBuf,
    /// What the file should have held (`"text corpus"`, `"token ids (JSON)"`, …).
    pub what: &'static str,
    /// The underlying error.
    pub source: io::Error,
}

impl TextFileError {
    /// Whether the file does not exist.
    pub fn is_missing(&self) -> bool {
        self.source.kind() == io::ErrorKind::NotFound
    }
}

impl fmt::Display for TextFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_missing() {
            write!(f, "{} not found: {}", self.what, self.path.display())
        } else {
            write!(
                f,
                "cannot read {} {}: {}",
                self.what,
                self.path.display(),
                self.source
            )
        }
    }
}

impl std::error::Error for TextFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Reads a UTF-8 file of at most `max_bytes` bytes, whatever kind of file it is (a FIFO or a device
/// such as `/dev/zero` has no size to check beforehand: at most `max_bytes + 1` bytes are read).
///
/// # Errors
///
/// [`TextFileError`] naming the file and `what` for a missing file, a read error, more than
/// `max_bytes` bytes (with the limit) or text that is not UTF-8.
pub fn read_text_limited(
    path: &Path,
    what: &'static str,
    max_bytes: u64,
) -> Result<String, TextFileError> {
    let fail = |source| TextFileError {
        path: path.to_path_buf(),
        what,
        source,
    };
    let file = std::fs::File::open(path).map_err(fail)?;
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    if bytes.len() as u64 > max_bytes {
        return Err(fail(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{what}: more than the limit of {max_bytes} bytes"),
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        fail(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{what}: {e}"),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("tint-assets-text-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("t.txt")
    }

    #[test]
    fn the_limit_is_inclusive_and_named() {
        let path = scratch("limit");
        std::fs::write(&path, "four").unwrap();
        assert_eq!(read_text_limited(&path, "text", 4).unwrap(), "four");
        let err = read_text_limited(&path, "text", 3).unwrap_err();
        assert!(!err.is_missing());
        let shown = err.to_string();
        assert!(
            shown.contains(&path.display().to_string())
                && shown.contains("more than the limit of 3 bytes"),
            "{shown}"
        );
    }

    #[test]
    fn an_endless_device_stops_at_the_limit() {
        let err = read_text_limited(Path::new("/dev/zero"), "text corpus", 1024).unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.contains("/dev/zero") && shown.contains("more than the limit of 1024 bytes"),
            "{shown}"
        );
    }

    #[test]
    fn missing_and_non_utf8_files_are_named() {
        let path = scratch("utf8");
        let missing = path.with_file_name("absent.txt");
        let err = read_text_limited(&missing, "text corpus", 16).unwrap_err();
        assert!(err.is_missing());
        assert_eq!(
            err.to_string(),
            format!("text corpus not found: {}", missing.display())
        );
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        let err = read_text_limited(&path, "text corpus", 16).unwrap_err();
        assert!(err.to_string().contains("invalid utf-8"), "{err}");
    }
}
