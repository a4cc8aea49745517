//! Heat maps of a square matrix with values in `[-1, 1]` (a CGT model's `n_s . n_t` map of the
//! context summary), on a diverging colour map, drawn as block means when wide.

use plotters::prelude::*;

use super::{chart_error, ChartError};

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
/// Errors: a [`ChartError`] when `matrix` is not `n x n` or `n = 0`.
pub fn heat_map_svg(matrix: &[f32], n: usize, title: &str) -> Result<String, ChartError> {
    heat_map_svg_with_cells(matrix, n, title, HEAT_MAP_MAX_CELLS)
}

/// [`heat_map_svg`] with at most `max_cells` cells per side.
fn heat_map_svg_with_cells(
    matrix: &[f32],
    n: usize,
    title: &str,
    max_cells: usize,
) -> Result<String, ChartError> {
    if matrix.len() != n * n || n == 0 {
        return Err(chart_error(format!(
            "a heat map needs an {n}x{n} matrix, got {} values",
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
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d(0..n, n..0)
            .map_err(chart_error)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("position t")
            .y_desc("position s")
            .draw()
            .map_err(chart_error)?;
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
            .map_err(chart_error)?;
        root.present().map_err(chart_error)?;
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
}
