//! Paired comparisons: per unit (an LM block, an ICL (seed, example) pair) the difference of a
//! method from a baseline on the SAME unit, the mean difference with a paired bootstrap interval,
//! and win / tie / loss counts. Pairing removes the between-unit spread (one block is simply harder
//! than another) that makes the per-method intervals overlap although one method is better on
//! almost every unit.
//!
//! Where units are not independent, because the same test query is scored once per seed, the
//! bootstrap must resample what repeats ([`paired_diff_clustered`]: a cluster bootstrap that draws
//! whole queries, each with all of its seeds); resampling the (seed, query) pairs one by one
//! ([`paired_diff`]) treats three correlated scores of one query as three independent ones and
//! makes the interval too narrow (by up to √3 with three seeds).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bootstrap::percentile_interval;

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
    #[serde(deserialize_with = "crate::json_nan::nan_if_null")]
    pub mean: f64,
    /// Lower end of the percentile bootstrap interval of the mean (each unit keeps its method and
    /// baseline values together; what was drawn is [`PairedDiff::resampled`]).
    #[serde(deserialize_with = "crate::json_nan::nan_if_null")]
    pub ci_low: f64,
    /// Upper end of the interval.
    #[serde(deserialize_with = "crate::json_nan::nan_if_null")]
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
    /// What the bootstrap resampled: `units` ([`paired_diff`]: each unit on its own, an LM block),
    /// `clusters` ([`paired_diff_clustered`]), or the caller's words for them
    /// ([`PairedDiff::resampled_as`], e.g. `queries (each keeps its seeds together)`). Reports
    /// written before it was recorded read as `units`, which is what they resampled.
    #[serde(default = "units_resampled")]
    pub resampled: String,
    /// Number of resampled clusters (`n` when every unit is its own); 0 in reports written before
    /// it was recorded.
    #[serde(default)]
    pub clusters: usize,
}

/// [`PairedDiff::resampled`] of [`paired_diff`], and of reports written before it was recorded.
pub const UNITS_RESAMPLED: &str = "units";
/// [`PairedDiff::resampled`] of [`paired_diff_clustered`] unless the caller names the clusters.
pub const CLUSTERS_RESAMPLED: &str = "clusters";

fn units_resampled() -> String {
    UNITS_RESAMPLED.into()
}

impl PairedDiff {
    /// The same difference with [`PairedDiff::resampled`] in the caller's words (what a unit or a
    /// cluster is: `blocks`, `queries (each keeps its seeds together)`).
    pub fn resampled_as(mut self, what: impl Into<String>) -> Self {
        self.resampled = what.into();
        self
    }

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

/// Mean and paired bootstrap interval of `method[i] − baseline[i]`, every unit its own cluster.
///
/// Units are resampled with replacement (`settings.resamples` times, deterministically from
/// `settings.seed`); the interval is the `(1 ± level) / 2` quantiles of the resampled means. With
/// fewer than 2 units the interval is the single value. Use it where the units are independent (LM
/// blocks); where a unit repeats (the same query under several seeds) use
/// [`paired_diff_clustered`].
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
    let n = method.1.len().min(baseline.1.len());
    let singletons: Vec<usize> = (0..n).collect();
    paired_diff_clustered(method, baseline, &singletons, better, settings)
        .resampled_as(UNITS_RESAMPLED)
}

