//! Cutting a token stream into evaluation blocks with a training part and an evaluation part.

use crate::EvalError;

/// How a token stream is cut into blocks.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BlockSpec {
    /// Tokens per block (the auxiliary model's context for one sequence).
    pub block_size: usize,
    /// Fraction of each block used for training (the first `floor(block_size * f)` tokens).
    pub train_fraction: f64,
    /// At most this many blocks are used (evenly spaced over the text when there are more).
    pub max_blocks: usize,
}

impl BlockSpec {
    /// Number of training tokens per block: `floor(block_size * train_fraction)`, as in the paper's
    /// `int(T * train_fraction)`.
    pub fn train_len(&self) -> usize {
        (self.block_size as f64 * self.train_fraction).floor() as usize
    }

    /// Checks the settings: block size ≥ 4, train fraction in (0, 1) leaving ≥ 2 training tokens and
    /// ≥ 1 evaluated token, at least one block.
    pub fn validate(&self) -> Result<(), EvalError> {
        if self.block_size < 4 {
            return Err(EvalError::InvalidSetting {
                name: "--block-size",
                value: self.block_size.to_string(),
                rule: "must be at least 4".into(),
            });
        }
        if !(self.train_fraction > 0.0 && self.train_fraction < 1.0) {
            return Err(EvalError::InvalidSetting {
                name: "--train-fraction",
                value: self.train_fraction.to_string(),
                rule: "must be strictly between 0 and 1".into(),
            });
        }
        let train = self.train_len();
        if train < 2 || train >= self.block_size {
            return Err(EvalError::InvalidSetting {
                name: "--train-fraction",
                value: self.train_fraction.to_string(),
                rule: "must leave at least 2 training tokens and 1 evaluated token per block"
                    .into(),
            });
        }
        if self.max_blocks == 0 {
            return Err(EvalError::InvalidSetting {
                name: "--max-blocks",
                value: "0".into(),
                rule: "must be at least 1".into(),
            });
        }
        Ok(())
    }

    /// Cuts `tokens` into non-overlapping blocks of `block_size` (a trailing partial block is dropped)
    /// and keeps at most `max_blocks`, evenly spaced, in order.
    pub fn cut(&self, tokens: &[u32]) -> Result<Vec<Vec<u32>>, EvalError> {
        self.validate()?;
        let n_full = tokens.len() / self.block_size;
        if n_full == 0 {
            return Err(EvalError::TextTooShort {
                tokens: tokens.len(),
                block_size: self.block_size,
            });
        }
        let n = n_full.min(self.max_blocks);
        Ok((0..n)
            .map(|i| {
                // Evenly spaced block indices: i * n_full / n.
                let b = i * n_full / n;
                tokens[b * self.block_size..(b + 1) * self.block_size].to_vec()
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(block_size: usize, train_fraction: f64, max_blocks: usize) -> BlockSpec {
        BlockSpec {
            block_size,
            train_fraction,
            max_blocks,
        }
    }

    #[test]
    fn cuts_full_blocks_and_spreads_them() {
        let tokens: Vec<u32> = (0..100).collect();
        let blocks = spec(10, 0.5, 3).cut(&tokens).unwrap();
        assert_eq!(blocks.len(), 3);
        // 10 full blocks, 3 kept: indices 0, 3, 6.
        assert_eq!(blocks[0][0], 0);
        assert_eq!(blocks[1][0], 30);
        assert_eq!(blocks[2][0], 60);
        assert!(blocks.iter().all(|b| b.len() == 10));
        let all = spec(10, 0.5, 1000).cut(&tokens[..95]).unwrap();
        assert_eq!(all.len(), 9, "the trailing partial block is dropped");
    }

    #[test]
    fn train_len_floors_like_the_paper() {
        assert_eq!(spec(256, 0.3, 1).train_len(), 76);
        assert_eq!(spec(256, 0.5, 1).train_len(), 128);
        assert_eq!(spec(64, 0.9, 1).train_len(), 57);
    }

    #[test]
    fn bad_settings_are_named() {
        let err = spec(10, 1.0, 1).validate().unwrap_err().to_string();
        assert!(err.contains("train-fraction"), "{err}");
        let err = spec(2, 0.5, 1).validate().unwrap_err().to_string();
        assert!(err.contains("block-size"), "{err}");
        let err = spec(10, 0.5, 0).validate().unwrap_err().to_string();
        assert!(err.contains("max-blocks"), "{err}");
        let err = spec(10, 0.5, 1).cut(&[1, 2, 3]).unwrap_err();
        assert!(matches!(err, EvalError::TextTooShort { tokens: 3, .. }));
    }
}
