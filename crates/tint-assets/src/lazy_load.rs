//! R lazy-load databases (an installed R package's `data/Rdata.rdx` + `Rdata.rdb`): the `.rdx` index
//! is a serialized list (`variables`: name → c(offset, length) in the `.rdb`; `compressed`: the
//! compression scheme); each `.rdb` blob is a 4-byte big-endian uncompressed length, then for schemes
//! 2 and 3 a type byte (`Z` raw LZMA2, `2` bzip2, `1` zlib, `0` none) and the data, for scheme 1 a
//! zlib stream (R's `serialize.c` / `lazyload.c`). Every object is checked to parse with
//! [`crate::r_data`] before it is returned.

use std::io::Read;

use crate::r_data::{read_rds, RObject, RValue};
use crate::{AssetError, BlobProblem};

/// Largest buffer reserved ahead of decoding a blob: the length in its header is a claim, not a
/// fact, until the data is decoded.
const MAX_PREALLOCATION: usize = 64 << 20;

/// The serialized bytes of `objects` in the lazy-load database `rdx` + `rdb`, in the order asked.
///
/// # Errors
///
/// [`AssetError::RData`] (the index or an object does not parse), [`AssetError::LazyLoadIndex`],
/// [`AssetError::NoObject`], [`AssetError::BlobOutOfRange`], [`AssetError::InObject`].
pub fn r_lazy_load_objects(
    rdx: &[u8],
    rdb: &[u8],
    objects: &[&str],
) -> Result<Vec<(String, Vec<u8>)>, AssetError> {
    let index = read_rds(rdx).map_err(|source| AssetError::RData {
        what: "reading the .rdx index".into(),
        source,
    })?;
    let rule = |rule: String| AssetError::LazyLoadIndex { rule };
    let RValue::List(parts) = &index.value else {
        return Err(rule(format!("a {}, not a list", index.type_name())));
    };
    let part_names = index.string_attr("names").unwrap_or_default();
    let part = |name: &str| -> Result<&RObject, AssetError> {
        part_names
            .iter()
            .position(|n| n == name)
            .and_then(|i| parts.get(i))
            .ok_or_else(|| rule(format!("no {name:?} entry")))
    };
    let scheme = match numbers(&part("compressed")?.value).as_deref() {
        Some(&[c]) if c.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&c) => c as u32,
        _ => {
            return Err(rule(
                "`compressed` is not a single non-negative integer".into(),
            ))
        }
    };
    let variables = part("variables")?;
    let RValue::List(locations) = &variables.value else {
        return Err(rule(format!(
            "`variables` is a {}, not a list",
            variables.type_name()
        )));
    };
    let names = variables.string_attr("names").unwrap_or_default();
    let mut out = Vec::new();
    for &object in objects {
        let Some(i) = names.iter().position(|n| n == object) else {
            return Err(AssetError::NoObject {
                object: object.to_string(),
                available: names.join(", "),
            });
        };
        let location = locations
            .get(i)
            .and_then(|l| numbers(&l.value))
            .filter(|l| {
                l.len() == 2
                    && l.iter()
                        .all(|v| v.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(v))
            })
            .ok_or_else(|| {
                rule(format!(
                    "the location of {object:?} is not two non-negative integers"
                ))
            })?;
        let (start, length) = (location[0] as u64, location[1] as u64);
        let end = start.saturating_add(length);
        let blob = usize::try_from(start)
            .ok()
            .zip(usize::try_from(end).ok())
            .and_then(|(s, e)| rdb.get(s..e))
            .ok_or_else(|| AssetError::BlobOutOfRange {
                object: object.to_string(),
                start,
                end,
                len: rdb.len(),
            })?;
        let bytes = lazy_load_blob(blob, scheme).map_err(|problem| AssetError::InObject {
            object: object.to_string(),
            problem,
        })?;
        read_rds(&bytes).map_err(|source| AssetError::RData {
            what: format!("parsing object {object:?}"),
            source,
        })?;
        out.push((object.to_string(), bytes));
    }
    Ok(out)
}

/// An integer, double or logical vector as doubles (`None` for other types or an NA).
fn numbers(value: &RValue) -> Option<Vec<f64>> {
    match value {
        RValue::Integers(v) => v.iter().map(|v| v.map(f64::from)).collect(),
        RValue::Reals(v) => Some(v.clone()),
        RValue::Logicals(v) => v
            .iter()
            .map(|v| v.map(|b| f64::from(u8::from(b))))
            .collect(),
        _ => None,
    }
}

/// Decompresses one `.rdb` blob of compression `scheme` (0: none, 1: zlib, 2: bzip2, 3: xz). The
/// decoded length must equal the blob's header; at most that length plus one byte is decoded from a
/// zlib stream.
///
/// # Errors
///
/// A [`BlobProblem`].
pub fn lazy_load_blob(blob: &[u8], scheme: u32) -> Result<Vec<u8>, BlobProblem> {
    if scheme == 0 {
        return Ok(blob.to_vec());
    }
    let Some((len, rest)) = blob.split_first_chunk::<4>() else {
        return Err(BlobProblem::NoLength);
    };
    let expected = u32::from_be_bytes(*len) as usize;
    let (kind, data) = match scheme {
        1 => (b'1', rest),
        2 | 3 => match rest.split_first() {
            Some((kind, data)) => (*kind, data),
            None => return Err(BlobProblem::NoTypeByte),
        },
        other => return Err(BlobProblem::UnknownScheme { scheme: other }),
    };
    let mut out = Vec::with_capacity(expected.min(MAX_PREALLOCATION));
    match kind {
        b'0' => out.extend_from_slice(data),
        b'1' => {
            flate2::read::ZlibDecoder::new(data)
                .take(expected as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| BlobProblem::Decode {
                    format: "zlib",
                    message: e.to_string(),
                })?;
        }
        b'Z' => lzma_rs::lzma2_decompress(&mut std::io::BufReader::new(data), &mut out).map_err(
            |e| BlobProblem::Decode {
                format: "raw LZMA2",
                message: e.to_string(),
            },
        )?,
        b'2' => return Err(BlobProblem::Bzip2),
        other => {
            return Err(BlobProblem::UnknownTypeByte {
                byte: char::from(other),
            })
        }
    }
    if out.len() != expected {
        return Err(BlobProblem::Length {
            actual: out.len(),
            expected,
        });
    }
    Ok(out)
}
