//! Paired differences between the Table 1 variants: each variant against the one it adds a
//! training term to (CGT against the baseline, + aux against CGT, + aux + reg against + aux; on text
//! also the full CGT and the widened baseline against the baseline and each other), per
//! seed (both runs of a seed share the training stream, the initialisation seed and the evaluation
//! sequences), as mean ± 95 % Student-t half-width over the seeds that have both runs.
//!
//! The per-variant cells of the main table cannot say whether two columns differ: their intervals
//! include the seed-to-seed spread that the pairing cancels.

use tint_cgt::presets::{DataPreset, Variant};
use tint_lab::table::Table;

use super::conventions::freeze_points;
use super::variant_result::VariantResult;
use tint_lab::seed_interval::cell;

/// The comparisons of the table, in its column order: `(a, b)` reports `b − a`.
pub const COMPARISONS: [(Variant, Variant); 3] = [
    (Variant::Baseline, Variant::Cgt),
    (Variant::Cgt, Variant::CgtAux),
    (Variant::CgtAux, Variant::CgtAuxReg),
];

/// The text presets' further comparisons (paper Fig. 5): the full CGT and the widened baseline
/// against the baseline, and the full CGT against the widened baseline.
pub const TEXT_COMPARISONS: [(Variant, Variant); 3] = [
    (Variant::Baseline, Variant::CgtAuxReg),
    (Variant::Baseline, Variant::WideBaseline),
    (Variant::WideBaseline, Variant::CgtAuxReg),
];

/// The comparisons of a preset's table: [`COMPARISONS`], and on text [`TEXT_COMPARISONS`] after them.
pub fn comparisons(data: &DataPreset) -> Vec<(Variant, Variant)> {
    let mut all = COMPARISONS.to_vec();
    if matches!(data, DataPreset::TextMixture { .. }) {
        all.extend(TEXT_COMPARISONS);
    }
    all
}

/// A per-run value of a row (`None` where the run lacks it).
type RunValue = Box<dyn Fn(&VariantResult) -> Option<f64>>;

/// One row of the table: a per-run value and how its cells are printed.
struct PairedMetric {
    name: String,
    value: RunValue,
    scale: f64,
    digits: usize,
    suffix: &'static str,
}

/// `b − a` of `metric` for every seed where both variants have a value, in the order of the seeds'
/// first appearance among `a`'s runs.
pub fn paired_differences(
    results: &[VariantResult],
    a: Variant,
    b: Variant,
    metric: &dyn Fn(&VariantResult) -> Option<f64>,
) -> Vec<f64> {
    results
        .iter()
        .filter(|r| r.variant == a)
        .filter_map(|ra| {
            let rb = results
                .iter()
                .find(|r| r.variant == b && r.seed == ra.seed)?;
            Some(metric(rb)? - metric(ra)?)
        })
        .collect()
}

/// The metrics compared for a preset's data: the figures of the main table's rows
/// ([`super::run_metrics`]) where a difference between two variants is read, plus the gaps.
fn metrics(data: &DataPreset) -> Vec<PairedMetric> {
    let metric = |name: &str, value: RunValue, scale: f64, digits: usize, suffix: &'static str| {
        PairedMetric {
            name: name.to_string(),
            value,
            scale,
            digits,
            suffix,
        }
    };
    let points = |name: &str, value: fn(&VariantResult) -> Option<f64>| {
        metric(name, Box::new(value), 100.0, 1, " points")
    };
    let plain = |name: &str, value: RunValue| metric(name, value, 1.0, 3, "");
    match data {
        DataPreset::Arithmetic(_) => vec![
            points("base accuracy (dynamic y)", VariantResult::dynamic_accuracy),
            points(
                "in-context gain (base − no-example accuracy)",
                VariantResult::in_context_gain,
            ),
            points("specialised accuracy", VariantResult::specialised_accuracy),
            points(
                "specialisation gap (base − specialised accuracy)",
                VariantResult::specialisation_gap,
            ),
            plain(
                "representation variation (eq. 4)",
                Box::new(VariantResult::representation_variation),
            ),
            plain(
                "linear-fit error of (a, b) from y",
                Box::new(VariantResult::linear_fit_error),
            ),
        ],
        DataPreset::LinearRegression(data) => {
            let k = freeze_points(data.n_pairs)[2];
            vec![
                plain(
                    &format!("L2 on pairs {k}.., dynamic y"),
                    Box::new(move |r| r.dynamic_error_from(k)),
                ),
                plain(
                    &format!("L2 on pairs {k}.., y frozen after {k} pairs"),
                    Box::new(move |r| r.frozen_error_after(k)),
                ),
                plain(
                    &format!("specialisation gap (frozen − dynamic L2 on pairs {k}..)"),
                    Box::new(move |r| r.frozen_gap_after(k)),
                ),
                plain(
                    "representation variation (eq. 4)",
                    Box::new(VariantResult::representation_variation),
                ),
                plain(
                    "linear-fit error of (U, b) from y",
                    Box::new(VariantResult::linear_fit_error),
                ),
            ]
        }
        DataPreset::TextMixture { .. } => vec![
            plain(
                "eval CE (dynamic y), nats/byte",
                Box::new(VariantResult::text_loss_dynamic),
            ),
            plain(
                "eval CE, frozen-y auxiliary model",
                Box::new(VariantResult::text_loss_frozen),
            ),
        ],
    }
}

