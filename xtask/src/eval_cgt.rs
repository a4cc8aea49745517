//! `cargo xtask eval cgt`: trains and evaluates the Contextually Guided Transformer variants of paper
//! Table 1 (baseline, CGT, CGT + aux, CGT + aux + reg) at a preset scale and over seeds, writes SVG plots into
//! `docs/cgt/` and a markdown section into `docs/results.md`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use burn::module::AutodiffModule;
use indicatif::{ProgressBar, ProgressStyle};
use tint_cgt::data::{ArithmeticConfig, BatchSource, LinearRegressionConfig, TextMixture};
use tint_cgt::metrics::{
    evaluate_icl, evaluate_regression, evaluate_regression_references, frozen_context,
    IclEvaluation, ReferenceErrors, RegressionEvaluation, RegressionReferences,
};
use tint_cgt::objective::joint_loss;
use tint_cgt::plot::{heat_map_svg, line_chart_svg, ChartText, Series};
use tint_cgt::presets::{DataPreset, ExperimentPreset, Variant};
use tint_cgt::train::{train_with_history, training_seconds, RunFiles};
use tint_cgt::CgtModel;

use crate::backend::{device, AB, B, BACKEND_NAME};

/// Arguments of `cargo xtask eval cgt`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CgtArgs {
    /// Experiment preset: icl-tiny (smoke, ~2 min), icl-small (CPU Table 1), icl-paper, linreg-small,
    /// linreg-paper, text-small, text-paper.
    #[arg(long, default_value = "icl-small")]
    pub preset: String,
    /// Training steps per variant (overrides the preset).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Sequences per training batch (overrides the preset; larger batches pay off on a GPU).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Comma-separated variants to run: baseline, cgt, cgt-aux, cgt-aux-reg (default: all four).
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
    /// Text corpus for the text presets (blank-line separated documents; default: the State of the
    /// Union addresses, fetched on demand like `cargo xtask fetch sotu`).
    #[arg(long)]
    pub text: Option<PathBuf>,
    /// Save a checkpoint every N steps (overrides the preset: 1000 for the *-paper presets, 0 = only at
    /// the end for the others). Does not change the results, so it is not part of the run directory.
    #[arg(long)]
    pub checkpoint_every: Option<usize>,
    /// Directory for the PNG plots.
    #[arg(long, default_value = "docs/cgt")]
    pub plots: PathBuf,
    /// Markdown file that receives this preset's section.
    #[arg(long, default_value = "docs/results.md")]
    pub report: PathBuf,
    /// Directory for checkpoints, JSONL logs and exported specialised models
    /// (default: `target/cgt-runs/<preset>-<steps>steps-batch<batch>`); an existing checkpoint of the same
    /// settings is resumed (losses and training time are read back from its log.jsonl), one written with
    /// other settings is an error.
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// Comma-separated seeds: each seeds the model initialisation, the training stream and the
    /// auxiliary draws (evaluation sequences are the same for every seed). One run per seed and variant;
    /// with several seeds the report gives the mean and a 95 % Student-t interval over seeds.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub seeds: Vec<u64>,
    /// Report only the (seed, variant) runs whose final checkpoint exists, without training the others
    /// (they are listed as not run): assembles the table of runs trained by separate invocations.
    #[arg(long)]
    pub only_finished: bool,
}

/// What one variant produced.
struct VariantResult {
    variant: Variant,
    /// The seed of this run.
    seed: u64,
    /// `(step, task loss)` of every step, earlier runs' steps included (read back from the log).
    losses: Vec<(f64, f64)>,
    /// Training seconds of all steps (earlier runs' steps from the log).
    train_seconds: f64,
    /// Wall seconds of this invocation for the variant: the steps trained now plus evaluation.
    wall_seconds: f64,
    /// Step this invocation resumed at (0: trained from scratch).
    resumed_at: usize,
    icl: Option<IclEvaluation>,
    regression: Option<RegressionEvaluation>,
    text_loss: Option<(f64, Option<f64>)>,
    fold_error: Option<f32>,
}

/// How the run was invoked, for the report.
struct RunSummary {
    /// The command line that reproduces the run.
    command: String,
    /// Whether `--steps` / `--batch-size` overrode the preset.
    steps_overridden: bool,
    batch_overridden: bool,
    /// The text corpus (text presets).
    corpus: Option<String>,
    /// Reference predictors (linear-regression presets).
    references: Option<RegressionReferences>,
    /// `(seed, variant)` runs left out by `--only-finished`.
    skipped: Vec<(u64, Variant)>,
}

/// The preset with the command-line overrides applied.
fn configured_preset(args: &CgtArgs) -> Result<ExperimentPreset> {
    let mut preset = ExperimentPreset::by_name(&args.preset)?;
    if let Some(steps) = args.steps {
        if steps == 0 {
            bail!("--steps must be at least 1");
        }
        // The warm-up and a pair curriculum's ramp keep their share of the schedule.
        let scale = |part: usize| part * steps / preset.training.steps;
        if let DataPreset::LinearRegression(data) = &mut preset.data {
            if let Some(curriculum) = &mut data.curriculum {
                curriculum.ramp_steps = scale(curriculum.ramp_steps);
            }
        }
        preset.training.warmup_steps = preset.training.warmup_steps.min(steps / 10);
        preset.training.steps = steps;
    }
    if let Some(batch_size) = args.batch_size {
        if batch_size == 0 {
            bail!("--batch-size must be at least 1");
        }
        preset.data.set_batch_size(batch_size);
    }
    if let Some(every) = args.checkpoint_every {
        preset.training.checkpoint_every = every;
    }
    Ok(preset)
}

/// The default run directory: depends on everything that changes the schedule or the data stream.
fn default_run_dir(preset: &ExperimentPreset) -> PathBuf {
    PathBuf::from("target/cgt-runs").join(format!(
        "{}-{}steps-batch{}",
        preset.name,
        preset.training.steps,
        preset.data.batch_size()
    ))
}

