//! What an in-context classification cell produces: per-example predictions, per-seed accuracies and
//! their mean and standard deviation (serialisable; the JSON report is a list of these).

use serde::{Deserialize, Serialize};

use super::prompt::{DemoFormat, TrainLoss};
use super::task::TaskKind;

/// Identifies a cell of the results table (what `--resume` matches on).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CellKey {
    /// The task.
    pub task: TaskKind,
    /// The method's name ([`super::IclMethod::name`]).
    pub method: String,
    /// Number of demonstrations (0 = zero-shot).
    pub k: usize,
    /// Training format; `None` when the method does not train on demonstrations or `k = 0`.
    pub format: Option<DemoFormat>,
    /// Training loss; `None` as for `format`.
    pub loss: Option<TrainLoss>,
}

impl CellKey {
    /// Row label in the paper's layout, e.g. `dyn-eval(lr=1e-3,steps=1) [single, label]`.
    pub fn row_label(&self) -> String {
        match (self.format, self.loss) {
            (Some(format), Some(loss)) => {
                format!("{} [{}, {}]", self.method, format.name(), loss.name())
            }
            _ => self.method.clone(),
        }
    }
}

/// One classified example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Index in the task's evaluation set.
    pub index: usize,
    /// Gold class.
    pub label: usize,
    /// `log P(c | input, prompt)` per class.
    #[serde(deserialize_with = "tint_lab::json_nan::nans_if_null")]
    pub scores: Vec<f64>,
    /// `log P(c | prompt)` per class (the calibration prior).
    #[serde(deserialize_with = "tint_lab::json_nan::nans_if_null")]
    pub prior: Vec<f64>,
    /// Uncalibrated prediction.
    pub predicted: usize,
    /// Calibrated prediction.
    pub predicted_calibrated: usize,
}

/// One seed (one draw of demonstrations) of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedRun {
    /// Seed of the demonstration draw (0 for zero-shot).
    pub seed: u64,
    /// Demonstrations that fit in the context (in-context methods) or were drawn (training methods).
    pub demos_used: usize,
    /// Accuracy without calibration.
    pub accuracy: f64,
    /// Accuracy with calibration.
    pub accuracy_calibrated: f64,
    /// Training losses of the (last) adaptation, if the method reports them.
    #[serde(deserialize_with = "tint_lab::json_nan::nans_if_null")]
    pub train_losses: Vec<f64>,
    /// Every prediction.
    pub predictions: Vec<Prediction>,
    /// Wall seconds of this seed's adaptation and scoring (0 in reports written before it was kept).
    #[serde(default)]
    pub seconds: f64,
}

/// Settings of a cell besides its key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSettings {
    /// Seeds of the demonstration draws.
    pub seeds: Vec<u64>,
    /// Balanced draws (k / n_classes per class).
    pub balanced: bool,
    /// Whether the demonstrations were part of the classification context.
    pub demos_in_context: bool,
    /// Evaluation examples.
    pub n_test: usize,
    /// Longest input in tokens (longer ones were cut).
    pub max_input_tokens: usize,
    /// Free-form method settings (learning rate, steps, trained layers).
    pub method_settings: String,
    /// The calibration prior: `prompt` (the paper's: the plain model on the prompt template alone,
    /// the same for every row) or `demos` (scored by the method with the cell's demonstrations in
    /// context); empty in reports written before the choice existed (`demos`).
    #[serde(default)]
    pub calibration: String,
}

/// A finished cell: key, settings, seeds, and summary accuracies (fractions in `0..=1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// Which cell.
    pub key: CellKey,
    /// How it was run.
    pub settings: CellSettings,
    /// One entry per seed.
    pub runs: Vec<SeedRun>,
    /// Mean accuracy over seeds, without calibration.
    pub accuracy_mean: f64,
    /// Population standard deviation of the accuracy over seeds, without calibration.
    pub accuracy_std: f64,
    /// Mean accuracy over seeds, with calibration.
    pub calibrated_mean: f64,
    /// Population standard deviation, with calibration.
    pub calibrated_std: f64,
    /// SHA-256 of the cell's inputs ([`super::cell_digest::cell_inputs_sha256`]: the examples,
    /// the template, the settings); `--resume` reuses the cell only when this run's digest is the
    /// same. Empty in reports written before it (such a cell is recomputed).
    #[serde(default)]
    pub inputs_sha256: String,
}

impl CellResult {
    /// Predictions (over all seeds) made from a non-finite score or prior: recorded only when the
    /// run allows non-finite values, and counted as class 0 (see [`super::IclSettings`]).
    pub fn non_finite_predictions(&self) -> usize {
        self.runs
            .iter()
            .flat_map(|r| &r.predictions)
            .filter(|p| p.scores.iter().chain(&p.prior).any(|s| !s.is_finite()))
            .count()
    }

    /// Checks that the stored numbers agree with the stored predictions (what `--resume` requires
    /// before it reuses a cell): every seed has `n_test` predictions with labels and predictions
    /// inside the classes and finite scores, its accuracies are the recounted ones, and the means
    /// are the means of the seeds (1e-9).
    ///
    /// # Errors
    ///
    /// The first rule broken, in words.
    pub fn validate(&self) -> Result<(), String> {
        if self.runs.is_empty() {
            return Err("no seed run".into());
        }
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9;
        for run in &self.runs {
            if run.predictions.len() != self.settings.n_test {
                return Err(format!(
                    "seed {} has {} predictions, n_test is {}",
                    run.seed,
                    run.predictions.len(),
                    self.settings.n_test
                ));
            }
            let n_classes = run.predictions.first().map_or(0, |p| p.scores.len());
            let mut right = 0usize;
            let mut right_calibrated = 0usize;
            for p in &run.predictions {
                if p.scores.len() != n_classes
                    || p.label >= n_classes
                    || p.predicted >= n_classes
                    || p.predicted_calibrated >= n_classes
                    || p.scores.iter().any(|s| !s.is_finite())
                {
                    return Err(format!(
                        "seed {}: prediction {} is malformed",
                        run.seed, p.index
                    ));
                }
                right += usize::from(p.predicted == p.label);
                right_calibrated += usize::from(p.predicted_calibrated == p.label);
            }
            let n = run.predictions.len().max(1) as f64;
            if !close(run.accuracy, right as f64 / n)
                || !close(run.accuracy_calibrated, right_calibrated as f64 / n)
            {
                return Err(format!(
                    "seed {}: stored accuracy {} / {} disagrees with its predictions",
                    run.seed, run.accuracy, run.accuracy_calibrated
                ));
            }
        }
        let plain: Vec<f64> = self.runs.iter().map(|r| r.accuracy).collect();
        let calibrated: Vec<f64> = self.runs.iter().map(|r| r.accuracy_calibrated).collect();
        let (m, s) = super::calibration::mean_std(&plain);
        let (mc, sc) = super::calibration::mean_std(&calibrated);
        if !close(m, self.accuracy_mean)
            || !close(s, self.accuracy_std)
            || !close(mc, self.calibrated_mean)
            || !close(sc, self.calibrated_std)
        {
            return Err("mean or std disagrees with the seeds".into());
        }
        Ok(())
    }
}
