//! The text presets' comparison of paper Fig. 5: each variant's held-out cross-entropy (dynamic
//! `y`) minus the Baseline's, paired by seed, as bars with their 95 % Student-t intervals over
//! seeds.

use tint_cgt::presets::Variant;
use tint_lab::chart::{grouped_bars_svg, GroupedBar, GroupedBars};
use tint_lab::seed_interval::interval;

use super::error::CgtRunError;
use super::paired::paired_differences;
use super::variant_result::{variants_of, VariantResult};

/// Each variant but the Baseline that has runs paired with a Baseline run of the same seed, with
/// the mean over seeds of its held-out cross-entropy minus the Baseline's and the half-width of the
/// 95 % Student-t interval (0 for one seed), in nats per byte. Empty without a Baseline run or
/// without the text reading.
pub fn differences_from_baseline(results: &[VariantResult]) -> Vec<(Variant, f64, f64)> {
    variants_of(results)
        .into_iter()
        .filter(|&v| v != Variant::Baseline)
        .filter_map(|v| {
            let differences = paired_differences(
                results,
                Variant::Baseline,
                v,
                &VariantResult::text_loss_dynamic,
            );
            let (mean, half) = interval(&differences)?;
            Some((v, mean, half.unwrap_or(0.0)))
        })
        .collect()
}

/// The chart (an SVG document), `None` when [`differences_from_baseline`] is empty.
///
/// # Errors
/// The chart cannot be drawn (a non-finite difference).
pub fn baseline_chart(
    results: &[VariantResult],
    title: &str,
) -> Result<Option<String>, CgtRunError> {
    let differences = differences_from_baseline(results);
    if differences.is_empty() {
        return Ok(None);
    }
    let reach = differences
        .iter()
        .map(|&(_, mean, half)| mean.abs() + half)
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.15;
    let chart = GroupedBars {
        title,
        y_label: "eval CE − Baseline (nats/byte)",
        y_range: (-reach, reach),
        y_digits: 2,
        groups: vec!["held-out mixtures, dynamic y (paired by seed)".into()],
        legend: differences
            .iter()
            .map(|&(v, _, _)| v.title().to_string())
            .collect(),
        bars: differences
            .iter()
            .enumerate()
            .map(|(row, &(_, value, error))| GroupedBar {
                group: 0,
                row,
                value,
                error,
            })
            .collect(),
    };
    grouped_bars_svg(&chart)
        .map(Some)
        .map_err(CgtRunError::chart("the Fig. 5 chart"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(variant: Variant, seed: u64, loss: f64) -> VariantResult {
        VariantResult {
            text_loss: Some((loss, None)),
            ..VariantResult::empty(variant, seed)
        }
    }

    #[test]
    fn differences_are_paired_by_seed_with_their_interval() {
        let results = [
            run(Variant::Baseline, 1, 2.0),
            run(Variant::Baseline, 2, 3.0),
            run(Variant::Cgt, 1, 1.75),
            run(Variant::Cgt, 2, 2.75),
            // Seed 3 has no Baseline: not paired.
            run(Variant::WideBaseline, 3, 1.0),
            run(Variant::WideBaseline, 1, 1.5),
        ];
        let differences = differences_from_baseline(&results);
        // Exact: binary fractions. CGT: −0.25 on both seeds, so no spread; the wide baseline has
        // one paired seed, so no interval (drawn without an error bar).
        assert_eq!(
            differences,
            [
                (Variant::WideBaseline, -0.5, 0.0),
                (Variant::Cgt, -0.25, 0.0)
            ]
        );
        let svg = baseline_chart(&results, "t").unwrap().unwrap();
        assert!(svg.contains("CGT (no Aux/Reg)") && svg.contains("Baseline (wide x)"));
        // Without a Baseline there is nothing to compare: no chart.
        assert!(baseline_chart(&results[2..], "t").unwrap().is_none());
    }
}
