//! Unix `ar` archives, the container of a Debian package: the `!<arch>\n` magic, then per member a
//! 60-byte header (name 16 bytes, …, decimal size at bytes 48..58, terminator `` `\n ``) and the data,
//! padded to an even length. Every size is checked against the bytes present before it is used.

use crate::AssetError;

const MAGIC: &[u8] = b"!<arch>\n";
const HEADER: usize = 60;

/// The members of an `ar` archive: (name without GNU's trailing `/`, content).
///
/// # Errors
///
/// [`AssetError::NotAr`], [`AssetError::ArHeaderTruncated`], [`AssetError::ArBadHeader`],
/// [`AssetError::ArBadSize`], [`AssetError::ArMemberTruncated`].
pub fn ar_members(bytes: &[u8]) -> Result<Vec<(String, &[u8])>, AssetError> {
    if !bytes.starts_with(MAGIC) {
        return Err(AssetError::NotAr);
    }
    let mut members = Vec::new();
    let mut pos = MAGIC.len();
    while pos < bytes.len() {
        let Some(header) = bytes.get(pos..pos + HEADER) else {
            return Err(AssetError::ArHeaderTruncated { offset: pos });
        };
        if &header[58..60] != b"`\n" {
            return Err(AssetError::ArBadHeader { offset: pos });
        }
        let name = String::from_utf8_lossy(&header[..16])
            .trim_end()
            .trim_end_matches('/')
            .to_string();
        let field = &header[48..58];
        let Some(size) = std::str::from_utf8(field)
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
        else {
            return Err(AssetError::ArBadSize {
                name,
                field: field.escape_ascii().to_string(),
                offset: pos,
            });
        };
        let start = pos + HEADER;
        let present = bytes.len() - start;
        if size > present {
            return Err(AssetError::ArMemberTruncated {
                name,
                announced: size,
                present,
            });
        }
        members.push((name, &bytes[start..start + size]));
        // Members are aligned to 2 bytes.
        pos = start + size + size % 2;
    }
    Ok(members)
}
