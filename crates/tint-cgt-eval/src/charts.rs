//! The SVG charts of a CGT report: the training loss of every variant (one seed) and, for the
//! regression presets, the held-out error by number of shown pairs with the reference predictors.
//! Drawn with plotters through [`tint_lab::chart`].

use tint_cgt::metrics::{ReferenceErrors, RegressionEvaluation, RegressionReferences};
use tint_cgt::presets::Variant;
use tint_lab::chart::{line_chart_svg, ChartText, Series};

use super::error::CgtRunError;
use super::variant_result::{variants_of, VariantResult};

/// The colour of a variant in every chart.
pub fn colour(variant: Variant) -> [u8; 3] {
    match variant {
        Variant::Baseline => [80, 80, 80],
        Variant::WideBaseline => [148, 103, 189],
        Variant::Cgt => [31, 119, 180],
        Variant::CgtAux => [255, 127, 14],
        Variant::CgtAuxReg => [44, 160, 44],
    }
}

/// The moving average of `points` over the last `window` points (fewer at the start).
pub fn smooth(points: &[(f64, f64)], window: usize) -> Vec<(f64, f64)> {
    points
        .iter()
        .enumerate()
        .map(|(i, &(x, _))| {
            let from = i.saturating_sub(window - 1);
            let slice = &points[from..=i];
            (
                x,
                slice.iter().map(|p| p.1).sum::<f64>() / slice.len() as f64,
            )
        })
        .collect()
}

/// The training-loss chart of the runs of `seed` (10-step moving average, log scale).
///
/// # Errors
/// The chart cannot be drawn.
pub fn loss_chart(
    results: &[VariantResult],
    seed: u64,
    preset: &str,
) -> Result<String, CgtRunError> {
    let curves: Vec<Series> = results
        .iter()
        .filter(|r| r.seed == seed)
        .map(|r| Series {
            name: r.variant.title().to_string(),
            points: smooth(&r.losses, 10),
            colour: colour(r.variant),
            thin: false,
        })
        .collect();
    let title = format!("{preset}: training task loss, seed {seed}");
    line_chart_svg(
        &curves,
        &ChartText {
            title: &title,
            x_label: "step",
            y_label: "task loss (10-step moving average, log scale)",
        },
        true,
    )
    .map_err(CgtRunError::chart("the loss chart"))
}

/// The per-pair error chart of a regression run (mean over seeds) with the reference predictors.
///
/// # Errors
/// The chart cannot be drawn.
pub fn regression_chart(
    results: &[VariantResult],
    references: Option<&RegressionReferences>,
    title: &str,
) -> Result<String, CgtRunError> {
    let mut series = Vec::new();
    for variant in variants_of(results) {
        let runs: Vec<&RegressionEvaluation> = results
            .iter()
            .filter(|r| r.variant == variant)
            .filter_map(|r| r.regression.as_ref())
            .collect();
        let Some(first) = runs.first() else { continue };
        let points = (0..first.dynamic_by_pair.len())
            .map(|i| {
                let mean =
                    runs.iter().map(|e| e.dynamic_by_pair[i]).sum::<f64>() / runs.len() as f64;
                (i as f64, mean)
            })
            .collect();
        series.push(Series {
            name: variant.title().to_string(),
            points,
            colour: colour(variant),
            thin: false,
        });
    }
    if let Some(references) = references {
        let reference = |name: &str, colour, pick: fn(&ReferenceErrors) -> f64| Series {
            name: name.to_string(),
            points: references
                .by_pair
                .iter()
                .enumerate()
                .map(|(i, e)| (i as f64, pick(e)))
                .collect(),
            colour,
            thin: true,
        };
        series.push(reference("least squares", [0, 0, 0], |e| e.least_squares));
        series.push(reference("ridge λ = σ²", [140, 86, 75], |e| {
            e.bayes_ridge
        }));
        series.push(reference("mean of shown y", [214, 39, 40], |e| e.mean));
    }
    line_chart_svg(
        &series,
        &ChartText {
            title,
            x_label: "pairs shown before the query",
            y_label: "mean squared error (log scale)",
        },
        true,
    )
    .map_err(CgtRunError::chart("the by-pair chart"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoothing_averages_the_last_points() {
        // Exact: sums of a few small binary fractions.
        let points = [(0.0, 1.0), (1.0, 3.0), (2.0, 5.0), (3.0, 7.0)];
        assert_eq!(
            smooth(&points, 2),
            [(0.0, 1.0), (1.0, 2.0), (2.0, 4.0), (3.0, 6.0)]
        );
        assert_eq!(smooth(&points, 1), points);
    }
}
