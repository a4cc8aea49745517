//! Paired comparisons: per unit (an LM block, an ICL example) the difference of a method from a
//! baseline on the SAME unit, the mean difference with a paired bootstrap interval, and win / tie /
//! loss counts. Pairing removes the between-unit spread (one block is simply harder than another)
//! that makes the per-method intervals overlap although one method is better on almost every unit.

use serde::{Deserialize, Serialize};

use crate::rng;

/// Which direction of a difference is a win.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Better {
    /// Lower is better (negative log-likelihood).
    Lower,
    /// Higher is better (accuracy).
    Higher,
}

/// The paired difference `method − baseline` over the units both were evaluated on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedDiff {
    /// The method.
    pub method: String,
    /// The baseline it is compared with.
    pub baseline: String,
    /// Mean over units of `method − baseline`.
    #[serde(deserialize_with = "crate::non_finite::nan_if_null")]
    pub mean: f64,
    /// Lower end of the percentile bootstrap interval of the mean (units resampled in pairs).
    #[serde(deserialize_with = "crate::non_finite::nan_if_null")]
    pub ci_low: f64,
    /// Upper end of the interval.
    #[serde(deserialize_with = "crate::non_finite::nan_if_null")]
    pub ci_high: f64,
    /// Confidence level, e.g. 0.95.
    pub level: f64,
    /// Units where the method is better than the baseline by more than `tie_tolerance`.
    pub wins: usize,
    /// Units where they differ by at most `tie_tolerance`.
    pub ties: usize,
    /// Units where the method is worse.
    pub losses: usize,
    /// Number of units.
    pub n: usize,
    /// `|difference| <= tie_tolerance` counts as a tie.
    pub tie_tolerance: f64,
    /// Direction of a win.
    pub better: Better,
}

impl PairedDiff {
    /// Whether the interval excludes 0 (the difference is resolved at this level).
    pub fn resolved(&self) -> bool {
        self.ci_low > 0.0 || self.ci_high < 0.0
    }

    /// `Δ [lo, hi]` with `digits` decimals and `wins/n`, for tables.
    pub fn cell(&self, digits: usize) -> String {
        format!(
            "{:+.d$} [{:+.d$}, {:+.d$}], {}/{}",
            self.mean,
            self.ci_low,
            self.ci_high,
            self.wins,
            self.n,
            d = digits
        )
    }
}

/// Settings of the paired bootstrap.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedSettings {
    /// Confidence level.
    pub level: f64,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Seed of the resampling.
    pub seed: u64,
    /// Differences at most this large (in absolute value) are ties.
    pub tie_tolerance: f64,
}

impl Default for PairedSettings {
    fn default() -> Self {
        Self {
            level: 0.95,
            resamples: 2000,
            seed: 0,
            tie_tolerance: 1e-6,
        }
    }
}

