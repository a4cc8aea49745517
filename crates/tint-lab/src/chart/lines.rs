//! Line charts of curves (a CGT run's loss, error by shown pairs, positions, learning curves), with
//! a legend, on a linear or log y axis.

use plotters::prelude::*;

use super::{chart_error, ChartError, ChartText, Series, HEIGHT, WIDTH};

/// Draws every series' `usable` points as a line (thick for models, thin for references) and the
/// legend, on a chart of either y scale.
fn draw_lines_with_legend<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &[Series],
    usable: &dyn Fn(&(f64, f64)) -> bool,
) -> Result<(), ChartError>
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
            .map_err(chart_error)?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(chart_error)?;
    Ok(())
}

/// A line chart as a standalone SVG document, with a legend; `log_y` draws the y axis on a log scale
/// (non-positive values are then left out).
///
/// Errors: a [`ChartError`] when no series has a finite (and, with `log_y`, positive) point.
pub fn line_chart_svg(
    series: &[Series],
    text: &ChartText<'_>,
    log_y: bool,
) -> Result<String, ChartError> {
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
        return Err(chart_error("line chart without a drawable point"));
    }
    if x_hi <= x_lo {
        x_hi = x_lo + 1.0;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
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
                .map_err(chart_error)?;
            chart
                .configure_mesh()
                .x_desc(text.x_label)
                .y_desc(text.y_label)
                .y_label_formatter(&|y| format!("{y:.3}"))
                .draw()
                .map_err(chart_error)?;
            draw_lines_with_legend(&mut chart, series, &usable)?;
        } else {
            let pad = ((y_hi - y_lo) * 0.05).max(1e-6);
            let mut chart = builder
                .build_cartesian_2d(x_lo..x_hi, (y_lo - pad)..(y_hi + pad))
                .map_err(chart_error)?;
            chart
                .configure_mesh()
                .x_desc(text.x_label)
                .y_desc(text.y_label)
                .draw()
                .map_err(chart_error)?;
            draw_lines_with_legend(&mut chart, series, &usable)?;
        }
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

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
