//! Training loop: burn's Adam with gradient-norm clipping, linear warm-up + cosine decay, resumable
//! checkpoints and a JSONL loss log. Library code: progress goes to a callback, nothing is printed.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::grad_clipping::GradientClippingConfig;
use burn::module::{AutodiffModule, Module};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder, Recorder};
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tint_assets::{ExclusiveLock, LockError};

use crate::data::{step_rng, BatchSource};
use crate::error::{CgtError, Result};
use crate::model::CgtModel;
use crate::objective::{joint_loss, LossTerms, ObjectiveConfig};

/// Optimisation hyper-parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainingConfig {
    /// Number of optimiser steps.
    pub steps: usize,
    /// Peak learning rate.
    pub learning_rate: f64,
    /// Learning rate at the end of the cosine decay.
    pub min_learning_rate: f64,
    /// Linear warm-up steps.
    pub warmup_steps: usize,
    /// Gradient-norm clipping threshold (`None`: no clipping).
    pub grad_clip_norm: Option<f32>,
    /// The loss.
    pub objective: ObjectiveConfig,
    /// Seed of the auxiliary-position sampling and VAE noise streams.
    pub seed: u64,
    /// Save a checkpoint every this many steps (0: only at the end, if a directory is given).
    pub checkpoint_every: usize,
}

impl TrainingConfig {
    /// Checks ranges.
    pub fn validate(&self) -> Result<()> {
        if self.steps == 0 || self.learning_rate <= 0.0 || self.min_learning_rate < 0.0 {
            return Err(CgtError::InvalidTrainingConfig(
                "steps and learning_rate must be positive, min_learning_rate >= 0".into(),
            ));
        }
        if self.grad_clip_norm.is_some_and(|c| c <= 0.0) {
            return Err(CgtError::InvalidTrainingConfig(
                "grad_clip_norm must be positive".into(),
            ));
        }
        self.objective.validate()
    }

    /// Learning rate at `step` (0-based): linear warm-up to the peak, then cosine decay to the minimum.
    pub fn learning_rate_at(&self, step: usize) -> f64 {
        if step < self.warmup_steps {
            return self.learning_rate * (step + 1) as f64 / self.warmup_steps as f64;
        }
        let decay_steps = self.steps.saturating_sub(self.warmup_steps).max(1);
        let progress = ((step - self.warmup_steps) as f64 / decay_steps as f64).min(1.0);
        let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
        self.min_learning_rate + (self.learning_rate - self.min_learning_rate) * cosine
    }
}

/// One logged step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// Step index (0-based).
    pub step: usize,
    /// Total steps of the run.
    pub total_steps: usize,
    /// Learning rate used.
    pub learning_rate: f64,
    /// Loss terms.
    pub terms: LossTerms,
    /// Seconds since the (re)start of the run.
    pub elapsed_s: f64,
    /// Seconds this step took (batch, forward, backward, optimiser step); 0 in logs written before the
    /// field existed.
    #[serde(default)]
    pub step_s: f64,
}

/// What [`train_with_history`] returns.
#[derive(Clone, Debug)]
pub struct TrainOutcome<B: AutodiffBackend> {
    /// The trained model.
    pub model: CgtModel<B>,
    /// One report per step `0..steps`, in step order: the steps of earlier (interrupted or finished) runs
    /// read back from the JSONL log, then the steps run now. Steps an earlier run logged but that the
    /// checkpoint does not cover are dropped (they were run again).
    pub history: Vec<StepReport>,
    /// The step training (re)started at: 0 for a fresh run, `steps` when the checkpoint was already final.
    pub resumed_at: usize,
}

/// Training seconds of a history: the sum of [`StepReport::step_s`]; for old log lines without it, the
/// difference of consecutive `elapsed_s` within one (re)start (a drop in `elapsed_s` marks a restart).
pub fn training_seconds(history: &[StepReport]) -> f64 {
    let mut total = 0.0;
    let mut previous_elapsed = 0.0;
    for report in history {
        total += if report.step_s > 0.0 {
            report.step_s
        } else if report.elapsed_s >= previous_elapsed {
            report.elapsed_s - previous_elapsed
        } else {
            report.elapsed_s
        };
        previous_elapsed = report.elapsed_s;
    }
    total
}

