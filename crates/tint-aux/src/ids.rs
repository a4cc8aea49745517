//! Token-id files (`{"input_ids": [[...], ...], "train_mask": [[...], ...]}`): parsing and checks that
//! run before any id reaches a tensor (burn casts ids to the backend's integer type, and an id that does
//! not fit panics there).
//!
//! Rules: at least one row, rows non-empty and of equal length, ids integers in `0..vocab_size`
//! ([`TokenIds::check_vocab`]); the optional `train_mask` has the shape of `input_ids`, entries 0 or 1,
//! and ([`TokenIds::check_train_mask`]) every row has a training token that is a loss target
//! (position ≥ 1) and an evaluation token after its first training token.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::AuxError;

/// Most bytes an ids file may have (1 GiB): the file is read whole.
pub const MAX_IDS_FILE_BYTES: u64 = 1 << 30;

/// A parsed token-ids file. Any other key (e.g. an `attention_mask`, which nothing here would apply)
/// is refused by name rather than ignored.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenIds {
    /// Token ids, one row per sequence.
    pub input_ids: Vec<Vec<i64>>,
    /// Optional training-part mask (1 = training token), same shape as `input_ids`.
    #[serde(default)]
    pub train_mask: Option<Vec<Vec<i64>>>,
}

impl TokenIds {
    /// Reads and parses `path` (at most [`MAX_IDS_FILE_BYTES`], whatever kind of file it is).
    ///
    /// # Errors
    /// [`AuxError::MissingFile`], [`AuxError::Io`], [`AuxError::InvalidIds`].
    pub fn read(path: &Path) -> Result<Self, AuxError> {
        let text = crate::config::read_text_limited(path, "token ids (JSON)", MAX_IDS_FILE_BYTES)?;
        Self::parse(&text, path)
    }