/// The preset of one seed: seed 0 is the preset itself; seed `s` shifts the training stream's seed by
/// `SEED_STRIDE * s` and the auxiliary draws' by `s` (evaluation streams derive from the preset's seed).
fn preset_for_seed(preset: &ExperimentPreset, seed: u64) -> ExperimentPreset {
    const SEED_STRIDE: u64 = 7919;
    let mut seeded = preset.clone();
    match &mut seeded.data {
        DataPreset::Arithmetic(data) => data.seed += SEED_STRIDE * seed,
        DataPreset::LinearRegression(data) => data.seed += SEED_STRIDE * seed,
        DataPreset::TextMixture { .. } => {}
    }
    seeded.training.seed += seed;
    seeded
}

/// The command line that reproduces a run with `args` on `backend` (report paths and checkpointing left
/// out: they do not change the numbers).
fn command_line(args: &CgtArgs, backend: &str) -> String {
    let mut command = if backend == "flex" {
        "cargo xtask eval cgt".to_string()
    } else {
        format!("cargo run -p xtask --features {backend} -- eval cgt")
    };
    command.push_str(&format!(" --preset {}", args.preset));
    if let Some(steps) = args.steps {
        command.push_str(&format!(" --steps {steps}"));
    }
    if let Some(batch_size) = args.batch_size {
        command.push_str(&format!(" --batch-size {batch_size}"));
    }
    if !args.variants.is_empty() {
        command.push_str(&format!(" --variants {}", args.variants.join(",")));
    }
    if args.only_finished {
        command.push_str(" --only-finished");
    }
    if args.seeds != [0] {
        let seeds: Vec<String> = args.seeds.iter().map(|s| s.to_string()).collect();
        command.push_str(&format!(" --seeds {}", seeds.join(",")));
    }
    if let Some(text) = &args.text {
        command.push_str(&format!(" --text {}", text.display()));
    }
    command
}

/// Runs the command.
pub(crate) fn run(args: &CgtArgs) -> Result<()> {
    let preset = configured_preset(args)?;
    let variants: Vec<Variant> = if args.variants.is_empty() {
        Variant::ALL.to_vec()
    } else {
        args.variants
            .iter()
            .map(|name| {
                Variant::ALL
                    .into_iter()
                    .find(|v| v.slug() == name)
                    .with_context(|| format!("unknown variant {name:?}"))
            })
            .collect::<Result<_>>()?
    };
    if args.seeds.is_empty() {
        bail!("--seeds needs at least one seed");
    }
    let run_dir = args
        .run_dir
        .clone()
        .unwrap_or_else(|| default_run_dir(&preset));
    let (_, corpus_name) = batch_source(&preset, args)?;
    std::fs::create_dir_all(&args.plots)?;
    eprintln!(
        "cgt preset {} | {} steps/variant, batch {} | seeds {:?} | backend {BACKEND_NAME} | runs in {}",
        preset.name,
        preset.training.steps,
        preset.data.batch_size(),
        args.seeds,
        run_dir.display()
    );
    let references = match &preset.data {
        DataPreset::LinearRegression(data) => Some(evaluate_regression_references(
            &regression_eval_data(data),
            preset.eval_batches,
            &freeze_points(data.n_pairs),
        )?),
        _ => None,
    };
    let mut summary = RunSummary {
        command: command_line(args, BACKEND_NAME),
        steps_overridden: args.steps.is_some(),
        batch_overridden: args.batch_size.is_some(),
        corpus: corpus_name,
        references,
        skipped: Vec::new(),
    };
    let mut results = Vec::new();
    for &seed in &args.seeds {
        let seeded = preset_for_seed(&preset, seed);
        let (source, _) = batch_source(&seeded, args)?;
        for &variant in &variants {
            let checkpoint = run_dir
                .join(format!("seed{seed}"))
                .join(variant.slug())
                .join("checkpoint");
            if args.only_finished
                && !tint_cgt::train::checkpoint_is_final(&checkpoint, preset.training.steps)?
            {
                summary.skipped.push((seed, variant));
                continue;
            }
            results.push(run_variant(
                &preset,
                &seeded,
                variant,
                seed,
                source.as_ref(),
                args,
                &run_dir.join(format!("seed{seed}")),
            )?);
        }
    }
    let first_seed = args.seeds[0];
    let curves: Vec<Series> = results
        .iter()
        .filter(|r| r.seed == first_seed)
        .map(|r| Series {
            name: r.variant.title().to_string(),
            points: smooth(&r.losses, 10),
            colour: colour(r.variant),
            thin: false,
        })
        .collect();
    let title = format!("{}: training task loss, seed {first_seed}", preset.name);
    let chart = line_chart_svg(
        &curves,
        &ChartText {
            title: &title,
            x_label: "step",
            y_label: "task loss (10-step moving average, log scale)",
        },
        true,
    )?;
    tint_eval::write_atomic(
        args.plots.join(format!("{}-loss.svg", preset.name)),
        chart.as_bytes(),
    )?;
    if matches!(preset.data, DataPreset::LinearRegression(_)) {
        let title = format!("{}: held-out error by shown pairs", preset.name);
        let chart = regression_chart(&results, summary.references.as_ref(), &title)?;
        tint_eval::write_atomic(
            args.plots.join(format!("{}-by-pair.svg", preset.name)),
            chart.as_bytes(),
        )?;
    }
    let section = render_section(&preset, &results, &args.plots, &summary);
    crate::report_doc::write_marked_section(
        &args.report,
        &format!("cgt:{}", preset.name),
        &section,
        "# Results\n\nEach section is regenerated by the command it names.\n",
    )?;
    eprintln!("{section}");
    eprintln!(
        "wrote {} and plots in {}",
        args.report.display(),
        args.plots.display()
    );
    Ok(())
}