/// Parses a JSONL loss log written by [`train`]; a missing file is an empty log. A truncated last line
/// (a run killed mid-write) is skipped.
pub fn read_log(path: &Path) -> Result<Vec<StepReport>> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CgtError::io("read", path, e)),
    };
    // (1-based line number, line) of the non-blank lines.
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l))
        .collect();
    let mut reports = Vec::with_capacity(lines.len());
    for (i, &(line_number, line)) in lines.iter().enumerate() {
        match serde_json::from_str::<StepReport>(line) {
            Ok(report) => reports.push(report),
            Err(_) if i + 1 == lines.len() => {}
            Err(e) => {
                return Err(CgtError::LogLine {
                    path: path.display().to_string(),
                    line: line_number,
                    message: e.to_string(),
                })
            }
        }
    }
    Ok(reports)
}

/// The reports of steps `0..before` in step order, the last logged report of each step winning (a step
/// logged after the last checkpoint of an interrupted run is run, and logged, again on resume).
fn history_before(log: Vec<StepReport>, before: usize) -> Vec<StepReport> {
    let mut by_step: Vec<Option<StepReport>> = vec![None; before];
    for report in log {
        if report.step < before {
            let step = report.step;
            by_step[step] = Some(report);
        }
    }
    by_step.into_iter().flatten().collect()
}

/// Where a run keeps its files.
#[derive(Clone, Debug, Default)]
pub struct RunFiles {
    /// Checkpoint directory (model, optimiser state, step); resumed from if it holds one.
    pub checkpoint_dir: Option<PathBuf>,
    /// JSONL loss log (appended to).
    pub log_path: Option<PathBuf>,
}

#[derive(Serialize, Deserialize)]
struct CheckpointState {
    next_step: usize,
    /// Total steps of the run; absent in old checkpoints.
    #[serde(default)]
    steps: Option<usize>,
    /// The run's training settings as JSON (`checkpoint_every` zeroed; compared as text because
    /// floats need not survive a JSON round trip bit for bit); absent in old checkpoints.
    #[serde(default)]
    training: Option<String>,
    /// Sequences per batch of the run; absent in old checkpoints.
    #[serde(default)]
    batch_size: Option<usize>,
    /// SHA-256 of the model file, checked when it is loaded; absent in old checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model_sha256: Option<String>,
    /// SHA-256 of the optimiser file, checked when it is loaded; absent in old checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    optimizer_sha256: Option<String>,
}

impl CheckpointState {
    /// The settings that shape the schedule and the data stream, as stored in a checkpoint.
    fn schedule_of(config: &TrainingConfig) -> Result<String> {
        Ok(serde_json::to_string(&TrainingConfig {
            checkpoint_every: 0,
            ..config.clone()
        })?)
    }

    /// Errors when this checkpoint was written by a run whose steps, batch size or other training
    /// settings differ from the requested ones (resuming would silently mix two schedules).
    fn check_compatible(
        &self,
        dir: &Path,
        config: &TrainingConfig,
        batch_size: usize,
    ) -> Result<()> {
        let advice = format!(
            "delete {} or train into another run directory",
            dir.display()
        );
        if let Some(stored) = self.steps {
            if stored != config.steps {
                return Err(CgtError::ResumeMismatch(format!(
                    "the checkpoint in {} belongs to a {stored}-step run, {} steps were requested; {advice}",
                    dir.display(),
                    config.steps
                )));
            }
        }
        if let Some(stored) = &self.training {
            let requested = Self::schedule_of(config)?;
            if *stored != requested {
                return Err(CgtError::ResumeMismatch(format!(
                    "the checkpoint in {} was trained with other settings ({stored}, requested \
                     {requested}); {advice}",
                    dir.display()
                )));
            }
        }
        if let Some(stored) = self.batch_size {
            if stored != batch_size {
                return Err(CgtError::ResumeMismatch(format!(
                    "the checkpoint in {} belongs to a run with batch size {stored}, batch size {batch_size} \
                     was requested; {advice}",
                    dir.display()
                )));
            }
        }
        Ok(())
    }
}

type CheckpointRecorder = NamedMpkFileRecorder<FullPrecisionSettings>;

/// The extension [`CheckpointRecorder`] appends to the file names it is given.
const CHECKPOINT_EXTENSION: &str = "mpk";