/// The markdown table of paired differences: one column per comparison whose two variants both
/// have runs, one row per metric (`–` where a variant lacks it, e.g. the baseline's specialised
/// accuracy). Empty when no comparison has a seed with both runs.
pub fn paired_table(data: &DataPreset, results: &[VariantResult]) -> String {
    let has_pair = |(a, b): (Variant, Variant)| {
        results.iter().any(|ra| {
            ra.variant == a
                && results
                    .iter()
                    .any(|rb| rb.variant == b && rb.seed == ra.seed)
        })
    };
    let comparisons: Vec<(Variant, Variant)> = comparisons(data)
        .into_iter()
        .filter(|&c| has_pair(c))
        .collect();
    if comparisons.is_empty() {
        return String::new();
    }
    let mut table = Table::new(
        std::iter::once("paired difference".to_string()).chain(
            comparisons
                .iter()
                .map(|(a, b)| format!("{} − {}", b.title(), a.title())),
        ),
    );
    for m in metrics(data) {
        let cells = comparisons.iter().map(|&(a, b)| {
            let differences = paired_differences(results, a, b, &*m.value);
            cell(&differences, m.scale, m.digits, m.suffix)
        });
        table.push_row(std::iter::once(m.name.to_string()).chain(cells));
    }
    table.to_markdown()
}

#[cfg(test)]
mod tests {
    use super::super::settings::CgtSettings;
    use super::*;
    use tint_cgt::metrics::IclEvaluation;

    fn run(variant: Variant, seed: u64, accuracy: f64, specialised: Option<f64>) -> VariantResult {
        VariantResult {
            icl: Some(IclEvaluation {
                dynamic_accuracy: accuracy,
                no_example_accuracy: 0.4,
                specialised_accuracy: specialised,
                ..Default::default()
            }),
            ..VariantResult::empty(variant, seed)
        }
    }

    #[test]
    fn differences_pair_runs_by_seed_and_skip_unpaired_seeds() {
        let results = [
            run(Variant::Cgt, 0, 0.50, Some(0.20)),
            run(Variant::Cgt, 1, 0.60, Some(0.30)),
            run(Variant::Cgt, 2, 0.70, Some(0.10)),
            // Seed 2 has no CGT + aux run: it drops out of that comparison.
            run(Variant::CgtAux, 1, 0.64, Some(0.60)),
            run(Variant::CgtAux, 0, 0.52, Some(0.50)),
        ];
        let gap = VariantResult::specialisation_gap;
        let d = paired_differences(&results, Variant::Cgt, Variant::CgtAux, &gap);
        // Seed 0: (0.52 − 0.50) − (0.50 − 0.20) = −0.28; seed 1: 0.04 − 0.30 = −0.26. Tolerance
        // 1e-12: two subtractions of numbers below 1.
        assert_eq!(d.len(), 2);
        assert!(
            (d[0] + 0.28).abs() < 1e-12 && (d[1] + 0.26).abs() < 1e-12,
            "{d:?}"
        );
        // The baseline has no runs here: no pairs.
        assert!(paired_differences(&results, Variant::Baseline, Variant::Cgt, &gap).is_empty());
    }

    #[test]
    fn the_table_has_a_column_per_comparison_with_runs() {
        let preset = CgtSettings::new("icl-tiny", "flex")
            .configured_preset()
            .unwrap();
        let results = [
            run(Variant::Baseline, 0, 0.50, None),
            run(Variant::Baseline, 1, 0.52, None),
            run(Variant::Cgt, 0, 0.55, Some(0.2)),
            run(Variant::Cgt, 1, 0.53, Some(0.3)),
        ];
        let table = paired_table(&preset.data, &results);
        assert!(
            table.starts_with("| paired difference | CGT (no Aux/Reg) − Baseline |\n|---|---|\n"),
            "{table}"
        );
        // Differences +5 and +1 points: mean 3, half-width 12.706 · 2.828 / sqrt(2) = 25.4.
        assert!(
            table.contains("| base accuracy (dynamic y) | 3.0 ± 25.4 points |"),
            "{table}"
        );
        // The baseline has no specialised accuracy: no pair.
        assert!(table.contains("| specialised accuracy | – |"), "{table}");
        assert!(paired_table(&preset.data, &results[..2]).is_empty());
    }

    #[test]
    fn regression_rows_pair_the_errors_after_the_last_freeze_point() {
        let preset = CgtSettings::new("linreg-cpu", "flex")
            .configured_preset()
            .unwrap();
        let DataPreset::LinearRegression(data) = &preset.data else {
            panic!("linreg preset expected")
        };
        let n = data.n_pairs;
        let k = freeze_points(n)[2];
        // Dynamic error `dynamic` on every pair, frozen error `frozen` after k pairs.
        let run = |variant, seed, dynamic: f64, frozen: f64| VariantResult {
            regression: Some(tint_cgt::metrics::RegressionEvaluation {
                dynamic_by_pair: vec![dynamic; n],
                specialised: freeze_points(n).iter().map(|&p| (p, 0.0, frozen)).collect(),
                representation_variation: None,
                linear_fit_error: None,
            }),
            ..VariantResult::empty(variant, seed)
        };
        let results = [
            run(Variant::Cgt, 1, 1.0, 4.0),
            run(Variant::CgtAux, 1, 1.5, 2.5),
        ];
        let table = paired_table(&preset.data, &results);
        // One seed: single observations. Gap 3.0 without aux, 1.0 with it: −2.0.
        for row in [
            format!("| L2 on pairs {k}.., dynamic y | 0.500 |"),
            format!("| L2 on pairs {k}.., y frozen after {k} pairs | -1.500 |"),
            format!("| specialisation gap (frozen − dynamic L2 on pairs {k}..) | -2.000 |"),
            "| representation variation (eq. 4) | – |".to_string(),
        ] {
            assert!(table.contains(&row), "{row}\n{table}");
        }
    }
}
