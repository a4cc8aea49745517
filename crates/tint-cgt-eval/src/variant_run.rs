//! One CGT run: train (or resume) one variant of one seed, then evaluate it on the held-out stream of
//! its preset (in-context accuracy, regression errors or text cross-entropy), draw its `y · y` map and
//! fold its context into a specialised model (checked against the frozen-`y` model, exported).

use std::path::Path;
use std::time::Instant;

use burn::backend::Autodiff;
use burn::module::AutodiffModule;
use burn::tensor::backend::Backend;
use burn::tensor::ElementConversion;
use tint_cgt::data::{
    ArithmeticConfig, BatchSource, HostBatch, LinearRegressionConfig, TextMixture,
};
use tint_cgt::metrics::IclEvaluation;
use tint_cgt::metrics::{
    evaluate_icl, evaluate_position_loss, evaluate_regression, frozen_context,
};
use tint_cgt::nodes::NodeSetup;
use tint_cgt::objective::{joint_loss, ObjectiveConfig};
use tint_cgt::presets::{DataPreset, ExperimentPreset, Variant};
use tint_cgt::train::{
    checkpoint_step, train_probed, training_seconds, Probe, RunFiles, StepReport, TrainOutcome,
};
use tint_cgt::CgtModel;
use tint_cgt::{train_data_parallel, train_data_parallel_on_nodes};
use tint_lab::chart::heat_map_svg;

use super::conventions::{
    freeze_points, icl_eval_data, regression_eval_data, EvalStream, MODEL_SEED_BASE,
    TEXT_EVAL_RNG_STREAM, TEXT_POSITION_PREFIX, TEXT_POSITION_SEED_OFFSET,
};
use super::curve_file::{append_point, settle_file, CurvePoint};
use super::error::CgtRunError;
use super::evaluation_file::RunEvaluation;
use super::host::{curve_point, step_done, variant_started, variant_trained};
use super::variant_result::VariantResult;
use tint_assets::write_atomic;
use tint_lab::Host;

/// One run to do: `preset` holds the evaluation streams (the same for every seed), `seeded` the
/// training stream and schedule of this seed.
pub struct VariantJob<'a> {
    /// The configured preset.
    pub preset: &'a ExperimentPreset,
    /// The preset of this seed ([`super::conventions::preset_for_seed`]).
    pub seeded: &'a ExperimentPreset,
    /// The variant.
    pub variant: Variant,
    /// The seed.
    pub seed: u64,
    /// The training stream of this seed.
    pub source: &'a dyn BatchSource,
    /// Text presets: the held-out documents' stream the run is evaluated on.
    pub held_out: Option<&'a TextMixture>,
    /// The seed's run directory (`<run dir>/seed<s>`); the variant's files go under its slug.
    pub seed_dir: &'a Path,
    /// Where the `y · y` map goes, when this seed draws one (the first seed).
    pub heat_map_dir: Option<&'a Path>,
    /// Evaluate the learning curve every N steps (arithmetic presets, one device; on the validation
    /// stream).
    pub eval_every: Option<usize>,
    /// The held-out stream of the final evaluation.
    pub eval_stream: EvalStream,
    /// The stem of the charts' names ([`super::report::RunSummary::stem`]): the `y · y` map is
    /// `<stem>-<variant>-yy.svg`.
    pub stem: &'a str,
    /// With several nodes, this node's place among them.
    pub nodes: Option<&'a NodeSetup>,
}

