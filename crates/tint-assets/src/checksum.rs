//! SHA-256 sums, lower-case hex: of the downloaded package file (checked against the manifest) and
//! of every extracted file (recorded in the cache's per-asset record, docs/assets.md).

use std::fs;
use std::io::{self, BufReader, Read};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::AssetError;

/// SHA-256 of everything `reader` yields.
///
/// # Errors
///
/// The reader's error.
pub fn sha256_reader(mut reader: impl Read) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// SHA-256 of `bytes`.
pub fn sha256_bytes(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// SHA-256 of the file at `path`.
///
/// # Errors
///
/// [`AssetError::Io`] naming the file (`open` or `read`).
pub fn sha256_file(path: &Path) -> Result<String, AssetError> {
    let file = fs::File::open(path).map_err(AssetError::io("open", path))?;
    sha256_reader(BufReader::new(file)).map_err(AssetError::io("read", path))
}
