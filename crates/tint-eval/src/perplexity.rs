//! Perplexity from summed negative log-likelihoods, with a bootstrap confidence interval over blocks.

use tint_lab::bootstrap::percentile_interval;

/// Summed next-token negative log-likelihood of one block's evaluated part.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BlockNll {
    /// Σ −log p(token) over the evaluated targets (natural log).
    #[serde(deserialize_with = "tint_lab::json_nan::nan_if_null")]
    pub sum_nll: f64,
    /// Number of evaluated targets.
    pub count: usize,
}

/// A perplexity with its bootstrap confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Perplexity {
    /// `exp(Σ nll / Σ count)` over all blocks (token-weighted, as in the paper's scripts).
    #[serde(deserialize_with = "tint_lab::json_nan::nan_if_null")]
    pub value: f64,
    /// Lower end of the confidence interval.
    #[serde(deserialize_with = "tint_lab::json_nan::nan_if_null")]
    pub ci_low: f64,
    /// Upper end of the confidence interval.
    #[serde(deserialize_with = "tint_lab::json_nan::nan_if_null")]
    pub ci_high: f64,
    /// Confidence level of the interval, e.g. 0.95.
    pub level: f64,
    /// Number of evaluated tokens.
    pub tokens: usize,
}

/// Token-weighted perplexity of a set of blocks.
pub fn perplexity_of(blocks: &[BlockNll]) -> f64 {
    let (nll, n) = blocks
        .iter()
        .fold((0.0, 0usize), |(s, c), b| (s + b.sum_nll, c + b.count));
    (nll / n.max(1) as f64).exp()
}

/// Perplexity with a percentile bootstrap interval ([`percentile_interval`]): blocks are resampled
/// with replacement `resamples` times (deterministically from `seed`), and the interval is the
/// `(1 ± level)/2` quantiles of the resampled perplexities.
pub fn bootstrap(blocks: &[BlockNll], level: f64, resamples: usize, seed: u64) -> Perplexity {
    let value = perplexity_of(blocks);
    let tokens = blocks.iter().map(|b| b.count).sum();
    let groups: Vec<(f64, usize)> = blocks.iter().map(|b| (b.sum_nll, b.count)).collect();
    let (ci_low, ci_high) =
        percentile_interval(&groups, level, resamples, seed, f64::exp).unwrap_or((value, value));
    Perplexity {
        value,
        ci_low,
        ci_high,
        level,
        tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perplexity_is_token_weighted() {
        let blocks = [
            BlockNll {
                sum_nll: 2.0,
                count: 1,
            },
            BlockNll {
                sum_nll: 0.0,
                count: 3,
            },
        ];
        // Σ nll / Σ count = 0.5, not the mean of per-block means (1.0).
        assert!((perplexity_of(&blocks) - 0.5f64.exp()).abs() < 1e-12);
    }

    #[test]
    fn bootstrap_interval_contains_the_value_and_is_deterministic() {
        let blocks: Vec<BlockNll> = (0..20)
            .map(|i| BlockNll {
                sum_nll: 10.0 + i as f64,
                count: 5,
            })
            .collect();
        let a = bootstrap(&blocks, 0.95, 500, 7);
        let b = bootstrap(&blocks, 0.95, 500, 7);
        assert_eq!(a, b);
        assert!(a.ci_low < a.value && a.value < a.ci_high, "{a:?}");
        assert_eq!(a.tokens, 100);
        // Identical blocks have no spread.
        let same = vec![
            BlockNll {
                sum_nll: 3.0,
                count: 2
            };
            10
        ];
        let c = bootstrap(&same, 0.9, 200, 1);
        assert!((c.ci_high - c.ci_low).abs() < 1e-12);
    }
}
