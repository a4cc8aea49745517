//! Completing and checking the picks of an extraction: the R lazy-load databases held in memory are
//! written as `.rds` files, and every pick must have found its members.

use std::collections::BTreeMap;
use std::io::Write;

use super::Sink;
use crate::lazy_load::r_lazy_load_objects;
use crate::manifest::Pick;
use crate::AssetError;

/// Completes the picks that needed several members: each object of an R lazy-load database is written
/// as `<name>.rds` (gzip-compressed R serialization, readable by [`crate::r_data::read_rds_file`]).
///
/// # Errors
///
/// [`AssetError::LazyLoadMembersMissing`], [`AssetError::InLazyLoad`] around the lazy-load errors,
/// and the sink's errors.
pub fn finish_held(picks: &[Pick], sink: &mut Sink) -> Result<(), AssetError> {
    for pick in picks {
        match *pick {
            Pick::Nested { picks, .. } => finish_held(picks, sink)?,
            Pick::RLazyLoad { db, objects } => {
                let member = |ext: &str| format!("{db}.{ext}");
                let (Some(rdx), Some(rdb)) =
                    (sink.held.get(&member("rdx")), sink.held.get(&member("rdb")))
                else {
                    return Err(AssetError::LazyLoadMembersMissing {
                        rdx: member("rdx"),
                        rdb: member("rdb"),
                    });
                };
                let blobs =
                    r_lazy_load_objects(rdx, rdb, objects).map_err(|e| AssetError::InLazyLoad {
                        db: db.to_string(),
                        source: Box::new(e),
                    })?;
                for (name, blob) in blobs {
                    let dest = format!("{name}.rds");
                    let mut encoder =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                    let gz = encoder
                        .write_all(&blob)
                        .and_then(|()| encoder.finish())
                        .map_err(AssetError::io("compress", &dest))?;
                    sink.write(&dest, &gz)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Every `File` pick must have been found, every `Dir` pick must have matched at least one member, and
/// every object of an `RLazyLoad` pick must have been written.
///
/// # Errors
///
/// [`AssetError::MemberNotFound`], [`AssetError::NoMemberUnder`], [`AssetError::ObjectNotWritten`].
pub fn check_all_picked(
    picks: &[Pick],
    extracted: &BTreeMap<String, String>,
) -> Result<(), AssetError> {
    for pick in picks {
        match *pick {
            Pick::File { member, dest } => {
                if !extracted.contains_key(dest) {
                    return Err(AssetError::MemberNotFound {
                        member: member.to_string(),
                    });
                }
            }
            Pick::Dir {
                prefix, dest_dir, ..
            } => {
                if !extracted
                    .keys()
                    .any(|k| k.starts_with(&format!("{dest_dir}/")))
                {
                    return Err(AssetError::NoMemberUnder {
                        prefix: prefix.to_string(),
                    });
                }
            }
            Pick::Nested { picks, .. } => check_all_picked(picks, extracted)?,
            Pick::RLazyLoad { db, objects } => {
                for object in objects {
                    if !extracted.contains_key(&format!("{object}.rds")) {
                        return Err(AssetError::ObjectNotWritten {
                            object: object.to_string(),
                            db: db.to_string(),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}
