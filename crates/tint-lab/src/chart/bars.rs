//! Grouped bar charts: one group per x category, one bar per legend row in each group, error bars
//! (the ICL report's accuracies: a group per task, a bar per table row).

use plotters::prelude::*;

use super::{chart_error, palette, ChartError};

/// Width of a bar chart, pixels (the plot takes the left 62 %, the legend the rest).
const WIDTH: u32 = 1100;
/// Height of a bar chart, pixels.
const HEIGHT: u32 = 460;

/// One bar: its group and legend row, its value and the half-width of its error bar (0: none),
/// in the units of the y axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupedBar {
    /// Index into [`GroupedBars::groups`].
    pub group: usize,
    /// Index into [`GroupedBars::legend`] (and the bar's colour, [`palette`]).
    pub row: usize,
    /// The bar's height.
    pub value: f64,
    /// Half-width of its error bar.
    pub error: f64,
}

/// A grouped bar chart: groups along x, a legend row per bar of a group, a y range.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupedBars<'a> {
    /// Caption.
    pub title: &'a str,
    /// y-axis label.
    pub y_label: &'a str,
    /// The y range (bars and error bars are clamped to it; bars start at 0).
    pub y_range: (f64, f64),
    /// Decimals of the y tick labels.
    pub y_digits: usize,
    /// Group names, under their groups.
    pub groups: Vec<String>,
    /// Legend rows, one colour each.
    pub legend: Vec<String>,
    /// The bars.
    pub bars: Vec<GroupedBar>,
}

/// The chart as an SVG document: group `g` spans `[g, g + 1)` on x, its bars share 80 % of it.
///
/// Errors: a [`ChartError`] for no group or legend row, or a non-finite value or error.
pub fn grouped_bars_svg(chart: &GroupedBars<'_>) -> Result<String, ChartError> {
    if chart.groups.is_empty() || chart.legend.is_empty() {
        return Err(chart_error("the report has no cells"));
    }
    if let Some(bad) = chart
        .bars
        .iter()
        .find(|b| !b.value.is_finite() || !b.error.is_finite())
    {
        return Err(chart_error(format!(
            "non-finite value {} ± {}",
            bad.value, bad.error
        )));
    }
    let (y_min, y_max) = chart.y_range;
    let clamp = |y: f64| y.clamp(y_min, y_max);
    let width = 0.8 / chart.legend.len() as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        // Plot on the left, legend on the right (row labels can be long).
        let (plot_area, legend_area) = root.split_horizontally(WIDTH * 62 / 100);
        let mut plot = ChartBuilder::on(&plot_area)
            .caption(chart.title, ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..chart.groups.len() as f64, y_min..y_max)
            .map_err(chart_error)?;
        plot.configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(chart.y_label)
            .y_label_formatter(&|y| format!("{y:.digits$}", digits = chart.y_digits))
            .draw()
            .map_err(chart_error)?;
        for bar in &chart.bars {
            let x0 = bar.group as f64 + 0.1 + bar.row as f64 * width;
            let [r, g, b] = palette(bar.row);
            let top = clamp(bar.value);
            plot.draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (x0 + 0.95 * width, top)],
                RGBColor(r, g, b).filled(),
            )))
            .map_err(chart_error)?;
            if bar.error > 0.0 {
                let xc = x0 + 0.475 * width;
                plot.draw_series(std::iter::once(ErrorBar::new_vertical(
                    xc,
                    clamp(bar.value - bar.error),
                    top,
                    clamp(bar.value + bar.error),
                    BLACK.stroke_width(1),
                    6,
                )))
                .map_err(chart_error)?;
            }
        }
        let style = ("sans-serif", 13).into_font();
        // Group names under the centre of their group, below the x axis (backend pixel
        // coordinates of the root).
        for (g, name) in chart.groups.iter().enumerate() {
            let (x, y) = plot.backend_coord(&(g as f64 + 0.5, y_min));
            root.draw(&Text::new(
                name.clone(),
                (x - 4 * name.len() as i32, y + 10),
                style.clone(),
            ))
            .map_err(chart_error)?;
        }
        for (row, label) in chart.legend.iter().enumerate() {
            let y = 40 + 20 * row as i32;
            let [r, g, b] = palette(row);
            legend_area
                .draw(&Rectangle::new(
                    [(10, y), (22, y + 12)],
                    RGBColor(r, g, b).filled(),
                ))
                .map_err(chart_error)?;
            legend_area
                .draw(&Text::new(label.clone(), (28, y), style.clone()))
                .map_err(chart_error)?;
        }
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_drawn_per_group_and_row_and_bad_values_refused() {
        let mut chart = GroupedBars {
            title: "t",
            y_label: "accuracy (%)",
            y_range: (0.0, 100.0),
            y_digits: 0,
            groups: vec!["SST-2".into(), "MR".into()],
            legend: vec!["icl (k=0)".into(), "tint (k=32)".into()],
            bars: vec![
                GroupedBar {
                    group: 0,
                    row: 0,
                    value: 60.0,
                    error: 2.0,
                },
                GroupedBar {
                    group: 1,
                    row: 1,
                    value: 120.0,
                    error: 0.0,
                },
            ],
        };
        let svg = grouped_bars_svg(&chart).unwrap();
        assert!(
            svg.contains("SST-2") && svg.contains("tint (k=32)"),
            "{svg}"
        );
        chart.bars[0].value = f64::NAN;
        assert!(grouped_bars_svg(&chart).is_err());
        chart.groups.clear();
        assert!(grouped_bars_svg(&chart).is_err());
    }
}
