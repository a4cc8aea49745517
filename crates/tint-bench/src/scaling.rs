//! The scaling section: time and peak memory of each execution and of the reference against the
//! batch size B, the sequence length T and the number of simulated top layers, as a table; the
//! exponents fitted on log-log axes beside the model-FLOP count's; and two log-log charts (time
//! against T and against B) with the FLOP bound drawn beside the measured lines.

use tint_lab::chart::{line_chart_svg, palette, ChartText, Series};
use tint_lab::table::{Align, Table};

use super::config::{long_context_positions, BenchConfig};
use super::machine::ReportContext;
use super::measure::{min, Measurement};
use super::mode::{mode_flops, mode_label};

/// A chart of a section: its file name and the SVG document. The host writes it into a folder
/// `bench/` beside the report, which the section's markdown links to.
pub type SectionChart = (String, String);

/// Least-squares slope of `ln y` against `ln x`: the exponent `k` of `y ∝ x^k` (`None` for fewer
/// than two points or a non-positive value).
pub fn log_log_slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 || points.iter().any(|&(x, y)| x <= 0.0 || y <= 0.0) {
        return None;
    }
    let logs: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (x.ln(), y.ln())).collect();
    let n = logs.len() as f64;
    let (mx, my) = (
        logs.iter().map(|p| p.0).sum::<f64>() / n,
        logs.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = logs.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = logs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// Which sweep a measurement belongs to.
#[derive(Clone, Copy, PartialEq)]
enum Sweep {
    /// B = 1, every layer, on the long checkpoint: against T.
    Length,
    /// The config's T, every layer, on its own checkpoint: against B.
    Batch,
}

impl Sweep {
    /// Whether `m` is a point of this sweep for `config`.
    fn holds(self, config: &BenchConfig, m: &Measurement) -> bool {
        let t = config.seq_length;
        m.sim_layers.is_none()
            && match self {
                Sweep::Length => m.batch_size == 1 && m.positions == long_context_positions(config),
                Sweep::Batch => m.seq_length == t && m.positions == t,
            }
    }

    /// The swept value of `m`.
    fn x(self, m: &Measurement) -> usize {
        match self {
            Sweep::Length => m.seq_length,
            Sweep::Batch => m.batch_size,
        }
    }

    /// The model FLOPs of `mode`'s step at the swept value `x`.
    fn flops(self, config: &BenchConfig, mode: &str, x: usize, sgemm_size: usize) -> f64 {
        match self {
            Sweep::Length => mode_flops(&config.with_positions(x), mode, 1, sgemm_size),
            Sweep::Batch => mode_flops(config, mode, x, sgemm_size),
        }
    }

    /// The points `(x, value)` of `mode` in this sweep, in x order.
    fn points(
        self,
        config: &BenchConfig,
        rows: &[Measurement],
        mode: &str,
        value: &dyn Fn(&Measurement) -> f64,
    ) -> Vec<(f64, f64)> {
        let mut points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|m| m.mode == mode && self.holds(config, m))
            .map(|m| (self.x(m) as f64, value(m)))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points
    }
}

/// The modes of `rows` in first-seen order.
fn modes_of(rows: &[Measurement]) -> Vec<&str> {
    let mut modes: Vec<&str> = Vec::new();
    for m in rows {
        if !modes.contains(&m.mode.as_str()) {
            modes.push(&m.mode);
        }
    }
    modes
}

/// The table: one row per (B, T, layers, checkpoint positions), a column per mode.
fn scaling_table(config: &BenchConfig, rows: &[Measurement], ctx: &ReportContext) -> String {
    let modes = modes_of(rows);
    let mut table = Table::new(
        ["B", "T", "layers", "Tmax"]
            .map(String::from)
            .into_iter()
            .chain(modes.iter().map(|mode| mode_label(mode, ctx.sgemm_size)))
            .chain(["tokens/s (first column)".to_string()]),
    );
    let key = |m: &Measurement| (m.batch_size, m.seq_length, m.sim_layers, m.positions);
    let mut points: Vec<(usize, usize, Option<usize>, usize)> = Vec::new();
    for m in rows {
        if !points.contains(&key(m)) {
            points.push(key(m));
        }
    }
    for point in points {
        let (b, t, layers, positions) = point;
        let layers_label =
            layers.map_or_else(|| format!("all ({})", config.n_layers), |n| n.to_string());
        let mut row = vec![
            b.to_string(),
            t.to_string(),
            layers_label,
            positions.to_string(),
        ];
        let mut first = None;
        for (column, mode) in modes.iter().enumerate() {
            match rows.iter().find(|m| m.mode == *mode && key(m) == point) {
                Some(m) => {
                    let best = min(&m.seconds);
                    if column == 0 {
                        first = Some(best);
                    }
                    row.push(format!(
                        "{best:.3} / {:.2} ({:.0})",
                        min(&m.cpu_seconds),
                        m.peak_rss_kb as f64 / 1024.0
                    ));
                }
                None => row.push("–".into()),
            }
        }
        row.push(first.map_or("–".into(), |best| format!("{:.0}", (b * t) as f64 / best)));
        table.push_row(row);
    }
    table.to_markdown()
}

