//! Perplexity against train fraction, one line per method with its bootstrap interval as error bars
//! (the paper's Table 2 as a chart), and the paired differences from a baseline, drawn by
//! `tint_lab::chart::interval_chart_svg`.

use tint_lab::chart::{interval_chart_svg, palette, IntervalAxes, IntervalSeries};

use crate::report::LmReport;
use crate::EvalError;

/// One method's points `(train fraction, perplexity, ci low, ci high)`, sorted by fraction.
type Curve = (String, Vec<(f64, f64, f64, f64)>);

fn curves(report: &LmReport) -> Vec<Curve> {
    let mut curves: Vec<Curve> = Vec::new();
    for r in &report.results {
        let point = (
            r.train_fraction,
            r.perplexity.value,
            r.perplexity.ci_low,
            r.perplexity.ci_high,
        );
        match curves.iter_mut().find(|(m, _)| *m == r.method) {
            Some((_, points)) => points.push(point),
            None => curves.push((r.method.clone(), vec![point])),
        }
    }
    for (_, points) in &mut curves {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    curves
}

/// The chart as an SVG document: x = train fraction, y = perplexity of the evaluated part, one
/// coloured line per method, vertical bars for the confidence intervals, a legend.
///
/// Errors: [`EvalError::Plot`] for an empty report or non-finite perplexities (nothing to scale).
pub fn perplexity_svg(report: &LmReport, title: &str) -> Result<String, EvalError> {
    draw(&curves(report), title, "perplexity of the rest", false)
}

/// The paired differences from `baseline` as an SVG document: x = train fraction, y = mean over
/// blocks of the method's minus the baseline's NLL per evaluated token (nats; below 0 = better),
/// one line per method with its paired bootstrap interval as error bars, and the zero line.
///
/// Errors: [`EvalError::Plot`] when the report holds no paired difference from `baseline`.
pub fn difference_svg(report: &LmReport, baseline: &str, title: &str) -> Result<String, EvalError> {
    let mut curves: Vec<Curve> = Vec::new();
    for p in report.paired.iter().filter(|p| p.diff.baseline == baseline) {
        let d = &p.diff;
        let point = (p.train_fraction, d.mean, d.ci_low, d.ci_high);
        match curves.iter_mut().find(|(m, _)| *m == d.method) {
            Some((_, points)) => points.push(point),
            None => curves.push((d.method.clone(), vec![point])),
        }
    }
    for (_, points) in &mut curves {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    draw(
        &curves,
        title,
        &format!("Δ nats per token vs {baseline}"),
        true,
    )
}

/// The curves, a colour each in order, on an interval chart against the train fraction.
fn draw(
    curves: &[Curve],
    title: &str,
    y_label: &str,
    zero_line: bool,
) -> Result<String, EvalError> {
    let series: Vec<IntervalSeries> = curves
        .iter()
        .enumerate()
        .map(|(i, (method, points))| IntervalSeries {
            name: method.clone(),
            colour: palette(i),
            points: points.clone(),
        })
        .collect();
    let axes = IntervalAxes {
        title,
        x_label: "fraction of each block used for training",
        y_label,
        zero_line,
    };
    Ok(interval_chart_svg(&series, &axes)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perplexity::Perplexity;
    use crate::report::MethodResult;

    fn result(method: &str, f: f64, value: f64) -> MethodResult {
        MethodResult {
            method: method.into(),
            train_fraction: f,
            perplexity: Perplexity {
                value,
                ci_low: value - 1.0,
                ci_high: value + 1.5,
                level: 0.95,
                tokens: 10,
            },
            blocks: Vec::new(),
            seconds: 0.0,
            inputs_sha256: String::new(),
        }
    }

    #[test]
    fn one_line_and_legend_entry_per_method() {
        let report = LmReport {
            settings: serde_json::json!({}),
            results: vec![
                result("vanilla", 0.5, 30.0),
                result("vanilla", 0.3, 31.0),
                result("dyn-eval", 0.3, 30.5),
                result("dyn-eval", 0.5, 29.0),
            ],
            paired: Vec::new(),
            tuning: Vec::new(),
        };
        let c = curves(&report);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].1[0].0, 0.3, "points sorted by fraction");
        let svg = perplexity_svg(&report, "test chart").unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        for text in ["vanilla", "dyn-eval", "test chart", "30 %", "50 %"] {
            assert!(svg.contains(text), "missing {text:?}");
        }
        // Two series lines (plus the legend samples) are polylines.
        assert!(svg.matches("<polyline").count() >= 2);
    }

    #[test]
    fn empty_or_non_finite_reports_are_errors() {
        let empty = LmReport {
            settings: serde_json::json!({}),
            results: vec![],
            paired: Vec::new(),
            tuning: Vec::new(),
        };
        assert!(matches!(
            perplexity_svg(&empty, "x"),
            Err(EvalError::Plot(_))
        ));
        let nan = LmReport {
            settings: serde_json::json!({}),
            results: vec![result("vanilla", 0.5, f64::NAN)],
            paired: Vec::new(),
            tuning: Vec::new(),
        };
        assert!(matches!(perplexity_svg(&nan, "x"), Err(EvalError::Plot(_))));
        assert!(matches!(
            difference_svg(&empty, "vanilla", "x"),
            Err(EvalError::Plot(_))
        ));
    }

    #[test]
    fn the_difference_chart_has_a_line_per_method_and_the_zero_line() {
        use crate::report::LmPaired;
        use tint_lab::paired::{paired_diff, Better, PairedSettings};
        let diff = |m: &str, shift: f64| {
            paired_diff(
                (m, &[1.0 + shift, 2.0 + shift, 3.0]),
                ("vanilla", &[1.0, 2.0, 3.0]),
                Better::Lower,
                &PairedSettings::default(),
            )
        };
        let report = LmReport {
            settings: serde_json::json!({}),
            results: Vec::new(),
            paired: [0.3, 0.5]
                .into_iter()
                .flat_map(|f| {
                    [
                        LmPaired {
                            train_fraction: f,
                            diff: diff("tint", -0.02),
                        },
                        LmPaired {
                            train_fraction: f,
                            diff: diff("dyn-eval", -0.03),
                        },
                    ]
                })
                .collect(),
            tuning: Vec::new(),
        };
        let svg = difference_svg(&report, "vanilla", "paired").unwrap();
        for text in ["tint", "dyn-eval", "vs vanilla", "30 %"] {
            assert!(svg.contains(text), "missing {text:?}");
        }
        // Zero line + two series (+ legend samples).
        assert!(svg.matches("<polyline").count() >= 3);
    }
}