/// Mean and paired bootstrap interval of `method[i] − baseline[i]`.
///
/// Units are resampled with replacement (`settings.resamples` times, deterministically from
/// `settings.seed`); the interval is the `(1 ± level) / 2` quantiles of the resampled means. With
/// fewer than 2 units the interval is the single value.
///
/// # Panics
///
/// Never; mismatched lengths use the common prefix (callers pair by unit before calling).
pub fn paired_diff(
    method: (&str, &[f64]),
    baseline: (&str, &[f64]),
    better: Better,
    settings: &PairedSettings,
) -> PairedDiff {
    let diffs: Vec<f64> = method
        .1
        .iter()
        .zip(baseline.1)
        .map(|(m, b)| m - b)
        .collect();
    let n = diffs.len();
    let mean = diffs.iter().sum::<f64>() / n.max(1) as f64;
    let (mut wins, mut ties, mut losses) = (0, 0, 0);
    for &d in &diffs {
        if d.abs() <= settings.tie_tolerance {
            ties += 1;
        } else if (d < 0.0) == (better == Better::Lower) {
            wins += 1;
        } else {
            losses += 1;
        }
    }
    let (ci_low, ci_high) = if n < 2 || settings.resamples == 0 {
        (mean, mean)
    } else {
        let mut draws = rng::seeded(settings.seed);
        let mut means: Vec<f64> = (0..settings.resamples)
            .map(|_| {
                (0..n)
                    .map(|_| diffs[rng::below(&mut draws, n)])
                    .sum::<f64>()
                    / n as f64
            })
            .collect();
        means.sort_by(f64::total_cmp);
        let last = settings.resamples - 1;
        let q = |p: f64| means[((p * last as f64).round() as usize).min(last)];
        (
            q((1.0 - settings.level) / 2.0),
            q((1.0 + settings.level) / 2.0),
        )
    };
    PairedDiff {
        method: method.0.to_string(),
        baseline: baseline.0.to_string(),
        mean,
        ci_low,
        ci_high,
        level: settings.level,
        wins,
        ties,
        losses,
        n,
        tie_tolerance: settings.tie_tolerance,
        better,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_counts_and_interval_of_a_known_difference() {
        let base = [3.0, 2.0, 5.0, 4.0, 1.0, 6.0];
        // The method is 0.1 lower on five units and equal on one.
        let method = [2.9, 1.9, 4.9, 3.9, 0.9, 6.0];
        let d = paired_diff(
            ("m", &method),
            ("b", &base),
            Better::Lower,
            &PairedSettings::default(),
        );
        assert!((d.mean - (-0.5 / 6.0)).abs() < 1e-12, "{d:?}");
        assert_eq!((d.wins, d.ties, d.losses, d.n), (5, 1, 0, 6));
        // Every resampled mean lies between -0.1 (all wins) and 0 (all ties).
        assert!(d.ci_low >= -0.1 - 1e-12 && d.ci_high <= 1e-12, "{d:?}");
        assert!(d.ci_low <= d.mean && d.mean <= d.ci_high);
        assert!(d.resolved(), "a consistent -0.1 shift is resolved: {d:?}");
        // The same data with Higher-is-better makes the wins losses.
        let h = paired_diff(
            ("m", &method),
            ("b", &base),
            Better::Higher,
            &PairedSettings::default(),
        );
        assert_eq!((h.wins, h.losses), (0, 5));
    }

    #[test]
    fn pairing_resolves_what_unpaired_spread_hides() {
        // Units differ by a lot, the method is uniformly 0.05 better: paired interval is a point.
        let base: Vec<f64> = (0..10).map(|i| 10.0 * i as f64).collect();
        let method: Vec<f64> = base.iter().map(|b| b - 0.05).collect();
        let d = paired_diff(
            ("m", &method),
            ("b", &base),
            Better::Lower,
            &PairedSettings::default(),
        );
        assert!((d.ci_low + 0.05).abs() < 1e-9 && (d.ci_high + 0.05).abs() < 1e-9);
    }

    #[test]
    fn a_symmetric_difference_is_not_resolved_and_is_deterministic() {
        let base = [0.0; 8];
        let method = [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0];
        let s = PairedSettings::default();
        let a = paired_diff(("m", &method), ("b", &base), Better::Lower, &s);
        let b = paired_diff(("m", &method), ("b", &base), Better::Lower, &s);
        assert_eq!(a, b);
        assert!(!a.resolved(), "{a:?}");
        assert_eq!((a.wins, a.losses), (4, 4));
        let cell = a.cell(2);
        assert!(
            cell.starts_with("+0.00 [") && cell.ends_with("], 4/8"),
            "{cell}"
        );
    }

    #[test]
    fn one_unit_has_a_point_interval() {
        let d = paired_diff(
            ("m", &[1.0]),
            ("b", &[2.0]),
            Better::Lower,
            &PairedSettings::default(),
        );
        assert_eq!((d.ci_low, d.mean, d.ci_high), (-1.0, -1.0, -1.0));
    }
}