/// The training stream of a preset and, for text presets, the corpus name for the report.
fn batch_source(
    preset: &ExperimentPreset,
    args: &CgtArgs,
) -> Result<(Box<dyn BatchSource>, Option<String>)> {
    let mut corpus_name = None;
    let source: Box<dyn BatchSource> = match &preset.data {
        DataPreset::Arithmetic(data) => Box::new(data.clone()),
        DataPreset::LinearRegression(data) => Box::new(data.clone()),
        DataPreset::TextMixture {
            seq_length,
            cut_min,
            cut_max,
            batch_size,
        } => {
            let path = match &args.text {
                Some(path) => {
                    corpus_name = Some(format!("`{}`", path.display()));
                    path.clone()
                }
                None => {
                    corpus_name = Some(
                        "the State of the Union addresses 1790–2021 (`xtask fetch sotu`)".into(),
                    );
                    crate::fetch::sotu_text().context(
                        "fetching the default SOTU corpus (or pass --text FILE with blank-line separated documents)",
                    )?
                }
            };
            let corpus = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            Box::new(TextMixture::new(
                &corpus,
                *seq_length,
                *cut_min,
                *cut_max,
                *batch_size,
                1,
            )?)
        }
    };
    Ok((source, corpus_name))
}

fn colour(variant: Variant) -> [u8; 3] {
    match variant {
        Variant::Baseline => [80, 80, 80],
        Variant::Cgt => [31, 119, 180],
        Variant::CgtAux => [255, 127, 14],
        Variant::CgtAuxReg => [44, 160, 44],
    }
}

fn smooth(points: &[(f64, f64)], window: usize) -> Vec<(f64, f64)> {
    points
        .iter()
        .enumerate()
        .map(|(i, &(x, _))| {
            let from = i.saturating_sub(window - 1);
            let slice = &points[from..=i];
            (
                x,
                slice.iter().map(|p| p.1).sum::<f64>() / slice.len() as f64,
            )
        })
        .collect()
}

/// The held-out evaluation stream of a regression preset.
fn regression_eval_data(data: &LinearRegressionConfig) -> LinearRegressionConfig {
    LinearRegressionConfig {
        seed: data.seed + 1000,
        ..data.without_curriculum()
    }
}

/// The prompt sizes `k` after which `y` is frozen in the regression evaluation (for 20 pairs: 5, 10
/// and 12, the last being the "once 12 pairs are shown" point of the CPU preset's target).
fn freeze_points(n_pairs: usize) -> [usize; 3] {
    [n_pairs / 4, n_pairs / 2, 3 * n_pairs / 5]
}

/// Trains (or resumes) one variant of one seed and evaluates it. `preset` holds the evaluation streams
/// (the same for every seed), `seeded` the training stream and schedule of this seed.
fn run_variant(
    preset: &ExperimentPreset,
    seeded: &ExperimentPreset,
    variant: Variant,
    seed: u64,
    source: &dyn BatchSource,
    args: &CgtArgs,
    run_dir: &Path,
) -> Result<VariantResult> {
    let device = device();
    let training = seeded.training_for(variant);
    let dir = run_dir.join(variant.slug());
    let files = RunFiles {
        checkpoint_dir: Some(dir.join("checkpoint")),
        log_path: Some(dir.join("log.jsonl")),
    };
    // Same initial weights for a (seed, variant) pair on every invocation.
    <B as burn::tensor::backend::Backend>::seed(&device, 1_000 + seed);
    let model = CgtModel::<AB>::new(&preset.model_for(variant), &device)?;
    let bar = ProgressBar::new(training.steps as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix:>16} [{elapsed_precise}] {bar:30} {pos}/{len} {msg} (eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(format!("{} seed {seed}", variant.slug()));
    let start = Instant::now();
    let outcome = train_with_history(model, source, &training, &files, &device, &mut |report| {
        bar.set_position(report.step as u64 + 1);
        bar.set_message(format!(
            "loss {:.3} (total {:.3})",
            report.terms.task, report.terms.total
        ));
    })
    .with_context(|| format!("training {}", variant.slug()))?;
    bar.finish();
    if outcome.resumed_at > 0 {
        eprintln!(
            "{}: resumed at step {} of {} from {}",
            variant.slug(),
            outcome.resumed_at,
            training.steps,
            dir.display()
        );
    }
    if outcome.history.len() != training.steps {
        eprintln!(
            "{}: warning: the log holds {} of {} steps; the loss curve and training time cover those",
            variant.slug(),
            outcome.history.len(),
            training.steps
        );
    }
    let losses = outcome
        .history
        .iter()
        .map(|r| (r.step as f64, r.terms.task))
        .collect();
    let train_seconds = training_seconds(&outcome.history);
    let resumed_at = outcome.resumed_at;
    let model: CgtModel<B> = outcome.model.valid();
    let mut result = VariantResult {
        variant,
        seed,
        losses,
        train_seconds,
        wall_seconds: 0.0,
        resumed_at,
        icl: None,
        regression: None,
        text_loss: None,
        fold_error: None,
    };
    match &preset.data {
        DataPreset::Arithmetic(data) => {
            let eval = ArithmeticConfig {
                seed: data.seed + 1000,
                ..data.clone()
            };
            let evaluation = evaluate_icl(&model, &eval, preset.eval_batches, &device)?;
            if let (Some(map), true) = (&evaluation.dot_products, seed == args.seeds[0]) {
                let title = format!("{} {}: mean n_s . n_t", preset.name, variant.title());
                let svg = heat_map_svg(map, evaluation.seq_length, &title)?;
                tint_eval::write_atomic(
                    args.plots
                        .join(format!("{}-{}-yy.svg", preset.name, variant.slug())),
                    svg.as_bytes(),
                )?;
            }
            if model.is_guided() {
                let single = ArithmeticConfig {
                    batch_size: 1,
                    ..eval.clone()
                };
                let (batch, sequences) = single.annotated_batch(0);
                let start = sequences[0].tasks[0].examples[eval.n_examples - 2].start;
                result.fold_error = Some(export_specialised(&model, &batch, start, &dir)?);
            }
            result.icl = Some(evaluation);
        }
        DataPreset::LinearRegression(data) => {
            let eval = regression_eval_data(data);
            result.regression = Some(evaluate_regression(
                &model,
                &eval,
                preset.eval_batches,
                &freeze_points(data.n_pairs),
                &device,
            )?);
            if model.is_guided() {
                let single = LinearRegressionConfig {
                    batch_size: 1,
                    ..eval.clone()
                };
                let (batch, _) = single.annotated_batch(0);
                // Frozen after half of the pairs: the prompt ends with y at position n_pairs - 1.
                let start = 2 * (data.n_pairs / 2);
                result.fold_error = Some(export_specialised(&model, &batch, start, &dir)?);
            }
        }
        DataPreset::TextMixture { .. } => {
            let mut total = 0.0;
            let mut aux_total = 0.0;
            let objective = tint_cgt::objective::ObjectiveConfig {
                eta: if model.is_guided() { 0.0 } else { 1.0 },
                ..Default::default()
            };
            for step in 0..preset.eval_batches {
                let batch = source.batch(1_000_000 + step as u64);
                let mut rng = tint_cgt::data::step_rng(7, step as u64);
                let (_, terms) = joint_loss(&model, &batch, &objective, &mut rng, &device)?;
                total += terms.task;
                aux_total += terms.aux.unwrap_or(f64::NAN);
            }
            let n = preset.eval_batches as f64;
            result.text_loss = Some((total / n, model.is_guided().then_some(aux_total / n)));
        }
    }
    result.wall_seconds = start.elapsed().as_secs_f64();
    Ok(result)
}

/// Folds `y` of a one-sequence batch, frozen at position `start - 1` (the end of its prompt), into a
/// plain model, checks it against the frozen-`y` model on the tokens from `start` on (earlier ones
/// hidden) and exports it; returns the largest output difference.
fn export_specialised(
    model: &CgtModel<B>,
    batch: &tint_cgt::data::HostBatch,
    start: usize,
    dir: &Path,
) -> Result<f32> {
    let device = device();
    let input = batch.input_tensor::<B>(&device);
    let context = model.context(&input)?.mean;
    let frozen = frozen_context(context, &[start - 1]);
    let reference = model.forward_x_path(&input, Some(frozen.clone()), Some(&[start]))?;
    let d_y = frozen.dims()[2];
    let folded = model.specialise(frozen.reshape([d_y]))?;
    let plain = folded.forward_x_path(&input, None, Some(&[start]))?;
    let error: f32 = (reference - plain).abs().max().into_scalar();
    std::fs::create_dir_all(dir)?;
    folded.export_safetensors(dir.join("specialised.safetensors"))?;
    Ok(error)
}

/// Two-sided 95 % Student-t quantiles for 1..=10 degrees of freedom.
const T_975: [f64; 10] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
];

