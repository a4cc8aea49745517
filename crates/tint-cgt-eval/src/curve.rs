//! Learning curves over the runs of a report (`cargo xtask eval cgt --eval-every N`): the chart of
//! the held-out accuracies during training and their table, from each run's points
//! ([`crate::curve_file`]).

use tint_lab::chart::{line_chart_svg, ChartText, Series};
use tint_lab::table::Table;

use super::charts::colour;
use super::curve_file::CurvePoint;
use super::error::CgtRunError;
use super::variant_result::{variants_of, VariantResult};
use tint_lab::seed_interval::cell;

/// The steps at which every run of `variant` in `results` has a point.
fn common_steps(results: &[&VariantResult]) -> Vec<usize> {
    let Some(first) = results.first() else {
        return Vec::new();
    };
    first
        .curve
        .iter()
        .map(|p| p.step)
        .filter(|step| {
            results
                .iter()
                .all(|r| r.curve.iter().any(|p| p.step == *step))
        })
        .collect()
}

/// `pick` of the point at `step` of every run.
fn at_step(runs: &[&VariantResult], step: usize, pick: fn(&CurvePoint) -> f64) -> Vec<f64> {
    runs.iter()
        .filter_map(|r| r.curve.iter().find(|p| p.step == step).map(pick))
        .collect()
}

/// The runs of each variant that have a curve, in table order.
fn runs_by_variant(
    results: &[VariantResult],
) -> Vec<(tint_cgt::presets::Variant, Vec<&VariantResult>)> {
    variants_of(results)
        .into_iter()
        .map(|v| {
            let runs = results
                .iter()
                .filter(|r| r.variant == v && !r.curve.is_empty())
                .collect::<Vec<_>>();
            (v, runs)
        })
        .filter(|(_, runs)| !runs.is_empty())
        .collect()
}

/// The learning-curve chart: per variant, the mean over seeds of the dynamic accuracy (thick) and of
/// the no-example accuracy (thin), in percent. `None` when no run has a curve.
///
/// # Errors
/// The chart cannot be drawn.
pub fn curve_chart(results: &[VariantResult], preset: &str) -> Result<Option<String>, CgtRunError> {
    let mut series = Vec::new();
    for (variant, runs) in runs_by_variant(results) {
        let steps = common_steps(&runs);
        let mean = |pick: fn(&CurvePoint) -> f64| -> Vec<(f64, f64)> {
            steps
                .iter()
                .map(|&s| {
                    let values = at_step(&runs, s, pick);
                    (
                        s as f64,
                        100.0 * values.iter().sum::<f64>() / values.len() as f64,
                    )
                })
                .collect()
        };
        series.push(Series {
            name: format!("{} (last two examples)", variant.title()),
            points: mean(|p| p.dynamic_accuracy),
            colour: colour(variant),
            thin: false,
        });
        series.push(Series {
            name: format!("{} (no example: format level)", variant.title()),
            points: mean(|p| p.no_example_accuracy),
            colour: colour(variant),
            thin: true,
        });
    }
    if series.is_empty() {
        return Ok(None);
    }
    let title = format!("{preset}: held-out answer accuracy during training (mean over seeds)");
    line_chart_svg(
        &series,
        &ChartText {
            title: &title,
            x_label: "training step",
            y_label: "answer-character accuracy, %",
        },
        false,
    )
    .map(Some)
    .map_err(CgtRunError::chart("the learning-curve chart"))
}

/// The learning-curve table: one row per evaluated step, per variant the dynamic accuracy and the
/// in-context gain (mean ± 95 % Student-t half-width over seeds, in percent / points). Empty when no
/// run has a curve.
pub fn curve_table(results: &[VariantResult]) -> String {
    let by_variant = runs_by_variant(results);
    if by_variant.is_empty() {
        return String::new();
    }
    let mut table = Table::new(std::iter::once("step".to_string()).chain(
        by_variant.iter().flat_map(|(variant, _)| {
            [
                format!("{}: accuracy", variant.title()),
                format!("{}: in-context gain", variant.title()),
            ]
        }),
    ));
    let mut steps: Vec<usize> = by_variant
        .iter()
        .flat_map(|(_, runs)| common_steps(runs))
        .collect();
    steps.sort_unstable();
    steps.dedup();
    for step in steps {
        let cells = by_variant.iter().flat_map(|(_, runs)| {
            [
                cell(&at_step(runs, step, |p| p.dynamic_accuracy), 100.0, 1, " %"),
                cell(&at_step(runs, step, CurvePoint::gain), 100.0, 1, " points"),
            ]
        });
        table.push_row(std::iter::once(step.to_string()).chain(cells));
    }
    table.to_markdown()
}