/// The fitted exponents: per mode, of the time and the peak RSS against T and against B, beside
/// the model-FLOP count's.
fn exponent_table(config: &BenchConfig, rows: &[Measurement], ctx: &ReportContext) -> String {
    let mut table = Table::new([
        "measurement",
        "time vs T",
        "model FLOPs vs T",
        "peak RSS vs T",
        "time vs B",
        "model FLOPs vs B",
        "peak RSS vs B",
    ])
    .aligned_from(1, Align::Right);
    let cell = |slope: Option<f64>| slope.map_or("–".to_string(), |k| format!("{k:.2}"));
    for mode in modes_of(rows) {
        let mut cells = vec![mode_label(mode, ctx.sgemm_size)];
        for sweep in [Sweep::Length, Sweep::Batch] {
            let time = sweep.points(config, rows, mode, &|m| min(&m.seconds));
            let flops: Vec<(f64, f64)> = time
                .iter()
                .map(|&(x, _)| (x, sweep.flops(config, mode, x as usize, ctx.sgemm_size)))
                .collect();
            let rss = sweep.points(config, rows, mode, &|m| m.peak_rss_kb as f64);
            cells.extend([
                cell(log_log_slope(&time)),
                cell(log_log_slope(&flops)),
                cell(log_log_slope(&rss)),
            ]);
        }
        table.push_row(cells);
    }
    table.to_markdown()
}

/// A log-log chart of the time of every mode against the sweep's value, with the FLOP bound (the
/// first mode's model FLOPs at the sgemm rate; every mode here is charged the same count) when the
/// rate is known. `None` when no mode has two points of the sweep.
fn sweep_chart(
    config: &BenchConfig,
    rows: &[Measurement],
    sweep: Sweep,
    sgemm_gflops: Option<f64>,
    ctx: &ReportContext,
) -> Option<String> {
    let modes = modes_of(rows);
    let log = |(x, y): (f64, f64)| (x.log10(), y.log10());
    let mut series: Vec<Series> = modes
        .iter()
        .enumerate()
        .map(|(i, mode)| Series {
            name: mode_label(mode, ctx.sgemm_size),
            points: sweep
                .points(config, rows, mode, &|m| min(&m.seconds))
                .into_iter()
                .map(log)
                .collect(),
            colour: palette(i),
            thin: false,
        })
        .filter(|s| s.points.len() >= 2)
        .collect();
    if series.is_empty() {
        return None;
    }
    if let (Some(rate), Some(mode)) = (sgemm_gflops, modes.first()) {
        let xs: Vec<f64> = sweep
            .points(config, rows, mode, &|m| min(&m.seconds))
            .iter()
            .map(|p| p.0)
            .collect();
        series.push(Series {
            name: "FLOP bound (model FLOPs / sgemm rate)".into(),
            points: xs
                .iter()
                .map(|&x| {
                    let seconds =
                        sweep.flops(config, mode, x as usize, ctx.sgemm_size) / (rate * 1e9);
                    log((x, seconds))
                })
                .collect(),
            colour: [110, 110, 110],
            thin: true,
        });
    }
    let (title, x_label) = match sweep {
        Sweep::Length => (
            format!("{}: step time against T (B = 1, all layers)", config.name),
            "log10 T (tokens)",
        ),
        Sweep::Batch => (
            format!(
                "{}: step time against B (T = {}, all layers)",
                config.name, config.seq_length
            ),
            "log10 B (sequences)",
        ),
    };
    line_chart_svg(
        &series,
        &ChartText {
            title: &title,
            x_label,
            y_label: "log10 seconds (min of the timed runs)",
        },
        false,
    )
    .ok()
}

