//! Runs one cell (task × method × k × format × loss) over its seeds.

use super::calibration::{accuracy, mean_std, predict, predict_calibrated};
use super::cell_digest::cell_inputs_sha256;
pub use super::cell_settings::IclSettings;
use super::method::{IclMethod, ScoreRequest};
use super::prompt::{DemoFormat, InContext, PromptEncoder, TrainLoss, TrainingSequences};
use super::result::{CellKey, CellResult, CellSettings, Prediction, SeedRun};
use super::sampling::sample_demonstrations;
use super::task::TaskData;
use crate::non_finite::NonFiniteOrigin;
use crate::EvalError;

/// The paper's calibration prior (appendix L): `log P(c | prompt)` of every label word after the
/// prompt template alone, scored by `method` without demonstrations and without adaptation (pass
/// the plain model). The same vector serves every row of a task.
///
/// # Errors
///
/// Model errors, and non-finite scores unless `allow_non_finite`.
pub fn calibration_prior(
    method: &mut dyn IclMethod,
    encoder: &PromptEncoder<'_>,
    allow_non_finite: bool,
) -> Result<Vec<f64>, EvalError> {
    method.adapt(&TrainingSequences::default())?;
    let labels = encoder.label_ids().to_vec();
    let request = ScoreRequest::plain(encoder.calibration_ids(), &labels);
    let scores = method.score(&request)?;
    if !allow_non_finite {
        check_finite(
            method,
            &scores,
            "label-word score",
            || "the calibration prompt (prompt template alone)".into(),
            Some(&request),
        )?;
    }
    Ok(scores)
}

impl Default for IclSettings {
    fn default() -> Self {
        Self {
            k: 32,
            seeds: vec![0, 1, 2],
            format: DemoFormat::Single,
            loss: TrainLoss::LabelOnly,
            balanced: false,
            demos_in_context: None,
            method_settings: String::new(),
            prior: None,
            allow_non_finite: false,
        }
    }
}

/// Where a running cell is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IclProgress {
    /// Examples classified so far in this cell (all seeds).
    pub done: usize,
    /// Examples to classify in this cell (all seeds).
    pub total: usize,
    /// Seed being run.
    pub seed: u64,
}

/// The key a cell with these settings gets (what `--resume` compares).
pub fn cell_key(task: super::TaskKind, method: &dyn IclMethod, settings: &IclSettings) -> CellKey {
    let trains_on_demos = method.trains() && settings.k > 0;
    CellKey {
        task,
        method: method.name(),
        k: settings.k,
        format: trains_on_demos.then_some(settings.format),
        loss: trains_on_demos.then_some(settings.loss),
    }
}

/// [`EvalError::NonFinite`] for the first non-finite value of `values` (`quantity` on
/// `location()`), with the origin the method finds for `request` (`None`: its last adaptation).
fn check_finite(
    method: &mut dyn IclMethod,
    values: &[f64],
    quantity: &'static str,
    location: impl FnOnce() -> String,
    request: Option<&ScoreRequest<'_>>,
) -> Result<(), EvalError> {
    match values.iter().find(|s| !s.is_finite()) {
        Some(&value) => Err(EvalError::NonFinite {
            method: method.name(),
            quantity,
            location: location(),
            value,
            origin: method.non_finite_origin(request),
        }),
        None => Ok(()),
    }
}

/// Whether `error` is a non-finite value ([`EvalError::NonFinite`]), and its origin.
pub fn non_finite_origin(error: &EvalError) -> Option<&NonFiniteOrigin> {
    match error {
        EvalError::NonFinite { origin, .. } => Some(origin),
        _ => None,
    }
}