/// The error of the recorder on `file` (given without the extension the recorder appends), with
/// the full file name and the recorder's reason in words (its own `Display` is its `Debug`).
fn checkpoint_error(
    operation: &'static str,
    file: &Path,
) -> impl FnOnce(burn::record::RecorderError) -> CgtError {
    let path = file
        .with_extension(CHECKPOINT_EXTENSION)
        .display()
        .to_string();
    move |error| {
        let reason = match error {
            burn::record::RecorderError::FileNotFound(detail) => format!("missing ({detail})"),
            burn::record::RecorderError::DeserializeError(detail) => {
                format!("not a checkpoint of this model ({detail})")
            }
            burn::record::RecorderError::Unknown(detail) => detail,
        };
        CgtError::Checkpoint {
            operation,
            path,
            reason,
        }
    }
}

/// SHA-256 of the checkpoint file `file` (without its extension).
fn checkpoint_digest(file: &Path) -> Result<String> {
    let path = file.with_extension(CHECKPOINT_EXTENSION);
    let mut reader = fs::File::open(&path).map_err(|e| CgtError::io("read", &path, e))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut reader, &mut hasher).map_err(|e| CgtError::io("read", &path, e))?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// Checks the checkpoint file `file` (without its extension) against the SHA-256 its state
/// recorded (`None`: an old checkpoint without digests).
fn check_digest(file: &Path, recorded: Option<&str>) -> Result<()> {
    let Some(expected) = recorded else {
        return Ok(());
    };
    let found = checkpoint_digest(file)?;
    if found == expected {
        return Ok(());
    }
    Err(CgtError::Checkpoint {
        operation: "read",
        path: file
            .with_extension(CHECKPOINT_EXTENSION)
            .display()
            .to_string(),
        reason: format!(
            "its SHA-256 is {found}, state.json recorded {expected} when it was written: the file \
             was changed since; delete the checkpoint directory to train the run again"
        ),
    })
}

