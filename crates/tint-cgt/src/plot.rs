//! SVG charts drawn with `plotters`: line charts of curves (loss, error by pair) and heat maps of the
//! `n_s . n_t` map of the context summary.

use plotters::prelude::*;

use crate::error::{CgtError, Result};

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

const WIDTH: u32 = 760;
const HEIGHT: u32 = 440;

fn plot_error(e: impl std::fmt::Display) -> CgtError {
    CgtError::Plot(e.to_string())
}

/// Draws every series' `usable` points as a line (thick for models, thin for references) and the
/// legend, on a chart of either y scale.
fn draw_lines_with_legend<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &[Series],
    usable: &dyn Fn(&(f64, f64)) -> bool,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for s in series {
        let [r, g, b] = s.colour;
        let colour = RGBColor(r, g, b).stroke_width(if s.thin { 1 } else { 2 });
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied().filter(|p| usable(p)),
                colour,
            ))
            .map_err(plot_error)?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(plot_error)?;
    Ok(())
}

/// A line chart as a standalone SVG document, with a legend; `log_y` draws the y axis on a log scale
/// (non-positive values are then left out).
///
/// Errors: [`CgtError::Plot`] when no series has a finite (and, with `log_y`, positive) point.
pub fn line_chart_svg(series: &[Series], text: &ChartText<'_>, log_y: bool) -> Result<String> {
    let usable = |&(x, y): &(f64, f64)| x.is_finite() && y.is_finite() && (!log_y || y > 0.0);
    let points = || {
        series
            .iter()
            .flat_map(|s| s.points.iter().copied().filter(usable))
    };
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for (x, y) in points() {
        x_lo = x_lo.min(x);
        x_hi = x_hi.max(x);
        y_lo = y_lo.min(y);
        y_hi = y_hi.max(y);
    }
    if !x_lo.is_finite() {
        return Err(plot_error("line chart without a drawable point"));
    }
    if x_hi <= x_lo {
        x_hi = x_lo + 1.0;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(text.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64);
        if log_y {
            let (lo, hi) = (y_lo * 0.8, (y_hi * 1.25).max(y_lo * 1.01));
            let mut chart = builder
                .build_cartesian_2d(x_lo..x_hi, (lo..hi).log_scale())
                .map_err(plot_error)?;
            chart
                .configure_mesh()
                .x_desc(text.x_label)
                .y_desc(text.y_label)
                .y_label_formatter(&|y| format!("{y:.3}"))
                .draw()
                .map_err(plot_error)?;
            draw_lines_with_legend(&mut chart, series, &usable)?;
        } else {
            let pad = ((y_hi - y_lo) * 0.05).max(1e-6);
            let mut chart = builder
                .build_cartesian_2d(x_lo..x_hi, (y_lo - pad)..(y_hi + pad))
                .map_err(plot_error)?;
            chart
                .configure_mesh()
                .x_desc(text.x_label)
                .y_desc(text.y_label)
                .draw()
                .map_err(plot_error)?;
            draw_lines_with_legend(&mut chart, series, &usable)?;
        }
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// Diverging colour map: -1 blue, 0 white, +1 red (values clamped).
pub fn diverging(value: f32) -> [u8; 3] {
    let v = value.clamp(-1.0, 1.0);
    let fade = |t: f32| (255.0 * (1.0 - t)).round() as u8;
    if v >= 0.0 {
        [255, fade(v), fade(v)]
    } else {
        [fade(-v), fade(-v), 255]
    }
}

/// Most cells a heat map draws per side. A wider map is drawn as the means of `k x k` blocks,
/// `k = ceil(n / HEAT_MAP_MAX_CELLS)`, so that its SVG stays small: the SVG holds one rectangle per
/// cell, and a 238-position `icl-paper` map of single cells is 4.9 MB. The `icl-small` maps (94
/// positions) are drawn cell by cell.
pub const HEAT_MAP_MAX_CELLS: usize = 96;

/// Heat map of an `n x n` row-major matrix with values in `[-1, 1]` (row 0 at the top) as an SVG
/// document, coloured by [`diverging`]. For `n > HEAT_MAP_MAX_CELLS`, each cell is the mean of a
/// `k x k` block, and the title says so.
///
/// Errors: [`CgtError::Shape`] when `matrix` is not `n x n` or `n = 0`.
pub fn heat_map_svg(matrix: &[f32], n: usize, title: &str) -> Result<String> {
    heat_map_svg_with_cells(matrix, n, title, HEAT_MAP_MAX_CELLS)
}

/// [`heat_map_svg`] with at most `max_cells` cells per side.
fn heat_map_svg_with_cells(
    matrix: &[f32],
    n: usize,
    title: &str,
    max_cells: usize,
) -> Result<String> {
    if matrix.len() != n * n || n == 0 {
        return Err(CgtError::Shape(format!(
            "heat map needs an {n}x{n} matrix, got {} values",
            matrix.len()
        )));
    }
    let block = n.div_ceil(max_cells.max(1));
    let (cells, side) = block_means(matrix, n, block);
    let caption = if block > 1 {
        format!("{title} ({block}x{block} block means)")
    } else {
        title.to_string()
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (520, 540)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d(0..n, n..0)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("position t")
            .y_desc("position s")
            .draw()
            .map_err(plot_error)?;
        let edge = |i: usize| (i * block).min(n);
        chart
            .draw_series((0..side).flat_map(|row| {
                let cells = &cells;
                (0..side).map(move |column| {
                    let [r, g, b] = diverging(cells[row * side + column]);
                    Rectangle::new(
                        [(edge(column), edge(row)), (edge(column + 1), edge(row + 1))],
                        RGBColor(r, g, b).filled(),
                    )
                })
            }))
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// Means of the `block x block` blocks of an `n x n` row-major matrix (the last row and column of
/// blocks hold what is left when `block` does not divide `n`), row-major, and the blocks per side.
fn block_means(matrix: &[f32], n: usize, block: usize) -> (Vec<f32>, usize) {
    let side = n.div_ceil(block);
    let mut sums = vec![0.0f64; side * side];
    let mut counts = vec![0usize; side * side];
    for row in 0..n {
        for column in 0..n {
            let cell = (row / block) * side + column / block;
            sums[cell] += f64::from(matrix[row * n + column]);
            counts[cell] += 1;
        }
    }
    let means = sums
        .iter()
        .zip(&counts)
        .map(|(&sum, &count)| (sum / count as f64) as f32)
        .collect();
    (means, side)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diverging_colours() {
        assert_eq!(diverging(1.0), [255, 0, 0]);
        assert_eq!(diverging(0.0), [255, 255, 255]);
        assert_eq!(diverging(-2.0), [0, 0, 255]);
    }

    #[test]
    fn heat_map_draws_every_cell_in_its_colour() {
        let svg = heat_map_svg(&[1.0, 0.0, -1.0, 0.5], 2, "map").unwrap();
        assert!(svg.starts_with("<svg"));
        // plotters writes fill colours as #RRGGBB.
        assert!(svg.contains("#FF0000"), "red cell missing");
        assert!(svg.contains("#0000FF"), "blue cell missing");
        assert!(heat_map_svg(&[1.0], 2, "bad").is_err());
    }

    /// Cell rectangles of a heat map SVG: every `<rect` but the white background.
    fn cell_rects(svg: &str) -> usize {
        svg.matches("<rect").count() - 1
    }

    #[test]
    fn a_map_within_the_cap_draws_every_cell_and_a_wider_one_block_means() {
        let n = 5;
        let matrix: Vec<f32> = (0..n * n).map(|i| (i as f32 / 12.0) - 1.0).collect();
        // Within the cap: one rectangle per cell, the title unchanged.
        let full = heat_map_svg_with_cells(&matrix, n, "map", 5).unwrap();
        assert_eq!(cell_rects(&full), n * n);
        assert!(!full.contains("block means"));
        // Cap 2: blocks of 3 x 3, two per side (the second holds the 2 rows/columns left).
        let blocked = heat_map_svg_with_cells(&matrix, n, "map", 2).unwrap();
        assert_eq!(cell_rects(&blocked), 4);
        assert!(blocked.contains("map (3x3 block means)"));
        let (means, side) = block_means(&matrix, n, 3);
        assert_eq!(side, 2);
        let mean = |cells: &[(usize, usize)]| {
            cells.iter().map(|&(r, c)| matrix[r * n + c]).sum::<f32>() / cells.len() as f32
        };
        let top_left: Vec<_> = (0..3).flat_map(|r| (0..3).map(move |c| (r, c))).collect();
        let bottom_right: Vec<_> = (3..5).flat_map(|r| (3..5).map(move |c| (r, c))).collect();
        // Tolerance: the block sums are f64, the reference f32 sums of at most 9 values.
        assert!((means[0] - mean(&top_left)).abs() < 1e-6);
        assert!((means[3] - mean(&bottom_right)).abs() < 1e-6);
        // The colours drawn are those of the means.
        for value in &means {
            let [r, g, b] = diverging(*value);
            assert!(blocked.contains(&format!("#{r:02X}{g:02X}{b:02X}")));
        }
    }

    #[test]
    fn a_paper_scale_map_stays_small() {
        // 238 positions, the `icl-paper` sequence: 3 x 3 blocks, 80 per side.
        let n = 238;
        let matrix: Vec<f32> = (0..n * n).map(|i| ((i % 7) as f32 / 3.0) - 1.0).collect();
        let svg = heat_map_svg(&matrix, n, "paper").unwrap();
        assert_eq!(cell_rects(&svg), 80 * 80);
        assert!(svg.len() < 700_000, "{} bytes", svg.len());
    }

    #[test]
    fn line_chart_has_one_legend_entry_per_series() {
        let series = vec![
            Series {
                name: "model".into(),
                points: vec![(0.0, 1.0), (1.0, 0.5)],
                colour: [0, 0, 255],
                thin: false,
            },
            Series {
                name: "reference".into(),
                points: vec![(0.0, 2.0), (1.0, 0.0)],
                colour: [0, 0, 0],
                thin: true,
            },
        ];
        let text = ChartText {
            title: "t",
            x_label: "x",
            y_label: "y",
        };
        let svg = line_chart_svg(&series, &text, true).unwrap();
        // plotters writes each text on its own line.
        assert!(
            svg.contains("\nmodel\n") && svg.contains("\nreference\n"),
            "{svg}"
        );
        assert!(line_chart_svg(&[], &text, false).is_err());
        // A log axis with only non-positive values has nothing to draw.
        let zero = vec![Series {
            points: vec![(0.0, 0.0)],
            ..series[1].clone()
        }];
        assert!(line_chart_svg(&zero, &text, true).is_err());
    }
}