    /// Parses an ids file's text; `path` names it in errors.
    ///
    /// # Errors
    /// [`AuxError::InvalidIds`] for malformed JSON (non-integer or out-of-`i64` ids included), empty or
    /// ragged rows, negative ids, or a bad `train_mask`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, AuxError> {
        let ids: TokenIds = serde_json::from_str(text).map_err(|e| {
            invalid(
                path,
                format!("{e} (expected {{\"input_ids\": [[...], ...]}} with integer ids)"),
            )
        })?;
        check_rect("input_ids", &ids.input_ids, path)?;
        for (b, row) in ids.input_ids.iter().enumerate() {
            if let Some(p) = row.iter().position(|&id| id < 0) {
                return Err(invalid(
                    path,
                    format!("negative token id {} at [{b}, {p}]", row[p]),
                ));
            }
        }
        if let Some(mask) = &ids.train_mask {
            check_rect("train_mask", mask, path)?;
            if mask.len() != ids.input_ids.len() || mask[0].len() != ids.input_ids[0].len() {
                return Err(invalid(
                    path,
                    format!(
                        "train_mask must have the shape of input_ids ([{}, {}]), found [{}, {}]",
                        ids.input_ids.len(),
                        ids.input_ids[0].len(),
                        mask.len(),
                        mask[0].len()
                    ),
                ));
            }
            if let Some(m) = mask.iter().flatten().find(|&&m| m != 0 && m != 1) {
                return Err(invalid(
                    path,
                    format!("train_mask entries must be 0 or 1, found {m}"),
                ));
            }
        }
        Ok(ids)
    }

    /// `[batch_size, seq_length]`.
    pub fn dims(&self) -> [usize; 2] {
        [self.input_ids.len(), self.input_ids[0].len()]
    }

    /// Checks every id against the vocabulary (before any tensor is built).
    ///
    /// # Errors
    /// [`AuxError::TokenIdOutOfRange`] for the first id `≥ vocab_size`.
    pub fn check_vocab(&self, vocab_size: usize) -> Result<(), AuxError> {
        for (batch, row) in self.input_ids.iter().enumerate() {
            for (position, &token_id) in row.iter().enumerate() {
                if u64::try_from(token_id).map_or(true, |id| id >= vocab_size as u64) {
                    return Err(AuxError::TokenIdOutOfRange {
                        token_id,
                        batch,
                        position,
                        vocab_size,
                    });
                }
            }
        }
        Ok(())
    }

    /// Checks that the training mask can drive a simulated update and leaves something to evaluate:
    /// every row has a training token at a position ≥ 1 (position 0 is no next-token target, so a mask
    /// that is all zeros or only marks position 0 gives a zero update) and an evaluation token after its
    /// first training token (a mask whose training tokens are all trailing leaves nothing for them to
    /// help predict).
    ///
    /// # Errors
    /// [`AuxError::InvalidIds`] naming `path`, the row and the rule; also when the mask is absent.
    pub fn check_train_mask(&self, path: &Path) -> Result<(), AuxError> {
        let Some(mask) = &self.train_mask else {
            return Err(invalid(
                path,
                "no \"train_mask\" next to \"input_ids\"".to_string(),
            ));
        };
        for (b, row) in mask.iter().enumerate() {
            if !row.iter().skip(1).any(|&m| m == 1) {
                return Err(invalid(
                    path,
                    format!(
                        "train_mask row {b} has no training token at a position ≥ 1 (all zero, or only \
                         position 0): the simulated update would be zero"
                    ),
                ));
            }
            let first = row.iter().position(|&m| m == 1).unwrap_or(0);
            if !row[first..].contains(&0) {
                return Err(invalid(
                    path,
                    format!(
                        "train_mask row {b} has no evaluation token after its first training token \
                         (position {first}): training tokens only at the end leave nothing to evaluate"
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn invalid(path: &Path, reason: String) -> AuxError {
    AuxError::InvalidIds {
        path: PathBuf::from(path),
        reason,
    }
}

fn check_rect(name: &str, rows: &[Vec<i64>], path: &Path) -> Result<(), AuxError> {
    if rows.is_empty() || rows[0].is_empty() {
        return Err(invalid(path, format!("{name} is empty")));
    }
    if let Some(r) = rows.iter().position(|r| r.len() != rows[0].len()) {
        return Err(invalid(
            path,
            format!(
                "all rows of {name} must have the same length (row 0 has {}, row {r} has {})",
                rows[0].len(),
                rows[r].len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<TokenIds, AuxError> {
        TokenIds::parse(text, Path::new("ids.json"))
    }

    #[test]
    fn well_formed_files_parse_and_bad_ones_name_the_rule() {
        let ids = parse(r#"{"input_ids": [[1, 2, 3]], "train_mask": [[1, 1, 0]]}"#).unwrap();
        assert_eq!(ids.dims(), [1, 3]);
        ids.check_vocab(4).unwrap();
        ids.check_train_mask(Path::new("ids.json")).unwrap();
        let cases = [
            (r#"{"input_ids": []}"#, "empty"),
            (r#"{"input_ids": [[1, 2], [3]]}"#, "same length"),
            (r#"{"input_ids": [[1, -2]]}"#, "negative"),
            (r#"{"input_ids": [[1, 2]], "train_mask": [[1]]}"#, "shape"),
            (
                r#"{"input_ids": [[1, 2]], "train_mask": [[1, 2]]}"#,
                "0 or 1",
            ),
            (r#"{"ids": [[1]]}"#, "expected"),
            (r#"{"input_ids": [[1.5]]}"#, "integer"),
            (r#"{"input_ids": [[9223372036854775808]]}"#, "expected"),
            (
                r#"{"input_ids": [[1, 2]], "attention_mask": [[1, 0]]}"#,
                "unknown field `attention_mask`",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(matches!(err, AuxError::InvalidIds { .. }), "{text}: {err}");
            assert!(err.to_string().contains(expected), "{text}: {err}");
        }
    }

    /// Any kind of file is read up to the limit: a device without a size (`/dev/zero`) is refused
    /// after `limit + 1` bytes instead of filling the memory.
    #[test]
    fn reads_stop_at_the_limit_whatever_the_file() {
        let err =
            crate::config::read_text_limited(Path::new("/dev/zero"), "token ids (JSON)", 1024)
                .unwrap_err()
                .to_string();
        assert!(
            err.contains("/dev/zero") && err.contains("more than the limit of 1024 bytes"),
            "{err}"
        );
        let path = std::env::temp_dir().join(format!("tint-ids-limit-{}.json", std::process::id()));
        let text = r#"{"input_ids": [[1, 2]]}"#;
        let n = text.len() as u64;
        std::fs::write(&path, text).unwrap();
        assert!(crate::config::read_text_limited(&path, "ids", n).is_ok());
        assert!(crate::config::read_text_limited(&path, "ids", n - 1).is_err());
        std::fs::write(&path, b"\xff\xfe").unwrap();
        assert!(crate::config::read_text_limited(&path, "ids", n).is_err());
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn ids_beyond_the_vocabulary_are_refused_before_any_cast() {
        for id in [4i64, 1 << 31, i64::MAX] {
            let ids = parse(&format!(r#"{{"input_ids": [[0, {id}]]}}"#)).unwrap();
            let err = ids.check_vocab(4).unwrap_err();
            assert!(
                matches!(err, AuxError::TokenIdOutOfRange { token_id, position: 1, .. } if token_id == id),
                "{err}"
            );
        }
    }

    #[test]
    fn useless_train_masks_are_refused() {
        let path = Path::new("ids.json");
        for (mask, expected) in [
            ("[[0, 0, 0, 0]]", "no training token"),
            ("[[1, 0, 0, 0]]", "no training token"),
            ("[[0, 0, 1, 1]]", "no evaluation token"),
            ("[[1, 1, 1, 1]]", "no evaluation token"),
        ] {
            let ids = parse(&format!(
                r#"{{"input_ids": [[1, 2, 3, 4]], "train_mask": {mask}}}"#
            ))
            .unwrap();
            let err = ids.check_train_mask(path).unwrap_err();
            assert!(err.to_string().contains(expected), "{mask}: {err}");
        }
        let ids = parse(r#"{"input_ids": [[1, 2, 3, 4]]}"#).unwrap();
        assert!(ids.check_train_mask(path).is_err());
    }
}