/// Parses the checkpoint state file `path`.
fn parse_state(path: &Path, text: &str) -> Result<CheckpointState> {
    serde_json::from_str(text).map_err(|e| CgtError::CheckpointState {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// The stem of a checkpoint file (`model`, `optimizer`) of the state at `next_step`: files are
/// tagged with their step (`model-6.mpk`) and `state.json`, written atomically after them, is the
/// commit point, so a crash while a checkpoint is being written leaves the previous one whole (its
/// state still names its own files). Checkpoints written before the tags have plain `model.mpk`.
/// With neither file present, the tagged name (the one `state.json` asks for), so that the error
/// names it.
fn checkpoint_file(dir: &Path, name: &str, next_step: usize) -> PathBuf {
    let tagged = dir.join(format!("{name}-{next_step}"));
    let plain = dir.join(name);
    if !tagged.with_extension(CHECKPOINT_EXTENSION).exists()
        && plain.with_extension(CHECKPOINT_EXTENSION).exists()
    {
        plain
    } else {
        tagged
    }
}

pub(crate) fn save_checkpoint<B: AutodiffBackend, O: Optimizer<CgtModel<B>, B>>(
    dir: &Path,
    model: &CgtModel<B>,
    optimizer: &O,
    next_step: usize,
    config: &TrainingConfig,
    batch_size: usize,
) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| CgtError::io("create the directory", dir, e))?;
    let recorder = CheckpointRecorder::new();
    let model_file = dir.join(format!("model-{next_step}"));
    model
        .clone()
        .save_file(&model_file, &recorder)
        .map_err(checkpoint_error("write", &model_file))?;
    let optimizer_file = dir.join(format!("optimizer-{next_step}"));
    recorder
        .record(optimizer.to_record(), optimizer_file.clone())
        .map_err(checkpoint_error("write", &optimizer_file))?;
    let state = serde_json::to_string(&CheckpointState {
        next_step,
        steps: Some(config.steps),
        training: Some(CheckpointState::schedule_of(config)?),
        batch_size: Some(batch_size),
        model_sha256: Some(checkpoint_digest(&model_file)?),
        optimizer_sha256: Some(checkpoint_digest(&optimizer_file)?),
    })?;
    // The commit point, atomically: a crash before it leaves the previous state and its files.
    tint_assets::atomic_write::write_atomic(dir.join("state.json"), state.as_bytes())?;
    // The files of earlier checkpoints are no longer named by the state.
    let current = [
        format!("model-{next_step}.{CHECKPOINT_EXTENSION}"),
        format!("optimizer-{next_step}.{CHECKPOINT_EXTENSION}"),
    ];
    let suffix = format!(".{CHECKPOINT_EXTENSION}");
    for entry in fs::read_dir(dir).map_err(|e| CgtError::io("list", dir, e))? {
        let path = entry.map_err(|e| CgtError::io("list", dir, e))?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let ours =
            (name.starts_with("model") || name.starts_with("optimizer")) && name.ends_with(&suffix);
        if ours && !current.contains(&name) {
            fs::remove_file(&path).map_err(|e| CgtError::io("remove", &path, e))?;
        }
    }
    Ok(())
}

/// Trains `model` on `source` and returns the trained model (see [`train_with_history`]).
///
/// The smallest preset for a few steps, in memory (no checkpoint, no log):
///
/// ```
/// use burn::backend::{Autodiff, Flex};
/// use tint_cgt::presets::{DataPreset, ExperimentPreset, Variant};
/// use tint_cgt::train::{train, RunFiles};
/// use tint_cgt::CgtModel;
///
/// let preset = ExperimentPreset::by_name("icl-tiny")?;
/// let DataPreset::Arithmetic(data) = &preset.data else { unreachable!("icl-tiny is arithmetic") };
/// let mut training = preset.training_for(Variant::Cgt);
/// training.steps = 3;
/// let device = Default::default();
/// let model = CgtModel::<Autodiff<Flex>>::new(&preset.model_for(Variant::Cgt), &device)?;
/// let mut losses = Vec::new();
/// let trained = train(model, data, &training, &RunFiles::default(), &device, &mut |step| {
///     losses.push(step.terms.task)
/// })?;
/// assert_eq!(losses.len(), 3);
/// assert!(losses.iter().all(|loss| loss.is_finite()));
/// # let _ = trained;
/// # Ok::<(), tint_cgt::CgtError>(())
/// ```
pub fn train<B: AutodiffBackend>(
    model: CgtModel<B>,
    source: &dyn BatchSource,
    config: &TrainingConfig,
    files: &RunFiles,
    device: &B::Device,
    progress: &mut dyn FnMut(&StepReport),
) -> Result<CgtModel<B>> {
    train_with_history(model, source, config, files, device, progress).map(|o| o.model)
}

/// A held-out evaluation during training, for a learning curve: after every `every`-th step and after
/// the last one, `evaluate(steps_done, model)` sees the model as it is then. It must not change the
/// training (it gets a shared reference; the runs's batches and random draws depend on the step only),
/// so a run with a probe trains the same parameters as one without.
pub struct Probe<'a, B: AutodiffBackend> {
    /// Steps between evaluations (at least 1).
    pub every: usize,
    /// Called with the number of steps done and the model after them.
    pub evaluate: &'a mut dyn FnMut(usize, &CgtModel<B>) -> Result<()>,
}

/// Trains `model` on `source`; returns the trained model and the loss history of all steps.
///
/// If `files.checkpoint_dir` holds a checkpoint, the model, optimiser state and step are restored from it
/// and training continues where it stopped (batches and random draws depend only on the step, so the
/// result matches an uninterrupted run); a checkpoint written with other steps, batch size or training
/// settings is an error ([`CgtError::ResumeMismatch`]). The history of the steps before the checkpoint is
/// read back from `files.log_path`, and the log is rewritten to hold exactly those steps before new ones
/// are appended. `progress` is called for the steps run now only.
pub fn train_with_history<B: AutodiffBackend>(
    model: CgtModel<B>,
    source: &dyn BatchSource,
    config: &TrainingConfig,
    files: &RunFiles,
    device: &B::Device,
    progress: &mut dyn FnMut(&StepReport),
) -> Result<TrainOutcome<B>> {
    train_probed(model, source, config, files, device, progress, None)
}

