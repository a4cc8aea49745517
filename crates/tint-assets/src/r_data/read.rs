//! The entry points: `.rds` and `.rda` streams and files, gzip undone.

use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

use super::reader::{escape, Reader};
use super::{RDataError, RObject, RValue};

/// Undoes a gzip layer if there is one; rejects bzip2 and xz with a clear error.
///
/// # Errors
///
/// [`RDataError::Gzip`], [`RDataError::UnsupportedCompression`].
pub fn decompress(bytes: &[u8]) -> Result<Cow<'_, [u8]>, RDataError> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes)
            .read_to_end(&mut out)
            .map_err(RDataError::Gzip)?;
        Ok(Cow::Owned(out))
    } else if bytes.starts_with(b"BZh") {
        Err(RDataError::UnsupportedCompression { method: "bzip2" })
    } else if bytes.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Err(RDataError::UnsupportedCompression { method: "xz" })
    } else {
        Ok(Cow::Borrowed(bytes))
    }
}

/// Reads one serialized object (an `.rds` file's content, gzip-compressed or not).
///
/// # Errors
///
/// Any [`RDataError`] of the stream.
pub fn read_rds(bytes: &[u8]) -> Result<RObject, RDataError> {
    let data = decompress(bytes)?;
    if data.starts_with(b"RD") {
        return Err(RDataError::BadMagic {
            found: "an .rda header: use read_rda".into(),
        });
    }
    let mut reader = Reader::new(&data);
    reader.header()?;
    reader.item(0)
}

/// Reads the named objects of an `.rda` / `.RData` file (`RDX2` / `RDX3`, gzip-compressed or not).
///
/// # Errors
///
/// Any [`RDataError`] of the stream; [`RDataError::Unexpected`] when the top level is not a tagged
/// pairlist.
pub fn read_rda(bytes: &[u8]) -> Result<Vec<(String, RObject)>, RDataError> {
    let data = decompress(bytes)?;
    match data.get(..5) {
        Some(b"RDX2\n" | b"RDX3\n") => {}
        Some(b"RDA2\n" | b"RDA3\n") => {
            return Err(RDataError::UnsupportedFormat { format: "ascii" })
        }
        Some(b"RDB2\n" | b"RDB3\n") => {
            return Err(RDataError::UnsupportedFormat {
                format: "native binary",
            })
        }
        _ => {
            return Err(RDataError::BadMagic {
                found: escape(&data[..data.len().min(8)]),
            })
        }
    }
    let mut reader = Reader::new(&data);
    reader.pos = 5;
    reader.header()?;
    let offset = reader.pos;
    let top = reader.item(0)?;
    match top.value {
        RValue::Pairlist(cells) => cells
            .into_iter()
            .map(|(tag, value)| {
                tag.map(|t| (t, value))
                    .ok_or_else(|| RDataError::Unexpected {
                        expected: "a tag (object name) on every top-level cell",
                        found: "an untagged cell".into(),
                        offset,
                    })
            })
            .collect(),
        RValue::Null => Ok(Vec::new()),
        _ => Err(RDataError::Unexpected {
            expected: "a pairlist of named objects",
            found: top.type_name().into(),
            offset,
        }),
    }
}

/// Reads an `.rds` file.
///
/// # Errors
///
/// [`RDataError::Io`] or as [`read_rds`].
pub fn read_rds_file(path: &Path) -> Result<RObject, RDataError> {
    read_rds(&read_file(path)?)
}

/// Reads an `.rda` / `.RData` file.
///
/// # Errors
///
/// [`RDataError::Io`] or as [`read_rda`].
pub fn read_rda_file(path: &Path) -> Result<Vec<(String, RObject)>, RDataError> {
    read_rda(&read_file(path)?)
}

/// Takes object `name` out of the objects of an `.rda` file.
///
/// # Errors
///
/// [`RDataError::MissingObject`].
pub fn take_object(
    objects: &mut Vec<(String, RObject)>,
    name: &str,
) -> Result<RObject, RDataError> {
    match objects.iter().position(|(n, _)| n == name) {
        Some(i) => Ok(objects.remove(i).1),
        None => Err(RDataError::MissingObject {
            name: name.to_string(),
            available: objects
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, RDataError> {
    std::fs::read(path).map_err(|source| RDataError::Io {
        path: path.to_path_buf(),
        source,
    })
}
