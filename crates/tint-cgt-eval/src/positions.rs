//! The text presets' position reading (paper Fig. 6 and 13): the cross-entropy of held-out
//! continuations by position, the specialised model (`y` frozen after a prefix that is not in
//! context) minus the dynamic model (`y` computed along the continuation alone), and the
//! specialised model minus the baseline, as a table of position ranges (mean ± 95 % Student-t
//! half-width over seeds) and a chart (means over seeds).

use tint_cgt::presets::Variant;
use tint_lab::chart::{line_chart_svg, ChartText, Series};
use tint_lab::seed_interval::cell;
use tint_lab::table::Table;

use super::charts::{colour, smooth};
use super::error::CgtRunError;
use super::variant_result::{variants_of, VariantResult};

/// The position ranges of the table, `[from, to)` bytes into the continuation.
pub const POSITION_RANGES: [(usize, usize); 6] =
    [(0, 8), (8, 16), (16, 32), (32, 64), (64, 96), (96, 128)];

/// The specialised minus the dynamic cross-entropy at every position (guided runs).
fn specialised_minus_dynamic(run: &VariantResult) -> Option<Vec<f64>> {
    let positions = run.text_positions.as_ref()?;
    let specialised = positions.specialised.as_ref()?;
    Some(
        specialised
            .iter()
            .zip(&positions.dynamic)
            .map(|(s, d)| s - d)
            .collect(),
    )
}

/// The specialised cross-entropy of `run` minus the dynamic one of the baseline run of its seed.
fn specialised_minus_baseline(results: &[VariantResult], run: &VariantResult) -> Option<Vec<f64>> {
    let specialised = run.text_positions.as_ref()?.specialised.as_ref()?;
    let baseline = results
        .iter()
        .find(|r| r.variant == Variant::Baseline && r.seed == run.seed)?;
    let dynamic = &baseline.text_positions.as_ref()?.dynamic;
    Some(
        specialised
            .iter()
            .zip(dynamic)
            .map(|(s, b)| s - b)
            .collect(),
    )
}

/// The dynamic cross-entropy at every position.
fn dynamic(run: &VariantResult) -> Option<Vec<f64>> {
    Some(run.text_positions.as_ref()?.dynamic.clone())
}

/// The mean of `curve` over `[from, to)` (clipped to its length; `None` when empty).
fn range_mean(curve: &[f64], (from, to): (usize, usize)) -> Option<f64> {
    let part = curve.get(from..to.min(curve.len()))?;
    (!part.is_empty()).then(|| part.iter().sum::<f64>() / part.len() as f64)
}

/// One column of the table: a title and each run's curve.
struct Column {
    title: String,
    curves: Vec<Vec<f64>>,
}

/// The columns: specialised − dynamic of every guided variant, specialised − baseline of every
/// guided variant, and the baseline's own cross-entropy for scale. Columns without runs are left out.
fn columns(results: &[VariantResult]) -> Vec<Column> {
    let variants = variants_of(results);
    let guided: Vec<Variant> = variants
        .iter()
        .copied()
        .filter(|v| !v.is_baseline())
        .collect();
    let runs_of = |variant: Variant| results.iter().filter(move |r| r.variant == variant);
    let mut columns = Vec::new();
    let mut push = |title: String, curves: Vec<Vec<f64>>| {
        if !curves.is_empty() {
            columns.push(Column { title, curves });
        }
    };
    for &variant in &guided {
        push(
            format!("{}: specialised − dynamic", variant.title()),
            runs_of(variant)
                .filter_map(specialised_minus_dynamic)
                .collect(),
        );
    }
    for &variant in &guided {
        push(
            format!("{}: specialised − Baseline", variant.title()),
            runs_of(variant)
                .filter_map(|r| specialised_minus_baseline(results, r))
                .collect(),
        );
    }
    for variant in [Variant::Baseline, Variant::WideBaseline] {
        push(
            format!("{}: CE", variant.title()),
            runs_of(variant).filter_map(dynamic).collect(),
        );
    }
    columns
}

/// The markdown table: one row per position range and one over all positions, one column per
/// comparison (nats per byte; mean ± 95 % Student-t half-width over seeds). Empty without a
/// position reading.
pub fn position_table(results: &[VariantResult]) -> String {
    let columns = columns(results);
    let Some(length) = columns.first().and_then(|c| c.curves.first()).map(Vec::len) else {
        return String::new();
    };
    let mut table = Table::new(
        std::iter::once("bytes of the continuation".to_string())
            .chain(columns.iter().map(|c| c.title.clone())),
    );
    let ranges = POSITION_RANGES
        .iter()
        .copied()
        .filter(|&(from, _)| from < length)
        .map(|(from, to)| (from, to.min(length)))
        .chain([(0, length)]);
    for (from, to) in ranges {
        let label = if (from, to) == (0, length) {
            format!("all ({length})")
        } else {
            format!("{from}–{}", to - 1)
        };
        let cells = columns.iter().map(|column| {
            let means: Vec<f64> = column
                .curves
                .iter()
                .filter_map(|c| range_mean(c, (from, to)))
                .collect();
            cell(&means, 1.0, 3, "")
        });
        table.push_row(std::iter::once(label).chain(cells));
    }
    table.to_markdown()
}

