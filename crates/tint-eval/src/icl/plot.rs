//! Accuracy bar charts (paper Table 1 as a chart): one group per task, one bar per table row
//! (method, settings, shots), error bars for the standard deviation over seeds, a legend naming the
//! rows; drawn by `tint_lab::chart::grouped_bars_svg`.

use tint_lab::chart::{grouped_bars_svg, GroupedBar, GroupedBars};

use super::report::IclReport;
use crate::EvalError;

/// A grouped bar chart of the report's accuracies (calibrated or not) as an SVG document:
/// y = accuracy in percent (0–100), x = tasks, one colour per row of the markdown table.
///
/// Errors: [`EvalError::Plot`] for a report without cells or with a non-finite accuracy.
pub fn accuracy_bars_svg(report: &IclReport, calibrated: bool) -> Result<String, EvalError> {
    let tasks = report.tasks();
    let rows = report.rows();
    let mut bars = Vec::new();
    for (group, &task) in tasks.iter().enumerate() {
        for (row, key) in rows.iter().enumerate() {
            let Some(cell) = report.lookup(key, task) else {
                continue;
            };
            let (mean, std) = if calibrated {
                (cell.calibrated_mean, cell.calibrated_std)
            } else {
                (cell.accuracy_mean, cell.accuracy_std)
            };
            bars.push(GroupedBar {
                group,
                row,
                value: 100.0 * mean,
                error: 100.0 * std,
            });
        }
    }
    let title = format!(
        "Accuracy {} calibration ({})",
        if calibrated { "with" } else { "without" },
        report.model
    );
    Ok(grouped_bars_svg(&GroupedBars {
        title: &title,
        y_label: "accuracy (%)",
        y_range: (0.0, 100.0),
        y_digits: 0,
        groups: tasks.iter().map(|t| t.display_name().to_string()).collect(),
        legend: rows
            .iter()
            .map(|(label, k)| format!("{label} (k={k})"))
            .collect(),
        bars,
    })?)
}
