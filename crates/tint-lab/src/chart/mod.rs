//! The one chart module of the reports: standalone SVG documents drawn with `plotters`, each kind in
//! its file, with one error type.
//!
//! | kind | what draws it |
//! |---|---|
//! | line chart of curves, linear or log y ([`line_chart_svg`]) | CGT loss, error by shown pairs, positions, learning curves |
//! | points with intervals against a fraction ([`interval_chart_svg`]) | the LM report's perplexity and paired differences |
//! | grouped bars with error bars ([`grouped_bars_svg`]) | the ICL report's accuracies |
//! | heat map of a square matrix ([`heat_map_svg`]) | a CGT model's `y · y` map |

mod bars;
mod heat_map;
mod intervals;
mod lines;

pub use bars::{grouped_bars_svg, GroupedBar, GroupedBars};
pub use heat_map::{diverging, heat_map_svg, HEAT_MAP_MAX_CELLS};
pub use intervals::{interval_chart_svg, IntervalAxes, IntervalSeries};
pub use lines::line_chart_svg;

use plotters::style::{Color, Palette, Palette99};

/// A chart could not be drawn: nothing to draw (no point, a non-finite value, a matrix of the
/// wrong size), or the drawing backend failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("cannot draw the chart: {0}")]
pub struct ChartError(pub String);

fn chart_error(e: impl std::fmt::Display) -> ChartError {
    ChartError(e.to_string())
}

/// Width of a line chart, pixels.
const WIDTH: u32 = 760;
/// Height of a line chart, pixels.
const HEIGHT: u32 = 440;

/// One named curve of a line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// `(x, y)` points in x order.
    pub points: Vec<(f64, f64)>,
    /// RGB colour.
    pub colour: [u8; 3],
    /// Drawn thin (reference curves) instead of thick (models).
    pub thin: bool,
}

/// Axes and title of a line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct ChartText<'a> {
    /// Caption.
    pub title: &'a str,
    /// x-axis label.
    pub x_label: &'a str,
    /// y-axis label.
    pub y_label: &'a str,
}

/// The `i`-th colour of the charts that colour their series in order (plotters' 99-colour
/// palette).
pub fn palette(i: usize) -> [u8; 3] {
    let (r, g, b) = Palette99::pick(i).rgb();
    [r, g, b]
}