/// [`train_with_history`] with a held-out evaluation every `probe.every` steps (a learning curve).
/// On resume the probe runs for the steps trained now only.
///
/// # Errors
/// As [`train_with_history`]; a probe with `every = 0`; the error of a failing probe.
pub fn train_probed<B: AutodiffBackend>(
    model: CgtModel<B>,
    source: &dyn BatchSource,
    config: &TrainingConfig,
    files: &RunFiles,
    device: &B::Device,
    progress: &mut dyn FnMut(&StepReport),
    mut probe: Option<Probe<'_, B>>,
) -> Result<TrainOutcome<B>> {
    config.validate()?;
    if probe.as_ref().is_some_and(|p| p.every == 0) {
        return Err(CgtError::InvalidConfig(
            "a training probe must run every N >= 1 steps, got every = 0".into(),
        ));
    }
    let batch_size = source.batch(0).batch_size;
    let _lock = lock_checkpoints(files)?;
    let optimizer = optimizer_config(config).init::<B, CgtModel<B>>();
    let (mut model, mut optimizer, first_step) =
        restore_checkpoint(model, optimizer, files, config, batch_size, device)?;
    let (mut history, mut log) = open_log(files, first_step)?;
    let start = Instant::now();
    for step in first_step..config.steps {
        let step_start = Instant::now();
        let batch = source.batch(step as u64);
        let mut rng = step_rng(config.seed ^ AUX_STREAM, step as u64);
        let (loss, terms) = joint_loss(&model, &batch, &config.objective, &mut rng, device)?;
        check_finite(&terms, step)?;
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let learning_rate = config.learning_rate_at(step);
        model = optimizer.step(learning_rate, model, grads);
        let report = StepReport {
            step,
            total_steps: config.steps,
            learning_rate,
            terms,
            elapsed_s: start.elapsed().as_secs_f64(),
            step_s: step_start.elapsed().as_secs_f64(),
        };
        log_step(&mut log, files, &report)?;
        progress(&report);
        history.push(report);
        let done = step + 1;
        if let Some(probe) = probe.as_mut() {
            if done % probe.every == 0 || done == config.steps {
                (probe.evaluate)(done, &model)?;
            }
        }
        if let Some(dir) = &files.checkpoint_dir {
            let periodic = config.checkpoint_every > 0 && done % config.checkpoint_every == 0;
            if periodic || done == config.steps {
                save_checkpoint(dir, &model, &optimizer, done, config, batch_size)?;
            }
        }
    }
    Ok(TrainOutcome {
        model,
        history,
        resumed_at: first_step,
    })
}

/// Mixed into [`TrainingConfig::seed`] for the step generators of the auxiliary positions and VAE noise.
pub(crate) const AUX_STREAM: u64 = 0xA11C_E5ED;

/// Adam with the run's gradient-norm clipping.
pub fn optimizer_config(config: &TrainingConfig) -> AdamConfig {
    let adam = AdamConfig::new();
    match config.grad_clip_norm {
        Some(norm) => adam.with_grad_clipping(Some(GradientClippingConfig::Norm(norm))),
        None => adam,
    }
}

/// Errors when a step's loss is not finite.
pub(crate) fn check_finite(terms: &LossTerms, step: usize) -> Result<()> {
    if terms.total.is_finite() {
        Ok(())
    } else {
        Err(CgtError::Numerical(format!(
            "loss became {} at step {step}",
            terms.total
        )))
    }
}

/// Appends one report to the open log.
pub(crate) fn log_step(
    log: &mut Option<File>,
    files: &RunFiles,
    report: &StepReport,
) -> Result<()> {
    if let (Some(file), Some(path)) = (log.as_mut(), &files.log_path) {
        let line = serde_json::to_string(report)?;
        writeln!(file, "{line}").map_err(|e| CgtError::io("append to", path, e))?;
    }
    Ok(())
}

/// The lock of `files.checkpoint_dir` (the file `DIR.lock` beside it), held by a training run from
/// before it restores a checkpoint until it ends, so two runs never write one directory's
/// checkpoints (each would overwrite the other's steps); `None` without a checkpoint directory.
///
/// # Errors
/// [`CgtError::CheckpointsBusy`] when another run (in this process or another) holds it;
/// [`CgtError::Io`] naming the lock file when it cannot be made.
pub(crate) fn lock_checkpoints(files: &RunFiles) -> Result<Option<ExclusiveLock>> {
    let Some(dir) = &files.checkpoint_dir else {
        return Ok(None);
    };
    // `components` drops a trailing `/`, so `runs/a/` locks `runs/a.lock` as `runs/a` does.
    let dir: PathBuf = dir.components().collect();
    let path = PathBuf::from(format!("{}.lock", dir.display()));
    match ExclusiveLock::acquire(&path) {
        Ok(lock) => Ok(Some(lock)),
        Err(LockError::Held { path }) => Err(CgtError::CheckpointsBusy {
            dir: dir.display().to_string(),
            lock: path.display().to_string(),
        }),
        Err(LockError::Io {
            operation,
            path,
            source,
        }) => Err(CgtError::io(operation, path, source)),
    }
}