/// The scaling section and its charts (`sgemm_gflops`: the machine's matmul rate, for the FLOP
/// bound; `None` draws the charts without it).
pub fn render_scaling(
    config: &BenchConfig,
    rows: &[Measurement],
    repeat: usize,
    ctx: &ReportContext,
    sgemm_gflops: Option<f64>,
) -> (String, Vec<SectionChart>) {
    let backend = &ctx.backend;
    let key = ctx.section_key(config.name);
    let long = long_context_positions(config);
    let mut out = format!(
        "## `{}` config, `{backend}` backend: scaling with B, T and simulated layers \
         (measured {})\n\n",
        config.name, ctx.date
    );
    out.push_str(&format!(
        "The `{}` model and TinT sizes of the section above; the first half of each sequence \
         trains; `layers` = simulated top layers (the layers below run their plain forward once). \
         `Tmax` is the checkpoint's number of positions, the construction's `Tmax`: the B sweep \
         and the layer rows run on the section's checkpoint ({} positions), the T sweep on one of \
         {long} positions (the same sizes with a longer position table, as long as the \
         construction allows, `P + Tmax ≤ 2048`: its weights are other seeded draws and its \
         construction's position terms larger, so its T = {} row is slower than the B sweep's). Each cell: the smallest wall seconds / the smallest \
         user+system CPU seconds of {repeat} timed runs after one warm-up, in a fresh child \
         process; in brackets the child's peak RSS in MB (loading and construction included).\n\n",
        config.name, config.seq_length, config.seq_length
    ));
    out.push_str(&format!(
        "* Machine: {}.\n* Build: {}.\n\n",
        ctx.machine, ctx.build
    ));
    out.push_str(&scaling_table(config, rows, ctx));
    out.push_str(
        "\nExponents `k` of `y ∝ x^k`, least squares on log-log axes over each sweep's points \
         (time: the smallest wall seconds; model FLOPs: the analytic count of the step, \
         `tint_sim::flops`; peak RSS: the child's, so a constant part — the process, the model, \
         the construction — flattens it):\n\n",
    );
    out.push_str(&exponent_table(config, rows, ctx));
    let mut charts = Vec::new();
    for (sweep, suffix) in [(Sweep::Length, "t"), (Sweep::Batch, "b")] {
        if let Some(svg) = sweep_chart(config, rows, sweep, sgemm_gflops, ctx) {
            let file = format!("{key}-scaling-{suffix}.svg");
            out.push_str(&format!(
                "\n![scaling against {}](bench/{file})\n",
                suffix.to_uppercase()
            ));
            charts.push((file, svg));
        }
    }
    if sgemm_gflops.is_some() && !charts.is_empty() {
        out.push_str(
            "\nThe grey line is the FLOP bound: the step's model FLOPs at this run's sgemm rate \
             (the section above), the time the step would take if all of it ran as fast as one \
             large matmul.\n",
        );
    }
    out.push_str(
        "\nReproduce: `cargo xtask bench --scaling` (also rewrites the config's main section; the \
         charts go to `docs/bench/`).\n",
    );
    (out, charts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> ReportContext {
        ReportContext {
            backend: "flex".into(),
            machine: "test machine".into(),
            build: "test build".into(),
            gpu: None,
            date: "2026-12-05 01:00 UTC".into(),
            sgemm_size: 1024,
        }
    }

    fn measurement(mode: &str, b: usize, t: usize, positions: usize, s: f64) -> Measurement {
        Measurement {
            mode: mode.into(),
            batch_size: b,
            seq_length: t,
            sim_layers: None,
            positions,
            seconds: vec![s, s * 1.1],
            cpu_seconds: vec![s],
            peak_rss_kb: 512 * 1024,
            gpu_memory_mb: None,
        }
    }

    #[test]
    fn slopes_recover_power_laws() {
        // y = 3 x²: the slope of ln y on ln x is 2 (to rounding, 1e-12).
        let points: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0].map(|x| (x, 3.0 * x * x)).to_vec();
        assert!((log_log_slope(&points).unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(log_log_slope(&points[..1]), None);
        assert_eq!(log_log_slope(&[(1.0, 1.0), (2.0, 0.0)]), None);
    }

    #[test]
    fn the_section_has_a_row_per_point_exponents_and_two_charts() {
        let config = BenchConfig::TINY;
        let mut rows = Vec::new();
        for b in [1usize, 2, 4] {
            // Time linear in B: exponent 1.
            rows.push(measurement("structured", b, 256, 256, 0.1 * b as f64));
        }
        for t in [128usize, 256, 512] {
            // Time quadratic in T: exponent 2.
            let s = 0.1 * (t as f64 / 256.0).powi(2);
            rows.push(measurement("structured", 1, t, 2016, s));
        }
        let mut top = measurement("structured", 1, 256, 256, 0.05);
        top.sim_layers = Some(1);
        rows.push(top);
        let (markdown, charts) = render_scaling(&config, &rows, 2, &context(), Some(100.0));
        // The T = 256 points of the two checkpoints are two rows.
        assert!(
            markdown.contains("| 1 | 256 | all (4) | 256 | 0.100 / 0.10 (512) | 2560 |"),
            "{markdown}"
        );
        assert!(
            markdown.contains("| 1 | 256 | all (4) | 2016 | 0.100 / 0.10 (512) | 2560 |"),
            "{markdown}"
        );
        assert!(markdown.contains("| 1 | 256 | 1 | 256 |"), "{markdown}");
        // Exponents: 2.00 against T, 1.00 against B; RSS flat (0.00).
        assert!(
            markdown.contains("| TinT step, structured execution | 2.00 |"),
            "{markdown}"
        );
        assert!(
            markdown.contains("| 0.00 | 1.00 | 1.00 | 0.00 |"),
            "{markdown}"
        );
        assert_eq!(charts.len(), 2);
        assert_eq!(charts[0].0, "bench-tiny-scaling-t.svg");
        assert!(markdown.contains("](bench/bench-tiny-scaling-t.svg)"));
        assert!(charts[0].1.contains("FLOP bound"));
    }
}