/// Mean of `values` and the half-width of its 95 % Student-t interval over seeds (`None` for a single
/// value; the normal 1.96 beyond 11 values). `None` for no values.
fn interval(values: &[f64]) -> Option<(f64, Option<f64>)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return Some((mean, None));
    }
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = T_975.get(n - 2).copied().unwrap_or(1.96);
    Some((mean, Some(t * (variance / n as f64).sqrt())))
}

/// A table cell: `mean ± half-width` over seeds (`scale` multiplies both, `digits` decimals).
fn cell(values: &[f64], scale: f64, digits: usize, suffix: &str) -> String {
    match interval(values) {
        None => "–".into(),
        Some((mean, None)) => format!("{:.digits$}{suffix}", mean * scale),
        Some((mean, Some(h))) => {
            format!("{:.digits$} ± {:.digits$}{suffix}", mean * scale, h * scale)
        }
    }
}

/// Titles of the reference columns of the linear-regression table.
const REFERENCE_TITLES: [&str; 4] = [
    "least squares in context",
    "ridge λ = σ² (Bayes)",
    "mean of shown y",
    "zero",
];

fn reference_cells(errors: &ReferenceErrors) -> Vec<String> {
    [
        errors.least_squares,
        errors.bayes_ridge,
        errors.mean,
        errors.zero,
    ]
    .iter()
    .map(|e| format!("{e:.3}"))
    .collect()
}

/// The variants present in `results`, in table order.
fn variants_of(results: &[VariantResult]) -> Vec<Variant> {
    Variant::ALL
        .into_iter()
        .filter(|v| results.iter().any(|r| r.variant == *v))
        .collect()
}

/// The values of `metric` over the seeds of `variant`.
fn per_seed(
    results: &[VariantResult],
    variant: Variant,
    metric: &dyn Fn(&VariantResult) -> Option<f64>,
) -> Vec<f64> {
    results
        .iter()
        .filter(|r| r.variant == variant)
        .filter_map(metric)
        .collect()
}

/// Mean dynamic-y error on pairs `k..`.
fn tail_error(evaluation: &RegressionEvaluation, k: usize) -> Option<f64> {
    let tail = evaluation.dynamic_by_pair.get(k..)?;
    (!tail.is_empty()).then(|| tail.iter().sum::<f64>() / tail.len() as f64)
}

