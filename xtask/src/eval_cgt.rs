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
    evaluate_icl, evaluate_regression, frozen_context, IclEvaluation, RegressionEvaluation,
};
use tint_cgt::objective::joint_loss;
use tint_cgt::plot::{heat_map, line_chart};
use tint_cgt::presets::{DataPreset, ExperimentPreset, Variant};
use tint_cgt::train::{train, RunFiles};
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
    /// Text corpus for the text presets (blank-line separated documents).
    #[arg(long)]
    pub text: Option<PathBuf>,
    /// Directory for the PNG plots.
    #[arg(long, default_value = "docs/cgt")]
    pub plots: PathBuf,
    /// Markdown file that receives this preset's section.
    #[arg(long, default_value = "docs/results.md")]
    pub report: PathBuf,
    /// Directory for checkpoints, JSONL logs and exported specialised models
    /// (default: target/cgt-runs/<preset>); an existing checkpoint is resumed.
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
}

/// What one variant produced.
struct VariantResult {
    variant: Variant,
    losses: Vec<(f64, f64)>,
    seconds: f64,
    icl: Option<IclEvaluation>,
    regression: Option<RegressionEvaluation>,
    text_loss: Option<(f64, Option<f64>)>,
    fold_error: Option<f32>,
}

/// Runs the command.
pub fn run(args: &CgtArgs) -> Result<()> {
    let mut preset = ExperimentPreset::by_name(&args.preset)?;
    if let Some(steps) = args.steps {
        preset.training.steps = steps;
        preset.training.warmup_steps = preset.training.warmup_steps.min(steps / 10);
    }
    if let Some(batch_size) = args.batch_size {
        if batch_size == 0 {
            bail!("--batch-size must be at least 1");
        }
        match &mut preset.data {
            DataPreset::Arithmetic(data) => data.batch_size = batch_size,
            DataPreset::LinearRegression(data) => data.batch_size = batch_size,
            DataPreset::TextMixture { batch_size: b, .. } => *b = batch_size,
        }
    }
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
        .unwrap_or_else(|| PathBuf::from("target/cgt-runs").join(&preset.name));
    let source: Box<dyn BatchSource> = match &preset.data {
        DataPreset::Arithmetic(data) => Box::new(data.clone()),
        DataPreset::LinearRegression(data) => Box::new(data.clone()),
        DataPreset::TextMixture {
            seq_length,
            cut_min,
            cut_max,
            batch_size,
        } => {
            let Some(path) = &args.text else {
                bail!(
                    "preset {} needs --text FILE (a corpus of blank-line separated documents)",
                    preset.name
                )
            };
            let corpus = std::fs::read_to_string(path)
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
        "cgt preset {} | {} steps/variant | backend {BACKEND_NAME} | runs in {}",
        preset.name,
        preset.training.steps,
        run_dir.display()
    );
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
    let section = render_section(&preset, &results, &args.plots);
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
    let mut losses = Vec::new();
    let start = Instant::now();
    let model = train(model, source, &training, &files, &device, &mut |report| {
        losses.push((report.step as f64, report.terms.task));
        bar.set_position(report.step as u64 + 1);
        bar.set_message(format!(
            "loss {:.3} (total {:.3})",
            report.terms.task, report.terms.total
        ));
    })?;
    bar.finish();
    let seconds = start.elapsed().as_secs_f64();
    let model: CgtModel<B> = model.valid();
    let mut result = VariantResult {
        variant,
        losses,
        seconds,
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
            let eval = LinearRegressionConfig {
                seed: data.seed + 1000,
                ..data.clone()
            };
            let n = data.n_pairs;
            let points = [n / 4, n / 2, 3 * n / 4];
            result.regression = Some(evaluate_regression(
                &model,
                &eval,
                preset.eval_batches,
                &points,
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

fn render_section(preset: &ExperimentPreset, results: &[VariantResult], plots: &Path) -> String {
    let model = &preset.model;
    let mut out = format!("## CGT: `{}`\n\n", preset.name);
    out.push_str(&format!(
        "Command: `cargo xtask eval cgt --preset {}` (backend {BACKEND_NAME}). \
         Model: L = {}, l = {}, d_x = {} ({} heads), d_y = {} ({} heads), rank r = {}, M = {} templates; \
         {} steps per variant, batch from the preset, Adam with warm-up + cosine, eta = {}, w_C = {}, w_D = {}.\n\n",
        preset.name,
        model.n_layers,
        model.readout_layer,
        model.d_x,
        model.n_heads_x,
        model.d_y,
        model.n_heads_y,
        model.rank,
        model.n_templates,
        preset.training.steps,
        preset.training.objective.eta,
        preset.training.objective.w_continuity,
        preset.training.objective.w_orthogonality,
    ));
    if let DataPreset::Arithmetic(data) = &preset.data {
        out.push_str(&format!(
            "Data: {} tasks x {} examples, d = {} digits ({} tokens per sequence). \
             Accuracy = answer characters (sign and digits after `=`) of the last two examples of every task, \
             teacher-forced argmax. Specialised = `y` frozen after the first {} examples of the task, \
             everything before them hidden from attention (positions kept).\n\n",
            data.n_tasks,
            data.n_examples,
            data.digits,
            data.sequence_length(),
            data.n_examples - 2
        ));
    }
    let header: Vec<&str> = results.iter().map(|r| r.variant.title()).collect();
    out.push_str(&format!(
        "| metric | {} | paper (baseline / CGT / +aux / +aux+reg) |\n",
        header.join(" | ")
    ));
    out.push_str(&format!("|---|{}---|\n", "---|".repeat(results.len())));
    let row = |name: &str, cells: Vec<String>, paper: &str| {
        format!("| {name} | {} | {paper} |\n", cells.join(" | "))
    };
    match &preset.data {
        DataPreset::Arithmetic(_) => {
            out.push_str(&row(
                "base accuracy (dynamic y)",
                results
                    .iter()
                    .map(|r| percent(r.icl.as_ref().map(|e| e.dynamic_accuracy)))
                    .collect(),
                "77.7 / 79.0 / 77.5 / 78.6 %",
            ));
            out.push_str(&row(
                "specialised accuracy",
                results
                    .iter()
                    .map(|r| percent(r.icl.as_ref().and_then(|e| e.specialised_accuracy)))
                    .collect(),
                "– / 15.3 / 77.0 / 77.5 %",
            ));
            out.push_str(&row(
                "representation variation (eq. 4)",
                results
                    .iter()
                    .map(|r| number(r.icl.as_ref().and_then(|e| e.representation_variation)))
                    .collect(),
                "– / 0.80 / 0.39 / 0.07",
            ));
            out.push_str(&row(
                "linear-fit error of (a, b) from y",
                results
                    .iter()
                    .map(|r| number(r.icl.as_ref().and_then(|e| e.linear_fit_error)))
                    .collect(),
                "– / 0.19 / 0.12 / 0.04",
            ));
            out.push_str(&row(
                "folded vs frozen max logit diff",
                results
                    .iter()
                    .map(|r| r.fold_error.map_or("–".into(), |e| format!("{e:.1e}")))
                    .collect(),
                "–",
            ));
        }
        DataPreset::LinearRegression(_) => {
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
                            let tail = &evaluation.dynamic_by_pair[k..];
                            format!("{:.3}", tail.iter().sum::<f64>() / tail.len().max(1) as f64)
                        }
                    })
                    .collect()
            };
            if let DataPreset::LinearRegression(data) = &preset.data {
                let n = data.n_pairs;
                for k in [n / 4, n / 2, 3 * n / 4] {
                    out.push_str(&row(
                        &format!("L2 on pairs {k}.., dynamic y (full context)"),
                        cells(k, false),
                        "–",
                    ));
                    out.push_str(&row(
                        &format!("L2 on pairs {k}.., y frozen after {k} pairs"),
                        cells(k, true),
                        "specialised ≈ in-context",
                    ));
                }
            }
        }
        DataPreset::TextMixture { .. } => {
            out.push_str(&row(
                "eval CE (dynamic y), nats/byte",
                results
                    .iter()
                    .map(|r| number(r.text_loss.map(|t| t.0)))
                    .collect(),
                "~3.65 → −0.23 with y (BPE)",
            ));
            out.push_str(&row(
                "eval CE, frozen-y auxiliary model",
                results
                    .iter()
                    .map(|r| number(r.text_loss.and_then(|t| t.1)))
                    .collect(),
                "–",
            ));
        }
    }
    out.push_str(&row(
        "final training loss (mean of last 10 steps)",
        results
            .iter()
            .map(|r| {
                let tail = &r.losses[r.losses.len().saturating_sub(10)..];
                format!(
                    "{:.3}",
                    tail.iter().map(|p| p.1).sum::<f64>() / tail.len().max(1) as f64
                )
            })
            .collect(),
        "–",
    ));
    out.push_str(&row(
        "training time",
        results
            .iter()
            .map(|r| format!("{:.0} s", r.seconds))
            .collect(),
        "~10 h on TPU, 400k steps",
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
