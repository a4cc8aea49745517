//! Where extracted members go: files under the staging directory with their SHA-256, and members
//! held in memory until the whole archive is read (the two files of an R lazy-load database).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::checksum::sha256_bytes;
use crate::AssetError;

/// The destination of an extraction.
#[derive(Debug)]
pub struct Sink {
    out: PathBuf,
    /// Written file (path relative to the output directory) → SHA-256.
    pub extracted: BTreeMap<String, String>,
    /// Member path → content, for picks that need several members.
    pub held: BTreeMap<String, Vec<u8>>,
}

impl Sink {
    /// A sink writing under `out`.
    pub fn new(out: &Path) -> Self {
        Self {
            out: out.to_path_buf(),
            extracted: BTreeMap::new(),
            held: BTreeMap::new(),
        }
    }

    /// Writes `bytes` to `dest` (relative to the output directory) and records its SHA-256.
    ///
    /// # Errors
    ///
    /// [`AssetError::Io`] naming the directory or file.
    pub fn write(&mut self, dest: &str, bytes: &[u8]) -> Result<(), AssetError> {
        let target = self.out.join(dest);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(AssetError::io("create directory", parent))?;
        }
        fs::File::create(&target)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(AssetError::io("write", &target))?;
        self.extracted.insert(dest.to_string(), sha256_bytes(bytes));
        Ok(())
    }
}