/// The per-pair error chart of a regression run (mean over seeds) with the reference predictors.
fn regression_chart(
    results: &[VariantResult],
    references: Option<&RegressionReferences>,
    title: &str,
) -> Result<String> {
    let mut series = Vec::new();
    for variant in variants_of(results) {
        let runs: Vec<&RegressionEvaluation> = results
            .iter()
            .filter(|r| r.variant == variant)
            .filter_map(|r| r.regression.as_ref())
            .collect();
        let Some(first) = runs.first() else { continue };
        let points = (0..first.dynamic_by_pair.len())
            .map(|i| {
                let mean =
                    runs.iter().map(|e| e.dynamic_by_pair[i]).sum::<f64>() / runs.len() as f64;
                (i as f64, mean)
            })
            .collect();
        series.push(Series {
            name: variant.title().to_string(),
            points,
            colour: colour(variant),
            thin: false,
        });
    }
    if let Some(references) = references {
        let reference = |name: &str, colour, pick: fn(&ReferenceErrors) -> f64| Series {
            name: name.to_string(),
            points: references
                .by_pair
                .iter()
                .enumerate()
                .map(|(i, e)| (i as f64, pick(e)))
                .collect(),
            colour,
            thin: true,
        };
        series.push(reference("least squares", [0, 0, 0], |e| e.least_squares));
        series.push(reference("ridge λ = σ²", [140, 86, 75], |e| {
            e.bayes_ridge
        }));
        series.push(reference("mean of shown y", [214, 39, 40], |e| e.mean));
    }
    Ok(line_chart_svg(
        &series,
        &ChartText {
            title,
            x_label: "pairs shown before the query",
            y_label: "mean squared error (log scale)",
        },
        true,
    )?)
}