/// Whether the position chart draws `variant`: the variants trained with the auxiliary loss, the
/// ones meant to be specialised (Fig. 6's model). CGT without it is in the table only: its frozen
/// `y` is worse by about a nat a byte, which would flatten the others' curves.
pub fn charted(variant: Variant) -> bool {
    matches!(variant, Variant::CgtAux | Variant::CgtAuxReg)
}

/// The chart of specialised − dynamic (thick) and specialised − Baseline (thin) by position for the
/// [`charted`] variants, means over seeds, 8-byte moving average. `None` without a charted run's
/// position reading.
///
/// # Errors
/// The chart cannot be drawn.
pub fn position_chart(
    results: &[VariantResult],
    title: &str,
) -> Result<Option<String>, CgtRunError> {
    let mean_curve = |curves: &[Vec<f64>]| -> Vec<(f64, f64)> {
        let length = curves.iter().map(Vec::len).min().unwrap_or(0);
        (0..length)
            .map(|t| {
                let mean = curves.iter().map(|c| c[t]).sum::<f64>() / curves.len() as f64;
                (t as f64, mean)
            })
            .collect()
    };
    let mut series = Vec::new();
    for variant in variants_of(results).into_iter().filter(|&v| charted(v)) {
        let runs = || results.iter().filter(move |r| r.variant == variant);
        let own: Vec<Vec<f64>> = runs().filter_map(specialised_minus_dynamic).collect();
        if own.is_empty() {
            continue;
        }
        series.push(Series {
            name: format!("{}: specialised − dynamic", variant.title()),
            points: smooth(&mean_curve(&own), 8),
            colour: colour(variant),
            thin: false,
        });
        let versus: Vec<Vec<f64>> = runs()
            .filter_map(|r| specialised_minus_baseline(results, r))
            .collect();
        if !versus.is_empty() {
            series.push(Series {
                name: format!("{}: specialised − Baseline", variant.title()),
                points: smooth(&mean_curve(&versus), 8),
                colour: colour(variant),
                thin: true,
            });
        }
    }
    if series.is_empty() {
        return Ok(None);
    }
    let length = series[0].points.len() as f64;
    series.push(Series {
        name: "no difference".into(),
        points: vec![(0.0, 0.0), (length - 1.0, 0.0)],
        colour: [0, 0, 0],
        thin: true,
    });
    line_chart_svg(
        &series,
        &ChartText {
            title,
            x_label: "byte of the continuation after the prefix",
            y_label: "cross-entropy difference, nats/byte (8-byte moving average)",
        },
        false,
    )
    .map(Some)
    .map_err(CgtRunError::chart("the position chart"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tint_cgt::metrics::PositionLoss;

    fn run(variant: Variant, seed: u64, dynamic: f64, specialised: Option<f64>) -> VariantResult {
        VariantResult {
            text_positions: Some(PositionLoss {
                prefix: 4,
                samples: 2,
                // Rising by 1/8 per position: the range means are exact binary fractions.
                dynamic: (0..16).map(|t| dynamic + t as f64 / 8.0).collect(),
                specialised: specialised.map(|s| vec![s; 16]),
            }),
            ..VariantResult::empty(variant, seed)
        }
    }

    #[test]
    fn ranges_average_the_differences_over_positions_then_seeds() {
        let results = [
            run(Variant::Baseline, 1, 2.0, None),
            run(Variant::Baseline, 2, 2.0, None),
            run(Variant::CgtAuxReg, 1, 1.0, Some(1.5)),
            run(Variant::CgtAuxReg, 2, 1.0, Some(2.5)),
        ];
        let table = position_table(&results);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "| bytes of the continuation | CGT (Aux + Reg): specialised − dynamic | CGT (Aux + Reg): specialised − Baseline | Baseline: CE |"
        );
        // Positions 0–7: dynamic 1 + t/8 has mean 1 + 3.5/8 = 1.4375; specialised 1.5 and 2.5.
        // Differences 0.0625 and 1.0625: mean 0.5625 over the two seeds, with a t interval.
        assert!(lines[2].starts_with("| 0–7 | 0.562 ± "), "{}", lines[2]);
        // Against the baseline (2 + t/8, mean 2.4375): -0.9375 and 0.0625, mean -0.4375.
        assert!(lines[2].contains("| -0.438 ± "), "{}", lines[2]);
        assert!(lines[3].starts_with("| 8–15 |"), "{}", lines[3]);
        assert!(lines.last().unwrap().starts_with("| all (16) |"));
        assert_eq!(lines.len(), 5, "{table}");
        let chart = position_chart(&results, "t").unwrap().unwrap();
        assert!(
            chart.contains("specialised − Baseline"),
            "a legend names the curves"
        );
        assert!(position_chart(&results[..2], "t").unwrap().is_none());
        // CGT without the auxiliary loss is in the table, not in the chart.
        let cgt_only = [run(Variant::Cgt, 1, 1.0, Some(2.5))];
        assert!(position_table(&cgt_only).contains("CGT (no Aux/Reg): specialised − dynamic"));
        assert!(position_chart(&cgt_only, "t").unwrap().is_none());
        assert!(position_table(&[]).is_empty());
    }
}