/// Mean and cluster bootstrap interval of `method[i] − baseline[i]`, where `clusters[i]` names the
/// cluster of unit `i` (in the ICL report: the test query, whose units are its seeds).
///
/// The mean and the win / tie / loss counts are over units, as in [`paired_diff`]. The interval
/// resamples CLUSTERS: each of `settings.resamples` draws (deterministic from `settings.seed`)
/// picks as many cluster ids as there are distinct ones, with replacement, and takes the mean over
/// all units of the drawn clusters (a cluster drawn twice counts twice); the interval is the
/// `(1 ± level) / 2` quantiles of those means. Units that share a cluster therefore move together,
/// so the interval reflects how the mean would vary over new queries, not over new (seed, query)
/// pairs. With every unit its own cluster this is exactly [`paired_diff`] (same draws, same
/// numbers). With fewer than 2 clusters the interval is the single value.
///
/// # Panics
///
/// Never; mismatched lengths use the common prefix of the three slices.
pub fn paired_diff_clustered(
    method: (&str, &[f64]),
    baseline: (&str, &[f64]),
    clusters: &[usize],
    better: Better,
    settings: &PairedSettings,
) -> PairedDiff {
    let diffs: Vec<f64> = method
        .1
        .iter()
        .zip(baseline.1)
        .zip(clusters)
        .map(|((m, b), _)| m - b)
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
    // (sum of differences, units) per cluster, in increasing cluster id.
    let mut by_cluster: BTreeMap<usize, (f64, usize)> = BTreeMap::new();
    for (&d, &c) in diffs.iter().zip(clusters) {
        let entry = by_cluster.entry(c).or_insert((0.0, 0));
        entry.0 += d;
        entry.1 += 1;
    }
    let groups: Vec<(f64, usize)> = by_cluster.into_values().collect();
    let n_clusters = groups.len();
    let (ci_low, ci_high) = percentile_interval(
        &groups,
        settings.level,
        settings.resamples,
        settings.seed,
        |mean| mean,
    )
    .unwrap_or((mean, mean));
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
        resampled: CLUSTERS_RESAMPLED.into(),
        clusters: n_clusters,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng;

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

    /// Width of the interval.
    fn width(d: &PairedDiff) -> f64 {
        d.ci_high - d.ci_low
    }

    /// Enough resamples that the quantiles of the bootstrap means are within a percent or two of
    /// their limit, so the width ratios below measure the resampling unit, not resampling noise.
    fn many_resamples() -> PairedSettings {
        PairedSettings {
            resamples: 20_000,
            seed: 7,
            ..PairedSettings::default()
        }
    }

    /// Seed-major units (every query under seed 0, then under seed 1, …), as the ICL report
    /// orders them; the cluster of a unit is its query.
    fn query_clusters(n_queries: usize, n_seeds: usize) -> Vec<usize> {
        (0..n_seeds).flat_map(|_| 0..n_queries).collect()
    }

    #[test]
    fn repeated_queries_widen_the_interval_by_the_root_of_the_seeds() {
        // 16 queries × 3 seeds; each query's difference is the same under all its seeds, so the
        // data hold 16 independent values, not 48. The naive bootstrap's standard error is
        // σ/√48, the query bootstrap's σ/√16 (equal cluster sizes: exactly the mean of 16 query
        // means): widths in the ratio √3.
        const N_QUERIES: usize = 16;
        const N_SEEDS: usize = 3;
        // Relative tolerance on the width ratio: 20 000 resamples put each 2.5 % / 97.5 % quantile
        // within about 1 % of its limit, and the percentile widths of two different resampling
        // schemes of a small sample differ from the exact √3 ratio of standard errors by a few %.
        const RATIO_TOL: f64 = 0.08;
        let mut draws = rng::seeded(62);
        let per_query: Vec<f64> = (0..N_QUERIES)
            .map(|_| rng::standard_normal(&mut draws))
            .collect();
        let method: Vec<f64> = (0..N_SEEDS).flat_map(|_| per_query.clone()).collect();
        let base = vec![0.0; method.len()];
        let clusters = query_clusters(N_QUERIES, N_SEEDS);
        let s = many_resamples();
        let naive = paired_diff(("m", &method), ("b", &base), Better::Higher, &s);
        let clustered =
            paired_diff_clustered(("m", &method), ("b", &base), &clusters, Better::Higher, &s);
        assert_eq!(clustered.mean, naive.mean, "the point estimate is the same");
        assert_eq!((clustered.n, clustered.clusters), (48, N_QUERIES));
        assert_eq!((naive.n, naive.clusters), (48, 48));
        assert_eq!(
            (naive.resampled.as_str(), clustered.resampled.as_str()),
            (UNITS_RESAMPLED, CLUSTERS_RESAMPLED)
        );
        let ratio = width(&clustered) / width(&naive);
        assert!(
            (ratio / 3f64.sqrt() - 1.0).abs() < RATIO_TOL,
            "clustered/naive width {ratio}, expected about √3: {naive:?} {clustered:?}"
        );
    }

    #[test]
    fn independent_seeds_leave_the_interval_as_wide_as_the_naive_one() {
        // Every (seed, query) value drawn on its own: the query is no unit of repetition, and the
        // two bootstraps estimate the same standard error σ/√(queries × seeds).
        const N_QUERIES: usize = 400;
        const N_SEEDS: usize = 3;
        // Relative tolerance: the realised between-seed correlation of 400 finite queries moves
        // the clustered standard error by about 1/√(2 × 400) = 3.5 % (one sd), plus ~1 % of
        // resampling noise per interval; 0.12 is three of those sds. A query-level resampling
        // of perfectly correlated seeds would be √3 = 1.73 times wider, far outside.
        const RATIO_TOL: f64 = 0.12;
        let mut draws = rng::seeded(63);
        let method: Vec<f64> = (0..N_QUERIES * N_SEEDS)
            .map(|_| rng::standard_normal(&mut draws))
            .collect();
        let base = vec![0.0; method.len()];
        let clusters = query_clusters(N_QUERIES, N_SEEDS);
        let s = many_resamples();
        let naive = paired_diff(("m", &method), ("b", &base), Better::Higher, &s);
        let clustered =
            paired_diff_clustered(("m", &method), ("b", &base), &clusters, Better::Higher, &s);
        let ratio = width(&clustered) / width(&naive);
        assert!(
            (ratio - 1.0).abs() < RATIO_TOL,
            "clustered/naive width {ratio}, expected about 1"
        );
    }

    #[test]
    fn singleton_clusters_are_the_unit_bootstrap_and_ids_need_not_be_dense() {
        let mut draws = rng::seeded(64);
        let method: Vec<f64> = (0..30).map(|_| rng::standard_normal(&mut draws)).collect();
        let base: Vec<f64> = (0..30).map(|_| rng::standard_normal(&mut draws)).collect();
        let s = PairedSettings::default();
        let unit = paired_diff(("m", &method), ("b", &base), Better::Lower, &s);
        // The unit bootstrap as it was written before clusters existed: the committed LM intervals
        // must not move.
        let diffs: Vec<f64> = method.iter().zip(&base).map(|(m, b)| m - b).collect();
        let mut r = rng::seeded(s.seed);
        let mut means: Vec<f64> = (0..s.resamples)
            .map(|_| (0..30).map(|_| diffs[rng::below(&mut r, 30)]).sum::<f64>() / 30.0)
            .collect();
        means.sort_by(f64::total_cmp);
        let last = (s.resamples - 1) as f64;
        let q = |p: f64| means[(p * last).round() as usize];
        assert_eq!((unit.ci_low, unit.ci_high), (q(0.025), q(0.975)));
        // Sparse increasing ids, one unit each: the same clusters in the same order.
        let sparse: Vec<usize> = (0..30).map(|i| 1000 + 7 * i).collect();
        let clustered =
            paired_diff_clustered(("m", &method), ("b", &base), &sparse, Better::Lower, &s);
        assert_eq!(clustered.clone().resampled_as(UNITS_RESAMPLED), unit);
        // One cluster holding every unit: nothing to resample.
        let one = paired_diff_clustered(("m", &method), ("b", &base), &[5; 30], Better::Lower, &s);
        assert_eq!(
            (one.ci_low, one.ci_high, one.clusters),
            (one.mean, one.mean, 1)
        );
    }

    #[test]
    fn reports_written_before_the_resampling_unit_was_recorded_still_read() {
        let d = paired_diff(
            ("m", &[1.0, 2.0]),
            ("b", &[0.0, 0.0]),
            Better::Higher,
            &PairedSettings::default(),
        );
        let mut json = serde_json::to_value(&d).unwrap();
        let object = json.as_object_mut().unwrap();
        assert!(object.remove("resampled").is_some() && object.remove("clusters").is_some());
        let old: PairedDiff = serde_json::from_value(json).unwrap();
        assert_eq!((old.resampled.as_str(), old.clusters), (UNITS_RESAMPLED, 0));
        let named = d.resampled_as("blocks");
        let back: PairedDiff =
            serde_json::from_str(&serde_json::to_string(&named).unwrap()).unwrap();
        assert_eq!(back, named);
    }
}