/// Restores the model, optimiser state and next step from `files.checkpoint_dir` when it holds a
/// checkpoint compatible with `config` and `batch_size`; otherwise returns them unchanged at step 0.
pub(crate) fn restore_checkpoint<B: AutodiffBackend, O: Optimizer<CgtModel<B>, B>>(
    model: CgtModel<B>,
    optimizer: O,
    files: &RunFiles,
    config: &TrainingConfig,
    batch_size: usize,
    device: &B::Device,
) -> Result<(CgtModel<B>, O, usize)> {
    let (mut model, mut optimizer) = (model, optimizer);
    let mut first_step = 0;
    if let Some(dir) = &files.checkpoint_dir {
        if let Some(state) = read_state(dir)? {
            state.check_compatible(dir, config, batch_size)?;
            if state.next_step > config.steps {
                return Err(CgtError::ResumeMismatch(format!(
                    "the checkpoint in {} is at step {}, past the {} requested steps",
                    dir.display(),
                    state.next_step,
                    config.steps
                )));
            }
            let recorder = CheckpointRecorder::new();
            let model_file = checkpoint_file(dir, "model", state.next_step);
            model = model
                .load_file(&model_file, &recorder, device)
                .map_err(checkpoint_error("read", &model_file))?;
            check_digest(&model_file, state.model_sha256.as_deref())?;
            let optimizer_file = checkpoint_file(dir, "optimizer", state.next_step);
            let record = recorder
                .load(optimizer_file.clone(), device)
                .map_err(checkpoint_error("read", &optimizer_file))?;
            check_digest(&optimizer_file, state.optimizer_sha256.as_deref())?;
            optimizer = optimizer.load_record(record);
            first_step = state.next_step;
        }
    }
    Ok((model, optimizer, first_step))
}

/// The history of the steps before `first_step` read back from `files.log_path`, and the log rewritten
/// to hold exactly those steps, open for appending.
pub(crate) fn open_log(
    files: &RunFiles,
    first_step: usize,
) -> Result<(Vec<StepReport>, Option<File>)> {
    let mut history = Vec::new();
    let log: Option<File> = match &files.log_path {
        Some(path) => {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)
                    .map_err(|e| CgtError::io("create the directory", parent, e))?;
            }
            history = history_before(read_log(path)?, first_step);
            let mut kept = String::new();
            for report in &history {
                kept.push_str(&serde_json::to_string(report)?);
                kept.push('\n');
            }
            tint_assets::atomic_write::write_atomic(path, kept.as_bytes())?;
            Some(
                OpenOptions::new()
                    .append(true)
                    .open(path)
                    .map_err(|e| CgtError::io("open for appending", path, e))?,
            )
        }
        None => None,
    };
    Ok((history, log))
}

/// The `state.json` of the checkpoint in `dir`, `None` when there is none.
fn read_state(dir: &Path) -> Result<Option<CheckpointState>> {
    let path = dir.join("state.json");
    if !path.exists() {
        return Ok(None);
    }
    let text = fs::read_to_string(&path).map_err(|e| CgtError::io("read", &path, e))?;
    Ok(Some(parse_state(&path, &text)?))
}

/// True when `dir` holds the final checkpoint of a `steps`-step run (training it again would only
/// reload it). A missing or partial checkpoint is `false`; an unreadable state file is an error.
pub fn checkpoint_is_final(dir: &Path, steps: usize) -> Result<bool> {
    Ok(read_state(dir)?
        .is_some_and(|state| state.next_step == steps && state.steps.is_none_or(|s| s == steps)))
}

/// Whether the model file that the checkpoint's `state.json` in `dir` names is there (`false`
/// without a state file): a run whose JSON was kept without its weights has the state and no model.
pub fn checkpoint_has_weights(dir: &Path) -> Result<bool> {
    Ok(read_state(dir)?.is_some_and(|state| {
        checkpoint_file(dir, "model", state.next_step)
            .with_extension(CHECKPOINT_EXTENSION)
            .is_file()
    }))
}