/// Trains (or resumes from its checkpoint) one variant of one seed and evaluates it: on `devices[0]`
/// alone, or data-parallel over every device when there are several
/// ([`tint_cgt::train_data_parallel`]; the evaluation runs on `devices[0]`).
///
/// # Errors
/// No device, or training, evaluation, export or a chart fails.
pub fn run_variant<B: Backend>(
    job: &VariantJob<'_>,
    devices: &[B::Device],
    host: &mut dyn Host,
) -> Result<VariantResult, CgtRunError> {
    let Some(device) = devices.first() else {
        return Err(CgtRunError::InvalidSetting {
            name: "--devices",
            value: "0".into(),
            rule: "at least one device",
        });
    };
    let dir = job.seed_dir.join(job.variant.slug());
    let trained = train_variant::<B>(job, devices, device, &dir, host)?;
    let outcome = trained.outcome;
    let losses = outcome
        .history
        .iter()
        .map(|r| (r.step as f64, r.terms.task))
        .collect();
    let model: CgtModel<B> = outcome.model.valid();
    let mut result = VariantResult {
        variant: job.variant,
        seed: job.seed,
        losses,
        train_seconds: training_seconds(&outcome.history),
        wall_seconds: 0.0,
        resumed_at: outcome.resumed_at,
        icl: None,
        regression: None,
        text_loss: None,
        text_positions: None,
        fold_error: None,
        curve: trained.curve,
        recorded_final_loss: None,
    };
    evaluate_variant(
        job,
        &model,
        trained.final_evaluation,
        &dir,
        device,
        &mut result,
    )?;
    result.wall_seconds = trained.start.elapsed().as_secs_f64();
    RunEvaluation::of(
        &job.preset.name,
        job.seeded.training_for(job.variant).steps,
        B::name(device),
        job.eval_stream,
        &result,
    )
    .write(&dir.join(job.eval_stream.evaluation_file()))?;
    Ok(result)
}

/// What training one run leaves for its evaluation.
struct Trained<B: Backend> {
    /// The trained model, its loss history and where it resumed.
    outcome: TrainOutcome<Autodiff<B>>,
    /// The learning curve (empty on the test stream or without `--eval-every`).
    curve: Vec<CurvePoint>,
    /// The probe's evaluation after the last step, which the final table reuses (validation
    /// stream only).
    final_evaluation: Option<IclEvaluation>,
    /// When the run started, after its model was built (the wall time of this invocation).
    start: Instant,
}

/// Builds the run's model (the same initial weights for a (seed, variant) pair on every
/// invocation), trains or resumes it in `dir` on one device, over several, or over several nodes,
/// with the learning-curve probe of `--eval-every` on one device, and reports to `host`.
fn train_variant<B: Backend>(
    job: &VariantJob<'_>,
    devices: &[B::Device],
    device: &B::Device,
    dir: &Path,
    host: &mut dyn Host,
) -> Result<Trained<B>, CgtRunError> {
    let (preset, variant, seed) = (job.preset, job.variant, job.seed);
    let training = job.seeded.training_for(variant);
    let files = RunFiles {
        checkpoint_dir: Some(dir.join("checkpoint")),
        log_path: Some(dir.join("log.jsonl")),
    };
    let label = format!("{} seed {seed}", variant.slug());
    // Same initial weights for a (seed, variant) pair on every invocation.
    B::seed(device, MODEL_SEED_BASE + seed);
    let model = CgtModel::<Autodiff<B>>::new(&preset.model_for(variant), device)
        .map_err(CgtRunError::cgt(format!("building {label}")))?;
    let resumes_at = match &files.checkpoint_dir {
        Some(checkpoint) => checkpoint_step(checkpoint)
            .map_err(CgtRunError::cgt(format!(
                "reading the checkpoint of {label}"
            )))?
            .unwrap_or(0),
        None => 0,
    };
    for event in variant_started(variant, seed, training.steps, resumes_at, dir) {
        host.event(event);
    }
    let start = Instant::now();
    // The progress callback and the curve probe both report to the host.
    let events = std::cell::RefCell::new(&mut *host);
    let mut progress = |r: &StepReport| {
        events.borrow_mut().event(step_done(
            r.step,
            training.steps,
            r.terms.task,
            r.terms.total,
        ))
    };
    let curve_path = dir.join("curve.jsonl");
    let curve_data = match (&preset.data, job.eval_every) {
        (DataPreset::Arithmetic(data), Some(every)) => {
            Some((icl_eval_data(data, EvalStream::Validation), every))
        }
        _ => None,
    };
    let mut probe_error: Option<CgtRunError> = None;
    // The probe's evaluation after the last step is the final table's (same model, sequences and
    // device): kept so that the table does not evaluate it again.
    let mut final_evaluation: Option<IclEvaluation> = None;
    let mut evaluate = |done: usize, model: &CgtModel<Autodiff<B>>| {
        let Some((eval, _)) = &curve_data else {
            return Ok(());
        };
        let evaluation = evaluate_icl(&model.valid(), eval, preset.eval_batches, device)?;
        let point = CurvePoint::of(done, &evaluation);
        if done == training.steps && job.eval_stream == EvalStream::Validation {
            final_evaluation = Some(evaluation);
        }
        append_point(&curve_path, &point).map_err(|e| {
            let message = e.to_string();
            probe_error = Some(e);
            tint_cgt::CgtError::InvalidConfig(message)
        })?;
        events
            .borrow_mut()
            .event(curve_point(variant, seed, &point));
        Ok(())
    };
    let outcome = if let Some(node) = job.nodes {
        train_data_parallel_on_nodes(
            model,
            job.source,
            &training,
            &files,
            devices,
            node,
            &mut progress,
        )
    } else if devices.len() > 1 {
        train_data_parallel(model, job.source, &training, &files, devices, &mut progress)
    } else {
        let probe = curve_data.as_ref().map(|(_, every)| Probe {
            every: *every,
            evaluate: &mut evaluate,
        });
        train_probed(
            model,
            job.source,
            &training,
            &files,
            device,
            &mut progress,
            probe,
        )
    };
    let outcome = match (outcome, probe_error) {
        (Err(_), Some(error)) => return Err(error),
        (outcome, _) => {
            outcome.map_err(CgtRunError::cgt(format!("training {}", variant.slug())))?
        }
    };
    // No file (no --eval-every now or before): no curve. The curve is measured on the validation
    // stream, so a test-stream evaluation does not carry it: its section leaves the curve to the
    // validation one rather than print it under a table of other sequences.
    let mut curve = settle_file(&curve_path, training.steps)?;
    if job.eval_stream == EvalStream::Test {
        curve.clear();
    }
    if let Some(warning) = variant_trained(variant, outcome.history.len(), training.steps) {
        host.event(warning);
    }
    Ok(Trained {
        outcome,
        curve,
        final_evaluation,
        start,
    })
}

