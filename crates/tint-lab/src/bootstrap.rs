//! The percentile bootstrap behind every resampled interval of the experiments: groups of
//! `(sum, count)` (an LM block: its summed NLL and its tokens; a query: its seeds' summed
//! difference and their number) are drawn with replacement, as many as there are, and a statistic
//! of the drawn `Σ sum / Σ count` is taken; the interval is the `(1 ± level) / 2` quantiles of the
//! resampled statistics. The perplexity interval (`exp` of the mean NLL) and the paired
//! differences ([`crate::paired`], the mean itself) are this one function.

use crate::rng;

/// The percentile interval of `statistic(Σ sum / Σ count)` over `resamples` draws of
/// `groups.len()` groups with replacement (deterministic from `seed`; `count` 0 in a whole draw is
/// read as 1). `None` with fewer than 2 groups or no resamples: nothing to resample.
pub fn percentile_interval(
    groups: &[(f64, usize)],
    level: f64,
    resamples: usize,
    seed: u64,
    statistic: impl Fn(f64) -> f64,
) -> Option<(f64, f64)> {
    let n = groups.len();
    if n < 2 || resamples == 0 {
        return None;
    }
    let mut draws = rng::seeded(seed);
    let mut values: Vec<f64> = (0..resamples)
        .map(|_| {
            let (mut sum, mut count) = (0.0, 0usize);
            for _ in 0..n {
                let (s, c) = groups[rng::below(&mut draws, n)];
                sum += s;
                count += c;
            }
            statistic(sum / count.max(1) as f64)
        })
        .collect();
    values.sort_by(f64::total_cmp);
    let last = resamples - 1;
    let q = |p: f64| values[((p * last as f64).round() as usize).min(last)];
    Some((q((1.0 - level) / 2.0), q((1.0 + level) / 2.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_brackets_the_statistic_and_needs_two_groups() {
        let groups = [(1.0, 1), (3.0, 1), (2.0, 2), (8.0, 4)];
        let (low, high) = percentile_interval(&groups, 0.9, 400, 3, |m| m).unwrap();
        // Σ sum / Σ count = 14 / 8; every resample lies between the smallest and largest group mean.
        assert!(low <= 14.0 / 8.0 && 14.0 / 8.0 <= high, "{low} {high}");
        assert!(low >= 1.0 && high <= 3.0);
        assert_eq!(
            percentile_interval(&groups, 0.9, 400, 3, |m| m),
            Some((low, high)),
            "deterministic"
        );
        let exp = percentile_interval(&groups, 0.9, 400, 3, f64::exp).unwrap();
        assert_eq!(
            exp,
            (low.exp(), high.exp()),
            "a monotone statistic maps the quantiles"
        );
        assert!(percentile_interval(&groups[..1], 0.9, 400, 3, |m| m).is_none());
        assert!(percentile_interval(&groups, 0.9, 0, 3, |m| m).is_none());
    }
}
