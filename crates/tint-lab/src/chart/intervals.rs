//! Points with intervals against a fraction in `[0, 1]`: one line per series through its values,
//! a vertical bar for each point's interval, a legend (the LM report's perplexity and paired
//! differences against the train fraction).

use plotters::prelude::*;

use super::{chart_error, ChartError};

/// Width of an interval chart, pixels.
const WIDTH: u32 = 860;
/// Height of an interval chart, pixels.
const HEIGHT: u32 = 480;

/// One series: its name, colour, and points `(x, value, interval low, interval high)` in x order.
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalSeries {
    /// Legend label.
    pub name: String,
    /// RGB colour.
    pub colour: [u8; 3],
    /// `(x, value, low, high)`, x a fraction in `[0, 1]`.
    pub points: Vec<(f64, f64, f64, f64)>,
}

/// Title, axes and style of an interval chart.
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalAxes<'a> {
    /// Caption.
    pub title: &'a str,
    /// x-axis label (ticks are drawn as percentages).
    pub x_label: &'a str,
    /// y-axis label.
    pub y_label: &'a str,
    /// Differences from a baseline: the y range includes 0, the line y = 0 is drawn, and the
    /// series are shifted slightly apart along x so that intervals at the same x do not hide
    /// each other; y ticks with 3 decimals (2 otherwise).
    pub zero_line: bool,
}

/// The chart as an SVG document.
///
/// Errors: a [`ChartError`] for no series or a non-finite value (nothing to scale).
pub fn interval_chart_svg(
    series: &[IntervalSeries],
    axes: &IntervalAxes<'_>,
) -> Result<String, ChartError> {
    let zero_line = axes.zero_line;
    let values = series
        .iter()
        .flat_map(|s| s.points.iter().flat_map(|&(_, v, lo, hi)| [v, lo, hi]));
    let (mut y_min, mut y_max) = if zero_line {
        (0.0, 0.0)
    } else {
        (f64::INFINITY, f64::NEG_INFINITY)
    };
    for v in values {
        if !v.is_finite() {
            return Err(chart_error(format!("non-finite value {v}")));
        }
        y_min = y_min.min(v);
        y_max = y_max.max(v);
    }
    if series.is_empty() {
        return Err(chart_error("the report has no results"));
    }
    let pad = ((y_max - y_min) * 0.08).max(y_max.abs() * 1e-3).max(1e-6);
    let (y_lo, y_hi) = (y_min - pad, y_max + pad);
    let (x_min, x_max) = series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
    let (x_lo, x_hi) = (x_min - 0.05, x_max + 0.05);
    let digits = if zero_line { 3 } else { 2 };

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(axes.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
            .map_err(chart_error)?;
        chart
            .configure_mesh()
            .x_desc(axes.x_label)
            .y_desc(axes.y_label)
            .x_label_formatter(&|x| format!("{:.0} %", x * 100.0))
            .y_label_formatter(&|y| format!("{y:.digits$}"))
            .draw()
            .map_err(chart_error)?;
        if zero_line {
            chart
                .draw_series(LineSeries::new(
                    [(x_lo, 0.0), (x_hi, 0.0)],
                    BLACK.stroke_width(1),
                ))
                .map_err(chart_error)?;
        }
        for (i, s) in series.iter().enumerate() {
            let [r, g, b] = s.colour;
            let colour = RGBColor(r, g, b);
            let shift = if zero_line {
                0.008 * (i as f64 - (series.len() as f64 - 1.0) / 2.0)
            } else {
                0.0
            };
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().map(|&(x, v, _, _)| (x + shift, v)),
                    colour.stroke_width(2),
                ))
                .map_err(chart_error)?
                .label(s.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(s.points.iter().map(|&(x, v, lo, hi)| {
                    ErrorBar::new_vertical(x + shift, lo, v, hi, colour.filled(), 8)
                }))
                .map_err(chart_error)?;
            chart
                .draw_series(
                    s.points
                        .iter()
                        .map(|&(x, v, _, _)| Circle::new((x + shift, v), 3, colour.filled())),
                )
                .map_err(chart_error)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(chart_error)?;
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}
