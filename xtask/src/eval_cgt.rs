//! `cargo xtask eval cgt`: trains and evaluates the Contextually Guided Transformer variants of paper
//! Table 1 (baseline, CGT, CGT + aux, CGT + aux + reg) at a preset scale, writes PNG plots into
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
use tint_cgt::plot::{heat_map, line_chart};
use tint_cgt::presets::{DataPreset, ExperimentPreset, Variant};
use tint_cgt::train::{train_with_history, training_seconds, RunFiles};
use tint_cgt::CgtModel;

use crate::backend::{device, AB, B, BACKEND_NAME};

/// Arguments of `cargo xtask eval cgt`.
#[derive(clap::Args, Debug, Clone)]
pub struct CgtArgs {
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
    /// (default: target/cgt-runs/<preset>-<steps>steps-batch<batch>); an existing checkpoint of the same
    /// settings is resumed (losses and training time are read back from its log.jsonl), one written with
    /// other settings is an error.
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
}

/// What one variant produced.
struct VariantResult {
    variant: Variant,
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
}

/// The preset with the command-line overrides applied.
fn configured_preset(args: &CgtArgs) -> Result<ExperimentPreset> {
    let mut preset = ExperimentPreset::by_name(&args.preset)?;
    if let Some(steps) = args.steps {
        if steps == 0 {
            bail!("--steps must be at least 1");
        }
        preset.training.steps = steps;
        preset.training.warmup_steps = preset.training.warmup_steps.min(steps / 10);
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
    if let Some(text) = &args.text {
        command.push_str(&format!(" --text {}", text.display()));
    }
    command
}

/// Runs the command.
pub fn run(args: &CgtArgs) -> Result<()> {
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
    let run_dir = args
        .run_dir
        .clone()
        .unwrap_or_else(|| default_run_dir(&preset));
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
    std::fs::create_dir_all(&args.plots)?;
    eprintln!(
        "cgt preset {} | {} steps/variant, batch {} | backend {BACKEND_NAME} | runs in {}",
        preset.name,
        preset.training.steps,
        preset.data.batch_size(),
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
    let summary = RunSummary {
        command: command_line(args, BACKEND_NAME),
        steps_overridden: args.steps.is_some(),
        batch_overridden: args.batch_size.is_some(),
        corpus: corpus_name,
        references,
    };
    let mut results = Vec::new();
    for variant in variants {
        results.push(run_variant(
            &preset,
            variant,
            source.as_ref(),
            args,
            &run_dir,
        )?);
    }
    let curves: Vec<tint_cgt::plot::Curve> = results
        .iter()
        .map(|r| (smooth(&r.losses, 10), colour(r.variant)))
        .collect();
    let chart = line_chart(&curves, 640, 360)?;
    let loss_png = args.plots.join(format!("{}-loss.png", preset.name));
    std::fs::write(&loss_png, chart.to_png()?)?;
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
        ..data.clone()
    }
}

/// The prompt sizes `k` after which `y` is frozen in the regression evaluation.
fn freeze_points(n_pairs: usize) -> [usize; 3] {
    [n_pairs / 4, n_pairs / 2, 3 * n_pairs / 4]
}

fn run_variant(
    preset: &ExperimentPreset,
    variant: Variant,
    source: &dyn BatchSource,
    args: &CgtArgs,
    run_dir: &Path,
) -> Result<VariantResult> {
    let device = device();
    let training = preset.training_for(variant);
    let dir = run_dir.join(variant.slug());
    let files = RunFiles {
        checkpoint_dir: Some(dir.join("checkpoint")),
        log_path: Some(dir.join("log.jsonl")),
    };
    let model = CgtModel::<AB>::new(&preset.model_for(variant), &device)?;
    let bar = ProgressBar::new(training.steps as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix:>16} [{elapsed_precise}] {bar:30} {pos}/{len} {msg} (eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(variant.slug());
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
            if let Some(map) = &evaluation.dot_products {
                let png = heat_map(map, evaluation.seq_length, 3)?.to_png()?;
                std::fs::write(
                    args.plots
                        .join(format!("{}-{}-yy.png", preset.name, variant.slug())),
                    png,
                )?;
            }
            if model.is_guided() {
                result.fold_error = Some(export_specialised(&model, &eval, &dir)?);
            }
            result.icl = Some(evaluation);
        }
        DataPreset::LinearRegression(data) => {
            result.regression = Some(evaluate_regression(
                &model,
                &regression_eval_data(data),
                preset.eval_batches,
                &freeze_points(data.n_pairs),
                &device,
            )?);
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

/// Folds `y` of the first evaluation sequence (frozen after its prompt) into a plain model, checks it
/// against the frozen-`y` model and exports it; returns the largest logit difference.
fn export_specialised(model: &CgtModel<B>, eval: &ArithmeticConfig, dir: &Path) -> Result<f32> {
    let device = device();
    let single = ArithmeticConfig {
        batch_size: 1,
        ..eval.clone()
    };
    let (batch, sequences) = single.annotated_batch(0);
    let input = batch.input_tensor::<B>(&device);
    let start = sequences[0].tasks[0].examples[eval.n_examples - 2].start;
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

fn percent(value: Option<f64>) -> String {
    value.map_or("–".into(), |v| format!("{:.1}%", 100.0 * v))
}

fn number(value: Option<f64>) -> String {
    value.map_or("–".into(), |v| format!("{v:.3}"))
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
    let mut out = format!("## CGT: `{}`\n\n", preset.name);
    out.push_str(&format!(
        "Command: `{}` (backend {BACKEND_NAME}). \
         Model: L = {}, l = {}, d_x = {} ({} heads), d_y = {} ({} heads), rank r = {}, M = {} templates; \
         {} steps per variant ({}), batch {} ({}), Adam with {} warm-up steps + cosine from lr {} to {}, \
         eta = {}, w_C = {}, w_D = {}.\n\n",
        summary.command,
        model.n_layers,
        model.readout_layer,
        model.d_x,
        model.n_heads_x,
        model.d_y,
        model.n_heads_y,
        model.rank,
        model.n_templates,
        training.steps,
        source(summary.steps_overridden, "--steps"),
        preset.data.batch_size(),
        source(summary.batch_overridden, "--batch-size"),
        training.warmup_steps,
        training.learning_rate,
        training.min_learning_rate,
        training.objective.eta,
        training.objective.w_continuity,
        training.objective.w_orthogonality,
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
            "Data: {} (x, y) pairs per sequence, x in R^{}, y in R^{}, W and b standard normal, noise σ = {}. \
             Errors are mean squared errors of the prediction of y_i at x_i over {} evaluation batches. \
             Reference columns see only the shown pairs of the same sequence: least squares fits (W, b) on \
             them (minimum-norm while fewer pairs than unknowns), the ridge with λ = σ² is the Bayes-optimal \
             predictor for this generator, the mean predicts the average of the shown y.\n\n",
            data.n_pairs,
            data.d_in,
            data.d_out,
            data.noise,
            preset.eval_batches,
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
    let resumed: Vec<String> = results
        .iter()
        .filter(|r| r.resumed_at > 0)
        .map(|r| format!("{} at step {}", r.variant.title(), r.resumed_at))
        .collect();
    if !resumed.is_empty() {
        out.push_str(&format!(
            "Resumed from checkpoints ({}); losses and training times of the earlier steps are read \
             back from the runs' log.jsonl.\n\n",
            resumed.join(", ")
        ));
    }
    let references = summary.references.as_ref();
    let extra: &[&str] = if references.is_some() {
        &REFERENCE_TITLES
    } else {
        &[]
    };
    let header: Vec<&str> = results
        .iter()
        .map(|r| r.variant.title())
        .chain(extra.iter().copied())
        .collect();
    out.push_str(&format!(
        "| metric | {} | paper (baseline / CGT / +aux / +aux+reg) |\n",
        header.join(" | ")
    ));
    out.push_str(&format!("|---|{}---|\n", "---|".repeat(header.len())));
    // A row: the variants' cells, then the reference cells (dashes when there are none), then the paper.
    let row = |name: &str, cells: Vec<String>, reference: Option<Vec<String>>, paper: &str| {
        let reference =
            reference.unwrap_or_else(|| extra.iter().map(|_| "–".to_string()).collect());
        format!(
            "| {name} | {} | {paper} |\n",
            cells
                .into_iter()
                .chain(reference)
                .collect::<Vec<_>>()
                .join(" | ")
        )
    };
    match &preset.data {
        DataPreset::Arithmetic(_) => {
            out.push_str(&row(
                "base accuracy (dynamic y)",
                results
                    .iter()
                    .map(|r| percent(r.icl.as_ref().map(|e| e.dynamic_accuracy)))
                    .collect(),
                None,
                "77.7 / 79.0 / 77.5 / 78.6 %",
            ));
            out.push_str(&row(
                "specialised accuracy",
                results
                    .iter()
                    .map(|r| percent(r.icl.as_ref().and_then(|e| e.specialised_accuracy)))
                    .collect(),
                None,
                "– / 15.3 / 77.0 / 77.5 %",
            ));
            out.push_str(&row(
                "representation variation (eq. 4)",
                results
                    .iter()
                    .map(|r| number(r.icl.as_ref().and_then(|e| e.representation_variation)))
                    .collect(),
                None,
                "– / 0.80 / 0.39 / 0.07",
            ));
            out.push_str(&row(
                "linear-fit error of (a, b) from y",
                results
                    .iter()
                    .map(|r| number(r.icl.as_ref().and_then(|e| e.linear_fit_error)))
                    .collect(),
                None,
                "– / 0.19 / 0.12 / 0.04",
            ));
            out.push_str(&row(
                "folded vs frozen max logit diff",
                results
                    .iter()
                    .map(|r| r.fold_error.map_or("–".into(), |e| format!("{e:.1e}")))
                    .collect(),
                None,
                "–",
            ));
        }
        DataPreset::LinearRegression(data) => {
            // Dynamic: mean error on pairs k.. with the whole context; frozen: y frozen after k pairs,
            // the first k pairs hidden.
            let cells = |k: usize, frozen: bool| -> Vec<String> {
                results
                    .iter()
                    .map(|r| {
                        let Some(evaluation) = &r.regression else {
                            return "–".to_string();
                        };
                        if frozen {
                            evaluation
                                .specialised
                                .iter()
                                .find(|s| s.0 == k)
                                .map_or("–".into(), |s| format!("{:.3}", s.2))
                        } else {
                            let tail = evaluation.dynamic_by_pair.get(k..).unwrap_or(&[]);
                            format!("{:.3}", tail.iter().sum::<f64>() / tail.len().max(1) as f64)
                        }
                    })
                    .collect()
            };
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
                cells(0, false),
                dynamic_reference(0),
                "–",
            ));
            for k in freeze_points(data.n_pairs) {
                out.push_str(&row(
                    &format!("L2 on pairs {k}.., dynamic y (full context)"),
                    cells(k, false),
                    dynamic_reference(k),
                    "–",
                ));
                out.push_str(&row(
                    &format!(
                        "L2 on pairs {k}.., y frozen after {k} pairs (references: fit on {k})"
                    ),
                    cells(k, true),
                    frozen_reference(k),
                    "specialised ≈ in-context",
                ));
            }
        }
        DataPreset::TextMixture { .. } => {
            out.push_str(&row(
                "eval CE (dynamic y), nats/byte",
                results
                    .iter()
                    .map(|r| number(r.text_loss.map(|t| t.0)))
                    .collect(),
                None,
                "~3.65 → −0.23 with y (BPE)",
            ));
            out.push_str(&row(
                "eval CE, frozen-y auxiliary model",
                results
                    .iter()
                    .map(|r| number(r.text_loss.and_then(|t| t.1)))
                    .collect(),
                None,
                "–",
            ));
        }
    }
    out.push_str(&row(
        "final training loss (mean of last 10 steps)",
        results
            .iter()
            .map(|r| {
                if r.losses.is_empty() {
                    return "–".to_string();
                }
                let tail = &r.losses[r.losses.len().saturating_sub(10)..];
                format!(
                    "{:.3}",
                    tail.iter().map(|p| p.1).sum::<f64>() / tail.len() as f64
                )
            })
            .collect(),
        None,
        "–",
    ));
    out.push_str(&row(
        "training time (all steps)",
        results
            .iter()
            .map(|r| format!("{:.0} s", r.train_seconds))
            .collect(),
        None,
        "~10 h on TPU, 400k steps",
    ));
    out.push_str(&row(
        "time per training step",
        results
            .iter()
            .map(|r| {
                if r.losses.is_empty() {
                    "–".to_string()
                } else {
                    format!("{:.3} s", r.train_seconds / r.losses.len() as f64)
                }
            })
            .collect(),
        None,
        "–",
    ));
    out.push_str(&row(
        "wall time of this invocation (steps trained now + evaluation)",
        results
            .iter()
            .map(|r| format!("{:.0} s", r.wall_seconds))
            .collect(),
        None,
        "–",
    ));
    let plot_path = |file: String| {
        plots
            .join(file)
            .display()
            .to_string()
            .replacen("docs/", "", 1)
    };
    out.push_str(&format!(
        "\nTraining loss (task loss, 10-step moving average; grey baseline, blue CGT, orange +aux, green +aux+reg):\n\n![loss]({})\n",
        plot_path(format!("{}-loss.png", preset.name))
    ));
    if matches!(preset.data, DataPreset::Arithmetic(_)) {
        out.push_str("\nMean `n_s . n_t` of the normalised context `y` over an evaluation batch (red +1, white 0, blue −1):\n\n");
        for r in results.iter().filter(|r| r.variant != Variant::Baseline) {
            out.push_str(&format!(
                "- {}: ![y.y]({})\n",
                r.variant.title(),
                plot_path(format!("{}-{}-yy.png", preset.name, r.variant.slug()))
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
        let result = VariantResult {
            variant: Variant::Cgt,
            losses: (0..20).map(|i| (i as f64, 1.0)).collect(),
            train_seconds: 10.0,
            wall_seconds: 12.0,
            resumed_at: 20,
            icl: None,
            regression: Some(RegressionEvaluation {
                dynamic_by_pair: vec![0.5; n],
                specialised: freeze_points(n).iter().map(|&k| (k, 0.5, 0.75)).collect(),
            }),
            text_loss: None,
            fold_error: None,
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
        };
        let section = render_section(&preset, &[result], Path::new("/tmp/plots"), &summary);
        assert!(section.contains("`cargo xtask eval cgt --preset linreg-small --batch-size 4`"));
        assert!(
            section.contains("batch 4 (set by --batch-size)"),
            "{section}"
        );
        assert!(section.contains("steps per variant (preset)"), "{section}");
        assert!(!section.contains("batch from the preset"));
        assert!(section.contains(
            "| least squares in context | ridge λ = σ² (Bayes) | mean of shown y | zero |"
        ));
        let k = n / 2;
        assert!(
            section.contains(&format!(
                "| L2 on pairs {k}.., y frozen after {k} pairs (references: fit on {k}) | 0.750 | 2.000 | 1.000 | 10.000 | 17.000 |"
            )),
            "{section}"
        );
        assert!(section
            .contains("| L2 on all pairs, dynamic y | 0.500 | 1.000 | 0.500 | 10.000 | 17.000 |"));
        assert!(
            section.contains("| time per training step | 0.500 s | – | – | – | – |"),
            "{section}"
        );
        assert!(section.contains("| training time (all steps) | 10 s |"));
        assert!(section.contains("| final training loss (mean of last 10 steps) | 1.000 |"));
        assert!(section.contains("Resumed from checkpoints (CGT (no Aux/Reg) at step 20)"));
    }
}