/// The step at which a run would resume from the checkpoint in `dir` (the number of steps it has
/// trained), `None` when `dir` holds none; an unreadable state file is an error. Whether the
/// checkpoint fits the requested settings is checked when training resumes from it.
pub fn checkpoint_step(dir: &Path) -> Result<Option<usize>> {
    Ok(read_state(dir)?.map(|state| state.next_step))
}

/// Loads a model saved by [`train`] (the model file that the checkpoint directory's `state.json`
/// names, or a plain `model.mpk`) into `model`'s structure.
pub fn load_checkpoint_model<B: AutodiffBackend>(
    model: CgtModel<B>,
    dir: &Path,
    device: &B::Device,
) -> Result<CgtModel<B>> {
    let (file, digest) = match read_state(dir)? {
        Some(state) => (
            checkpoint_file(dir, "model", state.next_step),
            state.model_sha256,
        ),
        None => (dir.join("model"), None),
    };
    let model = model
        .load_file(&file, &CheckpointRecorder::new(), device)
        .map_err(checkpoint_error("read", &file))?;
    check_digest(&file, digest.as_deref())?;
    Ok(model)
}

/// The inference copy of a trained model (autodiff stripped).
pub fn inference_model<B: AutodiffBackend>(model: &CgtModel<B>) -> CgtModel<B::InnerBackend> {
    model.valid()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TrainingConfig {
        TrainingConfig {
            steps: 100,
            learning_rate: 1e-3,
            min_learning_rate: 1e-4,
            warmup_steps: 10,
            grad_clip_norm: Some(1.0),
            objective: ObjectiveConfig::default(),
            seed: 0,
            checkpoint_every: 0,
        }
    }

    /// Schedule values are closed-form; f64 rounding only.
    const SCHEDULE_TOLERANCE: f64 = 1e-12;

    #[test]
    fn warmup_then_cosine() {
        let config = config();
        assert!((config.learning_rate_at(0) - 1e-4).abs() < SCHEDULE_TOLERANCE);
        assert!((config.learning_rate_at(9) - 1e-3).abs() < SCHEDULE_TOLERANCE);
        // Half-way through the decay the cosine factor is 1/2.
        assert!((config.learning_rate_at(55) - 5.5e-4).abs() < SCHEDULE_TOLERANCE);
        assert!((config.learning_rate_at(100) - 1e-4).abs() < SCHEDULE_TOLERANCE);
    }

    #[test]
    fn bad_training_configs_are_errors() {
        let mut bad = config();
        bad.grad_clip_norm = Some(0.0);
        assert!(bad.validate().is_err());
        let mut bad = config();
        bad.objective.eta = 1.5;
        assert!(bad.validate().is_err());
    }

    #[test]
    fn file_errors_name_the_operation_and_the_path() {
        // A directory where the loss log should be: reading it fails (a missing log is empty).
        let dir = std::env::temp_dir();
        let message = read_log(&dir).unwrap_err().to_string();
        assert!(
            message.starts_with(&format!("cannot read {}: ", dir.display())),
            "{message}"
        );
        assert!(read_log(&dir.join("tint-no-such-log.jsonl"))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_damaged_log_line_is_named_and_a_cut_last_line_skipped() {
        let report = StepReport {
            step: 0,
            total_steps: 2,
            learning_rate: 1e-3,
            terms: Default::default(),
            elapsed_s: 0.1,
            step_s: 0.1,
        };
        let good = serde_json::to_string(&report).unwrap();
        let path = std::env::temp_dir().join(format!("tint-log-{}.jsonl", std::process::id()));
        // A run killed mid-write leaves a cut last line: skipped.
        std::fs::write(&path, format!("{good}\n\n{good}\n{{\"step\": 2, \"tot")).unwrap();
        assert_eq!(read_log(&path).unwrap().len(), 2);
        // A damaged line before the last is an error naming the file and its line (blank lines
        // counted).
        std::fs::write(&path, format!("{good}\n\nnot json\n{good}\n")).unwrap();
        let message = read_log(&path).unwrap_err().to_string();
        assert!(
            message.starts_with(&format!("{} line 3: not a step report", path.display())),
            "{message}"
        );
        std::fs::remove_file(&path).unwrap();
    }
}