fn render_section(
    preset: &ExperimentPreset,
    results: &[VariantResult],
    plots: &Path,
    summary: &RunSummary,
) -> String {
    let model = &preset.model;
    let training = &preset.training;
    let source = |overridden: bool, flag: &str| {
        if overridden {
            format!("set by {flag}")
        } else {
            "preset".to_string()
        }
    };
    let mut seeds: Vec<u64> = results.iter().map(|r| r.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    let mut out = format!("## CGT: `{}`\n\n", preset.name);
    out.push_str(&format!(
        "Command: `{}` (backend {BACKEND_NAME}). \
         Model: L = {}, l = {}, d_x = {} ({} heads), d_y = {} ({} heads), rank r = {}, M = {} templates, \
         input {:?}; {} steps per variant ({}), batch {} ({}), Adam with {} warm-up steps + cosine from lr {} \
         to {}, gradient norm clipped at {:?}, eta = {}, w_C = {}, w_D = {} ({:?} normalisation). Seeds {:?}: \
         {}.\n\n",
        summary.command,
        model.n_layers,
        model.readout_layer,
        model.d_x,
        model.n_heads_x,
        model.d_y,
        model.n_heads_y,
        model.rank,
        model.n_templates,
        model.input,
        training.steps,
        source(summary.steps_overridden, "--steps"),
        preset.data.batch_size(),
        source(summary.batch_overridden, "--batch-size"),
        training.warmup_steps,
        training.learning_rate,
        training.min_learning_rate,
        training.grad_clip_norm,
        training.objective.eta,
        training.objective.w_continuity,
        training.objective.w_orthogonality,
        training.objective.normalisation,
        seeds,
        if seeds.len() > 1 {
            "cells are mean ± half-width of the 95 % Student-t interval over seeds"
        } else {
            "one seed, every cell is a single observation"
        },
    ));
    match &preset.data {
        DataPreset::Arithmetic(data) => out.push_str(&format!(
            "Data: {} tasks x {} examples, d = {} digits ({} tokens per sequence). \
             Accuracy = answer characters (sign and digits after `=`) of the last two examples of every task, \
             teacher-forced argmax. Specialised = `y` frozen after the first {} examples of the task, \
             everything before them hidden from attention (positions kept).\n\n",
            data.n_tasks,
            data.n_examples,
            data.digits,
            data.sequence_length(),
            data.n_examples - 2
        )),
        DataPreset::LinearRegression(data) => out.push_str(&format!(
            "Data: {} (x, y) pairs per sequence, x in R^{}, y in R^{}, U, b and x standard normal, noise σ = {}{}. \
             Errors are mean squared errors of the prediction of y_i at x_i (noisy targets) over {} held-out \
             evaluation batches of {} sequences (the same for every seed). Reference columns see only the shown \
             pairs of the same sequence: least squares fits (U, b) on them (minimum-norm while fewer pairs than \
             unknowns), the ridge with λ = σ² is the Bayes-optimal predictor for this generator, the mean \
             predicts the average of the shown y. Representation variation: eq. 4 with E1 = the first half of \
             the pairs, E2 = the second; linear fit: (U, b) from y_s, s in E2 (mean absolute error).\n\n",
            data.n_pairs,
            data.d_in,
            data.d_out,
            data.noise,
            data.curriculum.map_or(String::new(), |c| format!(
                "; training curriculum from {} pairs, one more pair at a time up to {} at step {}",
                c.start_pairs, data.n_pairs, c.ramp_steps
            )),
            preset.eval_batches,
            data.batch_size,
        )),
        DataPreset::TextMixture {
            seq_length,
            cut_min,
            cut_max,
            ..
        } => out.push_str(&format!(
            "Data: byte-level mixtures of two documents of {} ({seq_length} bytes per sequence, switch \
             between positions {cut_min} and {cut_max}).\n\n",
            summary.corpus.as_deref().unwrap_or("the corpus"),
        )),
    }
    if !summary.skipped.is_empty() {
        let skipped: Vec<String> = summary
            .skipped
            .iter()
            .map(|(seed, v)| format!("{} seed {seed}", v.title()))
            .collect();
        out.push_str(&format!(
            "Not run (no final checkpoint when this report was assembled with --only-finished): {}.\n\n",
            skipped.join(", ")
        ));
    }
    let resumed: Vec<String> = results
        .iter()
        .filter(|r| r.resumed_at > 0)
        .map(|r| {
            format!(
                "{} seed {} at step {}",
                r.variant.title(),
                r.seed,
                r.resumed_at
            )
        })
        .collect();
    if !resumed.is_empty() {
        out.push_str(&format!(
            "Resumed from checkpoints ({}); losses and training times of the earlier steps are read \
             back from the runs' log.jsonl.\n\n",
            resumed.join(", ")
        ));
    }
    let variants = variants_of(results);
    let references = summary.references.as_ref();
    let extra: &[&str] = if references.is_some() {
        &REFERENCE_TITLES
    } else {
        &[]
    };
    let header: Vec<&str> = variants
        .iter()
        .map(|v| v.title())
        .chain(extra.iter().copied())
        .collect();
    out.push_str(&format!(
        "| metric | {} | paper (baseline / CGT / +aux / +aux+reg) |\n",
        header.join(" | ")
    ));
    out.push_str(&format!("|---|{}---|\n", "---|".repeat(header.len())));
    // A row: one cell per variant over its seeds, then the reference cells (dashes when there are
    // none), then the paper.
    let row = |name: &str,
               metric: &dyn Fn(&VariantResult) -> Option<f64>,
               scale: f64,
               digits: usize,
               suffix: &str,
               reference: Option<Vec<String>>,
               paper: &str| {
        let reference =
            reference.unwrap_or_else(|| extra.iter().map(|_| "–".to_string()).collect());
        let cells = variants
            .iter()
            .map(|&v| cell(&per_seed(results, v, metric), scale, digits, suffix));
        format!(
            "| {name} | {} | {paper} |\n",
            cells.chain(reference).collect::<Vec<_>>().join(" | ")
        )
    };
    match &preset.data {
        DataPreset::Arithmetic(_) => {
            let icl = |r: &VariantResult| r.icl.clone();
            out.push_str(&row(
                "base accuracy (dynamic y)",
                &|r| icl(r).map(|e| e.dynamic_accuracy),
                100.0,
                1,
                " %",
                None,
                "77.7 / 79.0 / 77.5 / 78.6 %",
            ));
            out.push_str(&row(
                "specialised accuracy",
                &|r| icl(r).and_then(|e| e.specialised_accuracy),
                100.0,
                1,
                " %",
                None,
                "– / 15.3 / 77.0 / 77.5 %",
            ));
            out.push_str(&row(
                "representation variation (eq. 4)",
                &|r| icl(r).and_then(|e| e.representation_variation),
                1.0,
                3,
                "",
                None,
                "– / 0.80 / 0.39 / 0.07",
            ));
            out.push_str(&row(
                "linear-fit error of (a, b) from y",
                &|r| icl(r).and_then(|e| e.linear_fit_error),
                1.0,
                3,
                "",
                None,
                "– / 0.19 / 0.12 / 0.04",
            ));
        }
        DataPreset::LinearRegression(data) => {
            let regression = |r: &VariantResult| r.regression.clone();
            let dynamic_reference = |k: usize| {
                references.map(|r| {
                    reference_cells(&ReferenceErrors::average(r.by_pair.get(k..).unwrap_or(&[])))
                })
            };
            let frozen_reference = |k: usize| {
                references.and_then(|r| {
                    r.frozen
                        .iter()
                        .find(|f| f.0 == k)
                        .map(|f| reference_cells(&f.1))
                })
            };
            out.push_str(&row(
                "L2 on all pairs, dynamic y",
                &|r| regression(r).and_then(|e| tail_error(&e, 0)),
                1.0,
                3,
                "",
                dynamic_reference(0),
                "–",
            ));
            for k in freeze_points(data.n_pairs) {
                out.push_str(&row(
                    &format!("L2 on pairs {k}.., dynamic y (full context)"),
                    &|r| regression(r).and_then(|e| tail_error(&e, k)),
                    1.0,
                    3,
                    "",
                    dynamic_reference(k),
                    "–",
                ));
                out.push_str(&row(
                    &format!(
                        "L2 on pairs {k}.., y frozen after {k} pairs (references: fit on {k})"
                    ),
                    &|r| {
                        regression(r)
                            .and_then(|e| e.specialised.iter().find(|s| s.0 == k).map(|s| s.2))
                    },
                    1.0,
                    3,
                    "",
                    frozen_reference(k),
                    "specialised ≈ in-context",
                ));
            }
            let k = freeze_points(data.n_pairs)[2];
            if let Some(mean) =
                references.map(|r| ReferenceErrors::average(r.by_pair.get(k..).unwrap_or(&[])).mean)
            {
                out.push_str(&row(
                    &format!("L2 on pairs {k}.. (dynamic) / mean-of-shown-y L2 (target ≤ 0.25)"),
                    &|r| {
                        regression(r)
                            .and_then(|e| tail_error(&e, k))
                            .map(|e| e / mean)
                    },
                    1.0,
                    3,
                    "",
                    None,
                    "–",
                ));
            }
            out.push_str(&row(
                "representation variation (eq. 4)",
                &|r| regression(r).and_then(|e| e.representation_variation),
                1.0,
                3,
                "",
                None,
                "– / 0.80 / 0.39 / 0.07 (ICL)",
            ));
            out.push_str(&row(
                "linear-fit error of (U, b) from y",
                &|r| regression(r).and_then(|e| e.linear_fit_error),
                1.0,
                3,
                "",
                None,
                "– / 0.19 / 0.12 / 0.04 (ICL)",
            ));
        }
        DataPreset::TextMixture { .. } => {
            out.push_str(&row(
                "eval CE (dynamic y), nats/byte",
                &|r| r.text_loss.map(|t| t.0),
                1.0,
                3,
                "",
                None,
                "~3.65 → −0.23 with y (BPE)",
            ));
            out.push_str(&row(
                "eval CE, frozen-y auxiliary model",
                &|r| r.text_loss.and_then(|t| t.1),
                1.0,
                3,
                "",
                None,
                "–",
            ));
        }
    }
    // The folded-model check: the largest difference over seeds (a worst case, not a mean).
    let fold_cells: Vec<String> = variants
        .iter()
        .map(|&v| {
            let errors = per_seed(results, v, &|r| r.fold_error.map(f64::from));
            errors
                .iter()
                .copied()
                .reduce(f64::max)
                .map_or("–".into(), |e| format!("{e:.1e}"))
        })
        .chain(extra.iter().map(|_| "–".to_string()))
        .collect();
    out.push_str(&format!(
        "| folded vs frozen-y outputs, max abs diff (max over seeds) | {} | – |\n",
        fold_cells.join(" | ")
    ));
    out.push_str(&row(
        "final training loss (mean of last 10 steps)",
        &|r| {
            let tail = &r.losses[r.losses.len().saturating_sub(10)..];
            (!tail.is_empty()).then(|| tail.iter().map(|p| p.1).sum::<f64>() / tail.len() as f64)
        },
        1.0,
        3,
        "",
        None,
        "–",
    ));
    out.push_str(&row(
        "training time (all steps)",
        &|r| Some(r.train_seconds),
        1.0,
        0,
        " s",
        None,
        "~10 h on TPU, 400k steps",
    ));
    out.push_str(&row(
        "time per training step",
        &|r| (!r.losses.is_empty()).then(|| r.train_seconds / r.losses.len() as f64),
        1.0,
        3,
        " s",
        None,
        "–",
    ));
    out.push_str(&row(
        "wall time of this invocation (steps trained now + evaluation)",
        &|r| Some(r.wall_seconds),
        1.0,
        0,
        " s",
        None,
        "–",
    ));
    if let (DataPreset::LinearRegression(data), Some(references)) = (&preset.data, references) {
        let shown: Vec<usize> = [1, 2, 4, 6, 8, 10, 12, 16, data.n_pairs - 1]
            .into_iter()
            .filter(|&i| i < data.n_pairs)
            .collect();
        out.push_str(&format!(
            "\nDynamic-y error by number of shown pairs (mean over seeds) next to the references:\n\n\
             | pairs shown | {} | least squares | ridge λ = σ² | mean of shown y |\n|---|{}---|---|---|\n",
            variants.iter().map(|v| v.title()).collect::<Vec<_>>().join(" | "),
            "---|".repeat(variants.len())
        ));
        for i in shown {
            let cells: Vec<String> = variants
                .iter()
                .map(|&v| {
                    let values = per_seed(results, v, &|r| {
                        r.regression
                            .as_ref()
                            .and_then(|e| e.dynamic_by_pair.get(i).copied())
                    });
                    interval(&values).map_or("–".into(), |(m, _)| format!("{m:.3}"))
                })
                .collect();
            let e = &references.by_pair[i];
            out.push_str(&format!(
                "| {i} | {} | {:.3} | {:.3} | {:.3} |\n",
                cells.join(" | "),
                e.least_squares,
                e.bayes_ridge,
                e.mean
            ));
        }
    }
    let plot_path = |file: String| {
        plots
            .join(file)
            .display()
            .to_string()
            .replacen("docs/", "", 1)
    };
    out.push_str(&format!(
        "\nTraining loss of seed {} (task loss, 10-step moving average):\n\n![loss]({})\n",
        seeds.first().copied().unwrap_or(0),
        plot_path(format!("{}-loss.svg", preset.name))
    ));
    if matches!(preset.data, DataPreset::LinearRegression(_)) {
        out.push_str(&format!(
            "\nError by number of shown pairs (mean over seeds; thin lines: references):\n\n![by pair]({})\n",
            plot_path(format!("{}-by-pair.svg", preset.name))
        ));
    }
    if matches!(preset.data, DataPreset::Arithmetic(_)) {
        out.push_str("\nMean `n_s . n_t` of the normalised context `y` over an evaluation batch (red +1, white 0, blue −1):\n\n");
        for v in variants.iter().filter(|v| **v != Variant::Baseline) {
            out.push_str(&format!(
                "- {}: ![y.y]({})\n",
                v.title(),
                plot_path(format!("{}-{}-yy.svg", preset.name, v.slug()))
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: CgtArgs,
    }

    fn args(line: &[&str]) -> CgtArgs {
        Cli::parse_from(std::iter::once("cgt").chain(line.iter().copied())).args
    }

    #[test]
    fn eval_cgt_command_line_names_the_overrides() {
        let plain = args(&["--preset", "linreg-small"]);
        assert_eq!(
            command_line(&plain, "flex"),
            "cargo xtask eval cgt --preset linreg-small"
        );
        let overridden = args(&[
            "--preset",
            "icl-small",
            "--steps",
            "40",
            "--batch-size",
            "8",
            "--variants",
            "baseline,cgt",
            "--checkpoint-every",
            "10",
            "--report",
            "/tmp/r.md",
        ]);
        assert_eq!(
            command_line(&overridden, "cuda"),
            "cargo run -p xtask --features cuda -- eval cgt --preset icl-small --steps 40 \
             --batch-size 8 --variants baseline,cgt"
        );
    }

    #[test]
    fn eval_cgt_overrides_change_preset_and_run_dir() {
        let preset = configured_preset(&args(&[
            "--preset",
            "icl-paper",
            "--steps",
            "50",
            "--batch-size",
            "4",
        ]))
        .unwrap();
        assert_eq!(preset.training.steps, 50);
        assert_eq!(preset.training.warmup_steps, 5);
        assert_eq!(preset.data.batch_size(), 4);
        assert_eq!(preset.training.checkpoint_every, 1000);
        assert_eq!(
            default_run_dir(&preset),
            PathBuf::from("target/cgt-runs/icl-paper-50steps-batch4")
        );
        let every =
            configured_preset(&args(&["--preset", "icl-tiny", "--checkpoint-every", "7"])).unwrap();
        assert_eq!(every.training.checkpoint_every, 7);
        assert!(configured_preset(&args(&["--preset", "icl-tiny", "--batch-size", "0"])).is_err());
    }

    #[test]
    fn eval_cgt_seeds_shift_the_training_stream_only() {
        let preset =
            configured_preset(&args(&["--preset", "linreg-cpu", "--steps", "100"])).unwrap();
        let DataPreset::LinearRegression(data) = &preset.data else {
            panic!("linreg preset expected")
        };
        // The curriculum ramp keeps its 40 % share of the shortened schedule.
        assert_eq!(data.curriculum.unwrap().ramp_steps, 40);
        let seeded = preset_for_seed(&preset, 2);
        let DataPreset::LinearRegression(seeded_data) = &seeded.data else {
            panic!("linreg preset expected")
        };
        assert_ne!(seeded_data.seed, data.seed);
        assert_eq!(seeded.training.seed, preset.training.seed + 2);
        assert_eq!(preset_for_seed(&preset, 0).training, preset.training);
        // Evaluation streams derive from the unseeded preset and drop the curriculum.
        let eval = regression_eval_data(data);
        assert_eq!(eval.seed, data.seed + 1000);
        assert!(eval.curriculum.is_none());
        let line = command_line(
            &args(&["--preset", "linreg-cpu", "--seeds", "1,2,3"]),
            "flex",
        );
        assert_eq!(
            line,
            "cargo xtask eval cgt --preset linreg-cpu --seeds 1,2,3"
        );
    }

    #[test]
    fn eval_cgt_interval_is_student_t_over_seeds() {
        // Values 1, 2, 3: mean 2, sample sd 1, half-width 4.303 / sqrt(3) = 2.484.
        let (mean, half) = interval(&[1.0, 2.0, 3.0]).unwrap();
        assert!((mean - 2.0).abs() < 1e-12);
        assert!((half.unwrap() - 4.303 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(interval(&[5.0]), Some((5.0, None)));
        assert_eq!(interval(&[]), None);
        assert_eq!(cell(&[0.5, 0.7], 100.0, 1, " %"), "60.0 ± 127.1 %");
    }

    #[test]
    fn eval_cgt_linreg_section_has_references_and_timings() {
        let preset =
            configured_preset(&args(&["--preset", "linreg-small", "--batch-size", "4"])).unwrap();
        let DataPreset::LinearRegression(data) = &preset.data else {
            panic!("linreg preset expected")
        };
        let n = data.n_pairs;
        let errors = |scale: f64| ReferenceErrors {
            least_squares: scale,
            bayes_ridge: scale / 2.0,
            mean: 10.0,
            zero: 17.0,
        };
        let references = RegressionReferences {
            by_pair: vec![errors(1.0); n],
            frozen: freeze_points(n).iter().map(|&k| (k, errors(2.0))).collect(),
        };
        let result = |seed: u64, error: f64| VariantResult {
            variant: Variant::Cgt,
            seed,
            losses: (0..20).map(|i| (i as f64, 1.0)).collect(),
            train_seconds: 10.0,
            wall_seconds: 12.0,
            resumed_at: 20,
            icl: None,
            regression: Some(RegressionEvaluation {
                dynamic_by_pair: vec![error; n],
                specialised: freeze_points(n).iter().map(|&k| (k, error, 0.75)).collect(),
                representation_variation: Some(0.1),
                linear_fit_error: Some(0.2),
            }),
            text_loss: None,
            fold_error: Some(1e-6),
        };
        let summary = RunSummary {
            command: command_line(
                &args(&["--preset", "linreg-small", "--batch-size", "4"]),
                "flex",
            ),
            steps_overridden: false,
            batch_overridden: true,
            corpus: None,
            references: Some(references),
            skipped: vec![(4, Variant::CgtAux)],
        };
        let one = render_section(
            &preset,
            &[result(0, 0.5)],
            Path::new("/tmp/plots"),
            &summary,
        );
        assert!(one.contains("`cargo xtask eval cgt --preset linreg-small --batch-size 4`"));
        assert!(one.contains("batch 4 (set by --batch-size)"), "{one}");
        assert!(one.contains("one seed, every cell is a single observation"));
        assert!(
            one.contains("with --only-finished): CGT (Aux) seed 4."),
            "{one}"
        );
        assert!(one.contains(
            "| least squares in context | ridge λ = σ² (Bayes) | mean of shown y | zero |"
        ));
        let k = n / 2;
        assert!(
            one.contains(&format!(
                "| L2 on pairs {k}.., y frozen after {k} pairs (references: fit on {k}) | 0.750 | 2.000 | 1.000 | 10.000 | 17.000 |"
            )),
            "{one}"
        );
        assert!(one
            .contains("| L2 on all pairs, dynamic y | 0.500 | 1.000 | 0.500 | 10.000 | 17.000 |"));
        assert!(
            one.contains("| time per training step | 0.500 s | – | – | – | – |"),
            "{one}"
        );
        assert!(one.contains("| training time (all steps) | 10 s |"));
        assert!(one.contains("| final training loss (mean of last 10 steps) | 1.000 |"));
        assert!(one.contains("Resumed from checkpoints (CGT (no Aux/Reg) seed 0 at step 20)"));
        // Three seeds with errors 0.4, 0.5, 0.6: mean 0.5, half-width 4.303 * 0.1 / sqrt(3) = 0.248;
        // the ratio to the mean-of-shown-y error (10) is 0.05 ± 0.025.
        let three = render_section(
            &preset,
            &[result(1, 0.4), result(2, 0.5), result(3, 0.6)],
            Path::new("/tmp/plots"),
            &summary,
        );
        assert!(
            three.contains("| L2 on all pairs, dynamic y | 0.500 ± 0.248 |"),
            "{three}"
        );
        let last = freeze_points(n)[2];
        assert!(
            three.contains(&format!(
                "| L2 on pairs {last}.. (dynamic) / mean-of-shown-y L2 (target ≤ 0.25) | 0.050 ± 0.025 |"
            )),
            "{three}"
        );
        assert!(three.contains("| representation variation (eq. 4) | 0.100 ± 0.000 |"));
        assert!(three
            .contains("| folded vs frozen-y outputs, max abs diff (max over seeds) | 1.0e-6 |"));
        assert!(
            three.contains("| 12 | 0.500 | 1.000 | 0.500 | 10.000 |"),
            "{three}"
        );
    }
}