/// Evaluates the trained `model` on the held-out stream of its preset into `result`: the
/// in-context accuracy (reusing the probe's `final_evaluation` when there is one) with its `y · y`
/// map, the regression errors, or the text cross-entropy; a guided model's context is folded into
/// a specialised model exported to `dir`.
fn evaluate_variant<B: Backend>(
    job: &VariantJob<'_>,
    model: &CgtModel<B>,
    final_evaluation: Option<IclEvaluation>,
    dir: &Path,
    device: &B::Device,
    result: &mut VariantResult,
) -> Result<(), CgtRunError> {
    let (preset, variant) = (job.preset, job.variant);
    let label = format!("{} seed {}", variant.slug(), job.seed);
    let evaluating = || CgtRunError::cgt(format!("evaluating {label}"));
    match &preset.data {
        DataPreset::Arithmetic(data) => {
            let eval = icl_eval_data(data, job.eval_stream);
            let evaluation = match final_evaluation {
                Some(evaluation) => evaluation,
                None => {
                    evaluate_icl(model, &eval, preset.eval_batches, device).map_err(evaluating())?
                }
            };
            if let (Some(map), Some(plots)) = (&evaluation.dot_products, job.heat_map_dir) {
                let title = format!("{} {}: mean n_s . n_t", preset.name, variant.title());
                let svg = heat_map_svg(map, evaluation.seq_length, &title)
                    .map_err(CgtRunError::chart("the y.y map"))?;
                let file = format!("{}-{}-yy.svg", job.stem, variant.slug());
                write_atomic(plots.join(file), svg.as_bytes())?;
            }
            if model.is_guided() {
                let single = ArithmeticConfig {
                    batch_size: 1,
                    ..eval.clone()
                };
                let (batch, sequences) = single.annotated_batch(0);
                let start = sequences[0].tasks[0].examples[eval.n_examples - 2].start;
                result.fold_error = Some(export_specialised(model, &batch, start, dir, device)?);
            }
            result.icl = Some(evaluation);
        }
        DataPreset::LinearRegression(data) => {
            let eval = regression_eval_data(data, job.eval_stream);
            let freeze = freeze_points(data.n_pairs);
            result.regression = Some(
                evaluate_regression(model, &eval, preset.eval_batches, &freeze, device)
                    .map_err(evaluating())?,
            );
            if model.is_guided() {
                let single = LinearRegressionConfig {
                    batch_size: 1,
                    ..eval.clone()
                };
                let (batch, _) = single.annotated_batch(0);
                // Frozen after half of the pairs: the prompt ends with y at position n_pairs - 1.
                let start = 2 * (data.n_pairs / 2);
                result.fold_error = Some(export_specialised(model, &batch, start, dir, device)?);
            }
        }
        DataPreset::TextMixture { .. } => {
            let Some(held_out) = job.held_out else {
                return Err(evaluating()(tint_cgt::CgtError::InvalidDataConfig(
                    "a text preset's run needs its held-out stream".into(),
                )));
            };
            evaluate_text(model, held_out, preset.eval_batches, device, result)
                .map_err(evaluating())?;
        }
    }
    Ok(())
}