/// Classifies every evaluation example of `data` with `method`, for each seed of `settings`.
///
/// Per seed: draw k demonstrations; a training method adapts to them (Single/Multi, label/full
/// loss) once, or — zero-shot — to each query's own context before classifying it; then every query
/// is scored (with the demonstrations in its context when [`IclSettings::demos_in_context`] says so),
/// and so is the calibration prompt.
///
/// # Errors
///
/// Invalid settings (no seed, k larger than the pool), prompts that do not fit, model errors,
/// non-finite scores.
pub fn run_icl_cell(
    method: &mut dyn IclMethod,
    encoder: &PromptEncoder<'_>,
    data: &TaskData,
    settings: &IclSettings,
    progress: &mut dyn FnMut(IclProgress),
) -> Result<CellResult, EvalError> {
    let (seeds, demos_in_context) = cell_plan(method, encoder, data, settings)?;
    let key = cell_key(data.task, method, settings);
    let mut counter = QueryCounter {
        done: 0,
        total: seeds.len() * data.test.len(),
        progress,
    };
    let runs = seeds
        .iter()
        .map(|&seed| {
            run_seed(
                method,
                encoder,
                data,
                settings,
                seed,
                demos_in_context,
                &mut counter,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let plain: Vec<f64> = runs.iter().map(|r| r.accuracy).collect();
    let calibrated: Vec<f64> = runs.iter().map(|r| r.accuracy_calibrated).collect();
    let (accuracy_mean, accuracy_std) = mean_std(&plain);
    let (calibrated_mean, calibrated_std) = mean_std(&calibrated);
    Ok(CellResult {
        key,
        settings: CellSettings {
            seeds,
            balanced: settings.balanced,
            demos_in_context,
            n_test: data.test.len(),
            max_input_tokens: encoder.max_input_tokens(),
            method_settings: settings.method_settings.clone(),
            calibration: if settings.prior.is_some() {
                "prompt".into()
            } else {
                "demos".into()
            },
        },
        runs,
        accuracy_mean,
        accuracy_std,
        calibrated_mean,
        calibrated_std,
        inputs_sha256: cell_inputs_sha256(data, encoder, settings),
    })
}

/// Checks a cell's settings against its method, template and data, and returns its seeds (one,
/// 0, for zero-shot) and whether the demonstrations go into each query's context.
fn cell_plan(
    method: &dyn IclMethod,
    encoder: &PromptEncoder<'_>,
    data: &TaskData,
    settings: &IclSettings,
) -> Result<(Vec<u64>, bool), EvalError> {
    let n_classes = encoder.template().n_classes();
    if n_classes != data.task.n_classes() {
        return Err(EvalError::InvalidSetting {
            name: "template",
            value: format!("{n_classes} label words"),
            rule: format!("task {} has {} classes", data.task, data.task.n_classes()).into(),
        });
    }
    if data.test.is_empty() {
        return Err(EvalError::Empty {
            what: format!("the evaluation set of {}", data.task),
        });
    }
    let seeds: Vec<u64> = if settings.k == 0 {
        vec![0]
    } else if settings.seeds.is_empty() {
        return Err(EvalError::InvalidSetting {
            name: "--seeds",
            value: "[]".into(),
            rule: "k-shot runs need at least one seed".into(),
        });
    } else {
        settings.seeds.clone()
    };
    let trains = method.trains();
    if trains && settings.k > 0 && !method.supports(settings.format) {
        return Err(EvalError::InvalidSetting {
            name: "format",
            value: settings.format.name().into(),
            rule: format!("method {} does not train in this format", method.name()).into(),
        });
    }
    let demos_in_context = settings
        .demos_in_context
        .unwrap_or(!trains || settings.format == DemoFormat::Multi);
    Ok((seeds, demos_in_context))
}

/// The queries of a cell classified so far, of how many, and where progress goes.
struct QueryCounter<'p> {
    done: usize,
    total: usize,
    progress: &'p mut dyn FnMut(IclProgress),
}

/// One seed of a cell: draw its demonstrations, adapt the method to them (or, zero-shot, to each
/// query's own context), score the calibration prompt and every query.
fn run_seed(
    method: &mut dyn IclMethod,
    encoder: &PromptEncoder<'_>,
    data: &TaskData,
    settings: &IclSettings,
    seed: u64,
    demos_in_context: bool,
    counter: &mut QueryCounter<'_>,
) -> Result<SeedRun, EvalError> {
    let trains = method.trains();
    let n_classes = encoder.template().n_classes();
    let labels = encoder.label_ids().to_vec();
    let seed_start = std::time::Instant::now();
    method.begin_seed(seed);
    let demos = if settings.k > 0 {
        sample_demonstrations(&data.train, settings.k, n_classes, settings.balanced, seed)?
            .iter()
            .map(|d| encoder.demo(d))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    let per_query_training = trains && settings.k == 0;
    let mut demos_used = demos.len();
    // The training losses of the last `adapt`, checked unless non-finite values are allowed.
    let check_training = |method: &mut dyn IclMethod, place: &dyn Fn() -> String| {
        if settings.allow_non_finite {
            return Ok(());
        }
        let losses = method.train_losses();
        check_finite(method, &losses, "training loss", place, None)
    };
    if trains && settings.k > 0 {
        let (train, kept) = encoder.training(&demos, settings.format, settings.loss);
        demos_used = kept;
        method.adapt(&train)?;
        check_training(method, &|| {
            format!("the training on the demonstrations of seed {seed}")
        })?;
    } else {
        method.adapt(&TrainingSequences::default())?;
    }
    let context_for = |query: &[u32]| -> InContext {
        if demos_in_context {
            encoder.in_context(&demos, query, settings.loss)
        } else {
            encoder.in_context(&[], query, settings.loss)
        }
    };
    let score = |method: &mut dyn IclMethod, ctx: &InContext, place: &dyn Fn() -> String| {
        let request = ScoreRequest {
            context: &ctx.ids,
            demo_len: ctx.demo_len,
            demo_targets: &ctx.demo_targets,
            candidates: &labels,
        };
        let scores = method.score(&request)?;
        if !settings.allow_non_finite {
            check_finite(method, &scores, "label-word score", place, Some(&request))?;
        }
        Ok::<_, EvalError>(scores)
    };
    let calibration = || format!("the calibration prompt of seed {seed}");
    let mut prior = settings.prior.clone().unwrap_or_default();
    if !per_query_training && settings.prior.is_none() {
        prior = score(
            method,
            &context_for(encoder.calibration_ids()),
            &calibration,
        )?;
    }
    let mut predictions = Vec::with_capacity(data.test.len());
    for (index, example) in data.test.iter().enumerate() {
        let query = encoder.query_ids(&example.text)?;
        let place = || format!("example {index} of the evaluation set (seed {seed})");
        if per_query_training {
            method.adapt(&encoder.query_training(&query))?;
            check_training(method, &|| {
                format!("the training on example {index} (zero-shot)")
            })?;
            if settings.prior.is_none() {
                prior = score(
                    method,
                    &context_for(encoder.calibration_ids()),
                    &calibration,
                )?;
            }
        }
        let context = context_for(&query);
        if demos_in_context {
            demos_used = demos_used.min(context.kept);
        }
        let scores = score(method, &context, &place)?;
        predictions.push(Prediction {
            index,
            label: example.label,
            predicted: predict(&scores).unwrap_or(0),
            predicted_calibrated: predict_calibrated(&scores, &prior).unwrap_or(0),
            scores,
            prior: prior.clone(),
        });
        counter.done += 1;
        (counter.progress)(IclProgress {
            done: counter.done,
            total: counter.total,
            seed,
        });
    }
    let gold: Vec<usize> = predictions.iter().map(|p| p.label).collect();
    let plain: Vec<usize> = predictions.iter().map(|p| p.predicted).collect();
    let calibrated: Vec<usize> = predictions.iter().map(|p| p.predicted_calibrated).collect();
    Ok(SeedRun {
        seed,
        demos_used,
        accuracy: accuracy(&plain, &gold),
        accuracy_calibrated: accuracy(&calibrated, &gold),
        train_losses: method.train_losses(),
        predictions,
        seconds: seed_start.elapsed().as_secs_f64(),
    })
}
