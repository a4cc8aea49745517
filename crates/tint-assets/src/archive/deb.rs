//! Debian packages (`.deb`): an `ar` archive whose first member is `debian-binary` and whose
//! `data.tar`, `data.tar.gz` or `data.tar.xz` member holds the file tree (decoded with pure-Rust
//! gzip and xz decoders). Member paths are matched without their leading `./`.

use super::{ar::ar_members, extract_tar, Sink};
use crate::manifest::Pick;
use crate::AssetError;

/// Extracts `picks` from the data member of the Debian package `bytes`.
///
/// # Errors
///
/// The `ar` errors, [`AssetError::NotDebian`], [`AssetError::NoDataTar`],
/// [`AssetError::UnsupportedDebCompression`], [`AssetError::Decode`] and the tar errors.
pub fn extract_deb(bytes: &[u8], picks: &[Pick], sink: &mut Sink) -> Result<(), AssetError> {
    let members = ar_members(bytes)?;
    if members.first().map(|(n, _)| n.as_str()) != Some("debian-binary") {
        return Err(AssetError::NotDebian);
    }
    let Some((name, data)) = members.iter().find(|(n, _)| n.starts_with("data.tar")) else {
        return Err(AssetError::NoDataTar);
    };
    match name.as_str() {
        "data.tar" => extract_tar(*data, picks, sink),
        "data.tar.gz" => extract_tar(flate2::read::GzDecoder::new(*data), picks, sink),
        "data.tar.xz" => {
            let mut tar = Vec::new();
            lzma_rs::xz_decompress(&mut std::io::BufReader::new(*data), &mut tar).map_err(|e| {
                AssetError::Decode {
                    format: "xz (data.tar.xz)",
                    message: e.to_string(),
                }
            })?;
            extract_tar(tar.as_slice(), picks, sink)
        }
        other => Err(AssetError::UnsupportedDebCompression {
            member: other.to_string(),
        }),
    }
}