/// The text evaluation on held-out documents: the mean cross-entropy of `batches` batches of
/// mixtures with dynamic `y` (and the frozen-`y` auxiliary model's, for a guided model), and the
/// cross-entropy by position of as many continuations after a [`TEXT_POSITION_PREFIX`]-byte prefix.
fn evaluate_text<B: Backend>(
    model: &CgtModel<B>,
    held_out: &TextMixture,
    batches: usize,
    device: &B::Device,
    result: &mut VariantResult,
) -> Result<(), tint_cgt::CgtError> {
    let (mut total, mut aux_total) = (0.0, 0.0);
    let objective = ObjectiveConfig {
        eta: if model.is_guided() { 0.0 } else { 1.0 },
        ..Default::default()
    };
    for step in 0..batches {
        let batch = held_out.batch(step as u64);
        let mut rng = tint_cgt::data::step_rng(TEXT_EVAL_RNG_STREAM, step as u64);
        let (_, terms) = joint_loss(model, &batch, &objective, &mut rng, device)?;
        total += terms.task;
        aux_total += terms.aux.unwrap_or(f64::NAN);
    }
    let n = batches as f64;
    result.text_loss = Some((total / n, model.is_guided().then_some(aux_total / n)));
    result.text_positions = Some(evaluate_position_loss(
        model,
        held_out,
        TEXT_POSITION_PREFIX,
        batches,
        held_out.seed + TEXT_POSITION_SEED_OFFSET,
        device,
    )?);
    Ok(())
}

/// Folds `y` of a one-sequence batch, frozen at position `start - 1` (the end of its prompt), into a
/// plain model, checks it against the frozen-`y` model on the tokens from `start` on (earlier ones
/// hidden), exports it to `dir/specialised.safetensors`, and returns the largest output difference.
///
/// # Errors
/// A forward, the fold or the export fails.
pub fn export_specialised<B: Backend>(
    model: &CgtModel<B>,
    batch: &HostBatch,
    start: usize,
    dir: &Path,
    device: &B::Device,
) -> Result<f32, CgtRunError> {
    let folding = || CgtRunError::cgt(format!("folding y into {}", dir.display()));
    let input = batch.input_tensor::<B>(device);
    let context = model.context(&input).map_err(folding())?.mean;
    let frozen = frozen_context(context, &[start - 1]);
    let reference = model
        .forward_x_path(&input, Some(frozen.clone()), Some(&[start]))
        .map_err(folding())?;
    let d_y = frozen.dims()[2];
    let folded = model.specialise(frozen.reshape([d_y])).map_err(folding())?;
    let plain = folded
        .forward_x_path(&input, None, Some(&[start]))
        .map_err(folding())?;
    let error: f32 = (reference - plain).abs().max().into_scalar().elem();
    std::fs::create_dir_all(dir).map_err(|source| CgtRunError::Io {
        operation: "create",
        path: dir.to_path_buf(),
        source,
    })?;
    folded
        .export_safetensors(dir.join("specialised.safetensors"))
        .map_err(folding())?;
    Ok(error)
}
