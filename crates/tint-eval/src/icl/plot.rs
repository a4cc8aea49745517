//! Accuracy bar charts (paper Table 1 as a chart), drawn with `plotters` into a standalone SVG
//! document. One group per task, one bar per table row (method, settings, shots), error bars for the
//! standard deviation over seeds, a legend naming the rows.

use plotters::prelude::*;

use super::report::IclReport;
use crate::EvalError;

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 460;

fn plot_error(e: impl std::fmt::Display) -> EvalError {
    EvalError::Plot(e.to_string())
}

/// One bar: `(group x0, bar width, mean, std, row index)` in chart coordinates.
type Bar = (f64, f64, f64, f64, usize);

/// Positions of the bars: group `t` spans `[t, t + 1)`, its bars share 80 % of it.
fn bars(report: &IclReport, calibrated: bool) -> Vec<Bar> {
    let tasks = report.tasks();
    let rows = report.rows();
    let width = 0.8 / rows.len().max(1) as f64;
    let mut out = Vec::new();
    for (t, &task) in tasks.iter().enumerate() {
        for (r, row) in rows.iter().enumerate() {
            let Some(cell) = report.lookup(row, task) else {
                continue;
            };
            let (mean, std) = if calibrated {
                (cell.calibrated_mean, cell.calibrated_std)
            } else {
                (cell.accuracy_mean, cell.accuracy_std)
            };
            out.push((t as f64 + 0.1 + r as f64 * width, width, mean, std, r));
        }
    }
    out
}

/// A grouped bar chart of the report's accuracies (calibrated or not) as an SVG document:
/// y = accuracy in percent (0–100), x = tasks, one colour per row of the markdown table.
///
/// Errors: [`EvalError::Plot`] for a report without cells or with a non-finite accuracy.
pub fn accuracy_bars_svg(report: &IclReport, calibrated: bool) -> Result<String, EvalError> {
    let tasks = report.tasks();
    let rows = report.rows();
    if tasks.is_empty() || rows.is_empty() {
        return Err(plot_error("the report has no cells"));
    }
    let bars = bars(report, calibrated);
    if let Some(bad) = bars.iter().find(|b| !b.2.is_finite() || !b.3.is_finite()) {
        return Err(plot_error(format!(
            "non-finite accuracy {} ± {}",
            bad.2, bad.3
        )));
    }
    let title = format!(
        "Accuracy {} calibration ({})",
        if calibrated { "with" } else { "without" },
        report.model
    );
    let n_tasks = tasks.len() as f64;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        // Plot on the left, legend on the right (row labels can be long).
        let (plot_area, legend_area) = root.split_horizontally(WIDTH * 62 / 100);
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(&title, ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..n_tasks, 0.0..100.0)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("accuracy (%)")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(plot_error)?;
        for &(x0, width, mean, std, r) in &bars {
            let colour = Palette99::pick(r).to_rgba();
            let top = (100.0 * mean).clamp(0.0, 100.0);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, 0.0), (x0 + 0.95 * width, top)],
                    colour.filled(),
                )))
                .map_err(plot_error)?;
            if std > 0.0 {
                let xc = x0 + 0.475 * width;
                chart
                    .draw_series(std::iter::once(ErrorBar::new_vertical(
                        xc,
                        (100.0 * (mean - std)).clamp(0.0, 100.0),
                        top,
                        (100.0 * (mean + std)).clamp(0.0, 100.0),
                        BLACK.stroke_width(1),
                        6,
                    )))
                    .map_err(plot_error)?;
            }
        }
        let style = ("sans-serif", 13).into_font();
        // Task names under the centre of their group (backend pixel coordinates of the root).
        for (t, task) in tasks.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(t as f64 + 0.5, 0.0));
            root.draw(&Text::new(
                task.display_name().to_string(),
                (x - 4 * task.display_name().len() as i32, y + 10),
                style.clone(),
            ))
            .map_err(plot_error)?;
        }
        for (r, (label, k)) in rows.iter().enumerate() {
            let y = 40 + 20 * r as i32;
            let colour = Palette99::pick(r).to_rgba();
            legend_area
                .draw(&Rectangle::new([(10, y), (22, y + 12)], colour.filled()))
                .map_err(plot_error)?;
            legend_area
                .draw(&Text::new(
                    format!("{label} (k={k})"),
                    (28, y),
                    style.clone(),
                ))
                .map_err(plot_error)?;
        }
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}
